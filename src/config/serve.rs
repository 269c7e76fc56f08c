//! Flags of `schemagate serve`, and the configuration of the service they make.

use super::*;
use crate::core::auth::Auth;
use crate::core::gate::{GateConfig, QueueLimits};
use crate::core::schema::cache::CacheConfig;
use crate::net::listen::ConnectionLimits;
use crate::serve::ServeConfig;
use std::net::SocketAddr;
use std::path::PathBuf;

/// Flags of `schemagate serve`.
#[derive(Debug, Clone, Parser)]
#[command(name = "serve")]
pub struct ServeArgs {
    /// Address for REST, /metrics, /healthz and /readyz.
    #[arg(long, env = "SCHEMAGATE_LISTEN", default_value = DEFAULT_LISTEN)]
    pub listen: SocketAddr,
    /// Address for gRPC (schemagate.v1.Validator, grpc.health.v1, reflection).
    #[arg(long, env = "SCHEMAGATE_GRPC_LISTEN", default_value = DEFAULT_GRPC_LISTEN)]
    pub grpc_listen: SocketAddr,
    /// Trust policy file (TOML). Without it every server is untrusted.
    #[arg(long, env = "SCHEMAGATE_POLICY")]
    pub policy: Option<PathBuf>,
    /// Re-read the policy file when its content changes, every this many seconds (0: only on
    /// SIGHUP or POST /v1/admin/reload-policy).
    #[arg(long, env = "SCHEMAGATE_POLICY_POLL_INTERVAL", default_value_t = DEFAULT_POLICY_POLL_SECS)]
    pub policy_poll_interval: u64,
    /// Tokens, and TLS for both ports.
    #[command(flatten)]
    pub access: AccessArgs,
    /// With tokens configured, require the `metrics` scope for GET /metrics (probes stay open).
    #[arg(long, env = "SCHEMAGATE_METRICS_REQUIRE_TOKEN")]
    pub metrics_require_token: bool,
    /// Largest REST request body, in bytes.
    #[arg(long, env = "SCHEMAGATE_MAX_BODY_BYTES", default_value_t = DEFAULT_MAX_BODY_BYTES)]
    pub max_body_bytes: usize,
    /// Largest gRPC message, in bytes.
    #[arg(long, env = "SCHEMAGATE_GRPC_MAX_MESSAGE_BYTES", default_value_t = DEFAULT_GRPC_MAX_MESSAGE_BYTES)]
    pub grpc_max_message_bytes: usize,
    /// Most checks in one batch.
    #[arg(long, env = "SCHEMAGATE_MAX_BATCH_ITEMS", default_value_t = DEFAULT_MAX_BATCH_ITEMS)]
    pub max_batch_items: usize,
    /// The limits a check and its schema are held to.
    #[command(flatten)]
    pub limits: CheckLimitArgs,
    /// Weighted capacity of the compiled-schema cache, in estimated bytes.
    #[arg(long, env = "SCHEMAGATE_CACHE_MAX_BYTES", default_value_t = DEFAULT_CACHE_MAX_BYTES)]
    pub cache_max_bytes: u64,
    /// Compiled schemas unused this many seconds are dropped.
    #[arg(long, env = "SCHEMAGATE_CACHE_IDLE_SECS", default_value_t = DEFAULT_CACHE_IDLE_SECS)]
    pub cache_idle_secs: u64,
    /// Distinct values kept per client-controlled metric label (server, tool, path); the rest
    /// fold into `_other`.
    #[arg(long, env = "SCHEMAGATE_METRICS_LABEL_LIMIT", default_value_t = DEFAULT_LABEL_LIMIT)]
    pub metrics_label_limit: usize,
    /// Label combinations kept per client-labelled metric family; past it new combinations count
    /// under `_other` (and in schemagate_series_folded_total). Each (server, tool) pair takes 90
    /// series of schemagate_validations_total (tier x payload x attempt x outcome).
    #[arg(long, env = "SCHEMAGATE_METRICS_SERIES_LIMIT", default_value_t = DEFAULT_SERIES_LIMIT)]
    pub metrics_series_limit: usize,
    /// Most tools registered across all servers.
    #[arg(long, env = "SCHEMAGATE_MAX_REGISTERED_TOOLS", default_value_t = DEFAULT_MAX_REGISTERED_TOOLS)]
    pub max_registered_tools: usize,
    /// Bytes of schema texts kept from checks (by hash, for `schema_hash`), apart from the
    /// compiled cache; past it the least recently used are dropped. Registered schemas' texts
    /// are kept by their registration.
    #[arg(long, env = "SCHEMAGATE_MAX_SCHEMA_TEXT_BYTES", default_value_t = DEFAULT_MAX_SCHEMA_TEXT_BYTES)]
    pub max_schema_text_bytes: u64,
    /// The shared registry.
    #[command(flatten)]
    pub registry: RegistryArgs,
    /// Threads for CPU work (compiles, large checks, batches); 0 means one per core.
    #[arg(long, env = "SCHEMAGATE_WORKER_THREADS", default_value_t = 0)]
    pub worker_threads: usize,
    /// Checks admitted at once (queued or running on the workers); past it, new requests are
    /// refused at once with 503 `overloaded` and Retry-After (gRPC RESOURCE_EXHAUSTED). At least
    /// --max-batch-items.
    #[arg(long, env = "SCHEMAGATE_MAX_QUEUED_CHECKS", default_value_t = DEFAULT_MAX_QUEUED_CHECKS)]
    pub max_queued_checks: usize,
    /// Request bytes admitted at once; past it, new requests are refused as overloaded. At least
    /// --max-body-bytes and --grpc-max-message-bytes.
    #[arg(long, env = "SCHEMAGATE_MAX_QUEUED_BYTES", default_value_t = DEFAULT_MAX_QUEUED_BYTES)]
    pub max_queued_bytes: usize,
    /// Bytes that request bodies still arriving may hold together (a REST body until it is
    /// complete, a gRPC message until its last byte is in); past it, the request is refused as
    /// overloaded. At least --max-body-bytes and --grpc-max-message-bytes.
    #[arg(long, env = "SCHEMAGATE_MAX_RECEIVING_BYTES", default_value_t = DEFAULT_MAX_RECEIVING_BYTES)]
    pub max_receiving_bytes: usize,
    /// Connections: their number, timeouts and HTTP/2 settings.
    #[command(flatten)]
    pub connections: ConnectionArgs,
    /// Seconds after SIGINT or SIGTERM during which /readyz answers 503 and gRPC health says
    /// NOT_SERVING while checks are still accepted and answered (so load balancers stop sending
    /// before the listeners close).
    #[arg(long, env = "SCHEMAGATE_DRAIN_DELAY_SECS", default_value_t = DEFAULT_DRAIN_DELAY_SECS)]
    pub drain_delay_secs: u64,
    /// Seconds that checks in flight get to finish once the listeners close (after the drain
    /// delay).
    #[arg(long, env = "SCHEMAGATE_SHUTDOWN_GRACE_SECS", default_value_t = DEFAULT_SHUTDOWN_GRACE_SECS)]
    pub shutdown_grace_secs: u64,
    #[command(flatten)]
    pub log: LogArgs,
}

impl Default for ServeArgs {
    fn default() -> Self {
        ServeArgs::parse_from(["serve"])
    }
}

impl ServeArgs {
    /// What `schemagate serve` runs with.
    pub fn serve_config(&self) -> anyhow::Result<ServeConfig> {
        Ok(ServeConfig {
            gate: self.gate_config()?,
            tls: self.access.tls_files(),
            allowed: self.access.allowed_peers()?,
            connections: self.connection_limits(),
            grpc_max_message_bytes: self.grpc_max_message_bytes,
            poll_secs: self.policy_poll_interval,
            drain_delay: Duration::from_secs(self.drain_delay_secs),
            shutdown_grace: Duration::from_secs(self.shutdown_grace_secs),
        })
    }

    /// The core's configuration; loads the policy file, failing with a message that names it.
    pub fn gate_config(&self) -> anyhow::Result<GateConfig> {
        self.core_config(self.auth()?)
    }

    /// The core's configuration with `auth`.
    fn core_config(&self, auth: Auth) -> anyhow::Result<GateConfig> {
        let policy = load_policy(self.policy.as_deref())?;
        for (name, value) in [
            ("--max-body-bytes", self.max_body_bytes),
            ("--max-batch-items", self.max_batch_items),
            ("--metrics-label-limit", self.metrics_label_limit),
            ("--metrics-series-limit", self.metrics_series_limit),
        ] {
            anyhow::ensure!(value > 0, "{name} must be at least 1");
        }
        anyhow::ensure!(
            self.max_queued_checks >= self.max_batch_items,
            "--max-queued-checks ({}) must be at least --max-batch-items ({}), or a full batch could never be admitted",
            self.max_queued_checks,
            self.max_batch_items
        );
        anyhow::ensure!(
            self.max_queued_bytes >= self.max_body_bytes.max(self.grpc_max_message_bytes),
            "--max-queued-bytes ({}) must be at least --max-body-bytes and --grpc-max-message-bytes, or a full request could never be admitted",
            self.max_queued_bytes
        );
        anyhow::ensure!(
            self.max_receiving_bytes >= self.max_body_bytes.max(self.grpc_max_message_bytes),
            "--max-receiving-bytes ({}) must be at least --max-body-bytes and --grpc-max-message-bytes, or a full request could never arrive",
            self.max_receiving_bytes
        );
        self.connections.validate()?;
        Ok(GateConfig {
            limits: self.limits.limits(
                self.max_body_bytes,
                self.max_batch_items,
                Duration::from_secs(self.connections.body_read_timeout_secs),
            )?,
            cache: CacheConfig {
                max_bytes: self.cache_max_bytes,
                idle: Duration::from_secs(self.cache_idle_secs.max(1)),
            },
            label_limit: self.metrics_label_limit,
            series_limit: self.metrics_series_limit,
            max_registered_tools: self.max_registered_tools,
            max_schema_text_bytes: self.max_schema_text_bytes,
            registry: self.registry.config()?,
            policy,
            policy_path: self.policy.clone(),
            worker_threads: self.worker_threads,
            queue: QueueLimits {
                max_checks: self.max_queued_checks,
                max_bytes: self.max_queued_bytes,
            },
            max_receiving_bytes: self.max_receiving_bytes,
            auth,
        })
    }

    /// The tokens, and whether serving without them is allowed here: with no tokens, only on
    /// loopback addresses unless --allow-unauthenticated.
    fn auth(&self) -> anyhow::Result<Auth> {
        Ok(self
            .access
            .auth(
                &[self.listen, self.grpc_listen],
                "check, register tools and reload the policy",
            )?
            .with_metrics_token(self.metrics_require_token))
    }

    /// The limits every connection is served under (raises the open-file limit when
    /// --max-connections is 0).
    pub fn connection_limits(&self) -> ConnectionLimits {
        self.connections.limits()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_run_without_a_file() {
        let args = ServeArgs::default();
        assert_eq!(args.listen.to_string(), DEFAULT_LISTEN);
        assert_eq!(args.grpc_listen.to_string(), DEFAULT_GRPC_LISTEN);
        let config = args.gate_config().expect("defaults are valid");
        assert_eq!(config.limits.max_errors, 20);
    }

    #[test]
    fn a_bad_policy_file_names_itself_and_the_key() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("policy.toml");
        std::fs::write(&path, "default_tier = \"friendly\"\n").expect("write");
        let args = ServeArgs::parse_from(["serve", "--policy", path.to_str().expect("utf-8")]);
        let err = format!("{:#}", args.gate_config().unwrap_err());
        assert!(
            err.contains("policy.toml") && err.contains("default_tier"),
            "{err}"
        );
    }

    #[test]
    fn bad_flags_are_refused() {
        let shallow = ServeArgs::parse_from(["serve", "--max-depth", "0"]);
        assert!(shallow.gate_config().is_err());
        assert!(ServeArgs::try_parse_from(["serve", "--listen", "nowhere"]).is_err());
        let zero = ServeArgs::parse_from(["serve", "--max-errors", "0"]);
        assert!(zero.gate_config().is_err());
    }
}
