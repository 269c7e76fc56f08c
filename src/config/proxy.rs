//! Flags of `schemagate proxy`, and the configuration of the proxy adapter they make.

use super::*;
use crate::core::auth::Auth;
use crate::core::gate::GateConfig;
use crate::core::metrics::Transport;
use crate::mcp::BoundaryConfig;
use crate::proxy::ProxyConfig;
use std::net::SocketAddr;
use std::path::PathBuf;

/// Flags of `schemagate proxy`.
#[derive(Debug, Clone, Parser)]
#[command(name = "proxy")]
pub struct ProxyArgs {
    /// The server's name: what the policy matches, what the contract is registered under, the
    /// `server` label of the metrics.
    #[arg(long, env = "SCHEMAGATE_SERVER_NAME")]
    pub server_name: String,
    /// Trust policy file (TOML), as for `serve`. Without it the server is untrusted.
    #[arg(long, env = "SCHEMAGATE_POLICY")]
    pub policy: Option<PathBuf>,
    /// Re-read the policy file when its content changes, every this many seconds (0: never).
    #[arg(long, env = "SCHEMAGATE_POLICY_POLL_INTERVAL", default_value_t = DEFAULT_POLICY_POLL_SECS)]
    pub policy_poll_interval: u64,
    /// Serve GET /metrics (and /healthz) on this address, for a Prometheus sidecar scrape.
    #[arg(long, env = "SCHEMAGATE_METRICS_LISTEN")]
    pub metrics_listen: Option<SocketAddr>,
    /// Longest message relayed in either direction, in bytes; a longer request is answered with
    /// a JSON-RPC error, a longer answer replaced by one.
    #[arg(long, env = "SCHEMAGATE_MAX_MESSAGE_BYTES", default_value_t = DEFAULT_MAX_MESSAGE_BYTES)]
    pub max_message_bytes: usize,
    /// Requests in flight to the server (tool calls, listings) whose answers are followed; past
    /// it, a new call is answered with a JSON-RPC error rather than sent unchecked.
    #[arg(long, env = "SCHEMAGATE_MAX_CALLS_IN_FLIGHT", default_value_t = DEFAULT_MAX_CALLS_IN_FLIGHT)]
    pub max_calls_in_flight: usize,
    /// How long a call waits for the server's tools/list, when the proxy has to ask for it (no
    /// listing yet, or the tools changed), before it is checked with the contract at hand.
    #[arg(long, env = "SCHEMAGATE_CONTRACT_WAIT_MS", default_value_t = DEFAULT_CONTRACT_WAIT_MS)]
    pub contract_wait_ms: u64,
    /// When the client closes stdin: seconds the server has to exit after its own stdin is
    /// closed, and again after SIGTERM, before it is killed.
    #[arg(long, env = "SCHEMAGATE_PROXY_SHUTDOWN_GRACE_SECS", default_value_t = DEFAULT_PROXY_SHUTDOWN_GRACE_SECS)]
    pub shutdown_grace_secs: u64,
    /// The limits a check and its schema are held to, as for `serve`.
    #[command(flatten)]
    pub limits: CheckLimitArgs,
    /// Threads for CPU work (compiles, large checks); 0 means one per core.
    #[arg(long, env = "SCHEMAGATE_WORKER_THREADS", default_value_t = 1)]
    pub worker_threads: usize,
    #[command(flatten)]
    pub log: LogArgs,
    #[command(flatten)]
    pub record: RecordArgs,
    /// The MCP server to run, and its arguments (after `--`).
    #[arg(last = true, required = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

impl ProxyArgs {
    /// What `schemagate proxy` runs with.
    pub fn proxy_config(&self) -> anyhow::Result<ProxyConfig> {
        Ok(ProxyConfig {
            gate: self.gate_config()?,
            boundary: BoundaryConfig {
                server: self.server_name.as_str().into(),
                max_message_bytes: self.max_message_bytes,
                max_in_flight: self.max_calls_in_flight,
                contract_wait: Duration::from_millis(self.contract_wait_ms),
                transport: Transport::Proxy,
                registered_is_current: false,
            },
            command: self.command.clone(),
            shutdown_grace: Duration::from_secs(self.shutdown_grace_secs.max(1)),
            metrics_listen: self.metrics_listen,
            admin_limits: default_connection_limits(),
            poll_secs: self.policy_poll_interval,
            record: self.record.settings()?,
        })
    }

    /// The core's configuration: the limits given here, the policy file, the service's defaults
    /// for the rest, no shared registry and no tokens (the proxy answers only its own client).
    pub fn gate_config(&self) -> anyhow::Result<GateConfig> {
        anyhow::ensure!(
            !self.server_name.is_empty(),
            "--server-name must not be empty"
        );
        anyhow::ensure!(
            self.max_message_bytes >= 1024,
            "--max-message-bytes must be at least 1024"
        );
        anyhow::ensure!(
            self.max_calls_in_flight > 0,
            "--max-calls-in-flight must be at least 1"
        );
        mcp_gate_config(McpGate {
            limits: self.limits.limits(
                self.max_message_bytes,
                DEFAULT_MAX_BATCH_ITEMS,
                Duration::from_secs(DEFAULT_BODY_READ_TIMEOUT_SECS),
            )?,
            max_message_bytes: self.max_message_bytes,
            policy: self.policy.clone(),
            worker_threads: self.worker_threads,
            registry: None,
            auth: Auth::new(None, Vec::new())?,
        })
    }
}
