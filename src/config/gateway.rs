//! Flags of `schemagate gateway`, and the configuration of the Streamable HTTP adapter they make.

use super::*;
use crate::core::metrics::Transport;
use crate::gateway::{GatewayConfig, RouteList, SessionLimits, UpstreamConfig};
use crate::mcp::BoundaryConfig;
use std::net::SocketAddr;
use std::path::PathBuf;

pub const DEFAULT_GATEWAY_LISTEN: &str = "127.0.0.1:8090";
/// Seconds an upstream has to begin its answer: a tool answered as JSON begins it only once the
/// tool is done.
pub const DEFAULT_UPSTREAM_TIMEOUT_SECS: u64 = 300;
pub const DEFAULT_UPSTREAM_CONNECT_TIMEOUT_SECS: u64 = 10;
pub const DEFAULT_MAX_SESSIONS: u64 = 100_000;
/// The default of `--stdio-max-processes`.
pub const DEFAULT_STDIO_MAX_PROCESSES: usize = 64;
/// `--relay-threads`' default: one thread relays, as one relays for the proxy.
pub const DEFAULT_RELAY_THREADS: usize = 1;
pub const DEFAULT_SESSION_IDLE_SECS: u64 = 3600;
/// The default of `--server-request-timeout-secs`: as long as the SDKs wait for an answer.
pub const DEFAULT_SERVER_REQUEST_TIMEOUT_SECS: u64 = 60;
/// The default of `--stdio-idle-secs`: five minutes.
pub const DEFAULT_STDIO_IDLE_SECS: u64 = 300;

/// Flags of `schemagate gateway`.
#[derive(Debug, Clone, Parser)]
#[command(name = "gateway")]
pub struct GatewayArgs {
    /// Address clients connect to (`http://ADDR/mcp/NAME`).
    #[arg(long, env = "SCHEMAGATE_GATEWAY_LISTEN", default_value = DEFAULT_GATEWAY_LISTEN)]
    pub listen: SocketAddr,
    /// An upstream MCP server: NAME=URL, or NAME=stdio:COMMAND ARGS for a server run on stdio,
    /// one process per session (repeat for more, or separate them by spaces; quotes as in a
    /// shell). NAME is the path clients use (`/mcp/NAME`) and the server's name for the policy,
    /// the registry and the metrics; URL its Streamable HTTP endpoint.
    #[arg(
        long = "route",
        env = "SCHEMAGATE_ROUTES",
        value_name = "NAME=URL",
        required_unless_present = "routes_file"
    )]
    pub routes: Vec<RouteList>,
    /// A routes file (TOML: `[routes]` with `NAME = "URL"` or `NAME = "stdio:COMMAND ARGS"`
    /// lines), beside any --route; re-read
    /// when its content changes (every --policy-poll-interval seconds) and on SIGHUP. A route
    /// whose URL (or command) is unchanged keeps its sessions; a file that cannot be read keeps the routes in
    /// force.
    #[arg(long = "routes", env = "SCHEMAGATE_ROUTES_FILE", value_name = "FILE")]
    pub routes_file: Option<PathBuf>,
    /// Tokens (sent as `Proxy-Authorization: Bearer TOKEN`, scope `check`, server globs
    /// matching the route's name) and TLS for the listener.
    #[command(flatten)]
    pub access: AccessArgs,
    /// The shared registry: with it, the contracts one replica learns are used by every replica
    /// that names the same Redis.
    #[command(flatten)]
    pub registry: RegistryArgs,
    /// The gateway's URL as clients reach it (`https://mcp-gateway.example.com`): the base of the
    /// OAuth protected-resource metadata it serves for each route. Without it, the scheme it
    /// serves and the `Host` the client sent.
    #[arg(long, env = "SCHEMAGATE_PUBLIC_URL")]
    pub public_url: Option<String>,
    /// Trust policy file (TOML), as for `serve`. Without it every server is untrusted.
    #[arg(long, env = "SCHEMAGATE_POLICY")]
    pub policy: Option<PathBuf>,
    /// Re-read the policy file when its content changes, every this many seconds (0: never).
    #[arg(long, env = "SCHEMAGATE_POLICY_POLL_INTERVAL", default_value_t = DEFAULT_POLICY_POLL_SECS)]
    pub policy_poll_interval: u64,
    /// Serve GET /metrics (and /healthz) on this address too.
    #[arg(long, env = "SCHEMAGATE_METRICS_LISTEN")]
    pub metrics_listen: Option<SocketAddr>,
    /// Longest message relayed in either direction, in bytes: a longer POST gets 413, a longer
    /// answer (or event) from the upstream is replaced by a JSON-RPC error.
    #[arg(long, env = "SCHEMAGATE_MAX_MESSAGE_BYTES", default_value_t = DEFAULT_MAX_MESSAGE_BYTES)]
    pub max_message_bytes: usize,
    /// Requests in flight per session whose answers are followed; past it, a new call is
    /// answered with a JSON-RPC error rather than sent unchecked.
    #[arg(long, env = "SCHEMAGATE_MAX_CALLS_IN_FLIGHT", default_value_t = DEFAULT_MAX_CALLS_IN_FLIGHT)]
    pub max_calls_in_flight: usize,
    /// How long a call waits for the server's tools/list, when the gateway has to ask for it.
    #[arg(long, env = "SCHEMAGATE_CONTRACT_WAIT_MS", default_value_t = DEFAULT_CONTRACT_WAIT_MS)]
    pub contract_wait_ms: u64,
    /// Seconds an upstream has to begin its answer before the client gets 504.
    #[arg(long, env = "SCHEMAGATE_UPSTREAM_TIMEOUT_SECS", default_value_t = DEFAULT_UPSTREAM_TIMEOUT_SECS)]
    pub upstream_timeout_secs: u64,
    /// Seconds to connect to an upstream (name lookup, TCP and TLS) before the client gets 502.
    #[arg(long, env = "SCHEMAGATE_UPSTREAM_CONNECT_TIMEOUT_SECS", default_value_t = DEFAULT_UPSTREAM_CONNECT_TIMEOUT_SECS)]
    pub upstream_connect_timeout_secs: u64,
    /// Extra certificate authorities (PEM) trusted for https upstreams, beside the system's.
    #[arg(long, env = "SCHEMAGATE_UPSTREAM_CA")]
    pub upstream_ca: Option<PathBuf>,
    /// Most MCP sessions held at once (the least recently used is forgotten past it).
    #[arg(long, env = "SCHEMAGATE_MAX_SESSIONS", default_value_t = DEFAULT_MAX_SESSIONS)]
    pub max_sessions: u64,
    /// Seconds a session is held unused before it is forgotten.
    #[arg(long, env = "SCHEMAGATE_SESSION_IDLE_SECS", default_value_t = DEFAULT_SESSION_IDLE_SECS)]
    pub session_idle_secs: u64,
    /// Most processes each stdio route runs at once, one per session; past it, a client's
    /// initialize gets 503 (no other session's process is stopped for it).
    #[arg(long, env = "SCHEMAGATE_STDIO_MAX_PROCESSES", default_value_t = DEFAULT_STDIO_MAX_PROCESSES)]
    pub stdio_max_processes: usize,
    /// Seconds a stdio route's server request (a `roots/list` sent while the client has no
    /// stream open) waits for the client to open one; past it the server gets a JSON-RPC error
    /// for it, never left waiting.
    #[arg(long, env = "SCHEMAGATE_SERVER_REQUEST_TIMEOUT_SECS", default_value_t = DEFAULT_SERVER_REQUEST_TIMEOUT_SECS)]
    pub server_request_timeout_secs: u64,
    /// Seconds a stdio route's session with no stream open and no request is kept (a client that
    /// left without DELETE, as the TypeScript SDK's close() does); at --stdio-max-processes, the
    /// session idle longest is ended to make room before an initialize is refused.
    #[arg(long, env = "SCHEMAGATE_STDIO_IDLE_SECS", default_value_t = DEFAULT_STDIO_IDLE_SECS)]
    pub stdio_idle_secs: u64,
    /// Seconds /readyz fails after SIGTERM before the listener closes, requests still answered:
    /// time for Kubernetes to take the pod out of its Service.
    #[arg(long, env = "SCHEMAGATE_DRAIN_DELAY_SECS", default_value_t = DEFAULT_DRAIN_DELAY_SECS)]
    pub drain_delay_secs: u64,
    /// Seconds requests in flight get to finish once the listener closes.
    #[arg(long, env = "SCHEMAGATE_SHUTDOWN_GRACE_SECS", default_value_t = DEFAULT_SHUTDOWN_GRACE_SECS)]
    pub shutdown_grace_secs: u64,
    /// Connections: their number, timeouts and HTTP/2 settings, as for `serve`.
    #[command(flatten)]
    pub connections: ConnectionArgs,
    #[command(flatten)]
    pub record: RecordArgs,
    /// The limits a check and its schema are held to, as for `serve`.
    #[command(flatten)]
    pub limits: CheckLimitArgs,
    /// Threads for CPU work (compiles, large checks); 0 means one per core.
    #[arg(long, env = "SCHEMAGATE_WORKER_THREADS", default_value_t = 0)]
    pub worker_threads: usize,
    /// Threads that relay: accept connections, read and write messages, run the checks that
    /// are read inline. One (the default) costs the least CPU per call, with no wake-ups between
    /// threads; more relay more than one core's worth in one process. 0 leaves tokio's default
    /// (one per core, or `TOKIO_WORKER_THREADS`).
    #[arg(long, env = "SCHEMAGATE_RELAY_THREADS", default_value_t = DEFAULT_RELAY_THREADS)]
    pub relay_threads: usize,
    #[command(flatten)]
    pub log: LogArgs,
}

impl GatewayArgs {
    /// The hosts and origins the flags allow: `--allowed-hosts`, `--allowed-origins`, and the
    /// host and origin of `--public-url` (the name clients reach the gateway by).
    fn allowed_peers(&self) -> anyhow::Result<crate::net::origins::AllowedPeers> {
        let mut allowed = self.access.allowed_peers()?;
        if let Some(url) = self
            .public_url
            .as_deref()
            .and_then(|u| url::Url::parse(u).ok())
        {
            if let Some(host) = url.host_str() {
                allowed.hosts.push(host.to_owned());
                allowed.origins.push(url.origin().ascii_serialization());
            }
        }
        Ok(allowed)
    }

    /// What `schemagate gateway` runs with.
    pub fn gateway_config(&self) -> anyhow::Result<GatewayConfig> {
        anyhow::ensure!(
            self.max_message_bytes >= 1024,
            "--max-message-bytes must be at least 1024"
        );
        anyhow::ensure!(
            self.max_calls_in_flight > 0,
            "--max-calls-in-flight must be at least 1"
        );
        anyhow::ensure!(
            self.upstream_timeout_secs > 0 && self.upstream_connect_timeout_secs > 0,
            "--upstream-timeout-secs and --upstream-connect-timeout-secs must be at least 1"
        );
        anyhow::ensure!(self.max_sessions > 0, "--max-sessions must be at least 1");
        if let Some(url) = &self.public_url {
            let parsed = url::Url::parse(url)
                .map_err(|e| anyhow::anyhow!("--public-url {url:?} is not a URL: {e}"))?;
            anyhow::ensure!(
                matches!(parsed.scheme(), "http" | "https")
                    && parsed.host_str().is_some()
                    && parsed.query().is_none(),
                "--public-url {url:?}: give the http:// or https:// URL clients reach the gateway at"
            );
        }
        self.connections.validate()?;
        let body_read_timeout = Duration::from_secs(self.connections.body_read_timeout_secs);
        Ok(GatewayConfig {
            gate: mcp_gate_config(McpGate {
                limits: self.limits.limits(
                    self.max_message_bytes,
                    DEFAULT_MAX_BATCH_ITEMS,
                    body_read_timeout,
                )?,
                max_message_bytes: self.max_message_bytes,
                policy: self.policy.clone(),
                worker_threads: self.worker_threads,
                registry: self.registry.config()?,
                auth: self
                    .access
                    .auth(&[self.listen], "call every route's tools through it")?,
            })?,
            tls: self.access.tls_files(),
            allowed: self.allowed_peers()?,
            boundary: BoundaryConfig {
                // Each route's name, per route.
                server: "".into(),
                max_message_bytes: self.max_message_bytes,
                max_in_flight: self.max_calls_in_flight,
                contract_wait: Duration::from_millis(self.contract_wait_ms),
                transport: Transport::Gateway,
                registered_is_current: self.registry.url.is_some(),
            },
            routes: self
                .routes
                .iter()
                .flat_map(|l| l.0.iter().cloned())
                .collect(),
            routes_file: self.routes_file.clone(),
            public_url: self
                .public_url
                .as_ref()
                .map(|u| u.trim_end_matches('/').to_owned()),
            upstream: UpstreamConfig {
                timeout: Duration::from_secs(self.upstream_timeout_secs),
                connect_timeout: Duration::from_secs(self.upstream_connect_timeout_secs),
                ca: self.upstream_ca.clone(),
            },
            sessions: SessionLimits {
                max_sessions: self.max_sessions,
                idle: Duration::from_secs(self.session_idle_secs.max(1)),
            },
            stdio_max_processes: self.stdio_max_processes,
            server_request_timeout: Duration::from_secs(self.server_request_timeout_secs.max(1)),
            stdio_idle: Duration::from_secs(self.stdio_idle_secs.max(1)),
            connections: self.connections.limits(),
            metrics_listen: self.metrics_listen,
            poll_secs: self.policy_poll_interval,
            drain_delay: Duration::from_secs(self.drain_delay_secs),
            shutdown_grace: Duration::from_secs(self.shutdown_grace_secs),
            record: self.record.settings()?,
        })
    }
}
