//! Where a check runs: the entry points every transport calls. The gate puts the synchronous
//! [`Judge`] to work in place when a check is cheap (its schema cached, its work small: the
//! common case and the fast one) and on the [`Executor`]'s worker pool otherwise (a compile, a
//! large payload, a batch), and records each request once through the [`Instrument`].

use crate::core::auth::{Auth, Caller};
use crate::core::change::Class;
use crate::core::check::Check;
use crate::core::domain::ToolName;
use crate::core::error::CheckError;
pub use crate::core::executor::{Admit, QueueLimits};
use crate::core::executor::{Cost, Executor};
use crate::core::instrument::Instrument;
use crate::core::judge::{guarded, Deferred, Judge, Placement};
use crate::core::metrics::{Metrics, Transport};
use crate::core::policy::{Policy, PolicyError, PolicyStore};
use crate::core::receiving::{Held, Receiving};
use crate::core::registry::history::{contract_hash, ChangeKind, Refusal, ToolChange, Version};
use crate::core::registry::redis::{RedisConfig, RedisRegistry};
use crate::core::registry::AcceptedHashes;
use crate::core::registry::{
    Prepared, RegisterOptions, Registration, Registry, ServerListing, ServerSummary,
};
use crate::core::schema::cache::{CacheConfig, SchemaCache};
use crate::core::schema::texts::SchemaTexts;
use crate::core::verdict::Verdict;
use crate::core::Limits;
use crate::ops::reload;
use bytes::Bytes;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;
use tokio_util::sync::CancellationToken;

/// Bodies up to this size are parsed on the async runtime's thread.
const INLINE_PARSE_BYTES: usize = 128 * 1024;
/// How often recorded latencies are folded into their histogram buckets (each is kept until then).
const METRICS_UPKEEP: std::time::Duration = std::time::Duration::from_secs(1);

/// Everything the core needs, built once at start-up.
#[derive(Debug)]
pub struct GateConfig {
    pub limits: Limits,
    pub cache: CacheConfig,
    pub label_limit: usize,
    /// Label combinations per client-labelled metric family.
    pub series_limit: usize,
    pub max_registered_tools: usize,
    /// The byte budget of schema texts seen in checks (see [`crate::core::schema::texts`]).
    pub max_schema_text_bytes: u64,
    /// The shared registry; `None`: in-process only.
    pub registry: Option<RedisConfig>,
    pub policy: Policy,
    pub policy_path: Option<PathBuf>,
    /// Threads for CPU work; 0 means one per core.
    pub worker_threads: usize,
    /// The most work admitted at once; past it, requests are refused as overloaded.
    pub queue: QueueLimits,
    /// The most bytes request bodies still arriving may hold together.
    pub max_receiving_bytes: usize,
    /// Who may do what.
    pub auth: Auth,
}

/// The core as the transports see it.
pub struct Gate {
    judge: Judge,
    limits: Limits,
    policy: Arc<PolicyStore>,
    /// Compiled schemas: the judge's, and registration's.
    cache: Arc<SchemaCache>,
    registry: Arc<Registry>,
    /// Schema texts seen in checks, by hash (registered ones are the registry's).
    texts: Arc<SchemaTexts>,
    /// The shared registry, with `--registry redis://...`.
    shared: Option<Arc<RedisRegistry>>,
    metrics: Arc<Metrics>,
    executor: Executor,
    receiving: Arc<Receiving>,
    auth: Arc<Auth>,
    instrument: Instrument,
    ready: AtomicBool,
    /// Held from a registration's (or removal's) judgement to its being in force, so that two
    /// at once on this replica are judged each against the other's result (changes, pins).
    registering: tokio::sync::Mutex<()>,
}

impl Gate {
    /// The core. With a shared registry configured, must be called within a Tokio runtime, and
    /// the registry is followed once [`Gate::start`] is called.
    pub fn new(config: GateConfig) -> anyhow::Result<Arc<Gate>> {
        let metrics = Arc::new(Metrics::new(config.label_limit, config.series_limit));
        Metrics::keep_up(&metrics, METRICS_UPKEEP)?;
        let limits = config.limits;
        let registry = Arc::new(Registry::new(config.max_registered_tools));
        let texts = Arc::new(SchemaTexts::new(config.max_schema_text_bytes));
        let shared = config
            .registry
            .map(|redis| {
                RedisRegistry::new(
                    redis,
                    Arc::clone(&registry),
                    Arc::clone(&texts),
                    Arc::clone(&metrics),
                )
            })
            .transpose()?;
        let policy = Arc::new(PolicyStore::new(
            config.policy,
            config.policy_path,
            Arc::clone(&metrics),
        ));
        let cache = Arc::new(SchemaCache::new(
            config.cache,
            limits.compile(),
            Arc::clone(&metrics),
        ));
        Ok(Arc::new(Gate {
            judge: Judge::new(
                limits,
                Arc::clone(&policy),
                Arc::clone(&cache),
                Arc::clone(&registry),
                Arc::clone(&texts),
                shared.clone(),
                Arc::clone(&metrics),
            ),
            limits,
            policy,
            cache,
            registry,
            texts,
            shared,
            metrics: Arc::clone(&metrics),
            executor: Executor::new(config.worker_threads, config.queue)?,
            receiving: Receiving::new(config.max_receiving_bytes),
            registering: tokio::sync::Mutex::new(()),
            auth: Arc::new(config.auth),
            instrument: Instrument::new(metrics),
            ready: AtomicBool::new(true),
        }))
    }

    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// A hold on the receiving budget for one request body (see [`crate::core::receiving`]).
    pub fn hold_receiving(&self) -> Held {
        self.receiving.hold()
    }

    /// The tokens in force, and their reload.
    pub fn auth(&self) -> &Arc<Auth> {
        &self.auth
    }

    /// The metrics every part records into.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// Where the adapters count requests refused before they reach the gate.
    pub fn instrument(&self) -> &Instrument {
        &self.instrument
    }

    /// The policy in force, and its reload.
    pub fn policy(&self) -> &Arc<PolicyStore> {
        &self.policy
    }

    /// Re-reads the policy file. A bad file keeps the policy in force and says why.
    pub fn reload_policy(&self) -> Result<(), PolicyError> {
        self.policy.reload()
    }

    /// The Prometheus exposition, with gauges refreshed.
    pub fn render_metrics(&self) -> String {
        self.cache.refresh_gauges();
        self.metrics.render()
    }

    /// Ready: not draining, and with a shared registry, read in full once.
    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Relaxed)
            && self
                .shared
                .as_ref()
                .is_none_or(|s| s.synced().is_cancelled())
    }

    /// Starts following the shared registry, if one is configured, until `stop`.
    pub fn start(&self, stop: CancellationToken) {
        if let Some(shared) = &self.shared {
            shared.start(stop);
        }
    }

    /// Reloads the policy file and the token file (those configured) when their content changes
    /// (polled every `poll_secs`; 0: never) and, when `sighup`, on SIGHUP, until `stop`.
    pub fn watch_files(&self, poll_secs: u64, sighup: bool, stop: &CancellationToken) {
        if let Some(path) = self.policy.path() {
            let policy = Arc::clone(&self.policy);
            reload::watch(
                "policy",
                path.to_path_buf(),
                poll_secs,
                sighup,
                stop.clone(),
                move || {
                    let _ = policy.reload();
                },
            );
        }
        if let Some(path) = self.auth.path() {
            let auth = Arc::clone(&self.auth);
            reload::watch(
                "tokens",
                path.to_path_buf(),
                poll_secs,
                sighup,
                stop.clone(),
                move || {
                    let _ = auth.reload();
                },
            );
        }
    }

    /// Resolves once the shared registry has been read in full (at once without one).
    pub async fn synced(&self) {
        if let Some(shared) = &self.shared {
            shared.synced().cancelled().await;
        }
    }

    /// Marks the instance as draining: readiness fails, checks still in flight finish.
    pub fn set_draining(&self) {
        self.ready.store(false, Ordering::Relaxed);
    }

    /// Answers one check on the calling thread, compiling if need be. For use off the async
    /// runtime (benchmarks, tests).
    pub fn check(&self, check: &Check, transport: Transport) -> Result<Verdict, CheckError> {
        let start = Instant::now();
        let result = self.judge_on_worker(check, false);
        self.instrument.checked(transport, start, &result);
        result
    }

    /// The judgement of a check on a worker (a thread that may block).
    fn judge_on_worker(&self, check: &Check, hit_counted: bool) -> Result<Verdict, CheckError> {
        match self.judge.judge(check, Placement::Worker { hit_counted }) {
            Ok(verdict) => Ok(verdict),
            Err(Deferred::Refused(e)) => Err(e),
            // A worker judges to the end; only an inline judgement defers.
            Err(Deferred::ToWorker { .. }) => Err(CheckError::Internal),
        }
    }

    /// Answers one check read by `read` (which parses it): in place when that is cheap, on the
    /// worker pool otherwise (refused as overloaded when the pool has all the work it takes).
    /// Counted once, whatever happens. Dropping the future stops work not yet started.
    pub async fn check_one<F>(
        self: &Arc<Self>,
        caller: &Arc<Caller>,
        size_hint: usize,
        transport: Transport,
        read: F,
    ) -> Result<Verdict, CheckError>
    where
        F: FnOnce(&Limits) -> Result<Check, CheckError> + Send + 'static,
    {
        let start = Instant::now();
        let cost = Cost {
            checks: 1,
            bytes: size_hint,
        };
        let result = if size_hint <= INLINE_PARSE_BYTES {
            match guarded(|| read(self.limits())).and_then(|check| {
                caller.may_name(check.server.as_deref())?;
                Ok(check)
            }) {
                Err(e) => Err(e),
                Ok(check) => match self.judge.judge(&check, Placement::Inline) {
                    Ok(verdict) => Ok(verdict),
                    Err(Deferred::Refused(e)) => Err(e),
                    Err(Deferred::ToWorker { hit_counted }) => {
                        let gate = Arc::clone(self);
                        self.executor
                            .run(cost, move || gate.judge_on_worker(&check, hit_counted))
                            .await
                    }
                },
            }
        } else {
            let (gate, caller) = (Arc::clone(self), Arc::clone(caller));
            self.executor
                .run(cost, move || {
                    let check = guarded(|| read(gate.limits()))?;
                    caller.may_name(check.server.as_deref())?;
                    gate.judge_on_worker(&check, false)
                })
                .await
        };
        self.instrument.checked(transport, start, &result);
        result
    }

    /// Answers a batch on the worker pool, in order: `read_items` splits it into items (refusing
    /// a batch that cannot be read, or is too long, as a whole), `read_one` reads each item's
    /// check, and `finish` shapes each answer there too (so that work is spread as well). A bad
    /// item gets its own error; the others are answered. The one batch entry point of every
    /// transport: REST bodies, gRPC batches, and the chunks of a gRPC stream.
    ///
    /// `bytes` is the batch's size and `admit` whether it may be refused as overloaded (a stream's
    /// chunk is not: the stream waits instead). The items share the workers fairly with other
    /// requests; dropping the future stops the items not yet started (counted as cancelled).
    pub async fn check_batch<T, R, I, F, G>(
        self: &Arc<Self>,
        caller: &Arc<Caller>,
        transport: Transport,
        (bytes, admit): (usize, Admit),
        read_items: I,
        read_one: F,
        finish: G,
    ) -> Result<Vec<R>, CheckError>
    where
        T: Send + 'static,
        R: Send + 'static,
        I: FnOnce(&Limits) -> Result<Vec<T>, CheckError> + Send + 'static,
        F: Fn(T, &Limits) -> Result<Check, CheckError> + Send + Sync + 'static,
        G: Fn(Result<Verdict, CheckError>) -> R + Send + Sync + 'static,
    {
        let (reader, gate, caller) = (Arc::clone(self), Arc::clone(self), Arc::clone(caller));
        let instrument = self.instrument.clone();
        let answers = self
            .executor
            .batch(
                Cost { checks: 0, bytes },
                admit,
                move || guarded(|| read_items(reader.limits())),
                move |item| {
                    let start = Instant::now();
                    let result = guarded(|| read_one(item, gate.limits())).and_then(|check| {
                        caller.may_name(check.server.as_deref())?;
                        gate.judge_on_worker(&check, false)
                    });
                    gate.instrument.checked(transport, start, &result);
                    finish(result)
                },
                move |never_started| instrument.cancelled(transport, never_started),
            )
            .await;
        if let Err(e) = &answers {
            self.instrument.refused(transport, e);
        }
        answers
    }

    /// Refuses a batch of `len` items when it is longer than the limit.
    pub fn ensure_batch_len(&self, len: usize) -> Result<(), CheckError> {
        let limit = self.limits().max_batch_items;
        if len > limit {
            return Err(CheckError::BatchTooLarge { len, limit });
        }
        Ok(())
    }

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
        let accepted = match &self.shared {
            Some(shared) => shared.accepted(&server).await?,
            None => self.registry.accepted(&server),
        };
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
            shared = self.shared.is_some(),
            "tools registered"
        );
        self.count_changes(&registration.server, &registration.changes, caller.name());
        Ok(registration)
    }

    /// Puts a prepared registration in force: here, or written to the shared registry first
    /// (refused as `registry_unavailable` when it cannot be).
    async fn put_in_force(&self, prepared: Prepared) -> Result<Registration, CheckError> {
        match &self.shared {
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
                gate.registry.prepare_shadow(
                    &gate.cache,
                    &gate.policy.load(),
                    gate.limits.max_depth,
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
        let prepared = self.registry.prepare_shadow_removal(server, tool)?;
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
            let registered = self.registry.load();
            let schemas = registered
                .tool(server, tool)
                .ok_or_else(|| CheckError::UnknownTool {
                    server: server.to_owned(),
                    tool: tool.to_owned(),
                })?;
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
                Class::Breaking | Class::Unknown => tracing::warn!(
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
        let versions = match &self.shared {
            Some(shared) => shared.history(server, tool).await?,
            None => self.registry.history(server, tool),
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
        self.registry.prepare(
            &self.cache,
            &self.policy.load(),
            self.limits.max_depth,
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
        match &self.shared {
            Some(shared) => shared.accept(server, tool, hash).await?,
            None => self.registry.accept(server, tool, hash),
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
        self.registry.commit(prepared)
    }

    /// Keeps the texts of a registration's schemas in the text store too.
    fn remember_texts(&self, prepared: &Prepared) {
        for schema in prepared
            .tools
            .iter()
            .flat_map(|t| [&t.input, &t.output, &t.shadow_input, &t.shadow_output])
            .flatten()
        {
            self.texts.remember(schema.hash, &schema.text);
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
        let prepared = self.prepare(server, body, how, None, &self.registry.accepted(server))?;
        self.commit(prepared)
    }

    /// What registering `body` (a `tools/list` result) for `server` would change, tool by tool,
    /// classed as a registration is; nothing is stored, and no pin applies. On the calling
    /// thread (the command line's `diff`).
    pub fn changes_now(&self, server: &str, body: &Bytes) -> Result<Vec<ToolChange>, CheckError> {
        let how = RegisterOptions::default();
        let prepared = self.registry.prepare(
            &self.cache,
            &self.policy.load(),
            self.limits.max_depth,
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
        let prepared = self.registry.prepare_shadow(
            &self.cache,
            &self.policy.load(),
            self.limits.max_depth,
            server,
            body,
        )?;
        self.commit(prepared)
    }

    /// Whether `server` has a contract registered (here, or through the shared registry).
    pub fn has_contract(&self, server: &str) -> bool {
        self.registry.has_server(server)
    }

    /// The registered servers the caller may name, by name.
    pub fn servers(&self, caller: &Caller) -> Vec<ServerSummary> {
        self.registry
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
        self.registry.listing(server, schemas)
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
        let gone = self.registry.removal(server, tool, caller.token_name());
        // A pinned tool is removed only once its removal is accepted, as a registration that
        // drops it would be.
        let accepted = match &self.shared {
            Some(shared) => shared.accepted(server).await?,
            None => self.registry.accepted(server),
        };
        let removed_hash = contract_hash(None);
        let policy = self.policy.load();
        let refused: Vec<Refusal> = gone
            .iter()
            .filter(|(name, _)| policy.rules_for(Some(server), Some(name)).pin)
            .filter(|(name, _)| !accepted.contains(&(name.clone(), removed_hash.clone())))
            .map(|(name, _)| Refusal {
                change: ToolChange {
                    tool: name.clone(),
                    change: ChangeKind::Removed,
                    class: Class::Breaking,
                    schemas: Vec::new(),
                },
                accept: removed_hash.clone(),
            })
            .collect();
        if !refused.is_empty() {
            return Err(self.pinned(server, &refused, caller.name()));
        }
        let removed = match &self.shared {
            Some(shared) => {
                let removed = shared.delete(server, tool, &gone).await?;
                shared.settle(server).await;
                removed
            }
            None => {
                let removed = self.registry.remove(server, tool)?;
                self.registry.record_history(server, &gone);
                removed
            }
        };
        let changes: Vec<ToolChange> = gone
            .iter()
            .map(|(tool, _)| ToolChange {
                tool: tool.clone(),
                change: ChangeKind::Removed,
                class: Class::Breaking,
                schemas: Vec::new(),
            })
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
