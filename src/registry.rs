//! How tools are registered: the tools each server has registered (its MCP `tools/list` result),
//! so later checks can name only server and tool, and the registration that compiles their
//! schemas and stores them.
//!
//! Every check that names a registered tool reads this, so reads take no lock and bump no shared
//! counter: the map is replaced whole on registration (rare) and read through `arc-swap`.
//! Each registered schema carries its cache keys, computed once, so a check hashes nothing to
//! find its validator.

use crate::cache::{CacheKey, SchemaCache};
use crate::domain::{ProtocolVersion, SchemaHash, ServerId, ToolName};
use crate::error::{from_json_error, CheckError};
use crate::policy::{CompileOptions, Policy};
use arc_swap::{ArcSwap, Guard};
use bytes::Bytes;
use hashbrown::HashMap;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use std::sync::{Arc, Mutex};

/// A schema as registered: its text as sent, the hash of that text, and its cache keys.
#[derive(Debug, Clone)]
pub struct RegisteredSchema {
    pub hash: SchemaHash,
    pub text: Bytes,
    /// The cache key of this schema for its server and tool, under each of
    /// [`CompileOptions::ALL`].
    keys: [CacheKey; 4],
}

impl RegisteredSchema {
    fn new(server: &str, tool: &str, text: Bytes) -> Self {
        let hash = SchemaHash::of(&text);
        Self {
            hash,
            text,
            keys: CompileOptions::ALL.map(|o| CacheKey::new(Some(server), Some(tool), &hash, o)),
        }
    }

    /// The cache key of this schema under `options`.
    pub fn key(&self, options: CompileOptions) -> CacheKey {
        self.keys[options.index()]
    }
}

/// One tool's declared schemas.
#[derive(Debug, Clone)]
pub struct ToolSchemas {
    pub name: ToolName,
    pub input: Option<RegisteredSchema>,
    pub output: Option<RegisteredSchema>,
    /// The MCP revision the tool was registered under: checks that name none follow it.
    pub protocol: ProtocolVersion,
}

/// One `tools/list` result: its tools, and its `nextCursor` when it is one page of several.
#[derive(Debug)]
pub struct ToolsList {
    pub tools: Vec<ToolSchemas>,
    pub next_cursor: Option<String>,
}

/// Reads the body of an MCP `tools/list` result for `server`:
/// `{"tools": [{"name", "inputSchema", "outputSchema"}], "nextCursor"}`. Other fields (`_meta`,
/// 2026-07-28's `ttlMs` and `cacheScope`, a tool's `title`, `annotations`, ...) are read through.
pub fn parse_tools_list(
    server: &ServerId,
    body: &Bytes,
    depth_limit: usize,
    protocol: ProtocolVersion,
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
            Ok(ToolSchemas {
                input: schema(t.input),
                output: schema(t.output),
                name,
                protocol,
            })
        })
        .collect::<Result<_, _>>()?;
    Ok(ToolsList {
        tools,
        next_cursor: list.next_cursor.filter(|c| !c.is_empty()),
    })
}

/// How a registration applies.
#[derive(Debug, Clone, Copy, Default)]
pub struct RegisterOptions {
    /// Add the tools to the server's registration instead of replacing it.
    pub merge: bool,
    /// The MCP revision the server speaks; none: the newest.
    pub protocol_version: Option<ProtocolVersion>,
}

/// The result of registering a server's tools.
#[derive(Debug, Serialize)]
pub struct Registration {
    pub server: String,
    /// The MCP revision the tools were registered under.
    pub protocol_version: ProtocolVersion,
    pub tools: Vec<RegisteredTool>,
    /// The tools/list result's `nextCursor`: it was one page of several; register the next with
    /// `merge` so this one is kept.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// One registered tool: its schema hashes, and the compile error of a schema that is broken
/// (checks against that schema will get it; other tools are unaffected).
#[derive(Debug, Serialize)]
pub struct RegisteredTool {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub input_schema_hash: Option<SchemaHash>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_schema_hash: Option<SchemaHash>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<SchemaProblem>,
}

/// Why one of a tool's schemas cannot be used.
#[derive(Debug, Serialize)]
pub struct SchemaProblem {
    /// `inputSchema` or `outputSchema`.
    pub schema: &'static str,
    pub code: &'static str,
    pub message: String,
}

/// Every registered tool, by server and then by name. A registration replaces one server's map
/// and shares the others.
#[derive(Debug, Default)]
pub struct Servers(HashMap<String, Arc<HashMap<String, ToolSchemas>>>);

impl Servers {
    /// The registered schemas of `tool` on `server`.
    pub fn tool(&self, server: &str, tool: &str) -> Option<&ToolSchemas> {
        self.0.get(server)?.get(tool)
    }

    fn tool_count(&self) -> usize {
        self.0.values().map(|tools| tools.len()).sum()
    }
}

/// Registered tools by server; bounded in the total number of tools.
#[derive(Debug)]
pub struct Registry {
    servers: ArcSwap<Servers>,
    /// Held while a registration builds the next map, so two at once cannot lose one.
    writing: Mutex<()>,
    max_tools: usize,
}

impl Registry {
    pub fn new(max_tools: usize) -> Self {
        Self {
            servers: ArcSwap::from_pointee(Servers::default()),
            writing: Mutex::new(()),
            max_tools,
        }
    }

    /// Replaces the tools of `server` with `tools` (a tools/list result is the whole list), or
    /// with `merge` adds them to its registered tools (one page of a paginated tools/list): a
    /// tool of the same name is replaced, the others are kept.
    pub fn store(
        &self,
        server: &ServerId,
        tools: Vec<ToolSchemas>,
        merge: bool,
    ) -> Result<(), CheckError> {
        let _writing = self.writing.lock().map_err(|_| CheckError::Internal)?;
        let current = self.servers.load();
        let mut own: HashMap<String, ToolSchemas> = match current.0.get(server.as_str()) {
            Some(existing) if merge => existing.as_ref().clone(),
            _ => HashMap::new(),
        };
        for tool in tools {
            own.insert(tool.name.as_str().to_owned(), tool);
        }
        let others = current.tool_count()
            - current
                .0
                .get(server.as_str())
                .map_or(0, |tools| tools.len());
        if others + own.len() > self.max_tools {
            return Err(CheckError::TooManyTools {
                server: server.as_str().to_owned(),
                tools: own.len(),
                limit: self.max_tools,
            });
        }
        let mut next = current.0.clone();
        next.insert(server.as_str().to_owned(), Arc::new(own));
        self.servers.store(Arc::new(Servers(next)));
        Ok(())
    }

    /// Registers a server's tools (an MCP tools/list result) and compiles their schemas, so the
    /// first checks hit the cache. A broken schema is reported for its tool alone. The tools
    /// replace the server's registration, or with `merge` are added to it (one page of a
    /// paginated tools/list).
    pub fn register(
        &self,
        cache: &SchemaCache,
        policy: &Policy,
        depth_limit: usize,
        server: &str,
        body: &Bytes,
        how: RegisterOptions,
    ) -> Result<Registration, CheckError> {
        let server_id = ServerId::parse(server)?;
        let protocol = how.protocol_version.unwrap_or(ProtocolVersion::NEWEST);
        let list = parse_tools_list(&server_id, body, depth_limit, protocol)?;
        let mut report = Vec::with_capacity(list.tools.len());
        for tool in &list.tools {
            let rules = policy.rules_for(Some(server), Some(tool.name.as_str()));
            let mut errors = Vec::new();
            for (label, schema, is_output) in [
                ("inputSchema", &tool.input, false),
                ("outputSchema", &tool.output, true),
            ] {
                let Some(schema) = schema else { continue };
                let key = schema.key(rules.compile);
                let (compiled, _) = cache.get_or_compile(key, &schema.text, rules.compile, true);
                let problem = match compiled.as_ref() {
                    Err(e) => Some(e.clone()),
                    Ok(c)
                        if is_output
                            && rules.object_root_required(protocol)
                            && !c.root_is_object =>
                    {
                        Some(CheckError::SchemaRootNotObject {
                            version: protocol.as_str(),
                        })
                    }
                    Ok(_) => None,
                };
                if let Some(e) = problem {
                    errors.push(SchemaProblem {
                        schema: label,
                        code: e.code(),
                        message: e.to_string(),
                    });
                }
                cache.remember(schema.hash, &schema.text);
            }
            report.push(RegisteredTool {
                name: tool.name.as_str().to_owned(),
                input_schema_hash: tool.input.as_ref().map(|s| s.hash),
                output_schema_hash: tool.output.as_ref().map(|s| s.hash),
                errors,
            });
        }
        self.store(&server_id, list.tools, how.merge)?;
        tracing::info!(
            server,
            tools = report.len(),
            merge = how.merge,
            protocol_version = protocol.as_str(),
            next_cursor = list.next_cursor.as_deref().unwrap_or(""),
            "registered tools"
        );
        Ok(Registration {
            server: server.to_owned(),
            protocol_version: protocol,
            tools: report,
            next_cursor: list.next_cursor,
        })
    }

    /// A view of every registered tool, as of now; hold it only for the length of a check.
    pub fn load(&self) -> Guard<Arc<Servers>> {
        self.servers.load()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::RegexEngine;

    fn crm() -> ServerId {
        ServerId::parse("crm").expect("name")
    }

    #[test]
    fn tools_list_keeps_schema_bytes_and_replaces_per_server() {
        let body = Bytes::from_static(
            br#"{"tools": [{"name": "get", "inputSchema": {"type":"object"}, "outputSchema": {"type": "object"}},
                           {"name": "ping", "inputSchema": {}}]}"#,
        );
        let tools = parse_tools_list(&crm(), &body, 64, ProtocolVersion::NEWEST)
            .expect("parses")
            .tools;
        assert_eq!(tools.len(), 2);
        let out = tools[0].output.as_ref().expect("output schema");
        assert_eq!(&out.text[..], br#"{"type": "object"}"#);
        assert!(tools[1].output.is_none());

        let registry = Registry::new(2);
        registry.store(&crm(), tools, false).expect("fits");
        assert!(registry.load().tool("crm", "get").is_some());
        assert!(registry.load().tool("crm", "nope").is_none());
        let shop = ServerId::parse("shop").expect("name");
        let more = parse_tools_list(
            &shop,
            &Bytes::from_static(br#"{"tools": [{"name": "x"}]}"#),
            64,
            ProtocolVersion::NEWEST,
        )
        .expect("parses")
        .tools;
        assert!(
            registry.store(&shop, more.clone(), false).is_err(),
            "limit of 2 tools"
        );
        registry
            .store(&crm(), more, false)
            .expect("replacing crm's own tools fits");
        assert!(registry.load().tool("crm", "get").is_none());
        assert!(registry.load().tool("crm", "x").is_some());
    }

    #[test]
    fn registered_schemas_carry_the_cache_keys_a_check_would_compute() {
        let body = Bytes::from_static(
            br#"{"tools": [{"name": "get", "outputSchema": {"type": "object"}}]}"#,
        );
        let tools = parse_tools_list(&crm(), &body, 64, ProtocolVersion::NEWEST)
            .expect("parses")
            .tools;
        let out = tools[0].output.as_ref().expect("output schema");
        for options in CompileOptions::ALL {
            assert_eq!(
                out.key(options),
                CacheKey::new(Some("crm"), Some("get"), &out.hash, options)
            );
        }
        let strict = CompileOptions::ALL[CompileOptions::ALL.len() - 1];
        let lenient = CompileOptions {
            assert_formats: false,
            regex_engine: RegexEngine::BoundedBacktracking,
        };
        assert_ne!(out.key(strict), out.key(lenient));
    }

    #[test]
    fn pages_merge_and_2026_fields_are_read_through() {
        let page = |body: &'static [u8]| {
            parse_tools_list(
                &crm(),
                &Bytes::from_static(body),
                64,
                ProtocolVersion::NEWEST,
            )
            .expect("parses")
        };
        let first = page(br#"{"tools": [{"name": "a"}, {"name": "b"}], "nextCursor": "p2", "ttlMs": 60000, "cacheScope": "session"}"#);
        assert_eq!(first.next_cursor.as_deref(), Some("p2"));
        let second = page(br#"{"tools": [{"name": "c", "title": "C", "annotations": {}}]}"#);
        assert_eq!(second.next_cursor, None);
        let registry = Registry::new(10);
        registry.store(&crm(), first.tools, false).expect("fits");
        registry.store(&crm(), second.tools, true).expect("fits");
        for name in ["a", "b", "c"] {
            assert!(registry.load().tool("crm", name).is_some(), "{name}");
        }
        let again = page(br#"{"tools": [{"name": "c"}]}"#);
        registry.store(&crm(), again.tools, false).expect("fits");
        assert!(
            registry.load().tool("crm", "a").is_none(),
            "a whole list replaces"
        );
    }

    #[test]
    fn duplicate_and_bad_names_are_refused() {
        let dup = Bytes::from_static(br#"{"tools": [{"name": "a"}, {"name": "a"}]}"#);
        assert!(parse_tools_list(&crm(), &dup, 64, ProtocolVersion::NEWEST).is_err());
        let blank = Bytes::from_static(br#"{"tools": [{"name": ""}]}"#);
        assert_eq!(
            parse_tools_list(&crm(), &blank, 64, ProtocolVersion::NEWEST)
                .unwrap_err()
                .code(),
            "invalid_field"
        );
    }
}
