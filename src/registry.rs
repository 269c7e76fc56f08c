//! The tools each server has registered (its MCP `tools/list` result), so later checks can name
//! only server and tool.

use crate::domain::{SchemaHash, ServerId, ToolName};
use crate::error::{from_json_error, CheckError};
use bytes::Bytes;
use serde::Deserialize;
use serde_json::value::RawValue;
use std::collections::HashMap;
use std::sync::{Arc, RwLock};

/// A schema as registered: its text as sent and the hash of that text.
#[derive(Debug, Clone)]
pub struct RegisteredSchema {
    pub hash: SchemaHash,
    pub text: Bytes,
}

impl RegisteredSchema {
    fn new(text: Bytes) -> Self {
        Self {
            hash: SchemaHash::of(&text),
            text,
        }
    }
}

/// One tool's declared schemas.
#[derive(Debug, Clone)]
pub struct ToolSchemas {
    pub name: ToolName,
    pub input: Option<RegisteredSchema>,
    pub output: Option<RegisteredSchema>,
}

/// Reads the body of an MCP `tools/list` result: `{"tools": [{"name", "inputSchema", "outputSchema"}]}`.
pub fn parse_tools_list(body: &Bytes, depth_limit: usize) -> Result<Vec<ToolSchemas>, CheckError> {
    #[derive(Deserialize)]
    struct WireList<'a> {
        #[serde(borrow)]
        tools: Vec<WireTool<'a>>,
    }
    #[derive(Deserialize)]
    struct WireTool<'a> {
        name: String,
        #[serde(borrow, rename = "inputSchema", default)]
        input: Option<&'a RawValue>,
        #[serde(borrow, rename = "outputSchema", default)]
        output: Option<&'a RawValue>,
    }
    let list: WireList<'_> =
        serde_json::from_slice(body).map_err(|e| from_json_error(&e, depth_limit))?;
    let mut seen = std::collections::HashSet::new();
    list.tools
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
                raw.filter(|r| r.get() != "null")
                    .map(|r| RegisteredSchema::new(body.slice_ref(r.get().as_bytes())))
            };
            Ok(ToolSchemas {
                name,
                input: schema(t.input),
                output: schema(t.output),
            })
        })
        .collect()
}

type ServerTools = HashMap<String, Arc<ToolSchemas>>;

/// Registered tools by server; bounded in the total number of tools.
#[derive(Debug)]
pub struct Registry {
    servers: RwLock<HashMap<String, Arc<ServerTools>>>,
    max_tools: usize,
}

impl Registry {
    pub fn new(max_tools: usize) -> Self {
        Self {
            servers: RwLock::new(HashMap::new()),
            max_tools,
        }
    }

    /// Replaces the tools of `server` with `tools` (a tools/list result is the whole list).
    pub fn replace(&self, server: &ServerId, tools: Vec<ToolSchemas>) -> Result<(), CheckError> {
        let map: ServerTools = tools
            .into_iter()
            .map(|t| {
                // Copy out of the request body so the registry does not pin it.
                let own = |s: Option<RegisteredSchema>| {
                    s.map(|s| RegisteredSchema {
                        hash: s.hash,
                        text: Bytes::copy_from_slice(&s.text),
                    })
                };
                let t = ToolSchemas {
                    name: t.name,
                    input: own(t.input),
                    output: own(t.output),
                };
                (t.name.as_str().to_owned(), Arc::new(t))
            })
            .collect();
        let mut servers = self.servers.write().map_err(|_| CheckError::Internal)?;
        let others: usize = servers
            .iter()
            .filter(|(name, _)| name.as_str() != server.as_str())
            .map(|(_, tools)| tools.len())
            .sum();
        if others + map.len() > self.max_tools {
            return Err(CheckError::InvalidField(format!(
                "registering {} tools would pass the limit of {} registered tools (see --max-registered-tools)",
                map.len(),
                self.max_tools
            )));
        }
        servers.insert(server.as_str().to_owned(), Arc::new(map));
        Ok(())
    }

    /// The registered schemas of `tool` on `server`.
    pub fn get(&self, server: &str, tool: &str) -> Option<Arc<ToolSchemas>> {
        let servers = self.servers.read().ok()?;
        servers.get(server)?.get(tool).cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tools_list_keeps_schema_bytes_and_replaces_per_server() {
        let body = Bytes::from_static(
            br#"{"tools": [{"name": "get", "inputSchema": {"type":"object"}, "outputSchema": {"type": "object"}},
                           {"name": "ping", "inputSchema": {}}]}"#,
        );
        let tools = parse_tools_list(&body, 64).expect("parses");
        assert_eq!(tools.len(), 2);
        let out = tools[0].output.as_ref().expect("output schema");
        assert_eq!(&out.text[..], br#"{"type": "object"}"#);
        assert!(tools[1].output.is_none());

        let registry = Registry::new(2);
        let crm = ServerId::parse("crm").expect("name");
        registry.replace(&crm, tools).expect("fits");
        assert!(registry.get("crm", "get").is_some());
        assert!(registry.get("crm", "nope").is_none());
        let more = parse_tools_list(&Bytes::from_static(br#"{"tools": [{"name": "x"}]}"#), 64)
            .expect("parses");
        let other = ServerId::parse("shop").expect("name");
        assert!(
            registry.replace(&other, more.clone()).is_err(),
            "limit of 2 tools"
        );
        registry
            .replace(&crm, more)
            .expect("replacing crm's own tools fits");
        assert!(registry.get("crm", "get").is_none());
    }

    #[test]
    fn duplicate_and_bad_names_are_refused() {
        let dup = Bytes::from_static(br#"{"tools": [{"name": "a"}, {"name": "a"}]}"#);
        assert!(parse_tools_list(&dup, 64).is_err());
        let blank = Bytes::from_static(br#"{"tools": [{"name": ""}]}"#);
        assert_eq!(
            parse_tools_list(&blank, 64).unwrap_err().code(),
            "invalid_field"
        );
    }
}
