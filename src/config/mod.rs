//! The command line: one file per command ([`serve`], [`proxy`]), the flags they share, and the
//! documented defaults, each one a newcomer can run with. Flags become each layer's own
//! configuration here; no layer imports this module.

mod access;
mod check;
mod connections;
mod diff;
mod gateway;
mod proxy;
mod record;
mod registry;
mod serve;

pub use access::AccessArgs;
pub use check::CheckArgs;
pub use connections::ConnectionArgs;
pub use diff::DiffArgs;
pub use gateway::GatewayArgs;
pub use proxy::ProxyArgs;
pub use record::RecordArgs;
pub use registry::RegistryArgs;
pub use serve::ServeArgs;

use crate::core::policy::Policy;
use crate::core::Limits;
use crate::net::listen::{connections_from_fd_limit, ConnectionLimits, Http2Limits};
use anyhow::Context;
use clap::{Parser, Subcommand, ValueEnum};
use std::path::Path;
use std::time::Duration;

pub const DEFAULT_LISTEN: &str = "127.0.0.1:8080";
pub const DEFAULT_GRPC_LISTEN: &str = "127.0.0.1:50051";
/// 32 MiB: a batch of a few hundred large tool results.
pub const DEFAULT_MAX_BODY_BYTES: usize = 32 * 1024 * 1024;
/// 64 MiB: gRPC bulk needs more than tonic's 4 MiB default.
pub const DEFAULT_GRPC_MAX_MESSAGE_BYTES: usize = 64 * 1024 * 1024;
pub const DEFAULT_MAX_BATCH_ITEMS: usize = 10_000;
pub const DEFAULT_MAX_DEPTH: usize = 64;
pub const DEFAULT_MAX_ERRORS: usize = 20;
pub const DEFAULT_MAX_SCHEMA_BYTES: usize = 1024 * 1024;
pub const DEFAULT_MAX_SCHEMA_COST: u64 = 10_000;
/// Heap bytes a schema's compiled regular expressions may hold together (16 MiB).
pub const DEFAULT_MAX_SCHEMA_REGEX_BYTES: usize = 16 << 20;
pub const DEFAULT_MAX_CHECK_WORK: u64 = 50_000_000;
pub const DEFAULT_MAX_ERROR_WORK: u64 = 500_000;
/// 256 MiB of estimated compiled-schema weight.
pub const DEFAULT_CACHE_MAX_BYTES: u64 = 256 * 1024 * 1024;
pub const DEFAULT_CACHE_IDLE_SECS: u64 = 3600;
pub const DEFAULT_MAX_SCHEMA_TEXT_BYTES: u64 = 64 * 1024 * 1024;
pub const DEFAULT_REGISTRY_TIMEOUT_MS: u64 = 2000;
pub const DEFAULT_REGISTRY_SCHEMA_TTL_SECS: u64 = 7 * 24 * 3600;
pub const DEFAULT_LABEL_LIMIT: usize = 1000;
/// Label combinations per client-labelled metric family (validations, field failures).
pub const DEFAULT_SERIES_LIMIT: usize = 30_000;
pub const DEFAULT_MAX_REGISTERED_TOOLS: usize = 100_000;
pub const DEFAULT_POLICY_POLL_SECS: u64 = 10;
pub const DEFAULT_SHUTDOWN_GRACE_SECS: u64 = 30;
/// Seconds readiness fails (and gRPC health says NOT_SERVING) before the listeners close, while
/// checks are still answered: time for Kubernetes to take the pod out of its Service.
pub const DEFAULT_DRAIN_DELAY_SECS: u64 = 5;
/// Checks admitted at once (queued or running) before new work is refused as overloaded.
pub const DEFAULT_MAX_QUEUED_CHECKS: usize = 100_000;
/// Request bytes admitted at once before new work is refused as overloaded (256 MiB).
pub const DEFAULT_MAX_QUEUED_BYTES: usize = 256 << 20;
/// Bytes request bodies still arriving may hold together before new ones are refused (256 MiB).
pub const DEFAULT_MAX_RECEIVING_BYTES: usize = 256 << 20;
pub const DEFAULT_HEADER_READ_TIMEOUT_SECS: u64 = 10;
pub const DEFAULT_BODY_READ_TIMEOUT_SECS: u64 = 30;
pub const DEFAULT_IDLE_TIMEOUT_SECS: u64 = 60;
pub const DEFAULT_WRITE_TIMEOUT_SECS: u64 = 30;
pub const DEFAULT_HTTP2_MAX_CONCURRENT_STREAMS: u32 = 128;
/// Bytes a client may send on one HTTP/2 stream before schemagate reads them (256 KiB).
pub const DEFAULT_HTTP2_STREAM_WINDOW: u32 = 256 << 10;
/// Bytes a client may send on one HTTP/2 connection before schemagate reads them (1 MiB).
pub const DEFAULT_HTTP2_CONNECTION_WINDOW: u32 = 1 << 20;
pub const DEFAULT_HTTP2_KEEPALIVE_SECS: u64 = 30;

/// 16 MiB: the longest MCP message `schemagate proxy` relays.
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;
/// Requests in flight to the server whose answers the proxy reads.
pub const DEFAULT_MAX_CALLS_IN_FLIGHT: usize = 4096;
pub const DEFAULT_CONTRACT_WAIT_MS: u64 = 5000;
pub const DEFAULT_PROXY_SHUTDOWN_GRACE_SECS: u64 = 5;

#[derive(Debug, Parser)]
#[command(
    name = "schemagate",
    version,
    about = "Checks AI tool results against their declared schemas before anyone acts on them."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the service (REST and gRPC) on embedded defaults or the given flags.
    Serve(Box<ServeArgs>),
    /// Run an MCP server (stdio) behind schemagate: `schemagate proxy --server-name NAME --
    /// COMMAND [ARGS...]` relays between the client on this process's stdin/stdout and the
    /// server, checking tool-call arguments and results against the contract it lists.
    Proxy(Box<ProxyArgs>),
    /// Stand in front of remote MCP servers (Streamable HTTP): `schemagate gateway --route
    /// NAME=URL ...` serves `http://ADDR/mcp/NAME` and relays each route to its upstream (or to
    /// a local server run on stdio, `--route NAME=stdio:COMMAND ARGS`), checking tool-call
    /// arguments and results against the contract it lists.
    Gateway(Box<GatewayArgs>),
    /// Compare two tools/list snapshots as a registration would (`schemagate diff OLD.json
    /// NEW.json`): each tool added, removed or changed, with its class and reasons; exit code 1
    /// when a change reaches --fail-on (for CI), 2 when a file cannot be read.
    Diff(Box<DiffArgs>),
    /// Judge recorded traffic offline (`schemagate check --tools TOOLS.json LOG...`): each line
    /// a check in the REST body's shape, or with --format jsonrpc an MCP session's messages;
    /// prints a summary (JSON with --output json; JUnit with --junit FILE; every verdict with
    /// --verdicts FILE); exit code 1 when the policy would reject a check, 2 when a line or file
    /// could not be read.
    Check(Box<CheckArgs>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

/// Logging, the same for `serve` and `proxy`: lines go to stderr (under `proxy`, stdout is the
/// MCP client's).
#[derive(Debug, Clone, clap::Args)]
pub struct LogArgs {
    /// Log filter (tracing's EnvFilter syntax: info, debug, schemagate=debug,...).
    #[arg(long, env = "SCHEMAGATE_LOG_LEVEL", default_value = "info")]
    pub log_level: String,
    /// Log line format.
    #[arg(
        long,
        env = "SCHEMAGATE_LOG_FORMAT",
        value_enum,
        default_value = "text"
    )]
    pub log_format: LogFormat,
}

/// The limits a check and its schema are held to: flags of both `serve` and `proxy`.
#[derive(Debug, Clone, clap::Args)]
pub struct CheckLimitArgs {
    /// Deepest nesting of a payload or schema.
    #[arg(long, env = "SCHEMAGATE_MAX_DEPTH", default_value_t = DEFAULT_MAX_DEPTH)]
    pub max_depth: usize,
    /// Most errors listed in one verdict (`truncated` says when there were more).
    #[arg(long, env = "SCHEMAGATE_MAX_ERRORS", default_value_t = DEFAULT_MAX_ERRORS)]
    pub max_errors: usize,
    /// Largest schema, in bytes.
    #[arg(long, env = "SCHEMAGATE_MAX_SCHEMA_BYTES", default_value_t = DEFAULT_MAX_SCHEMA_BYTES)]
    pub max_schema_bytes: usize,
    /// Most subschema evaluations a schema may imply at one position of an instance.
    #[arg(long, env = "SCHEMAGATE_MAX_SCHEMA_COST", default_value_t = DEFAULT_MAX_SCHEMA_COST)]
    pub max_schema_cost: u64,
    /// Most heap bytes a schema's compiled regular expressions may hold together; a schema past
    /// it is refused before its patterns are compiled by the validator.
    #[arg(long, env = "SCHEMAGATE_MAX_SCHEMA_REGEX_BYTES", default_value_t = DEFAULT_MAX_SCHEMA_REGEX_BYTES)]
    pub max_schema_regex_bytes: usize,
    /// Most work (schema cost times payload size, plus regular expressions times string bytes)
    /// one check may cost.
    #[arg(long, env = "SCHEMAGATE_MAX_CHECK_WORK", default_value_t = DEFAULT_MAX_CHECK_WORK)]
    pub max_check_work: u64,
    /// Most work for which every error is collected; past it one summary error is reported.
    #[arg(long, env = "SCHEMAGATE_MAX_ERROR_WORK", default_value_t = DEFAULT_MAX_ERROR_WORK)]
    pub max_error_work: u64,
}

impl CheckLimitArgs {
    /// The core's limits: these, with the body size, batch length and body-read timeout of the
    /// command. Refuses values no check could be made under.
    fn limits(
        &self,
        max_body_bytes: usize,
        max_batch_items: usize,
        body_read_timeout: Duration,
    ) -> anyhow::Result<Limits> {
        for (name, value) in [
            ("--max-errors", self.max_errors),
            ("--max-schema-bytes", self.max_schema_bytes),
            ("--max-schema-regex-bytes", self.max_schema_regex_bytes),
        ] {
            anyhow::ensure!(value > 0, "{name} must be at least 1");
        }
        anyhow::ensure!(
            (1..=120).contains(&self.max_depth),
            "--max-depth must be between 1 and 120 (JSON parsing itself stops at 128 levels)"
        );
        Ok(Limits {
            max_body_bytes,
            max_batch_items,
            max_depth: self.max_depth,
            max_errors: self.max_errors,
            max_schema_bytes: self.max_schema_bytes,
            max_schema_cost: self.max_schema_cost,
            max_schema_regex_bytes: self.max_schema_regex_bytes,
            max_check_work: self.max_check_work,
            max_error_work: self.max_error_work,
            body_read_timeout,
        })
    }
}

/// What differs between the core configurations of the commands on the MCP wire (`proxy`,
/// `gateway`); the rest is the service's defaults.
struct McpGate {
    limits: Limits,
    /// The longest message relayed: the queue and receiving budgets hold at least one.
    max_message_bytes: usize,
    policy: Option<std::path::PathBuf>,
    worker_threads: usize,
    registry: Option<crate::core::registry::redis::RedisConfig>,
    auth: crate::core::auth::Auth,
}

/// The core's configuration of a command on the MCP wire.
fn mcp_gate_config(gate: McpGate) -> anyhow::Result<crate::core::gate::GateConfig> {
    use crate::core::gate::{GateConfig, QueueLimits};
    use crate::core::schema::cache::CacheConfig;
    Ok(GateConfig {
        limits: gate.limits,
        cache: CacheConfig {
            max_bytes: DEFAULT_CACHE_MAX_BYTES,
            idle: Duration::from_secs(DEFAULT_CACHE_IDLE_SECS),
        },
        label_limit: DEFAULT_LABEL_LIMIT,
        series_limit: DEFAULT_SERIES_LIMIT,
        max_registered_tools: DEFAULT_MAX_REGISTERED_TOOLS,
        max_schema_text_bytes: DEFAULT_MAX_SCHEMA_TEXT_BYTES,
        registry: gate.registry,
        policy: load_policy(gate.policy.as_deref())?,
        policy_path: gate.policy,
        worker_threads: gate.worker_threads,
        queue: QueueLimits {
            max_checks: DEFAULT_MAX_QUEUED_CHECKS,
            max_bytes: DEFAULT_MAX_QUEUED_BYTES.max(gate.max_message_bytes),
        },
        max_receiving_bytes: DEFAULT_MAX_RECEIVING_BYTES.max(gate.max_message_bytes),
        auth: gate.auth,
    })
}

/// The policy in `path` (failing with a message that names it), or the default: every server
/// untrusted.
fn load_policy(path: Option<&Path>) -> anyhow::Result<Policy> {
    match path {
        Some(path) => Policy::from_file(path).context("loading --policy"),
        None => Ok(Policy::default()),
    }
}

/// Connection limits at the service's defaults (the commands that do not take them as flags).
fn default_connection_limits() -> ConnectionLimits {
    let keepalive = Duration::from_secs(DEFAULT_HTTP2_KEEPALIVE_SECS);
    ConnectionLimits {
        max_connections: connections_from_fd_limit(),
        header_read_timeout: Duration::from_secs(DEFAULT_HEADER_READ_TIMEOUT_SECS),
        idle_timeout: Duration::from_secs(DEFAULT_IDLE_TIMEOUT_SECS),
        write_timeout: Duration::from_secs(DEFAULT_WRITE_TIMEOUT_SECS),
        http2: Http2Limits {
            max_concurrent_streams: DEFAULT_HTTP2_MAX_CONCURRENT_STREAMS,
            stream_window: DEFAULT_HTTP2_STREAM_WINDOW,
            connection_window: DEFAULT_HTTP2_CONNECTION_WINDOW,
            keepalive_interval: keepalive,
            keepalive_timeout: keepalive,
        },
    }
}
