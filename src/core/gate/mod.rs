//! Where a check runs: the entry points every transport calls. The gate puts the synchronous
//! [`Judge`] to work in place when a check is cheap (its schema cached, its work small: the
//! common case and the fast one) and on the [`Executor`]'s worker pool otherwise (a compile, a
//! large payload, a batch), and records each request once through the [`Instrument`].
//! Registrations, their changes, pins, histories and shadow schemas are its other door
//! ([`registrations`]).

mod registrations;

use crate::core::auth::{Auth, Caller};
use crate::core::check::Check;
use crate::core::error::CheckError;
pub use crate::core::executor::{Admit, QueueLimits};
use crate::core::executor::{Cost, Executor};
use crate::core::instrument::Instrument;
use crate::core::judge::{guarded, Deferred, Judge, Parts, Placement};
use crate::core::metrics::{Metrics, Transport};
use crate::core::policy::{Policy, PolicyError, PolicyStore};
use crate::core::receiving::{Held, Receiving};
use crate::core::registry::redis::{RedisConfig, RedisRegistry};
use crate::core::registry::Registry;
use crate::core::schema::cache::{CacheConfig, SchemaCache};
use crate::core::schema::texts::SchemaTexts;
use crate::core::verdict::Verdict;
use crate::core::Limits;
use crate::ops::reload;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;
use tokio_util::sync::CancellationToken;

/// A check of [`Gate::check_one`], judged where it was read, or sent to the worker pool (the
/// answer to come: the check is queued when it is first awaited, and dropping it stops the check
/// if not started).
enum Judged<'a> {
    Now(Result<Verdict, CheckError>),
    OnWorker(
        std::pin::Pin<
            Box<dyn std::future::Future<Output = Result<Verdict, CheckError>> + Send + 'a>,
        >,
    ),
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
    /// What the gate shares with its judge: limits, policy, cache, registry, texts, metrics.
    parts: Arc<Parts>,
    /// Shared by the sessions made from this gate ([`Gate::session`]); its workers stop when
    /// the last holder goes.
    executor: Arc<Executor>,
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
        let parts = Arc::new(Parts {
            limits,
            policy,
            cache,
            registry,
            texts,
            shared,
            metrics: Arc::clone(&metrics),
        });
        let executor = Arc::new(Executor::new(config.worker_threads, config.queue)?);
        let receiving = Receiving::new(config.max_receiving_bytes);
        Ok(Gate::assemble(
            parts,
            executor,
            receiving,
            Arc::new(config.auth),
        ))
    }

    /// A gate over `parts`, its judge and its counts made from them.
    fn assemble(
        parts: Arc<Parts>,
        executor: Arc<Executor>,
        receiving: Arc<Receiving>,
        auth: Arc<Auth>,
    ) -> Arc<Gate> {
        Arc::new(Gate {
            judge: Judge::new(Arc::clone(&parts)),
            instrument: Instrument::new(Arc::clone(&parts.metrics)),
            parts,
            executor,
            receiving,
            registering: tokio::sync::Mutex::new(()),
            auth,
            ready: AtomicBool::new(true),
        })
    }

    /// A core for one session replayed offline (`schemagate check --format jsonrpc`): a registry
    /// of its own, seeded with this gate's contracts, so that what the session lists judges only
    /// it; the policy, the compiled schemas, the schema texts, the metrics and the workers shared
    /// with this gate, so that no schema is compiled twice and no thread started per session.
    pub fn session(&self) -> Arc<Gate> {
        let parts = Arc::new(Parts {
            limits: self.parts.limits,
            policy: Arc::clone(&self.parts.policy),
            cache: Arc::clone(&self.parts.cache),
            registry: Arc::new(Registry::seeded_from(&self.parts.registry)),
            texts: Arc::clone(&self.parts.texts),
            shared: None,
            metrics: Arc::clone(&self.parts.metrics),
        });
        Gate::assemble(
            parts,
            Arc::clone(&self.executor),
            Arc::clone(&self.receiving),
            Arc::clone(&self.auth),
        )
    }

    pub fn limits(&self) -> &Limits {
        &self.parts.limits
    }

    /// Whether [`Gate::check_one`] reads a payload of `size` bytes on the caller's task (larger
    /// ones are read on the check's workers).
    pub fn reads_inline(&self, size: usize) -> bool {
        size <= INLINE_PARSE_BYTES
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
        &self.parts.metrics
    }

    /// Where the adapters count requests refused before they reach the gate.
    pub fn instrument(&self) -> &Instrument {
        &self.instrument
    }

    /// The policy in force, and its reload.
    pub fn policy(&self) -> &Arc<PolicyStore> {
        &self.parts.policy
    }

    /// Re-reads the policy file. A bad file keeps the policy in force and says why.
    pub fn reload_policy(&self) -> Result<(), PolicyError> {
        self.parts.policy.reload()
    }

    /// The Prometheus exposition, with gauges refreshed.
    pub fn render_metrics(&self) -> String {
        self.parts.cache.refresh_gauges();
        self.parts.metrics.render()
    }

    /// Ready: not draining, and with a shared registry, read in full once.
    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Relaxed)
            && self
                .parts
                .shared
                .as_ref()
                .is_none_or(|s| s.synced().is_cancelled())
    }

    /// Starts following the shared registry, if one is configured, until `stop`.
    pub fn start(&self, stop: CancellationToken) {
        if let Some(shared) = &self.parts.shared {
            shared.start(stop);
        }
    }

    /// Reloads the policy file and the token file (those configured) when their content changes
    /// (polled every `poll_secs`; 0: never) and, when `sighup`, on SIGHUP, until `stop`.
    pub fn watch_files(&self, poll_secs: u64, sighup: bool, stop: &CancellationToken) {
        if let Some(path) = self.parts.policy.path() {
            let policy = Arc::clone(&self.parts.policy);
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
        if let Some(shared) = &self.parts.shared {
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
        let result = self.judge_on_worker(check, &Caller::open(), false);
        self.instrument.checked(transport, start, &result);
        result
    }

    /// The judgement of a check on a worker (a thread that may block).
    fn judge_on_worker(
        &self,
        check: &Check,
        caller: &Caller,
        hit_counted: bool,
    ) -> Result<Verdict, CheckError> {
        match self
            .judge
            .judge(check, caller, Placement::Worker { hit_counted })
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
        // The workers' path is boxed: it is the rare one, and its state (the check, the queue's)
        // would otherwise be carried in every check's future, and copied at each await of the
        // futures it is part of. An inline check is judged before the one await.
        let judged = if self.reads_inline(size_hint) {
            match guarded(|| read(self.limits())).and_then(|check| {
                caller.may_name(check.server.as_deref())?;
                Ok(check)
            }) {
                Err(e) => Judged::Now(Err(e)),
                Ok(check) => match self.judge.judge(&check, caller, Placement::Inline) {
                    Ok(verdict) => Judged::Now(Ok(verdict)),
                    Err(Deferred::Refused(e)) => Judged::Now(Err(e)),
                    Err(Deferred::ToWorker { hit_counted }) => {
                        let (gate, caller) = (Arc::clone(self), Arc::clone(caller));
                        Judged::OnWorker(Box::pin(self.executor.run(cost, move || {
                            gate.judge_on_worker(&check, &caller, hit_counted)
                        })))
                    }
                },
            }
        } else {
            let (gate, caller) = (Arc::clone(self), Arc::clone(caller));
            Judged::OnWorker(Box::pin(self.executor.run(cost, move || {
                let check = guarded(|| read(gate.limits()))?;
                caller.may_name(check.server.as_deref())?;
                gate.judge_on_worker(&check, &caller, false)
            })))
        };
        let result = match judged {
            Judged::Now(result) => result,
            Judged::OnWorker(answer) => answer.await,
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
                        gate.judge_on_worker(&check, &caller, false)
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
}
