//! How tools are registered: the tools each server has registered (its MCP `tools/list` result),
//! so later checks can name only server and tool, and the registration that compiles their
//! schemas and stores them.
//!
//! Every check that names a registered tool reads this, so reads take no lock and bump no shared
//! counter: the map is replaced whole on registration (rare) and read through `arc-swap`.
//! Each registered schema carries its cache keys, computed once, so a check hashes nothing to
//! find its validator.
//!
//! This in-process map is what checks read in both modes. With `--registry redis://...`,
//! [`redis`] keeps it a copy of the registrations held in Redis (see there).

mod changes;
pub mod history;
mod listing;
mod prepare;
pub mod redis;
mod shadow;
mod tools_list;

pub use listing::{ServerListing, ServerSummary, ToolListing};
pub use tools_list::{parse_tools_list, ToolsList};

use crate::core::domain::{ProtocolVersion, SchemaHash, ServerId, ToolName};
use crate::core::error::CheckError;
use crate::core::policy::CompileOptions;
use crate::core::schema::cache::CacheKey;
use arc_swap::{ArcSwap, Guard};
use bytes::Bytes;
use hashbrown::HashMap;
use history::{History, Refusal, ToolChange, Version};
use serde::Serialize;
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

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
    pub(crate) fn new(server: &str, tool: &str, text: Bytes) -> Self {
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

/// Who registered a tool (or a server's tools), and when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Provenance {
    /// Milliseconds since the Unix epoch.
    pub at_ms: u64,
    /// The token's name; `None` when no tokens are configured.
    pub by: Option<Arc<str>>,
}

impl Provenance {
    /// A registration made now by `by`.
    pub fn now(by: Option<&str>) -> Self {
        Self {
            at_ms: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
            by: by.map(Arc::from),
        }
    }

    /// The time as RFC 3339 (UTC) with exactly three fraction digits, as the listing and the
    /// history show it: `2026-05-01T12:00:00.100Z`, never `.1Z`, so that times sort as text.
    pub fn at_rfc3339(&self) -> String {
        let nanos = i128::from(self.at_ms) * 1_000_000;
        crate::ops::stamp::utc(nanos, crate::ops::stamp::Style::Extended)
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
    pub provenance: Provenance,
    /// The tool's MCP `annotations` and `execution`, as JSON text, when it declares them: kept
    /// for its history and to class their changes.
    pub annotations: Option<Arc<str>>,
    pub execution: Option<Arc<str>>,
    /// The tool's `title` and `description`, when it declares them: kept for its history and
    /// the `description` part of its changes (what the model reads).
    pub title: Option<Arc<str>>,
    pub description: Option<Arc<str>>,
    /// Candidate schemas judged beside the enforced ones and only reported (`?shadow=true`).
    pub shadow_input: Option<RegisteredSchema>,
    pub shadow_output: Option<RegisteredSchema>,
}

/// How a registration applies.
#[derive(Debug, Clone, Copy, Default)]
pub struct RegisterOptions {
    /// Add the tools to the server's registration instead of replacing it.
    pub merge: bool,
    /// The MCP revision the server speaks; none: the newest.
    pub protocol_version: Option<ProtocolVersion>,
    /// Learned from a `tools/list` on the MCP wire (the proxy, the gateway): without a token,
    /// the history says `proxy` registered it.
    pub learned: bool,
    /// The tools' shadow schemas go (a promotion); otherwise a tool registered again keeps its
    /// shadow schemas.
    pub drop_shadow: bool,
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
    /// What the registration changed, tool by tool (absent: nothing).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub changes: Vec<ToolChange>,
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

/// A registration read and compiled, not yet stored: what a shared registry writes before the
/// in-process one takes it.
#[derive(Debug)]
pub struct Prepared {
    pub server: ServerId,
    pub tools: Vec<ToolSchemas>,
    pub merge: bool,
    /// The server's registration as a whole: when, by whom, under which revision.
    pub provenance: Provenance,
    pub protocol: ProtocolVersion,
    /// What the caller is answered.
    pub registration: Registration,
    /// The versions the registration adds to tools' histories, by tool.
    pub versions: Vec<(String, Version)>,
    /// The changes pinned contracts refuse: when there is one, nothing may be stored.
    pub refused: Vec<Refusal>,
}

/// One server's registered tools, and its latest registration's provenance.
#[derive(Debug, Clone)]
pub struct ServerTools {
    pub provenance: Provenance,
    pub protocol: ProtocolVersion,
    pub tools: HashMap<String, ToolSchemas>,
}

/// Every registered tool, by server and then by name, and the texts of their schemas by hash. A
/// registration replaces one server's map and shares the others.
#[derive(Debug, Default)]
pub struct Servers {
    servers: HashMap<String, Arc<ServerTools>>,
    /// The text of every registered schema, by hash: a registered hash resolves for as long as
    /// its registration lasts.
    texts: HashMap<SchemaHash, Bytes>,
}

impl Servers {
    fn new(servers: HashMap<String, Arc<ServerTools>>) -> Self {
        let mut texts = HashMap::new();
        for tool in servers.values().flat_map(|s| s.tools.values()) {
            for schema in [
                &tool.input,
                &tool.output,
                &tool.shadow_input,
                &tool.shadow_output,
            ]
            .into_iter()
            .flatten()
            {
                texts
                    .entry(schema.hash)
                    .or_insert_with(|| schema.text.clone());
            }
        }
        Self { servers, texts }
    }

    /// The registered schemas of `tool` on `server`.
    pub fn tool(&self, server: &str, tool: &str) -> Option<&ToolSchemas> {
        self.servers.get(server)?.tools.get(tool)
    }

    /// The registered schemas of `tool` on `server`, or `unknown_tool`.
    pub fn registered(&self, server: &str, tool: &str) -> Result<&ToolSchemas, CheckError> {
        self.tool(server, tool)
            .ok_or_else(|| CheckError::UnknownTool {
                server: server.to_owned(),
                tool: tool.to_owned(),
            })
    }

    /// One server's registration.
    pub fn server(&self, server: &str) -> Option<&Arc<ServerTools>> {
        self.servers.get(server)
    }

    /// Every server's registration, by name.
    pub fn iter(&self) -> impl Iterator<Item = (&String, &Arc<ServerTools>)> {
        self.servers.iter()
    }

    /// The text of a registered schema.
    pub fn text(&self, hash: &SchemaHash) -> Option<&Bytes> {
        self.texts.get(hash)
    }

    fn tool_count(&self) -> usize {
        self.servers.values().map(|s| s.tools.len()).sum()
    }
}

/// Registered tools by server; bounded in the total number of tools.
#[derive(Debug)]
pub struct Registry {
    servers: ArcSwap<Servers>,
    /// Held while a registration builds the next map, so two at once cannot lose one.
    writing: Mutex<()>,
    max_tools: usize,
    /// Each tool's versions (in this process; a shared registry keeps them in Redis).
    history: History,
    /// A server's tools as they were before a paginated listing began replacing them (its
    /// first page), until its last page: what the listing's changes are judged against.
    listing_base: Mutex<HashMap<String, Arc<ServerTools>>>,
    /// Contract hashes accepted past a pin, by server and tool (in this process; a shared
    /// registry keeps them in Redis).
    accepted: Mutex<Accepted>,
    /// Changes judged before, by the two contracts' hashes: shared with the registries seeded
    /// from this one, so that sessions replaying the same listings judge each change once.
    judged: Arc<changes::Judged>,
}

/// Accepted contract hashes: by server, the tool and hash pairs.
pub type Accepted = HashMap<String, AcceptedHashes>;
/// One server's accepted contract hashes: (tool, hash) pairs.
pub type AcceptedHashes = hashbrown::HashSet<(String, String)>;

/// Most hashes accepted per server (in process); past it the oldest are not kept apart from the
/// rest, so the set is cleared and starts again.
const MAX_ACCEPTED: usize = 10_000;

impl Registry {
    /// A registry of its own holding `other`'s contracts as they are now (no history, no
    /// accepted hashes): what it registers from then on is its alone.
    pub fn seeded_from(other: &Registry) -> Self {
        let registry = Self::with_judged(other.max_tools, Arc::clone(&other.judged));
        registry.servers.store(other.servers.load_full());
        registry
    }

    pub fn new(max_tools: usize) -> Self {
        Self::with_judged(max_tools, Arc::new(changes::Judged::new()))
    }

    /// An empty registry whose changes are judged in `judged` (its own, or shared).
    fn with_judged(max_tools: usize, judged: Arc<changes::Judged>) -> Self {
        Self {
            servers: ArcSwap::from_pointee(Servers::default()),
            writing: Mutex::new(()),
            max_tools,
            history: History::new(
                u64::try_from(max_tools)
                    .unwrap_or(u64::MAX)
                    .saturating_mul(2),
            ),
            listing_base: Mutex::new(HashMap::new()),
            accepted: Mutex::new(HashMap::new()),
            judged,
        }
    }

    /// Refuses `tools` for `server` when storing them would pass the limit on registered tools.
    pub fn ensure_fits(
        &self,
        server: &ServerId,
        tools: &[ToolSchemas],
        merge: bool,
    ) -> Result<(), CheckError> {
        let current = self.servers.load();
        let existing = current.servers.get(server.as_str());
        let own = match existing {
            Some(s) if merge => {
                s.tools.len()
                    + tools
                        .iter()
                        .filter(|t| !s.tools.contains_key(t.name.as_str()))
                        .count()
            }
            _ => tools.len(),
        };
        let others = current.tool_count() - existing.map_or(0, |s| s.tools.len());
        if others + own > self.max_tools {
            return Err(CheckError::TooManyTools {
                server: server.as_str().to_owned(),
                tools: own,
                limit: self.max_tools,
            });
        }
        Ok(())
    }

    /// Builds the next map from the current one with `change`, and puts it in force.
    fn change(
        &self,
        change: impl FnOnce(&mut HashMap<String, Arc<ServerTools>>) -> Result<(), CheckError>,
    ) -> Result<(), CheckError> {
        let _writing = self.writing.lock().map_err(|_| CheckError::Internal)?;
        let mut next = self.servers.load().servers.clone();
        change(&mut next)?;
        self.servers.store(Arc::new(Servers::new(next)));
        Ok(())
    }

    /// Replaces the tools of `server` with `tools` (a tools/list result is the whole list), or
    /// with `merge` adds them to its registered tools (one page of a paginated tools/list): a
    /// tool of the same name is replaced, the others are kept.
    pub fn store(
        &self,
        server: &ServerId,
        tools: Vec<ToolSchemas>,
        merge: bool,
        provenance: Provenance,
        protocol: ProtocolVersion,
    ) -> Result<(), CheckError> {
        self.change(|servers| {
            // Under the writing lock, so two registrations at once cannot both pass the limit.
            self.ensure_fits(server, &tools, merge)?;
            let mut own = match servers.get(server.as_str()) {
                Some(existing) if merge => existing.tools.clone(),
                _ => HashMap::new(),
            };
            for tool in tools {
                own.insert(tool.name.as_str().to_owned(), tool);
            }
            servers.insert(
                server.as_str().to_owned(),
                Arc::new(ServerTools {
                    provenance,
                    protocol,
                    tools: own,
                }),
            );
            Ok(())
        })
    }

    /// Puts one server's registration as the shared registry holds it in force (`None`: it has
    /// none). Not bounded by the tool limit: every replica must hold what the shared registry
    /// holds, and writes to it were bounded when they were made.
    pub fn apply(&self, server: &str, registration: Option<ServerTools>) -> Result<(), CheckError> {
        if registration.is_none() && self.load().server(server).is_none() {
            // Nothing to remove (a name looked up in vain): the map is not rebuilt.
            return Ok(());
        }
        self.change(|servers| {
            match registration {
                Some(r) => servers.insert(server.to_owned(), Arc::new(r)),
                None => servers.remove(server),
            };
            Ok(())
        })
    }

    /// Replaces every registration with `all` (a full resync from the shared registry).
    pub fn replace_all(&self, all: HashMap<String, ServerTools>) -> Result<(), CheckError> {
        self.change(|servers| {
            *servers = all.into_iter().map(|(k, v)| (k, Arc::new(v))).collect();
            Ok(())
        })
    }

    /// Removes `tool` of `server`, or with `None` all of the server's tools (and the server);
    /// says how many tools were removed.
    pub fn remove(&self, server: &str, tool: Option<&str>) -> Result<usize, CheckError> {
        if tool.is_none() {
            self.listing_base
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(server);
        }
        let mut removed = 0;
        self.change(|servers| {
            let unknown_server = || CheckError::UnknownServer(server.to_owned());
            match tool {
                None => {
                    let gone = servers.remove(server).ok_or_else(unknown_server)?;
                    removed = gone.tools.len();
                }
                Some(tool) => {
                    let existing = servers.get(server).ok_or_else(unknown_server)?;
                    let mut rest = existing.as_ref().clone();
                    rest.tools
                        .remove(tool)
                        .ok_or_else(|| CheckError::UnknownTool {
                            server: server.to_owned(),
                            tool: tool.to_owned(),
                        })?;
                    removed = 1;
                    servers.insert(server.to_owned(), Arc::new(rest));
                }
            }
            Ok(())
        })?;
        Ok(removed)
    }

    /// Puts a prepared registration in force here (in-process mode; with a shared registry, what
    /// Redis holds is put in force instead: see [`redis`]).
    pub fn commit(&self, prepared: Prepared) -> Result<Registration, CheckError> {
        let Prepared {
            server,
            tools,
            merge,
            provenance,
            protocol,
            registration,
            versions,
            refused: _,
        } = prepared;
        self.store(&server, tools, merge, provenance, protocol)?;
        self.record_history(server.as_str(), &versions);
        Ok(registration)
    }

    /// A view of every registered tool, as of now; hold it only for the length of a check.
    pub fn load(&self) -> Guard<Arc<Servers>> {
        self.servers.load()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::policy::RegexEngine;

    fn prov() -> Provenance {
        Provenance::now(Some("ci"))
    }

    fn crm() -> ServerId {
        ServerId::parse("crm").expect("name")
    }

    #[test]
    fn times_have_exactly_three_fraction_digits_so_they_sort_as_text() {
        let at = |at_ms| Provenance { at_ms, by: None }.at_rfc3339();
        assert_eq!(at(1_700_000_000_100), "2023-11-14T22:13:20.100Z");
        assert_eq!(at(1_700_000_000_000), "2023-11-14T22:13:20.000Z");
        assert_eq!(at(1_700_000_000_012), "2023-11-14T22:13:20.012Z");
        let mut times = [at(1_700_000_000_100), at(1_700_000_000_012)];
        times.sort();
        assert_eq!(times[0], at(1_700_000_000_012));
    }

    #[test]
    fn tools_list_keeps_schema_bytes_and_replaces_per_server() {
        let body = Bytes::from_static(
            br#"{"tools": [{"name": "get", "inputSchema": {"type":"object"}, "outputSchema": {"type": "object"}},
                           {"name": "ping", "inputSchema": {}}]}"#,
        );
        let tools = parse_tools_list(&crm(), &body, 64, ProtocolVersion::NEWEST, &prov())
            .expect("parses")
            .tools;
        assert_eq!(tools.len(), 2);
        let out = tools[0].output.as_ref().expect("output schema");
        assert_eq!(&out.text[..], br#"{"type": "object"}"#);
        assert!(tools[1].output.is_none());

        let registry = Registry::new(2);
        registry
            .store(&crm(), tools, false, prov(), ProtocolVersion::NEWEST)
            .expect("fits");
        assert!(registry.load().tool("crm", "get").is_some());
        assert!(registry.load().tool("crm", "nope").is_none());
        let shop = ServerId::parse("shop").expect("name");
        let more = parse_tools_list(
            &shop,
            &Bytes::from_static(br#"{"tools": [{"name": "x"}]}"#),
            64,
            ProtocolVersion::NEWEST,
            &prov(),
        )
        .expect("parses")
        .tools;
        assert!(
            registry
                .store(&shop, more.clone(), false, prov(), ProtocolVersion::NEWEST)
                .is_err(),
            "limit of 2 tools"
        );
        registry
            .store(&crm(), more, false, prov(), ProtocolVersion::NEWEST)
            .expect("replacing crm's own tools fits");
        assert!(registry.load().tool("crm", "get").is_none());
        assert!(registry.load().tool("crm", "x").is_some());
    }

    #[test]
    fn registered_schemas_carry_the_cache_keys_a_check_would_compute() {
        let body = Bytes::from_static(
            br#"{"tools": [{"name": "get", "outputSchema": {"type": "object"}}]}"#,
        );
        let tools = parse_tools_list(&crm(), &body, 64, ProtocolVersion::NEWEST, &prov())
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
                &prov(),
            )
            .expect("parses")
        };
        let first = page(br#"{"tools": [{"name": "a"}, {"name": "b"}], "nextCursor": "p2", "ttlMs": 60000, "cacheScope": "session"}"#);
        assert_eq!(first.next_cursor.as_deref(), Some("p2"));
        let second = page(br#"{"tools": [{"name": "c", "title": "C", "annotations": {}}]}"#);
        assert_eq!(second.next_cursor, None);
        let registry = Registry::new(10);
        registry
            .store(&crm(), first.tools, false, prov(), ProtocolVersion::NEWEST)
            .expect("fits");
        registry
            .store(&crm(), second.tools, true, prov(), ProtocolVersion::NEWEST)
            .expect("fits");
        for name in ["a", "b", "c"] {
            assert!(registry.load().tool("crm", name).is_some(), "{name}");
        }
        let again = page(br#"{"tools": [{"name": "c"}]}"#);
        registry
            .store(&crm(), again.tools, false, prov(), ProtocolVersion::NEWEST)
            .expect("fits");
        assert!(
            registry.load().tool("crm", "a").is_none(),
            "a whole list replaces"
        );
    }

    #[test]
    fn duplicate_and_bad_names_are_refused() {
        let dup = Bytes::from_static(br#"{"tools": [{"name": "a"}, {"name": "a"}]}"#);
        assert!(parse_tools_list(&crm(), &dup, 64, ProtocolVersion::NEWEST, &prov()).is_err());
        let blank = Bytes::from_static(br#"{"tools": [{"name": ""}]}"#);
        assert_eq!(
            parse_tools_list(&crm(), &blank, 64, ProtocolVersion::NEWEST, &prov())
                .unwrap_err()
                .code(),
            "invalid_field"
        );
    }
}
