//! `schemagate proxy`: the MCP wire on stdio. It runs an MCP server as a child process ([`child`])
//! and relays the stdio transport (newline-delimited JSON-RPC, read by
//! [`crate::ops::lines`]) both ways through its [`pipes`]
//! ([`relay`]); what to do with each message is the MCP rules' ([`crate::mcp`]), which this
//! module only feeds and whose answers it writes. Passed messages go out exactly as received.

mod pipes;

use crate::core::auth::Caller;
use crate::core::gate::{Gate, GateConfig};
use crate::core::metrics::Transport;
use crate::mcp::record::{session_name, RecordOverride, RecordSettings, SessionRecorder};
use crate::mcp::{Boundary, BoundaryConfig, Direction};
use crate::net::listen::ConnectionLimits;
use crate::net::{admin, drain};
use crate::ops::child;
use anyhow::Context;
use pipes::{relay_lines, Out, Pipes};
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::process::ExitStatus;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_util::sync::CancellationToken;

/// Once the proxy is signalled, the longest its MCP server has between SIGTERM and SIGKILL (or
/// `--shutdown-grace-secs`, if shorter): hosts kill a stubborn MCP server (here, the proxy) about
/// two seconds after signalling it, and the proxy must have stopped its own server by then.
pub const KILL_AFTER_SIGNAL: Duration = Duration::from_secs(1);

/// Everything `schemagate proxy` needs, built from its flags.
#[derive(Debug)]
pub struct ProxyConfig {
    /// The core: policy, limits, no shared registry, no tokens.
    pub gate: GateConfig,
    /// The session's MCP rules.
    pub boundary: BoundaryConfig,
    /// The MCP server to run, and its arguments.
    pub command: Vec<String>,
    /// After the client closes stdin: how long the server has to exit after its stdin closes,
    /// and again after SIGTERM, before it is killed.
    pub shutdown_grace: Duration,
    /// Where to serve `/metrics` and `/healthz`, if anywhere, and under which limits.
    pub metrics_listen: Option<SocketAddr>,
    pub admin_limits: ConnectionLimits,
    /// How often the policy file is polled for changes (0: only on SIGHUP).
    pub poll_secs: u64,
    /// Where the session is recorded, if it is (`--record`).
    pub record: Option<RecordSettings>,
}

/// Runs `schemagate proxy`: the core, the metrics listener if asked for, and the relay between
/// this process's stdin/stdout and the server, until the server exits (after the client goes, or
/// once `stop` resolves: see [`relay`]). Answers the exit code to leave with: the server's.
pub async fn run(
    config: ProxyConfig,
    stop: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<i32> {
    // SIGHUP is the host hanging up (it stops the proxy), so the policy reloads on change only.
    let started = drain::start(config.gate, None, config.poll_secs, false)?;
    if let Some(addr) = config.metrics_listen {
        admin::serve(
            addr,
            Arc::clone(&started.gate),
            config.admin_limits,
            Transport::Proxy,
            started.stop.clone(),
        )
        .await?;
    }
    let recording = SessionRecorder::start(config.record, &started.gate, Transport::Proxy)?;
    let (client_in, client_out) = client_stdio()?;
    let status = relay(
        Arc::clone(&started.gate),
        config.boundary,
        recording.as_ref(),
        &config.command,
        config.shutdown_grace,
        (client_in, client_out),
        stop,
    )
    .await?;
    if let Some(recording) = recording {
        recording.finish().await;
    }
    Ok(child::exit_code(status))
}

/// This process's stdin and stdout, as async streams. Pipes (what an MCP host gives) are read
/// and written on the runtime itself; anything else (a terminal, a file) through tokio's
/// blocking-thread stdio.
fn client_stdio() -> io::Result<(
    Box<dyn AsyncRead + Send + Unpin>,
    Box<dyn AsyncWrite + Send + Unpin>,
)> {
    use std::os::fd::AsFd;
    use tokio::net::unix::pipe;
    let stdin = std::io::stdin().as_fd().try_clone_to_owned()?;
    let input: Box<dyn AsyncRead + Send + Unpin> = match pipe::Receiver::from_owned_fd(stdin) {
        Ok(pipe) => Box::new(pipe),
        Err(_) => Box::new(tokio::io::stdin()),
    };
    let stdout = std::io::stdout().as_fd().try_clone_to_owned()?;
    let output: Box<dyn AsyncWrite + Send + Unpin> = match pipe::Sender::from_owned_fd(stdout) {
        Ok(pipe) => Box::new(pipe),
        Err(_) => Box::new(tokio::io::stdout()),
    };
    Ok((input, output))
}

/// Runs `command` and relays between it and the client on `client_in`/`client_out` until the
/// server exits; answers the server's exit status. When the client goes, the server's stdin is
/// closed and it is stopped after `shutdown_grace` (see [`child::stop_after`]); when `stop`
/// resolves (the proxy was signalled), its stdin is closed and it is stopped at once, killed
/// after [`KILL_AFTER_SIGNAL`] at most, so that it never outlives the proxy.
pub async fn relay(
    gate: Arc<Gate>,
    config: BoundaryConfig,
    recorder: Option<&SessionRecorder>,
    command: &[String],
    shutdown_grace: Duration,
    (client_in, client_out): (
        impl AsyncRead + Send + Unpin + 'static,
        impl AsyncWrite + Send + Unpin + 'static,
    ),
    stop: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<ExitStatus> {
    let (mut child, server_in, server_out) = child::spawn(command, false).context(
        "give the MCP server's command after --, as in `schemagate proxy --server-name crm -- npx crm-mcp-server`",
    )?;
    tracing::info!(server = %config.server, ?command, pid = child.id(), "relaying");
    let recording = recorder
        .and_then(|r| r.session(&config.server, &session_name(), &RecordOverride::default()));
    let boundary = Arc::new(Boundary::new(gate, Caller::open(), config).recorded(recording));
    let pipes = Arc::new(Pipes {
        to_client: Out::new(Box::new(client_out)),
        to_server: Out::new(Box::new(server_in)),
    });

    let (up_boundary, up_pipes) = (Arc::clone(&boundary), Arc::clone(&pipes));
    let pid = child.id();
    let exited = CancellationToken::new();
    let stopped = exited.clone();
    let up = tokio::spawn(async move {
        if let Err(e) = relay_lines(&up_boundary, &up_pipes, Direction::ToServer, client_in).await {
            tracing::debug!(error = %e, "relay to the server ended");
        }
        // The client is gone (or the server stopped reading): close the server's stdin, then
        // stop it if it does not exit by itself.
        up_pipes.to_server.close().await;
        child::stop_after(pid, false, shutdown_grace, stopped).await;
    });
    let (stop_pipes, stop_exited) = (Arc::clone(&pipes), exited.clone());
    let kill_after = shutdown_grace.min(KILL_AFTER_SIGNAL);
    let signalled = tokio::spawn(async move {
        tokio::select! {
            () = stop => {}
            () = stop_exited.cancelled() => return,
        }
        tracing::info!("signalled: stopping the MCP server");
        stop_pipes.to_server.close().await;
        child::stop_now(pid, kill_after, stop_exited).await;
    });
    if let Err(e) = relay_lines(&boundary, &pipes, Direction::ToClient, server_out).await {
        tracing::warn!(error = %e, "relay to the client ended: stopping the server");
        pipes.to_server.close().await;
        let _ = child.start_kill();
    }
    pipes.to_client.close().await;
    let status = match tokio::time::timeout(shutdown_grace, child.wait()).await {
        Ok(status) => status?,
        Err(_) => {
            tracing::warn!("the server closed its stdout but did not exit: killing it");
            child.kill().await?;
            child.wait().await?
        }
    };
    exited.cancel();
    up.abort();
    signalled.abort();
    tracing::info!(%status, "the MCP server exited");
    Ok(status)
}
