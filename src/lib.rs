//! schemagate checks AI tool results against the schemas their tools declare, before an
//! orchestrator acts on them.
//!
//! The module map, from the inside out:
//!
//! - [`domain`]: the names a check carries (`ServerId`, `ToolName`, `SchemaHash`, `Tier`,
//!   `ProtocolVersion`).
//! - [`policy`]: the trust policy (tiers per server and tool, and the rule switches), and how it
//!   reloads (`PolicyStore`, `watch`).
//! - [`analysis`]: bounds the work a schema can imply, before it runs.
//! - [`compile`]: schema text to validator, refusing hostile schemas; [`cache`] keeps the results.
//! - [`registry`]: how tools are registered, and the tools registered per server; with
//!   `--registry redis://...`, [`registry::redis`] keeps them a copy of what every replica shares.
//! - [`texts`]: schema texts seen in checks, by hash, kept apart from the compiled cache.
//! - [`check`]: a check as the core receives it, and how one is read from JSON.
//! - [`verdict`]: the answer, its errors and its feedback line; [`drift`] compares a result's
//!   text copy with its structured content.
//! - [`error`]: why a check cannot be made at all.
//! - [`validator`]: how a check is judged (the synchronous core).
//! - [`receiving`]: the bytes of request bodies still arriving, bounded across the process.
//! - [`executor`]: where CPU work runs (the worker pool); [`gate`]: where each check runs, the
//!   entry points every transport calls.
//! - [`memory`]: freed memory given back to the operating system when a thread goes quiet.
//! - [`metrics`]: the Prometheus series and their handles; [`instrument`]: what gets counted for
//!   each request.
//! - [`auth`]: who may do what (bearer tokens, scopes, the servers a token may name).
//! - [`http`] and [`grpc`]: the two thin adapters, each served by [`listen`] (connection limits
//!   and timeouts, the same on both ports); [`config`], [`shutdown`] and [`run`] wire them.
//! - [`proxy`]: the third adapter, on the MCP wire: `schemagate proxy -- COMMAND` relays stdio
//!   between an MCP client and server, checking calls and results with the same core.

mod analysis;
pub mod auth;
mod cache;
pub mod check;
pub mod compile;
pub mod config;
pub mod domain;
pub mod drift;
pub mod error;
mod executor;
pub mod gate;
pub mod grpc;
mod http;
mod instrument;
pub mod listen;
pub mod memory;
pub mod metrics;
pub mod policy;
pub mod proxy;
pub mod receiving;
pub mod registry;
mod reload;
pub mod shutdown;
pub mod texts;
pub mod tls;
mod validator;
pub mod verdict;

use crate::config::ServeArgs;
use crate::gate::Gate;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// The sockets the service answers on, bound by the caller (tests bind port 0).
pub struct Listeners {
    pub http: TcpListener,
    pub grpc: TcpListener,
}

/// Runs REST and gRPC until `shutdown` resolves, then drains: readiness fails and the gRPC health
/// service reports NOT_SERVING while checks are still answered for `--drain-delay-secs`; then new
/// connections are refused and checks in flight finish (for up to the grace period).
pub async fn run(
    args: ServeArgs,
    listeners: Listeners,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let gate = Gate::new(args.gate_config()?)?;
    run_gate(gate, &args, listeners, shutdown).await
}

/// Serves `gate` on `listeners` until `shutdown`, then drains (see [`run`]).
async fn run_gate(
    gate: Arc<Gate>,
    args: &ServeArgs,
    listeners: Listeners,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    // `unready`: readiness fails and gRPC health says NOT_SERVING, checks are still answered.
    // `token`, a drain delay later: the listeners close and checks in flight finish.
    let unready = CancellationToken::new();
    let token = CancellationToken::new();
    let drain_delay = Duration::from_secs(args.drain_delay_secs);
    let drain_gate = Arc::clone(&gate);
    let (unready_tx, stop) = (unready.clone(), token.clone());
    tokio::spawn(async move {
        shutdown.await;
        tracing::info!(
            delay_secs = drain_delay.as_secs(),
            "shutting down: not ready; still answering until the drain delay ends"
        );
        drain_gate.set_draining();
        unready_tx.cancel();
        tokio::time::sleep(drain_delay).await;
        tracing::info!("drain delay over: closing listeners, finishing checks in flight");
        stop.cancel();
    });
    // With a shared registry: follow it; not ready until it has been read in full.
    gate.start(token.clone());
    policy::watch(
        Arc::clone(gate.policy()),
        args.policy_poll_interval,
        token.clone(),
    );
    if let Some(path) = gate.auth().path() {
        let auth = Arc::clone(gate.auth());
        reload::watch(
            "tokens",
            path.to_path_buf(),
            args.policy_poll_interval,
            token.clone(),
            Arc::new(move || {
                let _ = auth.reload();
            }),
        );
    }

    let http_addr = listeners.http.local_addr()?;
    let grpc_addr = listeners.grpc.local_addr()?;
    tracing::info!(%http_addr, %grpc_addr, "schemagate is serving");

    let tls = args.tls()?;
    if let Some(tls) = &tls {
        let watched = Arc::clone(tls);
        reload::watch(
            "tls",
            tls.cert_path().to_path_buf(),
            args.policy_poll_interval,
            token.clone(),
            Arc::new(move || watched.reload()),
        );
    }
    let connections =
        listen::Connections::new(args.connection_limits(), Arc::clone(gate.metrics()));
    let http = connections.serve(
        listeners.http,
        http::service(Arc::clone(&gate)),
        listen::Protocols::Http1AndHttp2,
        metrics::Transport::Rest,
        tls.clone(),
        token.clone(),
    );
    let grpc = grpc::serve(
        Arc::clone(&gate),
        listeners.grpc,
        &connections,
        args.grpc_max_message_bytes,
        tls,
        unready,
        token.clone(),
    );
    let both = async { tokio::try_join!(async { http.await.map_err(anyhow::Error::from) }, grpc) };
    let grace = Duration::from_secs(args.shutdown_grace_secs);
    tokio::pin!(both);
    tokio::select! {
        result = &mut both => { result?; }
        () = async { token.cancelled().await; tokio::time::sleep(grace).await } => {
            tracing::warn!("grace period over; stopping with checks still in flight");
        }
    }
    Ok(())
}
