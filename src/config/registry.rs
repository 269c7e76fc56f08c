//! Where contracts live: flags `serve` and `gateway` share.

use super::*;
use crate::core::registry::redis::{redacted, RedisConfig};

/// The shared registry.
#[derive(Debug, Clone, clap::Args)]
pub struct RegistryArgs {
    /// Where registrations and schema texts live: unset, in this process alone; a
    /// `redis://[user:password@]host[:port][/db]` or `rediss://...` (TLS) URL, in Redis, shared
    /// by every replica that names it.
    #[arg(long = "registry", env = "SCHEMAGATE_REGISTRY")]
    pub url: Option<String>,
    /// The longest one Redis command or connection may take before it counts as failed (a
    /// registration is then refused as registry_unavailable).
    #[arg(long = "registry-timeout-ms", env = "SCHEMAGATE_REGISTRY_TIMEOUT_MS", default_value_t = DEFAULT_REGISTRY_TIMEOUT_MS)]
    pub timeout_ms: u64,
    /// How long Redis keeps the text of a schema first seen inline (registered texts do not
    /// expire).
    #[arg(long = "registry-schema-ttl-secs", env = "SCHEMAGATE_REGISTRY_SCHEMA_TTL_SECS", default_value_t = DEFAULT_REGISTRY_SCHEMA_TTL_SECS)]
    pub schema_ttl_secs: u64,
}

impl RegistryArgs {
    /// The shared registry, when --registry is given.
    pub fn config(&self) -> anyhow::Result<Option<RedisConfig>> {
        let Some(url) = self.url.as_deref().filter(|u| !u.is_empty()) else {
            return Ok(None);
        };
        anyhow::ensure!(
            url.starts_with("redis://") || url.starts_with("rediss://"),
            "--registry {}: expected a redis:// or rediss:// URL (or no --registry, for an in-process registry)",
            redacted(url)
        );
        anyhow::ensure!(
            self.timeout_ms > 0,
            "--registry-timeout-ms must be at least 1"
        );
        Ok(Some(RedisConfig {
            url: url.to_owned(),
            timeout: Duration::from_millis(self.timeout_ms),
            text_ttl: Duration::from_secs(self.schema_ttl_secs.max(1)),
        }))
    }
}
