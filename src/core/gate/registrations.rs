//! The gate's registrations: a server's tools registered (or learned), removed, listed, their
//! changes classed, counted and pinned, their histories, and their shadow schemas. The same
//! gate as [`super`]; this file holds the contract side of it.

use super::Gate;
use crate::core::auth::Caller;
use crate::core::change::Class;
use crate::core::check::ListedSchemas;
use crate::core::domain::{SchemaHash, ToolName};
use crate::core::error::CheckError;
use crate::core::executor::Cost;
use crate::core::registry::history::{contract_hash, Refusal, ToolChange, Version};
use crate::core::registry::{
    AcceptedHashes, Prepared, RegisterOptions, RegisteredSchema, Registration, ServerListing,
    ServerSummary, ToolSchemas,
};
use bytes::Bytes;
use std::sync::Arc;

impl Gate {
    /// Registers a server's tools (an MCP tools/list result): read and compiled on the worker
    /// pool, written to the shared registry when there is one (refused as
    /// `registry_unavailable` when it cannot be), then put in force here and answered.
    pub async fn register(
        self: &Arc<Self>,
        caller: &Arc<Caller>,
        server: String,
        body: Bytes,
        how: RegisterOptions,
    ) -> Result<Registration, CheckError> {
        caller.may_name(Some(&server))?;
        let by = caller
            .token_name()
            .map(str::to_owned)
            .or_else(|| how.learned.then(|| "proxy".to_owned()));
        let cost = Cost {
            checks: 1,
            bytes: body.len(),
        };
        let _registering = self.registering.lock().await;
        let accepted = self.accepted(&server).await?;
        let gate = Arc::clone(self);
        let prepared = self
            .executor
            .run(cost, move || {
                gate.prepare(&server, &body, how, by.as_deref(), &accepted)
            })
            .await?;
        if !prepared.refused.is_empty() {
            return Err(self.pinned(prepared.server.as_str(), &prepared.refused, caller.name()));
        }
        let registration = self.put_in_force(prepared).await?;
        tracing::info!(
            server = %registration.server,
            tools = registration.tools.len(),
            token = caller.name(),
            shared = self.parts.shared.is_some(),
            "tools registered"
        );
        self.count_changes(&registration.server, &registration.changes, caller.name());
        Ok(registration)
    }

    /// The contract hashes accepted past a pin on `server` (from the shared registry when there
    /// is one).
    async fn accepted(&self, server: &str) -> Result<AcceptedHashes, CheckError> {
        match &self.parts.shared {
            Some(shared) => shared.accepted(server).await,
            None => Ok(self.parts.registry.accepted(server)),
        }
    }

    /// Puts a prepared registration in force: here, or written to the shared registry first
    /// (refused as `registry_unavailable` when it cannot be).
    async fn put_in_force(&self, prepared: Prepared) -> Result<Registration, CheckError> {
        match &self.parts.shared {
            None => self.commit(prepared),
            Some(shared) => {
                shared.write(&prepared).await?;
                // In force here as Redis now holds it (with the texts at hand, so none is read
                // back).
                self.remember_texts(&prepared);
                shared.settle(prepared.server.as_str()).await;
                Ok(prepared.registration)
            }
        }
    }

    /// Registers shadow (candidate) schemas for registered tools of `server` (a `tools/list`
    /// result): judged beside the enforced ones on every check, reported in the verdict's
    /// `shadow`, never enforced. The contract and its history do not change.
    pub async fn register_shadow(
        self: &Arc<Self>,
        caller: &Arc<Caller>,
        server: String,
        body: Bytes,
    ) -> Result<Registration, CheckError> {
        caller.may_name(Some(&server))?;
        let cost = Cost {
            checks: 1,
            bytes: body.len(),
        };
        let _registering = self.registering.lock().await;
        let gate = Arc::clone(self);
        let prepared = self
            .executor
            .run(cost, move || {
                gate.parts.registry.prepare_shadow(
                    &gate.parts.cache,
                    &gate.parts.policy.load(),
                    gate.parts.limits.max_depth,
                    &server,
                    &body,
                )
            })
            .await?;
        let registration = self.put_in_force(prepared).await?;
        tracing::info!(server = %registration.server, tools = registration.tools.len(), token = caller.name(), "shadow schemas registered");
        Ok(registration)
    }

    /// Drops the shadow schemas of `tool` (`None`: of every tool) of `server`; says how many
    /// tools had one.
    pub async fn remove_shadow(
        &self,
        caller: &Caller,
        server: &str,
        tool: Option<&str>,
    ) -> Result<usize, CheckError> {
        caller.may_name(Some(server))?;
        let _registering = self.registering.lock().await;
        let prepared = self.parts.registry.prepare_shadow_removal(server, tool)?;
        let removed = prepared.tools.len();
        self.put_in_force(prepared).await?;
        tracing::info!(
            server,
            tool = tool.unwrap_or("*"),
            removed,
            token = caller.name(),
            "shadow schemas removed"
        );
        Ok(removed)
    }

    /// Makes `tool`'s shadow schemas its contract: a registration of the tool with them (a
    /// normal change: classified, kept in its history, refused by a pin until accepted), its
    /// shadow schemas dropped.
    pub async fn promote_shadow(
        self: &Arc<Self>,
        caller: &Arc<Caller>,
        server: &str,
        tool: &str,
    ) -> Result<Registration, CheckError> {
        caller.may_name(Some(server))?;
        let (body, protocol) = {
            let registered = self.parts.registry.load();
            let schemas = registered.registered(server, tool)?;
            if schemas.shadow_input.is_none() && schemas.shadow_output.is_none() {
                return Err(CheckError::InvalidField(format!(
                    "tool {tool:?} of server {server:?} has no shadow schema to promote: register one with ?shadow=true (gRPC RegisterTools with shadow) first"
                )));
            }
            let text = |s: &Option<crate::core::registry::RegisteredSchema>| {
                s.as_ref()
                    .map(|s| String::from_utf8_lossy(&s.text).into_owned())
            };
            let mut entry = vec![format!("\"name\":{}", serde_json::Value::from(tool))];
            for (key, value) in [
                (
                    "inputSchema",
                    text(&schemas.shadow_input).or_else(|| text(&schemas.input)),
                ),
                (
                    "outputSchema",
                    text(&schemas.shadow_output).or_else(|| text(&schemas.output)),
                ),
                (
                    "annotations",
                    schemas.annotations.as_deref().map(str::to_owned),
                ),
                ("execution", schemas.execution.as_deref().map(str::to_owned)),
            ] {
                if let Some(value) = value {
                    entry.push(format!("\"{key}\":{value}"));
                }
            }
            (
                Bytes::from(format!("{{\"tools\":[{{{}}}]}}", entry.join(","))),
                schemas.protocol,
            )
        };
        let how = RegisterOptions {
            merge: true,
            protocol_version: Some(protocol),
            learned: false,
            drop_shadow: true,
        };
        self.register(caller, server.to_owned(), body, how).await
    }

    /// The refusal of changes to a pinned contract: counted and logged as changes seen, then
    /// refused whole, so the old contract stays.
    fn pinned(&self, server: &str, refused: &[Refusal], by: &str) -> CheckError {
        let changes: Vec<ToolChange> = refused.iter().map(|r| r.change.clone()).collect();
        self.count_changes(server, &changes, by);
        let detail: Vec<String> = refused.iter().map(Refusal::describe).collect();
        tracing::warn!(server, refused = ?detail, token = by, "refused: it would change a pinned contract");
        CheckError::ContractPinned {
            server: server.to_owned(),
            detail: detail.join("; "),
            tools: changes.into_iter().map(|c| c.tool).collect(),
        }
    }

    /// Counts and logs what a registration changed: a line per changed tool (a warning for a
    /// breaking or undecided change), a count per changed part.
    fn count_changes(&self, server: &str, changes: &[ToolChange], by: &str) {
        for change in changes {
            for part in &change.schemas {
                self.metrics().contract_change(
                    server,
                    &change.tool,
                    part.schema.as_str(),
                    part.class.as_str(),
                );
            }
            let reasons: Vec<String> = change
                .schemas
                .iter()
                .flat_map(|p| {
                    p.reasons
                        .iter()
                        .map(move |r| format!("{}: {r}", p.schema.as_str()))
                })
                .collect();
            match change.class {
                // A text a person should read (a description that starts asking for secrets).
                Class::Breaking | Class::Unknown | Class::Review => tracing::warn!(
                    server,
                    tool = %change.tool,
                    change = ?change.change,
                    class = change.class.as_str(),
                    ?reasons,
                    by,
                    "contract changed"
                ),
                Class::Identical | Class::Compatible => tracing::info!(
                    server,
                    tool = %change.tool,
                    change = ?change.change,
                    class = change.class.as_str(),
                    ?reasons,
                    by,
                    "contract changed"
                ),
            }
        }
    }

    /// `tool`'s history: its versions, newest first (from the shared registry when there is
    /// one). A tool never registered has none: `unknown_tool`.
    pub async fn tool_history(
        &self,
        caller: &Caller,
        server: &str,
        tool: &str,
    ) -> Result<Vec<Version>, CheckError> {
        caller.may_name(Some(server))?;
        let versions = match &self.parts.shared {
            Some(shared) => shared.history(server, tool).await?,
            None => self.parts.registry.history(server, tool),
        };
        if versions.is_empty() {
            return Err(CheckError::UnknownTool {
                server: server.to_owned(),
                tool: tool.to_owned(),
            });
        }
        Ok(versions)
    }

    fn prepare(
        &self,
        server: &str,
        body: &Bytes,
        how: RegisterOptions,
        by: Option<&str>,
        accepted: &AcceptedHashes,
    ) -> Result<Prepared, CheckError> {
        self.parts.registry.prepare(
            &self.parts.cache,
            &self.parts.policy.load(),
            self.parts.limits.max_depth,
            server,
            body,
            how,
            by,
            &|tool, hash| accepted.contains(&(tool.to_owned(), hash.to_owned())),
        )
    }

    /// Accepts `hash` as `tool`'s contract on `server` past a pin (shared through the registry
    /// when there is one): a registration that brings that contract is no longer refused.
    pub async fn accept_contract(
        &self,
        caller: &Caller,
        server: &str,
        tool: &str,
        hash: &str,
    ) -> Result<(), CheckError> {
        caller.may_name(Some(server))?;
        ToolName::parse(tool)?;
        let valid =
            hash.len() == 64 && hash.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
        if !valid {
            return Err(CheckError::InvalidField(format!(
                "`hash` {hash:?} is not a contract hash: send the 64 lowercase hex digits a contract_pinned refusal names"
            )));
        }
        match &self.parts.shared {
            Some(shared) => shared.accept(server, tool, hash).await?,
            None => self.parts.registry.accept(server, tool, hash),
        }
        tracing::info!(
            server,
            tool,
            hash,
            token = caller.name(),
            "a pinned contract's change was accepted"
        );
        Ok(())
    }

    /// Puts a prepared registration in force here. Its texts are also kept apart, so their
    /// hashes resolve after the registration is replaced (while the text budget allows).
    fn commit(&self, prepared: Prepared) -> Result<Registration, CheckError> {
        self.remember_texts(&prepared);
        self.parts.registry.commit(prepared)
    }

    /// Keeps the texts of a registration's schemas in the text store too.
    fn remember_texts(&self, prepared: &Prepared) {
        for schema in prepared
            .tools
            .iter()
            .flat_map(|t| [&t.input, &t.output, &t.shadow_input, &t.shadow_output])
            .flatten()
        {
            self.parts.texts.remember(schema.hash, &schema.text);
        }
    }

    /// Registers a server's tools on the calling thread, in this instance alone (not in a shared
    /// registry). For use off the async runtime (benchmarks, tests).
    pub fn register_now(
        &self,
        server: &str,
        body: &Bytes,
        how: RegisterOptions,
    ) -> Result<Registration, CheckError> {
        let prepared = self.prepare(
            server,
            body,
            how,
            None,
            &self.parts.registry.accepted(server),
        )?;
        self.commit(prepared)
    }

    /// What registering `body` (a `tools/list` result) for `server` would change, tool by tool,
    /// classed as a registration is; nothing is stored, and no pin applies. On the calling
    /// thread (the command line's `diff`).
    pub fn changes_now(&self, server: &str, body: &Bytes) -> Result<Vec<ToolChange>, CheckError> {
        let how = RegisterOptions::default();
        let prepared = self.parts.registry.prepare(
            &self.parts.cache,
            &self.parts.policy.load(),
            self.parts.limits.max_depth,
            server,
            body,
            how,
            None,
            &|_, _| true,
        );
        Ok(prepared?.registration.changes)
    }

    /// Registers shadow schemas for `server`'s registered tools on the calling thread, in this
    /// instance alone (see [`Gate::register_shadow`]). For use off the async runtime (benchmarks,
    /// tests).
    pub fn register_shadow_now(
        &self,
        server: &str,
        body: &Bytes,
    ) -> Result<Registration, CheckError> {
        let prepared = self.parts.registry.prepare_shadow(
            &self.parts.cache,
            &self.parts.policy.load(),
            self.parts.limits.max_depth,
            server,
            body,
        )?;
        self.commit(prepared)
    }

    /// Whether the contract registered for `server` gives `tool` these very input and output
    /// schemas (the same texts, by hash).
    pub fn registers(&self, server: &str, tool: &str, schemas: &ListedSchemas) -> bool {
        let hash = |s: &Option<RegisteredSchema>| s.as_ref().map(|s| s.hash);
        let listed = |s: &Option<(SchemaHash, Bytes)>| s.as_ref().map(|(hash, _)| *hash);
        self.parts
            .registry
            .load()
            .tool(server, tool)
            .is_some_and(|r| {
                hash(&r.input) == listed(&schemas.input)
                    && hash(&r.output) == listed(&schemas.output)
            })
    }

    /// The contract registered for `server`'s `tool`, if any.
    pub fn registered_tool(&self, server: &str, tool: &str) -> Option<ToolSchemas> {
        self.parts.registry.load().tool(server, tool).cloned()
    }

    /// Whether `server` has `tool` registered.
    pub fn has_tool(&self, server: &str, tool: &str) -> bool {
        self.parts.registry.load().tool(server, tool).is_some()
    }

    /// Whether `server` has a contract registered (here, or through the shared registry).
    pub fn has_contract(&self, server: &str) -> bool {
        self.parts.registry.has_server(server)
    }

    /// The registered servers the caller may name, by name.
    pub fn servers(&self, caller: &Caller) -> Vec<ServerSummary> {
        self.parts
            .registry
            .summaries(|server| caller.may_name(Some(server)).is_ok())
    }

    /// One server's registered tools, with their schemas when `schemas`.
    pub fn server_tools(
        &self,
        caller: &Caller,
        server: &str,
        schemas: bool,
    ) -> Result<ServerListing, CheckError> {
        caller.may_name(Some(server))?;
        self.parts.registry.listing(server, schemas)
    }

    /// Removes `tool` of `server` (with `None`: all its tools, and the server), from the shared
    /// registry first when there is one; says how many tools were removed.
    pub async fn remove_tools(
        &self,
        caller: &Caller,
        server: &str,
        tool: Option<&str>,
    ) -> Result<usize, CheckError> {
        caller.may_name(Some(server))?;
        let _registering = self.registering.lock().await;
        // What is removed, for the tools' histories.
        let gone = self
            .parts
            .registry
            .removal(server, tool, caller.token_name());
        // A pinned tool is removed only once its removal is accepted, as a registration that
        // drops it would be.
        let accepted = self.accepted(server).await?;
        let removed_hash = contract_hash(None);
        let policy = self.parts.policy.load();
        let refused: Vec<Refusal> = gone
            .iter()
            .filter(|(name, _)| policy.rules_for(Some(server), Some(name)).pin)
            .filter(|(name, _)| !accepted.contains(&(name.clone(), removed_hash.clone())))
            .map(|(name, _)| Refusal {
                change: ToolChange::removed(name),
                accept: removed_hash.clone(),
            })
            .collect();
        if !refused.is_empty() {
            return Err(self.pinned(server, &refused, caller.name()));
        }
        let removed = match &self.parts.shared {
            Some(shared) => {
                let removed = shared.delete(server, tool, &gone).await?;
                shared.settle(server).await;
                removed
            }
            None => {
                let removed = self.parts.registry.remove(server, tool)?;
                self.parts.registry.record_history(server, &gone);
                removed
            }
        };
        let changes: Vec<ToolChange> = gone
            .iter()
            .map(|(tool, _)| ToolChange::removed(tool))
            .collect();
        self.count_changes(server, &changes, caller.name());
        tracing::info!(
            server,
            tool = tool.unwrap_or("*"),
            removed,
            token = caller.name(),
            "tools removed"
        );
        Ok(removed)
    }
}
