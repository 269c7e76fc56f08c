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

pub mod history;
pub mod redis;
mod tools_list;

pub use tools_list::{parse_tools_list, ToolsList};

use crate::core::domain::{ProtocolVersion, SchemaHash, ServerId, ToolName};
use crate::core::error::CheckError;
use crate::core::policy::{CompileOptions, Policy};
use crate::core::schema::cache::{CacheKey, SchemaCache};
use arc_swap::{ArcSwap, Guard};
use bytes::Bytes;
use hashbrown::HashMap;
use history::{History, Refusal, ToolChange, Version};
use serde::Serialize;
use serde_json::value::RawValue;
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

    /// The time as RFC 3339 (UTC, milliseconds), as the listing shows it.
    pub fn at_rfc3339(&self) -> String {
        let nanos = i128::from(self.at_ms) * 1_000_000;
        time::OffsetDateTime::from_unix_timestamp_nanos(nanos)
            .ok()
            .and_then(|t| {
                t.format(&time::format_description::well_known::Rfc3339)
                    .ok()
            })
            .unwrap_or_default()
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

/// A registered server, as `GET /v1/servers` lists it.
#[derive(Debug, Serialize)]
pub struct ServerSummary {
    pub server: String,
    pub tools: usize,
    pub protocol_version: ProtocolVersion,
    /// RFC 3339, of its latest registration.
    pub registered_at: String,
    /// The token that made its latest registration (absent without tokens).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub registered_by: Option<String>,
}

/// One registered tool, as `GET /v1/servers/{server}/tools` lists it.
#[derive(Debug, Serialize)]
pub struct ToolListing {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub input_schema_hash: Option<SchemaHash>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_schema_hash: Option<SchemaHash>,
    pub protocol_version: ProtocolVersion,
    pub registered_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub registered_by: Option<String>,
    /// The schema texts, exactly as registered, when asked for (`?schemas=true`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub input_schema: Option<Box<RawValue>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Box<RawValue>>,
}

/// One server's registration, listed.
#[derive(Debug, Serialize)]
pub struct ServerListing {
    pub server: String,
    pub protocol_version: ProtocolVersion,
    pub registered_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub registered_by: Option<String>,
    pub tools: Vec<ToolListing>,
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
}

/// Accepted contract hashes: by server, the tool and hash pairs.
pub type Accepted = HashMap<String, AcceptedHashes>;
/// One server's accepted contract hashes: (tool, hash) pairs.
pub type AcceptedHashes = hashbrown::HashSet<(String, String)>;

/// Most hashes accepted per server (in process); past it the oldest are not kept apart from the
/// rest, so the set is cleared and starts again.
const MAX_ACCEPTED: usize = 10_000;

impl Registry {
    pub fn new(max_tools: usize) -> Self {
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
        }
    }

    /// Accepts `hash` as `tool`'s contract on `server` past a pin (in this process).
    pub fn accept(&self, server: &str, tool: &str, hash: &str) {
        let mut accepted = self.accepted.lock().unwrap_or_else(|e| e.into_inner());
        let hashes = accepted.entry(server.to_owned()).or_default();
        if hashes.len() >= MAX_ACCEPTED {
            hashes.clear();
        }
        hashes.insert((tool.to_owned(), hash.to_owned()));
    }

    /// The contract hashes accepted on `server` (in this process).
    pub fn accepted(&self, server: &str) -> AcceptedHashes {
        let accepted = self.accepted.lock().unwrap_or_else(|e| e.into_inner());
        accepted.get(server).cloned().unwrap_or_default()
    }

    /// `tool`'s versions in this process, newest first.
    pub fn history(&self, server: &str, tool: &str) -> Vec<Version> {
        self.history.versions(server, tool)
    }

    /// The versions that removing `tool` of `server` (`None`: all its tools) adds to their
    /// histories, as of now, by `by`.
    pub fn removal(
        &self,
        server: &str,
        tool: Option<&str>,
        by: Option<&str>,
    ) -> Vec<(String, Version)> {
        let servers = self.load();
        let Some(tools) = servers.server(server) else {
            return Vec::new();
        };
        let provenance = Provenance::now(by);
        let mut gone: Vec<&ToolSchemas> = tools
            .tools
            .values()
            .filter(|t| tool.is_none_or(|name| t.name.as_str() == name))
            .collect();
        gone.sort_by(|a, b| a.name.as_str().cmp(b.name.as_str()));
        gone.into_iter()
            .filter_map(|old| {
                let change = history::compare(Some(old), None, CompileOptions::ALL[0], &|_| true)?;
                Some((change.tool.clone(), Version::of(&change, None, &provenance)))
            })
            .collect()
    }

    /// Records a registration's versions in this process's histories.
    pub fn record_history(&self, server: &str, versions: &[(String, Version)]) {
        for (tool, version) in versions {
            self.history.record(server, tool, version.clone());
        }
    }

    /// What registering `tools` (one page of a listing when `next_cursor`, added to the
    /// server's tools when `merge`) changes, tool by tool, and the versions it adds to their
    /// histories. A paginated listing is judged against the tools in force before its first
    /// page, and its removals are known at its last.
    /// The changes of a registration that pins refuse (see [`history::pin_applies`]): a changed
    /// or removed tool whose rules pin it; a tool added to a server whose contract is in force,
    /// when the new tool's rules pin it (a server, tier or policy pinned as a whole). A change
    /// whose contract hash was accepted passes.
    fn refusals(
        policy: &Policy,
        server: &str,
        changes: &[ToolChange],
        tools: &[ToolSchemas],
        had_contract: bool,
        accepted: &dyn Fn(&str, &str) -> bool,
    ) -> Vec<Refusal> {
        changes
            .iter()
            .filter(|change| history::pin_applies(change))
            .filter(|change| {
                let pinned = policy.rules_for(Some(server), Some(&change.tool)).pin;
                pinned && (change.change != history::ChangeKind::Added || had_contract)
            })
            .map(|change| {
                let tool = tools.iter().find(|t| t.name.as_str() == change.tool);
                Refusal {
                    change: change.clone(),
                    accept: history::contract_hash(tool),
                }
            })
            .filter(|refusal| !accepted(&refusal.change.tool, &refusal.accept))
            .collect()
    }

    /// `usable`: whether a schema of a tool compiles (only those are analysed). Also says
    /// whether the server had a contract to judge against.
    fn changes(
        &self,
        policy: &Policy,
        server: &str,
        tools: &[ToolSchemas],
        (merge, next_cursor): (bool, Option<&str>),
        provenance: &Provenance,
        usable: &dyn Fn(&str, &RegisteredSchema) -> bool,
    ) -> (Vec<ToolChange>, Vec<(String, Version)>, bool) {
        let current = self.servers.load();
        let in_force = current.server(server).cloned();
        // The tools the registration is judged against, and whether a listing is whole with it
        // (then what it no longer lists was removed).
        let (base, listing_ends) = {
            let mut bases = self.listing_base.lock().unwrap_or_else(|e| e.into_inner());
            match (merge, next_cursor) {
                // A first page of several: the listing is judged against what is in force now.
                (false, Some(_)) => {
                    if let Some(tools) = &in_force {
                        bases.insert(server.to_owned(), Arc::clone(tools));
                    }
                    (in_force.clone(), false)
                }
                (false, None) => {
                    bases.remove(server);
                    (in_force.clone(), true)
                }
                (true, Some(_)) => (
                    bases.get(server).cloned().or_else(|| in_force.clone()),
                    false,
                ),
                (true, None) => match bases.remove(server) {
                    Some(base) => (Some(base), true),
                    None => (in_force.clone(), false),
                },
            }
        };
        let base_tool = |name: &str| base.as_ref().and_then(|b| b.tools.get(name));
        let options = |name: &str| policy.rules_for(Some(server), Some(name)).compile;
        let mut changes = Vec::new();
        let mut versions = Vec::new();
        for tool in tools {
            let name = tool.name.as_str();
            let analysed = |s: &RegisteredSchema| usable(name, s);
            if let Some(change) =
                history::compare(base_tool(name), Some(tool), options(name), &analysed)
            {
                versions.push((
                    name.to_owned(),
                    Version::of(&change, Some(tool), provenance),
                ));
                changes.push(change);
            }
        }
        if listing_ends {
            if let Some(base) = &base {
                let listed = |name: &str| {
                    tools.iter().any(|t| t.name.as_str() == name)
                        || (merge
                            && in_force
                                .as_ref()
                                .is_some_and(|f| f.tools.contains_key(name)))
                };
                let mut gone: Vec<&ToolSchemas> = base
                    .tools
                    .values()
                    .filter(|t| !listed(t.name.as_str()))
                    .collect();
                gone.sort_by(|a, b| a.name.as_str().cmp(b.name.as_str()));
                for old in gone {
                    let name = old.name.as_str();
                    if let Some(change) =
                        history::compare(Some(old), None, options(name), &|_| true)
                    {
                        versions.push((name.to_owned(), Version::of(&change, None, provenance)));
                        changes.push(change);
                    }
                }
            }
        }
        (changes, versions, base.is_some())
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

    /// Reads a server's tools (an MCP tools/list result) and compiles their schemas, so the
    /// first checks hit the cache; nothing is stored yet. A broken schema is reported for its
    /// tool alone.
    #[allow(clippy::too_many_arguments)]
    pub fn prepare(
        &self,
        cache: &SchemaCache,
        policy: &Policy,
        depth_limit: usize,
        server: &str,
        body: &Bytes,
        how: RegisterOptions,
        by: Option<&str>,
        accepted: &dyn Fn(&str, &str) -> bool,
    ) -> Result<Prepared, CheckError> {
        let server_id = ServerId::parse(server)?;
        let protocol = how.protocol_version.unwrap_or(ProtocolVersion::NEWEST);
        let provenance = Provenance::now(by);
        let mut list = parse_tools_list(&server_id, body, depth_limit, protocol, &provenance)?;
        self.ensure_fits(&server_id, &list.tools, how.merge)?;
        if !how.drop_shadow {
            // A tool registered again keeps its shadow schemas (on a later page of a listing,
            // as they were before its first page).
            let current = self.servers.load();
            let base = self
                .listing_base
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get(server)
                .cloned();
            for tool in &mut list.tools {
                let name = tool.name.as_str();
                let old = current
                    .server(server)
                    .and_then(|s| s.tools.get(name))
                    .or_else(|| base.as_ref().and_then(|b| b.tools.get(name)));
                if let Some(old) = old {
                    tool.shadow_input = old.shadow_input.clone();
                    tool.shadow_output = old.shadow_output.clone();
                }
            }
        }
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
            }
            report.push(RegisteredTool {
                name: tool.name.as_str().to_owned(),
                input_schema_hash: tool.input.as_ref().map(|s| s.hash),
                output_schema_hash: tool.output.as_ref().map(|s| s.hash),
                errors,
            });
        }
        // Classed once every new schema was compiled under the cost bounds: only schemas that
        // compile are analysed (an old one is compiled again, or found in the cache).
        let usable = |tool: &str, schema: &RegisteredSchema| {
            let options = policy.rules_for(Some(server), Some(tool)).compile;
            let (compiled, _) =
                cache.get_or_compile(schema.key(options), &schema.text, options, true);
            compiled.is_ok()
        };
        let (changes, versions, had_contract) = self.changes(
            policy,
            server,
            &list.tools,
            (how.merge, list.next_cursor.as_deref()),
            &provenance,
            &usable,
        );
        let refused = Self::refusals(
            policy,
            server,
            &changes,
            &list.tools,
            had_contract,
            accepted,
        );
        // A first page of several replaces the server's tools with its own: a pinned tool in
        // force that it does not list is kept (its removal is judged at the listing's end).
        let mut tools = list.tools;
        if !how.merge && list.next_cursor.is_some() {
            if let Some(in_force) = self.servers.load().server(server) {
                let mut kept: Vec<ToolSchemas> = in_force
                    .tools
                    .values()
                    .filter(|t| !tools.iter().any(|n| n.name == t.name))
                    .filter(|t| policy.rules_for(Some(server), Some(t.name.as_str())).pin)
                    .cloned()
                    .collect();
                tools.append(&mut kept);
            }
        }
        Ok(Prepared {
            registration: Registration {
                server: server.to_owned(),
                protocol_version: protocol,
                tools: report,
                next_cursor: list.next_cursor,
                changes,
            },
            versions,
            refused,
            server: server_id,
            tools,
            merge: how.merge,
            provenance,
            protocol,
        })
    }

    /// Reads shadow (candidate) schemas for `server`'s registered tools from a `tools/list`
    /// result (each listed tool's inputSchema and outputSchema become its shadow ones; a
    /// schema left out clears that shadow) and compiles them; nothing is stored yet. A tool
    /// that is not registered refuses the whole (`unknown_tool`).
    pub fn prepare_shadow(
        &self,
        cache: &SchemaCache,
        policy: &Policy,
        depth_limit: usize,
        server: &str,
        body: &Bytes,
    ) -> Result<Prepared, CheckError> {
        let server_id = ServerId::parse(server)?;
        let current = self.servers.load();
        let in_force = current
            .server(server)
            .ok_or_else(|| CheckError::UnknownServer(server.to_owned()))?;
        let list = parse_tools_list(
            &server_id,
            body,
            depth_limit,
            in_force.protocol,
            &in_force.provenance,
        )?;
        let mut tools = Vec::with_capacity(list.tools.len());
        let mut report = Vec::with_capacity(list.tools.len());
        for candidate in list.tools {
            let name = candidate.name.as_str();
            let mut tool =
                in_force
                    .tools
                    .get(name)
                    .cloned()
                    .ok_or_else(|| CheckError::UnknownTool {
                        server: server.to_owned(),
                        tool: name.to_owned(),
                    })?;
            let rules = policy.rules_for(Some(server), Some(name));
            let mut errors = Vec::new();
            for (label, schema) in [
                ("inputSchema", &candidate.input),
                ("outputSchema", &candidate.output),
            ] {
                let Some(schema) = schema else { continue };
                let key = schema.key(rules.compile);
                let (compiled, _) = cache.get_or_compile(key, &schema.text, rules.compile, true);
                let problem = match compiled.as_ref() {
                    Err(e) => Some(e.clone()),
                    Ok(c)
                        if label == "outputSchema"
                            && rules.object_root_required(in_force.protocol)
                            && !c.root_is_object =>
                    {
                        Some(CheckError::SchemaRootNotObject {
                            version: in_force.protocol.as_str(),
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
            }
            report.push(RegisteredTool {
                name: name.to_owned(),
                input_schema_hash: candidate.input.as_ref().map(|s| s.hash),
                output_schema_hash: candidate.output.as_ref().map(|s| s.hash),
                errors,
            });
            tool.shadow_input = candidate.input;
            tool.shadow_output = candidate.output;
            tools.push(tool);
        }
        Ok(Self::unchanged_contract(server_id, in_force, tools, report))
    }

    /// The registration that drops the shadow schemas of `tool` (`None`: of every tool) of
    /// `server`; nothing is stored yet.
    pub fn prepare_shadow_removal(
        &self,
        server: &str,
        tool: Option<&str>,
    ) -> Result<Prepared, CheckError> {
        let server_id = ServerId::parse(server)?;
        let current = self.servers.load();
        let in_force = current
            .server(server)
            .ok_or_else(|| CheckError::UnknownServer(server.to_owned()))?;
        if let Some(tool) = tool {
            if !in_force.tools.contains_key(tool) {
                return Err(CheckError::UnknownTool {
                    server: server.to_owned(),
                    tool: tool.to_owned(),
                });
            }
        }
        let tools: Vec<ToolSchemas> = in_force
            .tools
            .values()
            .filter(|t| tool.is_none_or(|name| t.name.as_str() == name))
            .filter(|t| t.shadow_input.is_some() || t.shadow_output.is_some())
            .map(|t| ToolSchemas {
                shadow_input: None,
                shadow_output: None,
                ..t.clone()
            })
            .collect();
        let report = tools
            .iter()
            .map(|t| RegisteredTool {
                name: t.name.as_str().to_owned(),
                input_schema_hash: None,
                output_schema_hash: None,
                errors: Vec::new(),
            })
            .collect();
        Ok(Self::unchanged_contract(server_id, in_force, tools, report))
    }

    /// A registration of `tools` (merged) that leaves the server's contract, its provenance and
    /// its tools' histories as they are: only their shadow schemas change.
    fn unchanged_contract(
        server: ServerId,
        in_force: &ServerTools,
        tools: Vec<ToolSchemas>,
        report: Vec<RegisteredTool>,
    ) -> Prepared {
        Prepared {
            registration: Registration {
                server: server.as_str().to_owned(),
                protocol_version: in_force.protocol,
                tools: report,
                next_cursor: None,
                changes: Vec::new(),
            },
            server,
            tools,
            merge: true,
            provenance: in_force.provenance.clone(),
            protocol: in_force.protocol,
            versions: Vec::new(),
            refused: Vec::new(),
        }
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

    /// Whether `server` has a contract registered.
    pub fn has_server(&self, server: &str) -> bool {
        self.load().server(server).is_some()
    }

    /// Every registered server that `shown` admits, by name.
    pub fn summaries(&self, shown: impl Fn(&str) -> bool) -> Vec<ServerSummary> {
        let servers = self.load();
        let mut out: Vec<ServerSummary> = servers
            .iter()
            .filter(|(name, _)| shown(name))
            .map(|(name, s)| ServerSummary {
                server: name.clone(),
                tools: s.tools.len(),
                protocol_version: s.protocol,
                registered_at: s.provenance.at_rfc3339(),
                registered_by: s.provenance.by.as_deref().map(str::to_owned),
            })
            .collect();
        out.sort_by(|a, b| a.server.cmp(&b.server));
        out
    }

    /// One server's tools by name, with their schema texts when `schemas`.
    pub fn listing(&self, server: &str, schemas: bool) -> Result<ServerListing, CheckError> {
        let servers = self.load();
        let s = servers
            .server(server)
            .ok_or_else(|| CheckError::UnknownServer(server.to_owned()))?;
        let text = |schema: &Option<RegisteredSchema>| {
            schema
                .as_ref()
                .filter(|_| schemas)
                .and_then(|s| std::str::from_utf8(&s.text).ok())
                .and_then(|t| RawValue::from_string(t.to_owned()).ok())
        };
        let mut tools: Vec<ToolListing> = s
            .tools
            .values()
            .map(|t| ToolListing {
                name: t.name.as_str().to_owned(),
                input_schema_hash: t.input.as_ref().map(|s| s.hash),
                output_schema_hash: t.output.as_ref().map(|s| s.hash),
                protocol_version: t.protocol,
                registered_at: t.provenance.at_rfc3339(),
                registered_by: t.provenance.by.as_deref().map(str::to_owned),
                input_schema: text(&t.input),
                output_schema: text(&t.output),
            })
            .collect();
        tools.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(ServerListing {
            server: server.to_owned(),
            protocol_version: s.protocol,
            registered_at: s.provenance.at_rfc3339(),
            registered_by: s.provenance.by.as_deref().map(str::to_owned),
            tools,
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
    use crate::core::policy::RegexEngine;

    fn prov() -> Provenance {
        Provenance::now(Some("ci"))
    }

    fn crm() -> ServerId {
        ServerId::parse("crm").expect("name")
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
