//! A `tools/list` snapshot file, as `check --tools` and `diff` read it: one server's result (or a
//! JSON-RPC answer carrying it, as captured from the wire), or a map `{"servers": {NAME: result}}`
//! (the reference corpus's shape).

use bytes::Bytes;
use std::collections::BTreeMap;
use std::path::Path;

/// The server name of a snapshot that is one `tools/list` result.
pub const LONE_SERVER: &str = "-";

/// A snapshot's `tools/list` results by server: a map `{"servers": {...}}`, or one result
/// (server [`LONE_SERVER`]). Errors name the file, and the line and column of broken JSON.
pub fn read(path: &Path) -> anyhow::Result<BTreeMap<String, Bytes>> {
    let text = std::fs::read(path)
        .map_err(|e| anyhow::anyhow!("{}: cannot read it: {e}", path.display()))?;
    let value: serde_json::Value = serde_json::from_slice(&text).map_err(|e| {
        anyhow::anyhow!(
            "{}: line {}, column {}: not JSON: {e}",
            path.display(),
            e.line(),
            e.column()
        )
    })?;
    // A JSON-RPC answer to `tools/list`, as captured from the wire: its result.
    let (value, text) = match value.get("result") {
        Some(result) if value.get("jsonrpc").is_some() && result.get("tools").is_some() => {
            let text = result.to_string().into_bytes();
            (result.clone(), text)
        }
        _ => (value, text),
    };
    match value.get("servers") {
        Some(serde_json::Value::Object(servers)) => Ok(servers
            .iter()
            .map(|(name, list)| (name.clone(), Bytes::from(list.to_string())))
            .collect()),
        Some(_) => anyhow::bail!(
            "{}: `servers` must map each server's name to its tools/list result",
            path.display()
        ),
        None if value.get("tools").is_some() => {
            Ok(BTreeMap::from([(LONE_SERVER.to_owned(), Bytes::from(text))]))
        }
        None => anyhow::bail!(
            "{}: expected a tools/list result ({{\"tools\": [...]}}), a JSON-RPC answer carrying one, or {{\"servers\": {{NAME: tools/list result}}}}",
            path.display()
        ),
    }
}
