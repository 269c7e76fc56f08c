//! What the shared registry stores in Redis: its keys, a server's and a tool's records, and a
//! registration built back from them.

use crate::core::domain::{ProtocolVersion, SchemaHash, ToolName};
use crate::core::registry::{Provenance, RegisteredSchema, ServerTools, ToolSchemas};
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// The server index.
pub(super) const SERVERS: &str = "schemagate:servers";
/// The channel each change names its server on.
pub(super) const CHANGES: &str = "schemagate:changes";
pub(super) fn tools_key(server: &str) -> String {
    format!("schemagate:tools:{server}")
}
pub(super) fn text_key(hash: &SchemaHash) -> String {
    format!("schemagate:schema:{hash}")
}
/// A tool's history: a list of versions (JSON), newest first.
pub(super) fn history_key(server: &str, tool: &str) -> String {
    // The server's length keeps `a:b` + `c` apart from `a` + `b:c`.
    format!("schemagate:history:{}:{server}:{tool}", server.len())
}
/// A server's accepted contract hashes: a hash whose fields are `TOOL\nHASH`.
pub(super) fn accepted_key(server: &str) -> String {
    format!("schemagate:accepted:{server}")
}
/// How long a tool's history is kept after its last change (90 days): a tool removed for good
/// does not keep its history forever.
pub(super) const HISTORY_TTL_SECS: u64 = 90 * 24 * 3600;

/// A server's entry in `schemagate:servers`.
#[derive(Serialize, Deserialize)]
pub(super) struct ServerRecord {
    at: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    by: Option<String>,
    protocol: String,
}

impl ServerRecord {
    pub(super) fn of(provenance: &Provenance, protocol: ProtocolVersion) -> Self {
        Self {
            at: provenance.at_ms,
            by: provenance.by.as_deref().map(str::to_owned),
            protocol: protocol.as_str().to_owned(),
        }
    }
}

/// A tool's entry in `schemagate:tools:{server}`.
#[derive(Serialize, Deserialize)]
pub(super) struct ToolRecord {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) input: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) output: Option<String>,
    protocol: String,
    at: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    by: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    annotations: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    execution: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    title: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) shadow_input: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) shadow_output: Option<String>,
}

impl ToolRecord {
    pub(super) fn of(tool: &ToolSchemas) -> Self {
        Self {
            input: tool.input.as_ref().map(|s| s.hash.to_string()),
            output: tool.output.as_ref().map(|s| s.hash.to_string()),
            protocol: tool.protocol.as_str().to_owned(),
            at: tool.provenance.at_ms,
            by: tool.provenance.by.as_deref().map(str::to_owned),
            annotations: tool.annotations.as_deref().map(str::to_owned),
            execution: tool.execution.as_deref().map(str::to_owned),
            title: tool.title.as_deref().map(str::to_owned),
            description: tool.description.as_deref().map(str::to_owned),
            shadow_input: tool.shadow_input.as_ref().map(|s| s.hash.to_string()),
            shadow_output: tool.shadow_output.as_ref().map(|s| s.hash.to_string()),
        }
    }
}

/// One server's registration from its Redis records. A tool whose schema text Redis does not
/// hold (or holds under the wrong hash) is left out, logged, and so answered `unknown_tool`:
/// never registered without the schema it declared.
pub(super) fn build(
    server: &str,
    meta: ServerRecord,
    tools: Vec<(String, ToolRecord)>,
    text_of: &dyn Fn(&SchemaHash) -> Option<Bytes>,
) -> ServerTools {
    let protocol = |p: &str| ProtocolVersion::parse(p).unwrap_or(ProtocolVersion::NEWEST);
    let mut out = hashbrown::HashMap::with_capacity(tools.len());
    for (name, record) in tools {
        let Ok(tool_name) = ToolName::parse(&name) else {
            continue;
        };
        let schema = |hex: &Option<String>| -> Result<Option<RegisteredSchema>, ()> {
            let Some(hex) = hex else { return Ok(None) };
            let hash = SchemaHash::parse(hex).map_err(drop)?;
            let text = text_of(&hash)
                .filter(|t| SchemaHash::of(t) == hash)
                .ok_or(())?;
            Ok(Some(RegisteredSchema::new(server, &name, text)))
        };
        let (Ok(input), Ok(output), Ok(shadow_input), Ok(shadow_output)) = (
            schema(&record.input),
            schema(&record.output),
            schema(&record.shadow_input),
            schema(&record.shadow_output),
        ) else {
            tracing::error!(
                server,
                tool = name,
                "registry (Redis): a schema text of this tool is missing or altered; the tool is left out until it is registered again"
            );
            continue;
        };
        out.insert(
            name,
            ToolSchemas {
                name: tool_name,
                input,
                output,
                protocol: protocol(&record.protocol),
                provenance: Provenance {
                    at_ms: record.at,
                    by: record.by.as_deref().map(Arc::from),
                },
                annotations: record.annotations.as_deref().map(Arc::from),
                execution: record.execution.as_deref().map(Arc::from),
                title: record.title.as_deref().map(Arc::from),
                description: record.description.as_deref().map(Arc::from),
                shadow_input,
                shadow_output,
            },
        );
    }
    ServerTools {
        provenance: Provenance {
            at_ms: meta.at,
            by: meta.by.as_deref().map(Arc::from),
        },
        protocol: protocol(&meta.protocol),
        tools: out,
    }
}

/// A server's tool entries as Redis holds them, each read; one that cannot be read is skipped
/// (logged).
pub(super) fn readable_tools(
    server: &str,
    tools: std::collections::HashMap<String, Vec<u8>>,
) -> Vec<(String, ToolRecord)> {
    tools
        .into_iter()
        .filter_map(|(name, record)| {
            let record = serde_json::from_slice::<ToolRecord>(&record);
            if record.is_err() {
                tracing::warn!(
                    server,
                    tool = name,
                    "registry (Redis): an unreadable tool entry was skipped"
                );
            }
            Some((name, record.ok()?))
        })
        .collect()
}
