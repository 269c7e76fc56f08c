//! Where a check runs: the entry points every transport calls. The gate puts the synchronous
//! [`Validator`] to work in place when a check is cheap (its schema cached, its work small: the
//! common case and the fast one) and on the [`Executor`]'s worker pool otherwise (a compile, a
//! large payload, a batch), and records each request once through the [`Instrument`].

use crate::auth::{Auth, Caller};
use crate::cache::{CacheConfig, SchemaCache};
use crate::check::Check;
use crate::compile::CompileLimits;
use crate::error::CheckError;
pub use crate::executor::{Admit, QueueLimits};
use crate::executor::{Cost, Executor};
use crate::instrument::Instrument;
use crate::metrics::{Metrics, Transport};
use crate::policy::{Policy, PolicyError, PolicyStore};
use crate::receiving::{Held, Receiving};
use crate::registry::{RegisterOptions, Registration, Registry};
use crate::validator::{guarded, Deferred, Placement, Validator};
use crate::verdict::Verdict;
use bytes::Bytes;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
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
    /// How long a request body may take to arrive in full.
    pub body_read_timeout: std::time::Duration,
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
    validator: Validator,
    executor: Executor,
    receiving: Arc<Receiving>,
    auth: Arc<Auth>,
    instrument: Instrument,
    ready: AtomicBool,
}

impl Gate {
    pub fn new(config: GateConfig) -> anyhow::Result<Arc<Gate>> {
        let metrics = Arc::new(Metrics::new(config.label_limit, config.series_limit));
        Metrics::keep_up(&metrics, METRICS_UPKEEP)?;
        let limits = config.limits;
        Ok(Arc::new(Gate {
            validator: Validator {
                limits,
                policy: Arc::new(PolicyStore::new(
                    config.policy,
                    config.policy_path,
                    Arc::clone(&metrics),
                )),
                cache: SchemaCache::new(config.cache, limits.compile(), Arc::clone(&metrics)),
                registry: Registry::new(config.max_registered_tools),
                metrics: Arc::clone(&metrics),
            },
            executor: Executor::new(config.worker_threads, config.queue)?,
            receiving: Receiving::new(config.max_receiving_bytes),
            auth: Arc::new(config.auth),
            instrument: Instrument::new(metrics),
            ready: AtomicBool::new(true),
        }))
    }

    pub fn limits(&self) -> &Limits {
        &self.validator.limits
    }

    /// A hold on the receiving budget for one request body (see [`crate::receiving`]).
    pub fn hold_receiving(&self) -> Held {
        self.receiving.hold()
    }

    /// The tokens in force, and their reload.
    pub fn auth(&self) -> &Arc<Auth> {
        &self.auth
    }

    /// The metrics every part records into.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.validator.metrics
    }

    /// Where the adapters count requests refused before they reach the gate.
    pub fn instrument(&self) -> &Instrument {
        &self.instrument
    }

    /// The policy in force, and its reload.
    pub fn policy(&self) -> &Arc<PolicyStore> {
        &self.validator.policy
    }

    /// Re-reads the policy file. A bad file keeps the policy in force and says why.
    pub fn reload_policy(&self) -> Result<(), PolicyError> {
        self.validator.policy.reload()
    }

    /// The Prometheus exposition, with gauges refreshed.
    pub fn render_metrics(&self) -> String {
        self.validator.cache.refresh_gauges();
        self.validator.metrics.render()
    }

    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Relaxed)
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
        match self
            .validator
            .judge(check, Placement::Worker { hit_counted })
        {
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
                Ok(check) => match self.validator.judge(&check, Placement::Inline) {
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

    /// Registers a server's tools (an MCP tools/list result) on the worker pool: see
    /// [`Registry::register`].
    pub async fn register(
        self: &Arc<Self>,
        caller: &Arc<Caller>,
        server: String,
        body: Bytes,
        how: RegisterOptions,
    ) -> Result<Registration, CheckError> {
        caller.may_name(Some(&server))?;
        let by = Arc::clone(caller);
        let cost = Cost {
            checks: 1,
            bytes: body.len(),
        };
        let gate = Arc::clone(self);
        self.executor
            .run(cost, move || {
                let registration = gate.register_now(&server, &body, how)?;
                tracing::info!(
                    server = %server,
                    tools = registration.tools.len(),
                    token = by.name(),
                    "tools registered"
                );
                Ok(registration)
            })
            .await
    }

    /// Registers a server's tools on the calling thread. For use off the async runtime.
    pub fn register_now(
        &self,
        server: &str,
        body: &Bytes,
        how: RegisterOptions,
    ) -> Result<Registration, CheckError> {
        let v = &self.validator;
        v.registry.register(
            &v.cache,
            &v.policy.load(),
            v.limits.max_depth,
            server,
            body,
            how,
        )
    }
}
