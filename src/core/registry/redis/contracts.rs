//! What the shared registry keeps of contracts over time: each tool's history (a list of
//! versions, newest first) and the contract hashes accepted past a pin.

use super::records::{accepted_key, history_key, HISTORY_TTL_SECS};
use super::{failure::unavailable, RedisRegistry};
use crate::core::error::CheckError;
use crate::core::metrics::RegistryOp;
use crate::core::registry::history::{Version, MAX_VERSIONS};
use crate::core::registry::AcceptedHashes;

impl RedisRegistry {
    /// Accepts `hash` as `tool`'s contract on `server` past a pin, for every replica.
    pub async fn accept(&self, server: &str, tool: &str, hash: &str) -> Result<(), CheckError> {
        let mut pipe = redis::pipe();
        pipe.cmd("HSET")
            .arg(accepted_key(server))
            .arg(format!("{tool}\n{hash}"))
            .arg(1)
            .ignore();
        self.query(RegistryOp::Write, pipe).await
    }

    /// The contract hashes accepted on `server`, as Redis holds them.
    pub async fn accepted(&self, server: &str) -> Result<AcceptedHashes, CheckError> {
        let mut pipe = redis::pipe();
        pipe.cmd("HKEYS").arg(accepted_key(server));
        let (fields,): (Vec<String>,) = self.query(RegistryOp::Write, pipe).await?;
        Ok(fields
            .into_iter()
            .filter_map(|field| {
                let (tool, hash) = field.split_once('\n')?;
                Some((tool.to_owned(), hash.to_owned()))
            })
            .collect())
    }

    /// `tool`'s history as Redis holds it, newest first. A version that does not read is left
    /// out (logged).
    pub async fn history(&self, server: &str, tool: &str) -> Result<Vec<Version>, CheckError> {
        let mut pipe = redis::pipe();
        pipe.cmd("LRANGE")
            .arg(history_key(server, tool))
            .arg(0)
            .arg(-1);
        let (records,): (Vec<Vec<u8>>,) = self.query(RegistryOp::Sync, pipe).await?;
        Ok(records
            .iter()
            .filter_map(|record| match serde_json::from_slice(record) {
                Ok(version) => Some(version),
                Err(e) => {
                    tracing::warn!(server, tool, error = %e, "registry (Redis): a version of this tool's history does not read; left out");
                    None
                }
            })
            .collect())
    }
}

/// Adds `versions` to their tools' histories in `pipe`: newest first, the last
/// [`MAX_VERSIONS`] kept, for [`HISTORY_TTL_SECS`] after the last change.
pub(super) fn push_history(
    pipe: &mut redis::Pipeline,
    server: &str,
    versions: &[(String, Version)],
) -> Result<(), CheckError> {
    for (tool, version) in versions {
        let key = history_key(server, tool);
        let record = serde_json::to_vec(version).map_err(unavailable)?;
        pipe.cmd("LPUSH").arg(&key).arg(record).ignore();
        pipe.cmd("LTRIM")
            .arg(&key)
            .arg(0)
            .arg(MAX_VERSIONS - 1)
            .ignore();
        pipe.cmd("EXPIRE").arg(&key).arg(HISTORY_TTL_SECS).ignore();
    }
    Ok(())
}
