//! The core: one function that turns a [`Check`] into a [`Verdict`], used by every transport.
//!
//! The flow is parse (done by the caller), policy, cache, validate, verdict, metrics. CPU work
//! that could be long (a compile, a large payload, a batch) runs on a rayon pool, never on the
//! async runtime's threads; a check whose schema is cached and whose work is small is answered in
//! place, which is the common case and the fast one.

use crate::cache::{CacheConfig, CacheKey, SchemaCache};
use crate::check::{batch_from_json, Check, Document, Payload, SchemaSource, ToolResult};
use crate::compile::CompileLimits;
use crate::domain::{ProtocolVersion, SchemaHash, ServerId, Tier, ToolName};
use crate::error::CheckError;
use crate::metrics::{Attempt, Metrics, TargetMetrics, Transport};
use crate::policy::CompileOptions;
use crate::policy::{Policy, PolicyError, Rules};
use crate::registry::{parse_tools_list, Registry, Servers};
use crate::verdict::{
    clip, feedback, fold_indices, schema_keyword, with_article, Action, Finding, Outcome,
    ValidationFailure, Verdict,
};
use arc_swap::ArcSwap;
use bytes::Bytes;
use rayon::prelude::*;
use serde::Serialize;
use serde_json::Value;
use std::borrow::Cow;
use std::panic::AssertUnwindSafe;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// Request-controlled sizes and the work they may cause.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_body_bytes: usize,
    pub max_batch_items: usize,
    pub max_depth: usize,
    pub max_errors: usize,
    pub max_schema_bytes: usize,
    /// Most subschema evaluations a schema may imply at one instance position.
    pub max_schema_cost: u64,
    /// Most heap bytes a schema's compiled regular expressions may hold together.
    pub max_schema_regex_bytes: usize,
    /// Most subschema evaluations (schema cost times payload nodes, plus regular expressions
    /// times string bytes) one check may cost.
    pub max_check_work: u64,
    /// Most work for which every error is collected; past it, one summary error is reported.
    pub max_error_work: u64,
}

impl Limits {
    /// The limits a schema compile enforces.
    pub fn compile(&self) -> CompileLimits {
        CompileLimits {
            max_schema_bytes: self.max_schema_bytes,
            max_depth: self.max_depth,
            max_schema_cost: self.max_schema_cost,
            max_schema_regex_bytes: self.max_schema_regex_bytes,
        }
    }
}

/// Work small enough to do on the async runtime's thread.
const INLINE_WORK: u64 = 50_000;
/// Bodies up to this size are parsed on the async runtime's thread.
const INLINE_PARSE_BYTES: usize = 128 * 1024;
/// How often recorded latencies are folded into their histogram buckets (each is kept until then).
const METRICS_UPKEEP: std::time::Duration = std::time::Duration::from_secs(1);
/// Longest error message kept (messages can quote the whole failing value).
const MAX_MESSAGE_BYTES: usize = 300;

/// Everything the core needs, built once at start-up.
#[derive(Debug)]
pub struct GateConfig {
    pub limits: Limits,
    pub cache: CacheConfig,
    pub label_limit: usize,
    pub max_registered_tools: usize,
    pub policy: Policy,
    pub policy_path: Option<PathBuf>,
    /// Threads for CPU work; 0 means one per core.
    pub worker_threads: usize,
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

pub struct Gate {
    limits: Limits,
    policy: ArcSwap<Policy>,
    policy_path: Option<PathBuf>,
    cache: SchemaCache,
    registry: Registry,
    metrics: Arc<Metrics>,
    pool: rayon::ThreadPool,
    ready: AtomicBool,
    /// Jobs on the worker pool, queued or running.
    pending_jobs: Arc<AtomicUsize>,
}

/// Counts a job from its hand-off to the worker pool until it ends (or is dropped unrun).
struct PendingJob(Arc<AtomicUsize>);

impl PendingJob {
    fn new(count: Arc<AtomicUsize>) -> Self {
        count.fetch_add(1, Ordering::Relaxed);
        Self(count)
    }
}

impl Drop for PendingJob {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The schema a check is validated against: its hash, its cache key, its text for a compile, and
/// for a registered schema the MCP revision it was registered under.
struct SchemaRef<'a> {
    hash: SchemaHash,
    key: CacheKey,
    text: Cow<'a, Bytes>,
    protocol: Option<ProtocolVersion>,
}

/// A verdict before anything is concluded: nothing validated, action `pass`.
fn unvalidated_verdict(tier: Tier, check: &Check) -> Verdict {
    Verdict {
        valid: None,
        action: Action::Pass,
        tier,
        outcome: Outcome::Valid,
        schema_hash: None,
        errors: Vec::new(),
        truncated: false,
        feedback: String::new(),
        findings: Vec::new(),
        call_id: check.call_id.clone(),
    }
}

/// Where a check is being evaluated.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// On an async thread: no compile, no long work.
    Inline,
    /// On a thread that may block; `hit_counted` when an inline attempt already counted the hit.
    Blocking { hit_counted: bool },
}

/// Why a check could not be answered in place.
enum Deferred {
    Refused(CheckError),
    /// Needs a compile or more work than is fit for an async thread; says whether the cache hit
    /// was already counted.
    Offload(bool),
}

impl From<CheckError> for Deferred {
    fn from(e: CheckError) -> Self {
        Deferred::Refused(e)
    }
}

impl Gate {
    pub fn new(config: GateConfig) -> anyhow::Result<Arc<Gate>> {
        let metrics = Arc::new(Metrics::new(config.label_limit));
        Metrics::keep_up(&metrics, METRICS_UPKEEP)?;
        let limits = config.limits;
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(config.worker_threads)
            .thread_name(|i| format!("schemagate-worker-{i}"))
            .panic_handler(|_| tracing::error!("a check panicked; it was answered as internal"))
            .build()?;
        Ok(Arc::new(Gate {
            limits,
            policy: ArcSwap::from_pointee(config.policy),
            policy_path: config.policy_path,
            cache: SchemaCache::new(config.cache, limits.compile(), Arc::clone(&metrics)),
            registry: Registry::new(config.max_registered_tools),
            metrics,
            pool,
            ready: AtomicBool::new(true),
            pending_jobs: Arc::new(AtomicUsize::new(0)),
        }))
    }

    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// The Prometheus exposition, with gauges refreshed.
    pub fn render_metrics(&self) -> String {
        self.cache.refresh_gauges();
        self.metrics.render()
    }

    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Relaxed)
    }

    /// Marks the instance as draining: readiness fails, checks still in flight finish.
    pub fn set_draining(&self) {
        self.ready.store(false, Ordering::Relaxed);
    }

    /// Answers one check on the calling thread, compiling if need be. For use off the async
    /// runtime (the worker pool, benchmarks, tests).
    pub fn check(&self, check: &Check, transport: Transport) -> Result<Verdict, CheckError> {
        self.check_in(check, transport, Mode::Blocking { hit_counted: false })
    }

    fn check_in(
        &self,
        check: &Check,
        transport: Transport,
        mode: Mode,
    ) -> Result<Verdict, CheckError> {
        let start = Instant::now();
        let result = match self.evaluate_guarded(check, mode) {
            Ok(v) => Ok(v),
            Err(Deferred::Refused(e)) => Err(e),
            Err(Deferred::Offload(_)) => Err(CheckError::Internal),
        };
        self.account(&result, transport, start);
        result
    }

    /// Answers a check built by `build` (which parses it): in place when that is cheap, on the
    /// worker pool otherwise.
    pub async fn check_with<F>(
        self: &Arc<Self>,
        size_hint: usize,
        transport: Transport,
        build: F,
    ) -> Result<Verdict, CheckError>
    where
        F: FnOnce(&Limits) -> Result<Check, CheckError> + Send + 'static,
    {
        let start = Instant::now();
        if size_hint <= INLINE_PARSE_BYTES {
            let check = match guarded(|| build(&self.limits)) {
                Ok(c) => c,
                Err(e) => {
                    let result = Err(e);
                    self.account(&result, transport, start);
                    return result;
                }
            };
            match self.evaluate_guarded(&check, Mode::Inline) {
                Ok(v) => {
                    let result = Ok(v);
                    self.account(&result, transport, start);
                    return result;
                }
                Err(Deferred::Refused(e)) => {
                    let result = Err(e);
                    self.account(&result, transport, start);
                    return result;
                }
                Err(Deferred::Offload(hit_counted)) => {
                    let gate = Arc::clone(self);
                    let mode = Mode::Blocking { hit_counted };
                    return self
                        .offload(move || gate.check_in(&check, transport, mode))
                        .await
                        .and_then(|r| r);
                }
            }
        }
        let gate = Arc::clone(self);
        let outcome = self
            .offload(move || match guarded(|| build(&gate.limits)) {
                Ok(check) => gate.check(&check, transport),
                Err(e) => {
                    let result = Err(e);
                    gate.account(&result, transport, start);
                    result
                }
            })
            .await;
        outcome.and_then(|r| r)
    }

    /// Answers a batch (`{"items": [...]}` as JSON text) across the worker pool, in order, each
    /// answer shaped by `finish` there too (so that work is spread as well). A bad item gets its
    /// own error; only a batch that cannot be read at all fails as a whole.
    pub async fn check_batch_json<R, G>(
        self: &Arc<Self>,
        body: Bytes,
        transport: Transport,
        finish: G,
    ) -> Result<Vec<R>, CheckError>
    where
        R: Send + 'static,
        G: Fn(Result<Verdict, CheckError>) -> R + Send + Sync + 'static,
    {
        let gate = Arc::clone(self);
        self.offload(move || {
            let limits = &gate.limits;
            let items = batch_from_json(&body, limits.max_depth, limits.max_batch_items)?;
            Ok(gate.check_many(
                items,
                transport,
                |item, limits| item.into_check(limits.max_depth),
                finish,
            ))
        })
        .await
        .and_then(|r| r)
    }

    /// Answers many checks across the worker pool, in order: `build` parses each item and
    /// `finish` shapes each answer. Call from the worker pool (see [`Gate::offload`]).
    pub fn check_many<T, F, R, G>(
        &self,
        items: Vec<T>,
        transport: Transport,
        build: F,
        finish: G,
    ) -> Vec<R>
    where
        T: Send,
        F: Fn(T, &Limits) -> Result<Check, CheckError> + Sync,
        R: Send,
        G: Fn(Result<Verdict, CheckError>) -> R + Sync,
    {
        let one = |item: T| {
            let start = Instant::now();
            let read = guarded(|| build(item, &self.limits));
            let result = match read {
                Ok(check) => self.check(&check, transport),
                Err(e) => {
                    let result = Err(e);
                    self.account(&result, transport, start);
                    result
                }
            };
            finish(result)
        };
        if !self.spare_workers() {
            return items.into_iter().map(one).collect();
        }
        self.pool
            .install(|| items.into_par_iter().with_min_len(8).map(one).collect())
    }

    /// Refuses a batch longer than the limit.
    pub fn ensure_batch_len(&self, len: usize) -> Result<(), CheckError> {
        if len > self.limits.max_batch_items {
            return Err(CheckError::BatchTooLarge {
                len,
                limit: self.limits.max_batch_items,
            });
        }
        Ok(())
    }

    /// Runs CPU work on the worker pool and waits for it without blocking the async runtime.
    pub async fn offload<R, F>(&self, work: F) -> Result<R, CheckError>
    where
        R: Send + 'static,
        F: FnOnce() -> R + Send + 'static,
    {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let pending = PendingJob::new(Arc::clone(&self.pending_jobs));
        self.pool.spawn(move || {
            let _pending = pending;
            let _ = tx.send(work());
        });
        rx.await.map_err(|_| CheckError::Internal)
    }

    /// Whether a worker is free to take part of a batch. When every worker has a job of its own,
    /// splitting a batch only moves its documents between cores (measured: at 32 batches in
    /// flight, splitting cost a third of the throughput), so the batch runs where it was read.
    fn spare_workers(&self) -> bool {
        self.pending_jobs.load(Ordering::Relaxed) < self.pool.current_num_threads()
    }

    fn account(&self, result: &Result<Verdict, CheckError>, transport: Transport, start: Instant) {
        self.metrics
            .duration(transport)
            .record(start.elapsed().as_secs_f64());
        if let Err(e) = result {
            self.metrics.request_error(transport, e.code());
        }
    }

    /// [`Gate::evaluate`], with a panic turned into this check's own `internal` error, so one
    /// check can never take a batch, a stream or the process down with it.
    fn evaluate_guarded(&self, check: &Check, mode: Mode) -> Result<Verdict, Deferred> {
        match std::panic::catch_unwind(AssertUnwindSafe(|| self.evaluate(check, mode))) {
            Ok(result) => result,
            Err(_) => {
                tracing::error!(
                    server = check.server.as_deref().unwrap_or(""),
                    tool = check.tool.as_deref().unwrap_or(""),
                    call_id = check.call_id.as_deref().unwrap_or(""),
                    "a check panicked; it was answered as internal"
                );
                Err(Deferred::Refused(CheckError::Internal))
            }
        }
    }

    /// The check itself. Inline, it refuses to compile or to do long work and answers
    /// `Deferred::Offload` instead.
    fn evaluate(&self, check: &Check, mode: Mode) -> Result<Verdict, Deferred> {
        let may_block = mode != Mode::Inline;
        let server = check.server.as_deref();
        let tool = check.tool.as_deref();
        if let Some(s) = server {
            ServerId::check(s).map_err(CheckError::from)?;
        }
        if let Some(t) = tool {
            ToolName::check(t).map_err(CheckError::from)?;
        }
        let rules = self.policy.load().rules_for(server, tool);
        let target = self.metrics.target(server, tool);
        let attempt = Attempt::of(check.attempt);
        // Nothing validated (yet): `valid` stays unset unless a validation sets it.
        let unvalidated = |outcome: Outcome| {
            target.validation(rules.tier, attempt, outcome).increment(1);
            Verdict {
                outcome,
                ..unvalidated_verdict(rules.tier, check)
            }
        };

        if let Payload::Result(r) = &check.payload {
            if r.is_error {
                return Ok(unvalidated(Outcome::ToolError));
            }
        }
        if rules.tier == Tier::Trusted {
            return Ok(unvalidated(Outcome::Skipped));
        }

        let registered = self.registry.load();
        let Some(SchemaRef {
            hash,
            key,
            text,
            protocol,
        }) = self.schema_of(check, &registered, rules.compile)?
        else {
            return Ok(unvalidated(Outcome::Unchecked));
        };
        let version = check
            .protocol_version
            .or(protocol)
            .unwrap_or(ProtocolVersion::NEWEST);
        let compiled = match mode {
            Mode::Blocking { hit_counted } => {
                let (compiled, missed) =
                    self.cache
                        .get_or_compile(key, &text, rules.compile, !hit_counted);
                if missed && matches!(check.schema, SchemaSource::Inline(_)) {
                    self.cache.remember(hash, &text);
                }
                compiled
            }
            Mode::Inline => self.cache.get(&key).ok_or(Deferred::Offload(false))?,
        };
        drop(registered);
        let compiled = match compiled.as_ref() {
            Ok(c) => c,
            Err(e) => return Err(e.clone().into()),
        };

        let mut verdict = unvalidated_verdict(rules.tier, check);
        verdict.schema_hash = Some(hash);
        let document: Option<&Document> = match &check.payload {
            Payload::Instance(v) | Payload::Arguments(v) => Some(v),
            Payload::Result(r) => {
                if rules.object_root_required(version) && !compiled.root_is_object {
                    return Err(CheckError::SchemaRootNotObject {
                        version: version.as_str(),
                    }
                    .into());
                }
                r.structured_content.as_ref()
            }
        };

        match document {
            None => verdict.errors.push(ValidationFailure {
                instance_path: String::new(),
                schema_path: String::new(),
                keyword: "structuredContent".into(),
                message: "structuredContent is absent, but the tool declares an outputSchema: return the result as structuredContent (the text copy in content is not checked)".into(),
            }),
            Some(doc) => {
                if doc.depth > self.limits.max_depth {
                    return Err(CheckError::TooDeep {
                        what: "payload",
                        limit: self.limits.max_depth,
                    }
                    .into());
                }
                let work = compiled.work(doc.nodes, doc.string_bytes);
                if work > self.limits.max_check_work {
                    return Err(CheckError::WorkLimitExceeded {
                        work,
                        limit: self.limits.max_check_work,
                    }
                    .into());
                }
                if !may_block && work > INLINE_WORK {
                    return Err(Deferred::Offload(true));
                }
                if !compiled.validator.is_valid(&doc.value) {
                    if !may_block && work.saturating_mul(4) > INLINE_WORK {
                        // Collecting errors costs more than the yes/no answer.
                        return Err(Deferred::Offload(true));
                    }
                    self.collect_errors(&compiled.validator, &doc.value, work, &mut verdict);
                }
            }
        }

        if let (Payload::Result(r), Some(structured)) = (&check.payload, document) {
            if let Some(finding) = text_drift(r, &structured.value) {
                target.drift().increment(1);
                if rules.drift_fails {
                    verdict.errors.push(ValidationFailure {
                        instance_path: finding.instance_path.clone(),
                        schema_path: String::new(),
                        keyword: "content".into(),
                        message: finding.message.clone(),
                    });
                }
                verdict.findings.push(finding);
            }
            if version >= ProtocolVersion::V2026_07_28
                && !structured.value.is_object()
                && !r.has_text_block
            {
                verdict.findings.push(Finding {
                    kind: "missing_text_copy",
                    instance_path: String::new(),
                    message: "structuredContent is not an object, and MCP 2026-07-28 asks for a TextContent block beside it in content: add one".into(),
                });
            }
        }

        self.conclude(&mut verdict, &rules, check, &target, attempt);
        Ok(verdict)
    }

    /// The schema `check` is validated against under `options`; `None` for a registered tool
    /// that declares no schema for the payload (nothing to check). A registered schema comes
    /// with the MCP revision it was registered under.
    fn schema_of<'a>(
        &self,
        check: &'a Check,
        registered: &'a Servers,
        options: CompileOptions,
    ) -> Result<Option<SchemaRef<'a>>, CheckError> {
        let (server, tool) = (check.server.as_deref(), check.tool.as_deref());
        match &check.schema {
            SchemaSource::Inline(text) => {
                let hash = SchemaHash::of(text);
                Ok(Some(SchemaRef {
                    hash,
                    key: CacheKey::new(server, tool, &hash, options),
                    text: Cow::Borrowed(text),
                    protocol: None,
                }))
            }
            SchemaSource::Hash(h) => {
                let hash = SchemaHash::parse(h)?;
                let text = self
                    .cache
                    .source(&hash)
                    .ok_or_else(|| CheckError::UnknownSchemaHash(hash.to_string()))?;
                Ok(Some(SchemaRef {
                    hash,
                    key: CacheKey::new(server, tool, &hash, options),
                    text: Cow::Owned(text),
                    protocol: None,
                }))
            }
            SchemaSource::Registered => {
                let (Some(server), Some(tool)) = (server, tool) else {
                    return Err(CheckError::MissingSchema);
                };
                let schemas =
                    registered
                        .tool(server, tool)
                        .ok_or_else(|| CheckError::UnknownTool {
                            server: server.to_owned(),
                            tool: tool.to_owned(),
                        })?;
                let schema = match check.payload {
                    Payload::Arguments(_) => schemas.input.as_ref(),
                    _ => schemas.output.as_ref(),
                };
                Ok(schema.map(|schema| SchemaRef {
                    hash: schema.hash,
                    key: schema.key(options),
                    text: Cow::Borrowed(&schema.text),
                    protocol: Some(schemas.protocol),
                }))
            }
        }
    }

    fn collect_errors(
        &self,
        validator: &jsonschema::Validator,
        doc: &Value,
        work: u64,
        verdict: &mut Verdict,
    ) {
        if work > self.limits.max_error_work {
            verdict.errors.push(ValidationFailure {
                instance_path: String::new(),
                schema_path: String::new(),
                keyword: "errors".into(),
                message: format!(
                    "the payload fails its schema; its errors were not listed because listing them would cost about {work} evaluations (limit {}, see --max-error-work)",
                    self.limits.max_error_work
                ),
            });
            verdict.truncated = true;
            return;
        }
        let max = self.limits.max_errors;
        let mut count = 0usize;
        for error in validator.iter_errors(doc) {
            count += 1;
            if count > max {
                verdict.truncated = true;
                break;
            }
            let schema_path = error.schema_path().as_str();
            verdict.errors.push(ValidationFailure {
                instance_path: error.instance_path().as_str().to_owned(),
                keyword: schema_keyword(error.kind().keyword(), schema_path).to_owned(),
                schema_path: schema_path.to_owned(),
                message: clip(with_article(error.to_string()), MAX_MESSAGE_BYTES),
            });
        }
    }

    /// Sets validity, action and feedback, and counts the check.
    fn conclude(
        &self,
        verdict: &mut Verdict,
        rules: &Rules,
        check: &Check,
        target: &TargetMetrics,
        attempt: Attempt,
    ) {
        let valid = verdict.errors.is_empty();
        verdict.valid = Some(valid);
        verdict.outcome = if valid {
            Outcome::Valid
        } else {
            Outcome::Invalid
        };
        if !valid {
            verdict.action = if rules.tier == Tier::Untrusted {
                Action::Reject
            } else {
                Action::Pass
            };
            verdict.feedback =
                feedback(check.payload.subject(), &verdict.errors, verdict.truncated);
            for e in &verdict.errors {
                self.metrics
                    .field_failure(target, &fold_indices(&e.instance_path), &e.keyword);
            }
            if rules.tier == Tier::SemiTrusted {
                tracing::warn!(
                    server = check.server.as_deref().unwrap_or(""),
                    tool = check.tool.as_deref().unwrap_or(""),
                    tier = rules.tier.as_str(),
                    call_id = check.call_id.as_deref().unwrap_or(""),
                    feedback = %verdict.feedback,
                    "tool result failed its schema (logged, passed)"
                );
            }
        }
        target
            .validation(rules.tier, attempt, verdict.outcome)
            .increment(1);
    }

    /// Registers a server's tools (an MCP tools/list result) and compiles their schemas, so the
    /// first checks hit the cache. A broken schema is reported for its tool alone. The tools
    /// replace the server's registration, or with `merge` are added to it (one page of a
    /// paginated tools/list).
    pub fn register(
        &self,
        server: &str,
        body: &Bytes,
        how: RegisterOptions,
    ) -> Result<Registration, CheckError> {
        let server_id = ServerId::parse(server)?;
        let protocol = how.protocol_version.unwrap_or(ProtocolVersion::NEWEST);
        let list = parse_tools_list(&server_id, body, self.limits.max_depth, protocol)?;
        let policy = self.policy.load();
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
                let (compiled, _) =
                    self.cache
                        .get_or_compile(key, &schema.text, rules.compile, true);
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
                self.cache.remember(schema.hash, &schema.text);
            }
            report.push(RegisteredTool {
                name: tool.name.as_str().to_owned(),
                input_schema_hash: tool.input.as_ref().map(|s| s.hash),
                output_schema_hash: tool.output.as_ref().map(|s| s.hash),
                errors,
            });
        }
        self.registry.register(&server_id, list.tools, how.merge)?;
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

    /// Re-reads the policy file. A bad file keeps the policy in force and says why.
    pub fn reload_policy(&self) -> Result<(), PolicyError> {
        let Some(path) = &self.policy_path else {
            return Err(PolicyError::Invalid {
                at: String::new(),
                message: "no policy file is configured (start with --policy FILE)".into(),
            });
        };
        match Policy::from_file(path) {
            Ok(policy) => {
                self.policy.store(Arc::new(policy));
                self.metrics.policy_reload(true);
                tracing::info!(path = %path.display(), "policy reloaded");
                Ok(())
            }
            Err(e) => {
                self.metrics.policy_reload(false);
                tracing::error!(path = %path.display(), error = %e, "policy reload failed; the previous policy stays in force");
                Err(e)
            }
        }
    }

    pub fn policy_path(&self) -> Option<&PathBuf> {
        self.policy_path.as_ref()
    }
}

/// Runs `read`, turning a panic into an `internal` error for this item alone.
fn guarded<T>(read: impl FnOnce() -> Result<T, CheckError>) -> Result<T, CheckError> {
    std::panic::catch_unwind(AssertUnwindSafe(read)).unwrap_or_else(|_| {
        tracing::error!("reading a check panicked; it was answered as internal");
        Err(CheckError::Internal)
    })
}

/// A text block of `content` that parses as JSON and is a different JSON value from
/// `structuredContent` (numbers compared by value), with where they first differ. A text holding
/// a JSON scalar is compared only with a scalar `structuredContent`: beside an object it is
/// prose that happens to parse (a count, a word), not a copy.
fn text_drift(result: &ToolResult, structured: &Value) -> Option<Finding> {
    let structured_is_scalar = !structured.is_object() && !structured.is_array();
    let mut sent: Option<Cow<'_, [u8]>> = result.structured_text.as_deref().map(Cow::Borrowed);
    for text in &result.json_texts {
        if crate::drift::is_scalar_text(text) && !structured_is_scalar {
            continue;
        }
        let sent = sent.get_or_insert_with(|| {
            // Kept whenever a text copy may follow; rebuilt from the value otherwise.
            Cow::Owned(serde_json::to_vec(structured).unwrap_or_default())
        });
        if crate::drift::same_tokens(text.as_bytes(), sent) {
            continue;
        }
        if let Some(Some(path)) = crate::drift::first_difference(text.as_bytes(), sent) {
            let at = if path.is_empty() { "/" } else { path.as_str() };
            return Some(Finding {
                kind: "text_drift",
                message: format!(
                    "the text copy in content parses as JSON but is a different value from structuredContent, first at {at}"
                ),
                instance_path: path,
            });
        }
    }
    None
}
