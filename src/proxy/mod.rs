//! `schemagate proxy`: the third adapter, on the MCP wire itself. It spawns an MCP server as a
//! child process and relays the stdio transport (newline-delimited JSON-RPC) both ways, reading
//! only each message's envelope. It learns the server's contract from `tools/list` results
//! (registering them in the core as `PUT /v1/servers/{server}/tools` does), checks `tools/call`
//! arguments before the server sees them and results before the client does, and per the policy
//! passes, logs, or answers with a tool execution error that carries the verdict. What passes is
//! forwarded exactly as received; only the messages it writes itself ([`reply`]) are its own.
//!
//! [`frame`] reads lines without buffering past the limit, [`envelope`] reads a message's
//! JSON-RPC envelope, [`session`] holds what one session needs remembered.

mod envelope;
mod frame;
mod reply;
mod session;

pub use reply::VERDICT_META_KEY;

use crate::auth::Caller;
use crate::check::{Check, Payload, SchemaSource};
use crate::config::ProxyArgs;
use crate::domain::{ProtocolVersion, Tier};
use crate::error::CheckError;
use crate::gate::Gate;
use crate::listen::{Connections, Protocols};
use crate::metrics::{Attempt, Direction, ProxyMetrics, Relayed, Transport};
use crate::registry::RegisterOptions;
use crate::verdict::{Action, Outcome, Verdict};
use anyhow::Context;
use bytes::Bytes;
use envelope::{Message, Parsed};
use frame::{Line, Lines};
use http_body_util::Full;
use serde::Deserialize;
use serde_json::value::RawValue;
use session::{ListPage, Listing, Pending, Session};
use std::borrow::Cow;
use std::io;
use std::process::{ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, BufWriter};
use tokio::net::TcpListener;
use tokio::process::Command;
use tokio::sync::Mutex;
use tokio_util::sync::CancellationToken;

/// `_meta` key of a 2026-07-28 request that names its revision.
const PROTOCOL_META_KEY: &str = "io.modelcontextprotocol/protocolVersion";

/// How the proxy runs.
#[derive(Debug, Clone)]
pub struct ProxyConfig {
    /// The server's name in the registry, the policy and the metrics.
    pub server: String,
    /// The MCP server to run, and its arguments.
    pub command: Vec<String>,
    /// Longest message relayed, in bytes (newline excluded).
    pub max_message_bytes: usize,
    /// Most requests in flight whose answers are read (tool calls, listings).
    pub max_in_flight: usize,
    /// How long a call waits for the contract the proxy asked the server for.
    pub contract_wait: Duration,
    /// After the client closes stdin: how long the server has to exit after its stdin closes,
    /// and again after SIGTERM, before it is killed.
    pub shutdown_grace: Duration,
}

/// A byte stream the proxy writes messages to: each flushed as it is written, except messages
/// relayed as received while more input is already waiting, which go out with the next flush.
type Writer = Box<dyn AsyncWrite + Send + Unpin>;

struct Out {
    writer: Mutex<Option<BufWriter<Writer>>>,
    /// The relay forwarding into this stream has more input already read (set per line).
    more_waiting: AtomicBool,
}

impl Out {
    fn new(writer: Writer) -> Self {
        Self {
            writer: Mutex::new(Some(BufWriter::with_capacity(64 * 1024, writer))),
            more_waiting: AtomicBool::new(false),
        }
    }

    /// Writes one message (and a newline, if it has none), then flushes.
    async fn send(&self, message: &[u8]) -> io::Result<()> {
        self.write(message, true).await
    }

    /// Writes one message relayed as received, flushed unless more input is already waiting
    /// (then the relay flushes once it has none): under load, many messages go out in one write.
    async fn relay(&self, message: &[u8]) -> io::Result<()> {
        self.write(message, !self.more_waiting.load(Ordering::Relaxed))
            .await
    }

    async fn write(&self, message: &[u8], flush: bool) -> io::Result<()> {
        let mut guard = self.writer.lock().await;
        let writer = guard
            .as_mut()
            .ok_or_else(|| io::Error::new(io::ErrorKind::BrokenPipe, "closed"))?;
        writer.write_all(message).await?;
        if message.last() != Some(&b'\n') {
            writer.write_all(b"\n").await?;
        }
        if flush {
            writer.flush().await?;
        }
        Ok(())
    }

    /// Flushes what [`relay`](Self::relay) left buffered.
    async fn flush(&self) -> io::Result<()> {
        match self.writer.lock().await.as_mut() {
            Some(writer) if !writer.buffer().is_empty() => writer.flush().await,
            _ => Ok(()),
        }
    }

    /// Flushes and closes the stream (the server sees the end of its stdin).
    async fn close(&self) {
        if let Some(mut writer) = self.writer.lock().await.take() {
            let _ = writer.shutdown().await;
        }
    }
}

/// The relay between one client and one server.
struct Relay {
    gate: Arc<Gate>,
    caller: Arc<Caller>,
    config: ProxyConfig,
    session: Session,
    to_client: Out,
    to_server: Out,
}

/// Runs `schemagate proxy`: the core, the metrics listener if asked for, and the relay between
/// this process's stdin/stdout and the server. Answers the exit code to leave with: the server's.
pub async fn run(args: ProxyArgs) -> anyhow::Result<i32> {
    let gate = Gate::new(args.gate_config()?)?;
    // The proxy's series exist from the start, at zero.
    gate.metrics().proxy();
    let token = CancellationToken::new();
    let _stop = token.clone().drop_guard();
    crate::policy::watch(
        Arc::clone(gate.policy()),
        args.policy_poll_interval,
        token.clone(),
    );
    if let Some(addr) = args.metrics_listen {
        let listener = TcpListener::bind(addr)
            .await
            .with_context(|| format!("cannot listen on {addr} (--metrics-listen)"))?;
        tracing::info!(%addr, "serving /metrics");
        let connections = Connections::new(args.connection_limits(), Arc::clone(gate.metrics()));
        let service = metrics_service(Arc::clone(&gate));
        let token = token.clone();
        tokio::spawn(async move {
            let served = connections
                .serve(
                    listener,
                    service,
                    Protocols::Http1AndHttp2,
                    Transport::Proxy,
                    None,
                    token,
                )
                .await;
            if let Err(e) = served {
                tracing::error!(error = %e, "the metrics listener stopped");
            }
        });
    }
    let (client_in, client_out) = client_stdio()?;
    let status = relay(gate, args.proxy_config(), client_in, client_out).await?;
    Ok(exit_code(status))
}

/// The exit code that reports `status`: the server's code, or 128 + the signal that ended it.
fn exit_code(status: ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(1)
}

/// GET /metrics (the Prometheus exposition) and GET /healthz; 404 otherwise.
fn metrics_service(gate: Arc<Gate>) -> impl crate::listen::PortService<Full<Bytes>> {
    tower::service_fn(move |request: http::Request<hyper::body::Incoming>| {
        let gate = Arc::clone(&gate);
        async move {
            let (status, content_type, body) = match (request.method(), request.uri().path()) {
                (&http::Method::GET, "/metrics") => (
                    http::StatusCode::OK,
                    "text/plain; version=0.0.4",
                    Bytes::from(gate.render_metrics()),
                ),
                (&http::Method::GET, "/healthz") => (
                    http::StatusCode::OK,
                    "text/plain",
                    Bytes::from_static(b"ok\n"),
                ),
                _ => (
                    http::StatusCode::NOT_FOUND,
                    "text/plain",
                    Bytes::from_static(b"schemagate proxy serves GET /metrics and GET /healthz\n"),
                ),
            };
            let mut response = http::Response::new(Full::new(body));
            *response.status_mut() = status;
            response.headers_mut().insert(
                http::header::CONTENT_TYPE,
                http::HeaderValue::from_static(content_type),
            );
            Ok::<_, std::convert::Infallible>(response)
        }
    })
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

/// Runs `config.command` and relays between it and the client on `client_in`/`client_out`
/// until the server exits; answers the server's exit status.
pub async fn relay(
    gate: Arc<Gate>,
    config: ProxyConfig,
    client_in: impl AsyncRead + Send + Unpin + 'static,
    client_out: impl AsyncWrite + Send + Unpin + 'static,
) -> anyhow::Result<ExitStatus> {
    let (program, args) = config
        .command
        .split_first()
        .context("no server command: give it after --, as in `schemagate proxy --server-name crm -- npx crm-mcp-server`")?;
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("cannot start the MCP server {program:?}"))?;
    let (Some(server_in), Some(server_out)) = (child.stdin.take(), child.stdout.take()) else {
        anyhow::bail!("the MCP server's stdin and stdout were not piped");
    };
    tracing::info!(server = %config.server, command = ?config.command, pid = child.id(), "relaying");
    let relay = Arc::new(Relay {
        gate,
        caller: Caller::open(),
        session: Session::new(config.max_in_flight),
        to_client: Out::new(Box::new(client_out)),
        to_server: Out::new(Box::new(server_in)),
        config,
    });

    let upstream = Arc::clone(&relay);
    let pid = child.id();
    let exited = tokio_util::sync::CancellationToken::new();
    let stopped = exited.clone();
    let up = tokio::spawn(async move {
        if let Err(e) = upstream.relay_lines(Direction::ToServer, client_in).await {
            tracing::debug!(error = %e, "relay to the server ended");
        }
        // The client is gone (or the server stopped reading): close the server's stdin, then
        // stop it if it does not exit by itself.
        upstream.to_server.close().await;
        stop_after(pid, upstream.config.shutdown_grace, stopped).await;
    });
    if let Err(e) = relay.relay_lines(Direction::ToClient, server_out).await {
        tracing::warn!(error = %e, "relay to the client ended: stopping the server");
        relay.to_server.close().await;
        let _ = child.start_kill();
    }
    relay.to_client.close().await;
    let status = match tokio::time::timeout(relay.config.shutdown_grace, child.wait()).await {
        Ok(status) => status?,
        Err(_) => {
            tracing::warn!("the server closed its stdout but did not exit: killing it");
            child.kill().await?;
            child.wait().await?
        }
    };
    exited.cancel();
    up.abort();
    tracing::info!(%status, "the MCP server exited");
    Ok(status)
}

/// Stops process `pid` that was asked to exit (its stdin closed): SIGTERM after `grace`, SIGKILL
/// after another, unless it exited (`exited`) first.
async fn stop_after(
    pid: Option<u32>,
    grace: Duration,
    exited: tokio_util::sync::CancellationToken,
) {
    let Some(pid) = pid.and_then(|p| i32::try_from(p).ok()) else {
        return;
    };
    for signal in [libc::SIGTERM, libc::SIGKILL] {
        tokio::select! {
            () = exited.cancelled() => return,
            () = tokio::time::sleep(grace) => {}
        }
        tracing::info!(pid, signal, "the MCP server has not exited: signalling it");
        // SAFETY: kill(2) takes plain integers and touches no memory of ours; `pid` is our own
        // child, not yet reaped (`exited` is cancelled only after it is waited for).
        unsafe {
            libc::kill(pid, signal);
        }
    }
}

#[derive(Deserialize)]
struct CallParams<'a> {
    #[serde(borrow)]
    name: Cow<'a, str>,
    #[serde(borrow, default)]
    arguments: Option<&'a RawValue>,
    #[serde(borrow, default, rename = "_meta")]
    meta: Option<&'a RawValue>,
}

#[derive(Deserialize, Default)]
struct ListParams<'a> {
    #[serde(borrow, default)]
    cursor: Option<Cow<'a, str>>,
    #[serde(borrow, default, rename = "_meta")]
    meta: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct RequestMeta<'a> {
    #[serde(borrow, default, rename = "io.modelcontextprotocol/protocolVersion")]
    protocol: Option<Cow<'a, str>>,
}

/// The revision a request's `_meta` names (2026-07-28 requests carry it).
fn meta_protocol(meta: Option<&RawValue>) -> Option<ProtocolVersion> {
    let meta: RequestMeta<'_> = serde_json::from_str(meta?.get()).ok()?;
    ProtocolVersion::parse(meta.protocol?.as_ref()).ok()
}

impl Relay {
    fn metrics(&self) -> &ProxyMetrics {
        self.gate.metrics().proxy()
    }

    /// Relays every line read from `input` in `direction`, until its end.
    async fn relay_lines(
        &self,
        direction: Direction,
        input: impl AsyncRead + Unpin,
    ) -> io::Result<()> {
        let mut lines = Lines::new(input, self.config.max_message_bytes);
        let out = self.out(direction);
        while let Some(line) = lines.next().await? {
            let more = lines.has_line();
            out.more_waiting.store(more, Ordering::Relaxed);
            match line {
                Line::Message(bytes) => self.relay_line(direction, &bytes).await?,
                Line::Oversized { head, len } => self.oversized(direction, &head, len).await?,
            }
            if !more {
                out.flush().await?;
            }
        }
        out.more_waiting.store(false, Ordering::Relaxed);
        out.flush().await
    }

    /// Where messages read in `direction` are relayed to.
    fn out(&self, direction: Direction) -> &Out {
        match direction {
            Direction::ToServer => &self.to_server,
            Direction::ToClient => &self.to_client,
        }
    }

    async fn forward(&self, direction: Direction, kind: Relayed, bytes: &[u8]) -> io::Result<()> {
        self.metrics().count(direction, kind);
        self.out(direction).relay(bytes).await
    }

    /// One line read in `direction`: a message is handled, a batch (not MCP since 2025-06-18)
    /// holding something the proxy acts on is handled one message at a time (so nothing in it
    /// passes unchecked), anything else is relayed as it came.
    async fn relay_line(&self, direction: Direction, line: &Bytes) -> io::Result<()> {
        let items = match envelope::parse(line) {
            Parsed::One(message) => return self.message(direction, line, line, message).await,
            Parsed::Batch(items) => items,
            Parsed::NotJsonRpc => return self.forward(direction, Relayed::NotJsonRpc, line).await,
        };
        let messages: Vec<(Bytes, Option<Message<'_>>)> = items
            .into_iter()
            .map(|item| {
                let text = line.slice_ref(item.get().as_bytes());
                (text, envelope::message(item.get().as_bytes()))
            })
            .collect();
        let acts = messages
            .iter()
            .any(|(_, m)| m.as_ref().is_some_and(|m| self.acts_on(direction, m)));
        if !acts {
            return self.forward(direction, Relayed::NotJsonRpc, line).await;
        }
        for (text, message) in messages {
            match message {
                Some(message) => self.message(direction, line, &text, message).await?,
                None => self.forward(direction, Relayed::NotJsonRpc, &text).await?,
            }
        }
        Ok(())
    }

    async fn message(
        &self,
        direction: Direction,
        line: &Bytes,
        text: &[u8],
        message: Message<'_>,
    ) -> io::Result<()> {
        match direction {
            Direction::ToServer => self.client_message(line, text, message).await,
            Direction::ToClient => self.server_message(line, text, message).await,
        }
    }

    /// Whether `message`, read in `direction`, is one the proxy acts on: from the client a call,
    /// a listing or `initialize`; from the server an answer it follows, or `list_changed`.
    fn acts_on(&self, direction: Direction, message: &Message<'_>) -> bool {
        match (direction, message) {
            (Direction::ToServer, Message::Request { method, .. }) => {
                matches!(method.as_ref(), "tools/call" | "tools/list" | "initialize")
            }
            (Direction::ToClient, Message::Response { id: Some(id), .. }) => {
                self.session.follows(id.get())
            }
            (Direction::ToClient, Message::Notification { method, .. }) => {
                method == "notifications/tools/list_changed"
            }
            _ => false,
        }
    }

    /// One message from the client; `text` is its bytes (the line, or one item of a batch).
    async fn client_message(
        &self,
        line: &Bytes,
        text: &[u8],
        message: Message<'_>,
    ) -> io::Result<()> {
        match message {
            Message::Request { id, method, params } => match method.as_ref() {
                "initialize" => {
                    let _ = self.session.track(id.get(), Pending::Initialize);
                }
                "tools/list" => {
                    let params: ListParams<'_> = params
                        .and_then(|p| serde_json::from_str(p.get()).ok())
                        .unwrap_or_default();
                    let pending = Pending::ToolsList(ListPage {
                        first_page: params.cursor.is_none(),
                        ours: false,
                        protocol: meta_protocol(params.meta).or(self.session.protocol()),
                        meta: None,
                    });
                    if let Err(full) = self.session.track(id.get(), pending) {
                        return self.too_many(id, full.limit).await;
                    }
                }
                "tools/call" => return self.call(line, text, id, params).await,
                _ => {}
            },
            Message::Notification { method, params } if method == "notifications/cancelled" => {
                #[derive(Deserialize)]
                struct Cancelled<'a> {
                    #[serde(borrow, rename = "requestId")]
                    request_id: &'a RawValue,
                }
                if let Some(c) =
                    params.and_then(|p| serde_json::from_str::<Cancelled<'_>>(p.get()).ok())
                {
                    self.session.cancelled(c.request_id.get());
                }
            }
            _ => {}
        }
        self.forward(Direction::ToServer, Relayed::Forwarded, text)
            .await
    }

    async fn too_many(&self, id: &RawValue, limit: usize) -> io::Result<()> {
        let message = format!(
            "schemagate proxy: {limit} requests are already in flight to the server (--max-calls-in-flight); wait for some to finish and send this one again"
        );
        self.metrics().count(Direction::ToServer, Relayed::Answered);
        self.to_client
            .send(&reply::error(Some(id), reply::TOO_MANY_IN_FLIGHT, &message))
            .await
    }

    /// A `tools/call`: its arguments are checked (the contract asked for first if need be); a
    /// rejected call is answered here, any other is followed and forwarded.
    async fn call(
        &self,
        line: &Bytes,
        text: &[u8],
        id: &RawValue,
        params: Option<&RawValue>,
    ) -> io::Result<()> {
        let Some(params) =
            params.and_then(|p| serde_json::from_str::<CallParams<'_>>(p.get()).ok())
        else {
            self.metrics().count(Direction::ToServer, Relayed::Answered);
            return self
                .to_client
                .send(&reply::error(
                    Some(id),
                    reply::INVALID_PARAMS,
                    "tools/call needs params with the tool's `name` (a string) and, optionally, `arguments` (an object)",
                ))
                .await;
        };
        let tool = params.name.into_owned();
        let protocol = meta_protocol(params.meta).or(self.session.protocol());
        self.ensure_contract(params.meta).await?;
        let attempt = self.session.attempt(&tool);
        let arguments = match params.arguments {
            Some(raw) => line.slice_ref(raw.get().as_bytes()),
            None => Bytes::from_static(b"{}"),
        };
        let judged = self
            .judge(&tool, id, attempt, protocol, arguments, |text, depth| {
                Ok(Payload::Arguments(Payload::document_from_json(
                    "arguments",
                    &text,
                    depth,
                )?))
            })
            .await;
        let refusal = match judged {
            Ok(verdict) if verdict.action == Action::Reject => {
                self.log_rejection(&tool, id, "arguments", &verdict);
                Some(reply::rejected(id, &tool, true, &verdict, protocol))
            }
            Ok(_) => None,
            Err(e) => self
                .unchecked(&tool, id, attempt, "arguments", &e)
                .map(|tier| reply::unchecked(id, &tool, "call", tier, &e, protocol)),
        };
        if let Some(answer) = refusal {
            self.session.concluded(&tool, true);
            self.metrics().count(Direction::ToServer, Relayed::Answered);
            return self.to_client.send(&answer).await;
        }
        let pending = Pending::ToolsCall {
            tool,
            attempt,
            protocol,
        };
        if let Err(full) = self.session.track(id.get(), pending) {
            return self.too_many(id, full.limit).await;
        }
        self.forward(Direction::ToServer, Relayed::Forwarded, text)
            .await
    }

    /// Before a call is checked: when the contract is not current (never listed, or the tools
    /// changed since), asks the server for it once and waits (up to `--contract-wait-ms`).
    async fn ensure_contract(&self, meta: Option<&RawValue>) -> io::Result<()> {
        let mut listings = self.session.watch_listings();
        listings.borrow_and_update();
        match self.session.listing() {
            Listing::Current => return Ok(()),
            Listing::Wait => {}
            Listing::Ask(id) => {
                let protocol = meta_protocol(meta).or(self.session.protocol());
                let pending = Pending::ToolsList(ListPage {
                    first_page: true,
                    ours: true,
                    protocol,
                    meta: meta.map(|m| m.get().into()),
                });
                if self.session.track(&id, pending).is_err() {
                    self.session.listing_ended(false, true);
                    return Ok(());
                }
                tracing::debug!(id, "asking the server for its tools");
                self.to_server.send(&list_request(&id, None, meta)).await?;
            }
        }
        if tokio::time::timeout(self.config.contract_wait, listings.changed())
            .await
            .is_err()
        {
            tracing::warn!(
                server = %self.config.server,
                wait_ms = self.config.contract_wait.as_millis() as u64,
                "the server did not list its tools in time: checking with the contract at hand"
            );
        }
        Ok(())
    }

    /// Judges `payload_text` of a call of `tool` against its registered contract.
    async fn judge(
        &self,
        tool: &str,
        id: &RawValue,
        attempt: u32,
        protocol: Option<ProtocolVersion>,
        payload_text: Bytes,
        read: fn(Bytes, usize) -> Result<Payload, CheckError>,
    ) -> Result<Verdict, CheckError> {
        let (server, tool, call_id) = (
            self.config.server.clone(),
            tool.to_owned(),
            id.get().to_owned(),
        );
        let size = payload_text.len();
        self.gate
            .check_one(&self.caller, size, Transport::Proxy, move |limits| {
                Ok(Check {
                    server: Some(server),
                    tool: Some(tool),
                    schema: SchemaSource::Registered,
                    payload: read(payload_text, limits.max_depth)?,
                    attempt,
                    call_id: Some(call_id),
                    protocol_version: protocol,
                })
            })
            .await
    }

    /// A call's `subject` could not be checked (`error`): counted as unchecked and logged; says
    /// the tier when the policy withholds it. A tool the server never listed has no contract, and what
    /// has no contract passes as a schema-less tool's does; a listed tool whose contract cannot
    /// be enforced (a refused schema, a result that cannot be read, no capacity) is withheld
    /// where the policy rejects: for arguments, `arguments = "reject"`; for results, untrusted.
    fn unchecked(
        &self,
        tool: &str,
        id: &RawValue,
        attempt: u32,
        subject: &str,
        error: &CheckError,
    ) -> Option<Tier> {
        let rules = self
            .gate
            .policy()
            .load()
            .rules_for(Some(&self.config.server), Some(tool));
        let unlisted =
            matches!(error, CheckError::UnknownTool { .. }) && !self.session.is_unenforceable(tool);
        self.gate
            .metrics()
            .target(Some(&self.config.server), Some(tool))
            .count(rules.tier, Attempt::of(attempt), Outcome::Unchecked);
        let withheld = !unlisted
            && match subject {
                "arguments" => rules.arguments == crate::policy::ArgumentsMode::Reject,
                _ => rules.tier == Tier::Untrusted,
            };
        tracing::warn!(
            server = %self.config.server,
            tool,
            call_id = id.get(),
            subject,
            code = error.code(),
            error = %error,
            withheld,
            "could not be checked"
        );
        withheld.then_some(rules.tier)
    }

    fn log_rejection(&self, tool: &str, id: &RawValue, subject: &str, verdict: &Verdict) {
        let paths: Vec<&str> = verdict
            .errors
            .iter()
            .map(|e| e.instance_path.as_str())
            .collect();
        let keywords: Vec<&str> = verdict.errors.iter().map(|e| e.keyword.as_str()).collect();
        tracing::warn!(
            server = %self.config.server,
            tool,
            call_id = id.get(),
            subject,
            tier = verdict.tier.as_str(),
            ?paths,
            ?keywords,
            "rejected"
        );
    }

    async fn server_message(
        &self,
        line: &Bytes,
        text: &[u8],
        message: Message<'_>,
    ) -> io::Result<()> {
        match message {
            Message::Response {
                id: Some(id),
                result,
            } => match self.session.answered(id.get()) {
                Some(Pending::Initialize) => {
                    #[derive(Deserialize)]
                    struct Initialized<'a> {
                        #[serde(borrow, rename = "protocolVersion")]
                        protocol: Cow<'a, str>,
                    }
                    if let Some(v) = result
                        .and_then(|r| serde_json::from_str::<Initialized<'_>>(r.get()).ok())
                        .and_then(|i| ProtocolVersion::parse(&i.protocol).ok())
                    {
                        self.session.set_protocol(v);
                    }
                }
                Some(Pending::ToolsList(page)) => {
                    let ours = page.ours;
                    self.listed(line, id, result, page).await?;
                    if ours {
                        return Ok(());
                    }
                }
                Some(Pending::ToolsCall {
                    tool,
                    attempt,
                    protocol,
                }) => {
                    return self
                        .result(line, text, id, result, &tool, attempt, protocol)
                        .await
                }
                None => {}
            },
            Message::Notification { method, .. }
                if method == "notifications/tools/list_changed" =>
            {
                tracing::info!(server = %self.config.server, "the server's tools changed: the contract is stale until the next tools/list");
                self.session.list_changed();
            }
            _ => {}
        }
        self.forward(Direction::ToClient, Relayed::Forwarded, text)
            .await
    }

    /// A `tools/list` page answered: registered (the first page replacing the contract, later
    /// ones adding to it) before it is forwarded; the proxy's own listing follows `nextCursor`.
    async fn listed(
        &self,
        line: &Bytes,
        id: &RawValue,
        result: Option<&RawValue>,
        page: ListPage,
    ) -> io::Result<()> {
        let ListPage {
            first_page,
            ours,
            protocol,
            meta,
        } = page;
        let Some(result) = result else {
            tracing::warn!(server = %self.config.server, id = id.get(), "the server answered tools/list with an error: the contract is unchanged");
            self.session.listing_ended(false, ours);
            return Ok(());
        };
        #[derive(Deserialize)]
        struct Page<'a> {
            #[serde(borrow, default)]
            tools: Vec<&'a RawValue>,
            #[serde(borrow, default, rename = "nextCursor")]
            next_cursor: Option<Cow<'a, str>>,
        }
        let page: Option<Page<'_>> = serde_json::from_str(result.get()).ok();
        let next_cursor = page
            .as_ref()
            .and_then(|p| p.next_cursor.as_deref())
            .filter(|c| !c.is_empty())
            .map(str::to_owned);
        if first_page {
            self.session.listing_started();
        }
        let how = RegisterOptions {
            merge: !first_page,
            protocol_version: protocol,
        };
        let body = line.slice_ref(result.get().as_bytes());
        match self
            .gate
            .register(&self.caller, self.config.server.clone(), body, how)
            .await
        {
            Ok(registration) => {
                for tool in registration.tools.iter().filter(|t| !t.errors.is_empty()) {
                    tracing::warn!(
                        server = %self.config.server,
                        tool = %tool.name,
                        errors = ?tool.errors.iter().map(|e| e.message.as_str()).collect::<Vec<_>>(),
                        "a schema of this tool was refused: its calls cannot be checked against it"
                    );
                }
                tracing::info!(server = %self.config.server, tools = registration.tools.len(), first_page, ours, "contract registered");
            }
            Err(e) => {
                tracing::warn!(server = %self.config.server, error = %e, "tools/list could not be registered as a whole: registering its tools one by one");
                self.register_one_by_one(
                    line,
                    page.map(|p| p.tools).unwrap_or_default(),
                    first_page,
                    protocol,
                )
                .await;
            }
        }
        match (next_cursor, ours) {
            (Some(cursor), true) => {
                let id = self.session.our_id();
                let meta_raw = meta
                    .as_deref()
                    .and_then(|m| RawValue::from_string(m.to_owned()).ok());
                let request = list_request(&id, Some(&cursor), meta_raw.as_deref());
                let pending = Pending::ToolsList(ListPage {
                    first_page: false,
                    ours: true,
                    protocol,
                    meta,
                });
                if self.session.track(&id, pending).is_ok() {
                    self.to_server.send(&request).await?;
                } else {
                    self.session.listing_ended(false, true);
                }
            }
            (Some(_), false) => {}
            (None, _) => self.session.listing_ended(true, ours),
        }
        Ok(())
    }

    /// Registers each tool of a page alone, so one bad tool (a name the registry refuses, say)
    /// costs only itself; a tool that cannot be registered is marked unenforceable.
    async fn register_one_by_one(
        &self,
        line: &Bytes,
        tools: Vec<&RawValue>,
        first_page: bool,
        protocol: Option<ProtocolVersion>,
    ) {
        if first_page {
            let empty = RegisterOptions {
                merge: false,
                protocol_version: protocol,
            };
            let _ = self
                .gate
                .register(
                    &self.caller,
                    self.config.server.clone(),
                    Bytes::from_static(b"{\"tools\":[]}"),
                    empty,
                )
                .await;
        }
        #[derive(Deserialize)]
        struct Named<'a> {
            #[serde(borrow, default)]
            name: Option<Cow<'a, str>>,
        }
        for tool in tools {
            let text = line.slice_ref(tool.get().as_bytes());
            let mut body = Vec::with_capacity(text.len() + 12);
            body.extend_from_slice(b"{\"tools\":[");
            body.extend_from_slice(&text);
            body.extend_from_slice(b"]}");
            let how = RegisterOptions {
                merge: true,
                protocol_version: protocol,
            };
            if let Err(e) = self
                .gate
                .register(&self.caller, self.config.server.clone(), body.into(), how)
                .await
            {
                let name = serde_json::from_str::<Named<'_>>(tool.get())
                    .ok()
                    .and_then(|n| n.name)
                    .unwrap_or_default();
                tracing::warn!(server = %self.config.server, tool = %name, error = %e, "a listed tool could not be registered: its calls cannot be checked");
                self.session.mark_unenforceable(&name);
            }
        }
    }

    /// A `tools/call` result: checked, then forwarded as received, or replaced where the policy
    /// rejects it.
    #[allow(clippy::too_many_arguments)]
    async fn result(
        &self,
        line: &Bytes,
        text: &[u8],
        id: &RawValue,
        result: Option<&RawValue>,
        tool: &str,
        attempt: u32,
        protocol: Option<ProtocolVersion>,
    ) -> io::Result<()> {
        // A JSON-RPC error is not a tool result; a result that is not final (2026-07-28's
        // `input_required`, a task) is followed by another call or by the task's result.
        let Some(result) = result.filter(|r| is_final(r)) else {
            return self
                .forward(Direction::ToClient, Relayed::Forwarded, text)
                .await;
        };
        let body = line.slice_ref(result.get().as_bytes());
        let judged = self
            .judge(tool, id, attempt, protocol, body, |text, depth| {
                Ok(Payload::Result(Payload::result_from_json(&text, depth)?))
            })
            .await;
        let replacement = match judged {
            Ok(verdict) if verdict.action == Action::Reject => {
                self.log_rejection(tool, id, "result", &verdict);
                Some(reply::rejected(id, tool, false, &verdict, protocol))
            }
            Ok(_) => None,
            Err(e) => self
                .unchecked(tool, id, attempt, "result", &e)
                .map(|tier| reply::unchecked(id, tool, "result", tier, &e, protocol)),
        };
        self.session.concluded(tool, replacement.is_some());
        match replacement {
            Some(answer) => {
                self.metrics().count(Direction::ToClient, Relayed::Replaced);
                self.to_client.send(&answer).await
            }
            None => {
                self.forward(Direction::ToClient, Relayed::Forwarded, text)
                    .await
            }
        }
    }

    /// A line past `--max-message-bytes`: not relayed. A request is answered with a JSON-RPC
    /// error to its sender; an answer to a request, with one to the side awaiting it.
    async fn oversized(&self, direction: Direction, head: &[u8], len: usize) -> io::Result<()> {
        self.metrics().count(direction, Relayed::Oversized);
        let head = envelope::head(head);
        let limit = self.config.max_message_bytes;
        tracing::warn!(
            server = %self.config.server,
            direction = direction.as_str(),
            bytes = len,
            limit,
            id = head.id.as_deref().unwrap_or(""),
            "a message past --max-message-bytes was not relayed"
        );
        let Some(id) = head.id.and_then(|id| RawValue::from_string(id).ok()) else {
            return Ok(());
        };
        let from = match direction {
            Direction::ToServer => "client",
            Direction::ToClient => "server",
        };
        let message = format!(
            "schemagate proxy: a message of {len} bytes from the {from} exceeds --max-message-bytes ({limit}); it was not relayed"
        );
        let answer = reply::error(Some(&id), reply::INVALID_REQUEST, &message);
        // A request goes back to its sender; an answer on to the side that awaits it.
        let to_client = (direction == Direction::ToServer) == head.has_method;
        if to_client {
            if let Some(Pending::ToolsCall { tool, .. }) = self.session.answered(id.get()) {
                self.session.concluded(&tool, true);
            }
            self.to_client.send(&answer).await
        } else {
            self.to_server.send(&answer).await
        }
    }
}

/// Whether a `tools/call` result is final: `resultType` absent or `"complete"`.
fn is_final(result: &RawValue) -> bool {
    let text = result.get().as_bytes();
    if memchr::memmem::find(text, b"\"resultType\"").is_none() {
        return true;
    }
    #[derive(Deserialize)]
    struct Kind<'a> {
        #[serde(borrow, default, rename = "resultType")]
        result_type: Option<Cow<'a, str>>,
    }
    serde_json::from_slice::<Kind<'_>>(text)
        .map(|k| k.result_type.is_none_or(|t| t == "complete"))
        .unwrap_or(true)
}

/// The proxy's own `tools/list` request: `id` (JSON text), the page's `cursor`, and the
/// client's request `_meta` (2026-07-28 requests need its revision and capabilities) without
/// its progress token.
fn list_request(id: &str, cursor: Option<&str>, meta: Option<&RawValue>) -> Vec<u8> {
    let mut params = serde_json::Map::new();
    if let Some(cursor) = cursor {
        params.insert("cursor".into(), cursor.into());
    }
    if let Some(mut meta) = meta.and_then(|m| {
        serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(m.get()).ok()
    }) {
        meta.remove("progressToken");
        if meta.contains_key(PROTOCOL_META_KEY) {
            params.insert("_meta".into(), meta.into());
        }
    }
    let params = serde_json::Value::Object(params);
    format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/list","params":{params}}}"#).into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(text: &str) -> Box<RawValue> {
        RawValue::from_string(text.to_owned()).expect("valid JSON")
    }

    #[test]
    fn only_complete_results_are_final() {
        assert!(is_final(&raw(r#"{"content":[],"structuredContent":{}}"#)));
        assert!(is_final(&raw(r#"{"resultType":"complete","content":[]}"#)));
        assert!(!is_final(&raw(
            r#"{"resultType":"input_required","inputRequests":{}}"#
        )));
        assert!(!is_final(&raw(r#"{"resultType":"task","task":{}}"#)));
        // A string that merely mentions the key is not the key.
        assert!(is_final(&raw(
            r#"{"content":[{"type":"text","text":"\"resultType\""}]}"#
        )));
    }

    #[test]
    fn the_proxys_listing_carries_the_clients_revision_but_not_its_progress_token() {
        let meta = raw(
            r#"{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"progressToken":5}"#,
        );
        let request = list_request("\"schemagate-1\"", Some("p2"), Some(&meta));
        let v: serde_json::Value = serde_json::from_slice(&request).expect("JSON");
        assert_eq!(v["id"], "schemagate-1");
        assert_eq!(v["method"], "tools/list");
        assert_eq!(v["params"]["cursor"], "p2");
        assert_eq!(v["params"]["_meta"][PROTOCOL_META_KEY], "2026-07-28");
        assert!(v["params"]["_meta"].get("progressToken").is_none());
        let older = list_request("\"s\"", None, None);
        assert_eq!(
            older,
            br#"{"jsonrpc":"2.0","id":"s","method":"tools/list","params":{}}"#
        );
    }

    #[test]
    fn revisions_come_from_request_meta() {
        let meta = raw(r#"{"io.modelcontextprotocol/protocolVersion":"2025-11-25"}"#);
        assert_eq!(
            meta_protocol(Some(&meta)),
            Some(ProtocolVersion::V2025_11_25)
        );
        assert_eq!(meta_protocol(Some(&raw("{}"))), None);
        assert_eq!(meta_protocol(None), None);
    }
}
