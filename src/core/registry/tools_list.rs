//! An MCP `tools/list` result read into the schemas of each tool, as registration takes it.

use super::{Provenance, RegisteredSchema, ToolSchemas};
use crate::core::domain::{ProtocolVersion, ServerId, ToolName};
use crate::core::error::{from_json_error, CheckError};
use bytes::Bytes;
use serde::Deserialize;
use serde_json::value::RawValue;
use std::sync::Arc;

/// Longest `annotations`, `execution`, `title` or `description` of a tool that is kept.
const MAX_METADATA_BYTES: usize = 16 * 1024;

/// One `tools/list` result: its tools, and its `nextCursor` when it is one page of several.
#[derive(Debug)]
pub struct ToolsList {
    pub tools: Vec<ToolSchemas>,
    pub next_cursor: Option<String>,
}

/// Reads the body of an MCP `tools/list` result for `server`:
/// `{"tools": [{"name", "inputSchema", "outputSchema"}], "nextCursor"}`. Other fields (`_meta`,
/// 2026-07-28's `ttlMs` and `cacheScope`, ...) are read through.
pub fn parse_tools_list(
    server: &ServerId,
    body: &Bytes,
    depth_limit: usize,
    protocol: ProtocolVersion,
    provenance: &Provenance,
) -> Result<ToolsList, CheckError> {
    #[derive(Deserialize)]
    struct WireList<'a> {
        #[serde(borrow)]
        tools: Vec<WireTool<'a>>,
        #[serde(rename = "nextCursor", default)]
        next_cursor: Option<String>,
    }
    #[derive(Deserialize)]
    struct WireTool<'a> {
        name: String,
        #[serde(borrow, rename = "inputSchema", default)]
        input: Option<&'a RawValue>,
        #[serde(borrow, rename = "outputSchema", default)]
        output: Option<&'a RawValue>,
        #[serde(borrow, default)]
        annotations: Option<&'a RawValue>,
        #[serde(borrow, default)]
        execution: Option<&'a RawValue>,
        #[serde(borrow, default)]
        title: Option<&'a RawValue>,
        #[serde(borrow, default)]
        description: Option<&'a RawValue>,
    }
    let list: WireList<'_> =
        serde_json::from_slice(body).map_err(|e| from_json_error(&e, depth_limit, None))?;
    let mut seen = std::collections::HashSet::new();
    let tools = list
        .tools
        .into_iter()
        .map(|t| {
            let name = ToolName::parse(&t.name)?;
            if !seen.insert(t.name.clone()) {
                return Err(CheckError::InvalidField(format!(
                    "tool {:?} appears twice in `tools`",
                    t.name
                )));
            }
            let schema = |raw: Option<&RawValue>| {
                raw.filter(|r| r.get() != "null").map(|r| {
                    // Copied out of the request body, so the registry does not pin it.
                    let text = Bytes::copy_from_slice(r.get().as_bytes());
                    RegisteredSchema::new(server.as_str(), name.as_str(), text)
                })
            };
            // Kept for history and change classes up to a bound; longer ones are not kept.
            let text = |raw: Option<&RawValue>| {
                raw.filter(|r| r.get() != "null" && r.get().len() <= MAX_METADATA_BYTES)
                    .map(|r| Arc::from(r.get()))
            };
            // A text that is not a string is no text a client shows; read through.
            let words = |raw: Option<&RawValue>| {
                raw.filter(|r| r.get().len() <= MAX_METADATA_BYTES)
                    .and_then(|r| serde_json::from_str::<String>(r.get()).ok())
                    .map(Arc::from)
            };
            Ok(ToolSchemas {
                input: schema(t.input),
                output: schema(t.output),
                annotations: text(t.annotations),
                execution: text(t.execution),
                title: words(t.title),
                description: words(t.description),
                shadow_input: None,
                shadow_output: None,
                name,
                protocol,
                provenance: provenance.clone(),
            })
        })
        .collect::<Result<_, _>>()?;
    Ok(ToolsList {
        tools,
        next_cursor: list.next_cursor.filter(|c| !c.is_empty()),
    })
}
