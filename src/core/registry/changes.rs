//! What a registration changes, tool by tool: the changes judged against the tools in force (or,
//! for a paginated listing, those before its first page), the ones pins refuse, the hashes
//! accepted past a pin, and the versions kept in each tool's history. See [`super::history`].

use super::history::{self, Refusal, ToolChange, Version};
use super::{AcceptedHashes, Provenance, RegisteredSchema, Registry, ToolSchemas, MAX_ACCEPTED};
use crate::core::policy::{CompileOptions, Policy};
use std::sync::Arc;

/// Most changes remembered by [`Judged`].
const JUDGED_CHANGES: u64 = 4096;

/// Changes judged before: what comparing two contracts gave, by their contract hashes and the
/// options they were judged under (a comparison is a function of those alone). Saves the
/// canonical analysis when the same listings are registered again and again (`schemagate check`
/// replaying many sessions of one server).
pub struct Judged(moka::sync::Cache<(String, String, usize), Option<ToolChange>>);

impl Judged {
    pub fn new() -> Self {
        Self(moka::sync::Cache::new(JUDGED_CHANGES))
    }

    /// `old` against `new` (the same tool), judged now or before.
    fn compare(
        &self,
        old: Option<&ToolSchemas>,
        new: Option<&ToolSchemas>,
        options: CompileOptions,
        usable: &dyn Fn(&RegisteredSchema) -> bool,
    ) -> Option<ToolChange> {
        let (Some(was), Some(is)) = (old, new) else {
            return history::compare(old, new, options, usable);
        };
        // The usual case, a listing registered again: nothing to hash or remember.
        if history::unchanged(was, is) {
            return None;
        }
        let key = (
            history::contract_hash(Some(was)),
            history::contract_hash(Some(is)),
            options.index(),
        );
        let mut change = self
            .0
            .get_with(key, || history::compare(old, new, options, usable))?;
        // The same contracts under another name judge alike.
        change.tool = is.name.as_str().to_owned();
        Some(change)
    }
}

impl std::fmt::Debug for Judged {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Judged")
            .field("changes", &self.0.entry_count())
            .finish()
    }
}

impl Default for Judged {
    fn default() -> Self {
        Self::new()
    }
}

impl Registry {
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
    pub(super) fn refusals(
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
    pub(super) fn changes(
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
                self.judged
                    .compare(base_tool(name), Some(tool), options(name), &analysed)
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
        let schemas = |t: &ToolSchemas| {
            let hash = |s: &Option<RegisteredSchema>| s.as_ref().map(|s| s.hash);
            (hash(&t.input), hash(&t.output))
        };
        history::mark_renames(
            &mut changes,
            &|name| base_tool(name).map(schemas),
            &|name| tools.iter().find(|t| t.name.as_str() == name).map(schemas),
        );
        (changes, versions, base.is_some())
    }
}
