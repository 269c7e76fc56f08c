//! The Prometheus series schemagate exports: their names (one place), their descriptions, and
//! pre-resolved handles so the hot path never builds a label set.
//!
//! Each [`Metrics`] owns its own recorder (no global state), so several instances in one process,
//! as in the tests, keep their figures apart. Every label a client controls (server, tool, path)
//! passes through a [`LabelFolder`]: past its bound, new values fold into `_other`.

use crate::domain::Tier;
use crate::error::CheckError;
use crate::verdict::Outcome;
use hashbrown::{Equivalent, HashMap, HashSet};
use metrics::{Counter, Gauge, Histogram, Key, Label, Metadata, Recorder, SharedString, Unit};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle, PrometheusRecorder};
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock, RwLock};
use std::time::Duration;

pub const VALIDATIONS_TOTAL: &str = "schemagate_validations_total";
pub const FIELD_FAILURES_TOTAL: &str = "schemagate_field_failures_total";
pub const VALIDATION_DURATION_SECONDS: &str = "schemagate_validation_duration_seconds";
pub const TEXT_DRIFT_TOTAL: &str = "schemagate_text_drift_total";
pub const CACHE_HITS_TOTAL: &str = "schemagate_cache_hits_total";
pub const CACHE_MISSES_TOTAL: &str = "schemagate_cache_misses_total";
pub const CACHE_EVICTIONS_TOTAL: &str = "schemagate_cache_evictions_total";
pub const CACHE_ENTRIES: &str = "schemagate_cache_entries";
pub const SCHEMA_COMPILES_TOTAL: &str = "schemagate_schema_compiles_total";
pub const SCHEMA_COMPILE_DURATION_SECONDS: &str = "schemagate_schema_compile_duration_seconds";
pub const SCHEMA_COMPILE_FAILURES_TOTAL: &str = "schemagate_schema_compile_failures_total";
pub const REQUEST_ERRORS_TOTAL: &str = "schemagate_request_errors_total";
pub const POLICY_RELOADS_TOTAL: &str = "schemagate_policy_reloads_total";
pub const SERIES_FOLDED_TOTAL: &str = "schemagate_series_folded_total";
pub const SHED_TOTAL: &str = "schemagate_shed_total";
pub const CANCELLED_TOTAL: &str = "schemagate_cancelled_total";
pub const CONNECTIONS_OPEN: &str = "schemagate_connections_open";
pub const CONNECTIONS_REFUSED_TOTAL: &str = "schemagate_connections_refused_total";
pub const CONNECTIONS_CLOSED_TOTAL: &str = "schemagate_connections_closed_total";
pub const AUTH_FAILURES_TOTAL: &str = "schemagate_auth_failures_total";
pub const REGISTRY_ERRORS_TOTAL: &str = "schemagate_registry_errors_total";
pub const REGISTRY_CONNECTED: &str = "schemagate_registry_connected";
pub const REGISTRY_RESYNCS_TOTAL: &str = "schemagate_registry_resyncs_total";
pub const PROXY_MESSAGES_TOTAL: &str = "schemagate_proxy_messages_total";

/// The `reason` values of `schemagate_auth_failures_total`.
pub const AUTH_FAILURE_REASONS: [&str; 4] = ["missing", "unknown", "scope", "server"];

/// An operation on the shared registry, the `op` of `schemagate_registry_errors_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RegistryOp {
    Write,
    ReadThrough,
    Sync,
    Subscribe,
    Remember,
}

impl RegistryOp {
    pub const ALL: [RegistryOp; 5] = [
        RegistryOp::Write,
        RegistryOp::ReadThrough,
        RegistryOp::Sync,
        RegistryOp::Subscribe,
        RegistryOp::Remember,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            RegistryOp::Write => "write",
            RegistryOp::ReadThrough => "read_through",
            RegistryOp::Sync => "sync",
            RegistryOp::Subscribe => "subscribe",
            RegistryOp::Remember => "remember",
        }
    }
}

/// Which way a message crossed `schemagate proxy`, the `direction` of
/// `schemagate_proxy_messages_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// From the MCP client to the server.
    ToServer,
    /// From the MCP server to the client.
    ToClient,
}

impl Direction {
    pub const ALL: [Direction; 2] = [Direction::ToServer, Direction::ToClient];

    pub fn as_str(self) -> &'static str {
        match self {
            Direction::ToServer => "to_server",
            Direction::ToClient => "to_client",
        }
    }
}

/// What became of a message `schemagate proxy` read, the `kind` of
/// `schemagate_proxy_messages_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Relayed {
    /// Forwarded exactly as received.
    Forwarded,
    /// Forwarded exactly as received, though it is not a JSON-RPC message (not JSON, or JSON
    /// that is not a JSON-RPC object).
    NotJsonRpc,
    /// Longer than `--max-message-bytes`: not forwarded; a request or a response awaited is
    /// answered with a JSON-RPC error instead.
    Oversized,
    /// A tool result replaced by an `isError` result carrying the verdict.
    Replaced,
    /// A request answered by schemagate without reaching the server (arguments rejected, too
    /// many calls in flight).
    Answered,
}

impl Relayed {
    pub const ALL: [Relayed; 5] = [
        Relayed::Forwarded,
        Relayed::NotJsonRpc,
        Relayed::Oversized,
        Relayed::Replaced,
        Relayed::Answered,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Relayed::Forwarded => "forwarded",
            Relayed::NotJsonRpc => "not_json_rpc",
            Relayed::Oversized => "oversized",
            Relayed::Replaced => "replaced",
            Relayed::Answered => "answered",
        }
    }
}

/// The series of `schemagate proxy`, made when a proxy runs.
pub struct ProxyMetrics {
    messages: [[Counter; Relayed::ALL.len()]; Direction::ALL.len()],
}

impl ProxyMetrics {
    pub fn count(&self, direction: Direction, what: Relayed) {
        self.messages[direction as usize][what as usize].increment(1);
    }
}

/// The shared registry's series, made when a shared registry is configured.
pub struct RegistryMetrics {
    errors: [Counter; RegistryOp::ALL.len()],
    pub connected: Gauge,
    pub resyncs: Counter,
}

impl RegistryMetrics {
    pub fn error(&self, op: RegistryOp) {
        self.errors[op as usize].increment(1);
    }
}

/// What kind of series a name is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Counter,
    Gauge,
    /// In seconds.
    Histogram,
}

/// One series: its name, kind and description (its `# HELP` line).
#[derive(Debug, Clone, Copy)]
pub struct Series {
    pub name: &'static str,
    pub kind: Kind,
    pub help: &'static str,
}

/// Every series schemagate exports: the one table names, descriptions and [`ALL`] come from.
pub const SERIES: [Series; 24] = [
    Series { name: VALIDATIONS_TOTAL, kind: Kind::Counter, help: "Checks by server, tool, tier, attempt (first|retry) and outcome (valid|invalid|skipped|tool_error|unchecked)." },
    Series { name: FIELD_FAILURES_TOTAL, kind: Kind::Counter, help: "Failing fields by server, tool, instance path (array indices folded to *) and keyword." },
    Series { name: VALIDATION_DURATION_SECONDS, kind: Kind::Histogram, help: "Time to answer one check, by transport." },
    Series { name: TEXT_DRIFT_TOTAL, kind: Kind::Counter, help: "Results whose text copy in content parses as JSON and is a different value from structuredContent." },
    Series { name: CACHE_HITS_TOTAL, kind: Kind::Counter, help: "Checks whose compiled schema was already in the cache." },
    Series { name: CACHE_MISSES_TOTAL, kind: Kind::Counter, help: "Checks that had to compile their schema." },
    Series { name: CACHE_EVICTIONS_TOTAL, kind: Kind::Counter, help: "Compiled schemas evicted for size or idleness." },
    Series { name: CACHE_ENTRIES, kind: Kind::Gauge, help: "Compiled schemas in the cache." },
    Series { name: SCHEMA_COMPILES_TOTAL, kind: Kind::Counter, help: "Schema compilations (successful or not)." },
    Series { name: SCHEMA_COMPILE_DURATION_SECONDS, kind: Kind::Histogram, help: "Time to compile one schema." },
    Series { name: SCHEMA_COMPILE_FAILURES_TOTAL, kind: Kind::Counter, help: "Schemas that did not compile (the failure is cached)." },
    Series { name: REQUEST_ERRORS_TOTAL, kind: Kind::Counter, help: "Checks refused before a verdict, by transport and error code." },
    Series { name: POLICY_RELOADS_TOTAL, kind: Kind::Counter, help: "Policy reloads by result (ok|error)." },
    Series { name: SERIES_FOLDED_TOTAL, kind: Kind::Counter, help: "Counts that went to an _other series (a label value past --metrics-label-limit, or a label combination past --metrics-series-limit), by metric family." },
    Series { name: SHED_TOTAL, kind: Kind::Counter, help: "Requests refused at once as overloaded (503 overloaded, gRPC RESOURCE_EXHAUSTED) because the work admitted was at --max-queued-checks or --max-queued-bytes, by transport." },
    Series { name: CANCELLED_TOTAL, kind: Kind::Counter, help: "Checks never started because their request went away first (client disconnected, call cancelled, deadline passed), by transport." },
    Series { name: CONNECTIONS_OPEN, kind: Kind::Gauge, help: "Open client connections, by transport." },
    Series { name: CONNECTIONS_REFUSED_TOTAL, kind: Kind::Counter, help: "Connections closed on accept because --max-connections were open, by transport." },
    Series { name: AUTH_FAILURES_TOTAL, kind: Kind::Counter, help: "Requests refused for their credentials, by transport and reason (missing: no token; unknown: a token not in force; scope: a token without the scope needed; server: a token not allowed that server)." },
    Series { name: REGISTRY_ERRORS_TOTAL, kind: Kind::Counter, help: "Failed operations on the shared registry (--registry redis://...), by op (write: a registration or removal, refused as registry_unavailable; read_through: a check's lookup of a name this replica did not hold; sync: reading changes or everything; subscribe: following changes, reconnected after; remember: sharing an inline schema's text). Only with --registry." },
    Series { name: REGISTRY_CONNECTED, kind: Kind::Gauge, help: "1 while this replica follows the shared registry's changes and has read it in full since; 0 while it reconnects (known contracts are still served; registrations may be refused). Only with --registry." },
    Series { name: REGISTRY_RESYNCS_TOTAL, kind: Kind::Counter, help: "Full reads of the shared registry: one at start-up and one after each lost subscription. Only with --registry." },
    Series { name: PROXY_MESSAGES_TOTAL, kind: Kind::Counter, help: "Messages schemagate proxy read, by direction (to_server|to_client) and kind (forwarded: as received; not_json_rpc: forwarded as received, though not a JSON-RPC message; oversized: past --max-message-bytes, not forwarded; replaced: a tool result replaced by an isError result; answered: a request answered by schemagate, not forwarded). Only in schemagate proxy." },
    Series { name: CONNECTIONS_CLOSED_TOTAL, kind: Kind::Counter, help: "Connections closed by schemagate, by transport and reason (idle: no request for --idle-timeout-secs; write_timeout: an answer not read for --write-timeout-secs)." },
];

/// Every series name, for documentation checks.
pub const ALL: [&str; SERIES.len()] = {
    let mut names = [""; SERIES.len()];
    let mut i = 0;
    while i < SERIES.len() {
        names[i] = SERIES[i].name;
        i += 1;
    }
    names
};

/// Label value for a check that names no server or tool.
pub const NONE_LABEL: &str = "_none";
/// Label value that stands for every value past a label's bound.
pub const OTHER_LABEL: &str = "_other";

const LATENCY_BUCKETS: [f64; 14] = [
    0.000_01, 0.000_025, 0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025,
    0.1, 0.25, 1.0,
];

/// Which transport a check came over; a label of the latency series.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    Rest,
    Grpc,
    /// `schemagate proxy`, on the MCP wire.
    Proxy,
}

impl Transport {
    pub const ALL: [Transport; 3] = [Transport::Rest, Transport::Grpc, Transport::Proxy];

    /// Its place in [`Transport::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Transport::Rest => "rest",
            Transport::Grpc => "grpc",
            Transport::Proxy => "proxy",
        }
    }
}

/// Whether a check is a first attempt or a retry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attempt {
    First,
    Retry,
}

impl Attempt {
    pub const ALL: [Attempt; 2] = [Attempt::First, Attempt::Retry];

    /// Its place in [`Attempt::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }

    pub fn of(attempt: u32) -> Self {
        if attempt <= 1 {
            Attempt::First
        } else {
            Attempt::Retry
        }
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Attempt::First => "first",
            Attempt::Retry => "retry",
        }
    }
}

/// Bounds the distinct values of one label.
#[derive(Debug)]
pub struct LabelFolder {
    limit: usize,
    seen: RwLock<HashSet<Arc<str>>>,
    other: Arc<str>,
}

impl LabelFolder {
    pub fn new(limit: usize) -> Self {
        Self {
            limit,
            seen: RwLock::new(HashSet::new()),
            other: Arc::from(OTHER_LABEL),
        }
    }

    /// The label value for `value`: itself while the bound allows, `_other` after.
    pub fn fold(&self, value: &str) -> Arc<str> {
        if let Ok(seen) = self.seen.read() {
            if let Some(v) = seen.get(value) {
                return Arc::clone(v);
            }
            if seen.len() >= self.limit {
                return Arc::clone(&self.other);
            }
        }
        let Ok(mut seen) = self.seen.write() else {
            return Arc::clone(&self.other);
        };
        if let Some(v) = seen.get(value) {
            return Arc::clone(v);
        }
        if seen.len() >= self.limit {
            return Arc::clone(&self.other);
        }
        let v: Arc<str> = Arc::from(value);
        seen.insert(Arc::clone(&v));
        v
    }
}

/// The validation counters of one (server, tool) pair, by tier, attempt and outcome.
type Validations = [[[Counter; Outcome::ALL.len()]; Attempt::ALL.len()]; Tier::ALL.len()];

/// The series of one (server, tool) pair, resolved once.
pub struct TargetMetrics {
    server: Arc<str>,
    tool: Arc<str>,
    validations: Validations,
    /// For the `_other` pair: counts what lands in it (see `schemagate_series_folded_total`).
    folded: Option<Counter>,
    drift: Counter,
    fields: RwLock<HashMap<(Arc<str>, String), Counter>>,
}

impl TargetMetrics {
    pub fn validation(&self, tier: Tier, attempt: Attempt, outcome: Outcome) -> &Counter {
        &self.validations[tier.index()][attempt.index()][outcome.index()]
    }

    /// Counts one check answered with a verdict.
    pub fn count(&self, tier: Tier, attempt: Attempt, outcome: Outcome) {
        self.validation(tier, attempt, outcome).increment(1);
        if let Some(folded) = &self.folded {
            folded.increment(1);
        }
    }

    pub fn drift(&self) -> &Counter {
        &self.drift
    }
}

#[derive(PartialEq, Eq, Hash)]
struct PairKey(Arc<str>, Arc<str>);
struct PairRef<'a>(&'a str, &'a str);

impl Hash for PairRef<'_> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        // Must hash exactly as `PairKey` does (Arc<str> hashes as str).
        self.0.hash(state);
        self.1.hash(state);
    }
}

impl Equivalent<PairKey> for PairRef<'_> {
    fn equivalent(&self, key: &PairKey) -> bool {
        *key.0 == *self.0 && *key.1 == *self.1
    }
}

struct FieldRef<'a>(&'a str, &'a str);

impl Hash for FieldRef<'_> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.0.hash(state);
        self.1.hash(state);
    }
}

impl Equivalent<(Arc<str>, String)> for FieldRef<'_> {
    fn equivalent(&self, key: &(Arc<str>, String)) -> bool {
        *key.0 == *self.0 && key.1 == self.1
    }
}

/// The service's metrics: a private recorder, its renderer and the resolved handles.
pub struct Metrics {
    recorder: PrometheusRecorder,
    handle: PrometheusHandle,
    servers: LabelFolder,
    tools: LabelFolder,
    paths: LabelFolder,
    targets: RwLock<HashMap<PairKey, Arc<TargetMetrics>>>,
    pub duration_rest: Histogram,
    pub duration_grpc: Histogram,
    pub duration_proxy: Histogram,
    pub cache_hits: Counter,
    pub cache_misses: Counter,
    pub cache_evictions: Counter,
    pub cache_entries: Gauge,
    pub compiles: Counter,
    pub compile_duration: Histogram,
    pub compile_failures: Counter,
    /// By transport and error code (in [`CheckError::CODES`] order): there from start-up, at zero.
    request_errors: [[Counter; CheckError::CODES.len()]; Transport::ALL.len()],
    /// `ok`, then `error`.
    policy_reloads: [Counter; 2],
    /// By transport.
    shed: [Counter; Transport::ALL.len()],
    cancelled: [Counter; Transport::ALL.len()],
    /// By transport and reason (in [`AUTH_FAILURE_REASONS`] order).
    auth_failures: [[Counter; AUTH_FAILURE_REASONS.len()]; Transport::ALL.len()],
    pub connections: [ConnectionMetrics; Transport::ALL.len()],
    /// (server, tool) pairs that may have series of their own (`--metrics-series-limit` over the
    /// 30 series of a pair, one pair's worth kept for `_other`).
    pair_budget: SeriesBudget,
    /// Field-failure label combinations that may have a series of their own.
    field_budget: SeriesBudget,
    /// What counts under `_other` in each family, for `schemagate_series_folded_total`.
    folded_validations: Counter,
    folded_fields: Counter,
    /// The one field-failure series past the budget (every label `_other`), made on first use.
    other_field: OnceLock<Counter>,
    registry: OnceLock<RegistryMetrics>,
    proxy: OnceLock<ProxyMetrics>,
}

/// The connection series of one transport.
pub struct ConnectionMetrics {
    pub open: Gauge,
    pub refused: Counter,
    pub closed_idle: Counter,
    pub closed_write_timeout: Counter,
}

/// How many more label combinations a family may create.
struct SeriesBudget {
    used: AtomicUsize,
    limit: usize,
}

impl SeriesBudget {
    fn new(limit: usize) -> Self {
        Self {
            used: AtomicUsize::new(0),
            limit,
        }
    }

    /// Takes one combination; `false` once the budget is spent.
    fn take(&self) -> bool {
        self.used
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |used| {
                (used < self.limit).then_some(used + 1)
            })
            .is_ok()
    }
}

static METADATA: Metadata<'static> =
    Metadata::new(module_path!(), metrics::Level::INFO, Some(module_path!()));

impl Metrics {
    /// A fresh set of series; `label_limit` bounds each client-controlled label and
    /// `series_limit` the label combinations of each family those labels appear in.
    pub fn new(label_limit: usize, series_limit: usize) -> Self {
        let recorder = PrometheusBuilder::new()
            .set_buckets(&LATENCY_BUCKETS)
            .unwrap_or_else(|_| PrometheusBuilder::new())
            .build_recorder();
        let handle = recorder.handle();
        describe(&recorder);
        let counter = |name: &'static str, labels: Vec<Label>| {
            recorder.register_counter(&Key::from_parts(name, labels), &METADATA)
        };
        let histogram = |name: &'static str, labels: Vec<Label>| {
            recorder.register_histogram(&Key::from_parts(name, labels), &METADATA)
        };
        let transport = |t: Transport| vec![Label::new("transport", t.as_str())];
        let request_errors = Transport::ALL.map(|t| {
            CheckError::CODES.map(|code| {
                counter(
                    REQUEST_ERRORS_TOTAL,
                    vec![
                        Label::new("transport", t.as_str()),
                        Label::new("code", code),
                    ],
                )
            })
        });
        let policy_reloads = ["ok", "error"]
            .map(|result| counter(POLICY_RELOADS_TOTAL, vec![Label::new("result", result)]));
        let folded =
            |family: &'static str| counter(SERIES_FOLDED_TOTAL, vec![Label::new("family", family)]);
        let shed = Transport::ALL.map(|t| counter(SHED_TOTAL, transport(t)));
        let cancelled = Transport::ALL.map(|t| counter(CANCELLED_TOTAL, transport(t)));
        let auth_failures = Transport::ALL.map(|t| {
            AUTH_FAILURE_REASONS.map(|reason| {
                counter(
                    AUTH_FAILURES_TOTAL,
                    vec![
                        Label::new("transport", t.as_str()),
                        Label::new("reason", reason),
                    ],
                )
            })
        });
        let connections = Transport::ALL.map(|t| {
            let closed = |reason: &'static str| {
                counter(
                    CONNECTIONS_CLOSED_TOTAL,
                    vec![
                        Label::new("transport", t.as_str()),
                        Label::new("reason", reason),
                    ],
                )
            };
            ConnectionMetrics {
                open: recorder
                    .register_gauge(&Key::from_parts(CONNECTIONS_OPEN, transport(t)), &METADATA),
                refused: counter(CONNECTIONS_REFUSED_TOTAL, transport(t)),
                closed_idle: closed("idle"),
                closed_write_timeout: closed("write_timeout"),
            }
        });
        let per_pair = Tier::ALL.len() * Attempt::ALL.len() * Outcome::ALL.len();
        Metrics {
            request_errors,
            policy_reloads,
            shed,
            cancelled,
            auth_failures,
            connections,
            pair_budget: SeriesBudget::new((series_limit / per_pair).saturating_sub(1)),
            field_budget: SeriesBudget::new(series_limit.saturating_sub(1)),
            folded_validations: folded(VALIDATIONS_TOTAL),
            folded_fields: folded(FIELD_FAILURES_TOTAL),
            other_field: OnceLock::new(),
            registry: OnceLock::new(),
            proxy: OnceLock::new(),
            duration_rest: histogram(VALIDATION_DURATION_SECONDS, transport(Transport::Rest)),
            duration_grpc: histogram(VALIDATION_DURATION_SECONDS, transport(Transport::Grpc)),
            duration_proxy: histogram(VALIDATION_DURATION_SECONDS, transport(Transport::Proxy)),
            cache_hits: counter(CACHE_HITS_TOTAL, vec![]),
            cache_misses: counter(CACHE_MISSES_TOTAL, vec![]),
            cache_evictions: counter(CACHE_EVICTIONS_TOTAL, vec![]),
            cache_entries: recorder.register_gauge(&Key::from_name(CACHE_ENTRIES), &METADATA),
            compiles: counter(SCHEMA_COMPILES_TOTAL, vec![]),
            compile_duration: histogram(SCHEMA_COMPILE_DURATION_SECONDS, vec![]),
            compile_failures: counter(SCHEMA_COMPILE_FAILURES_TOTAL, vec![]),
            servers: LabelFolder::new(label_limit),
            tools: LabelFolder::new(label_limit),
            paths: LabelFolder::new(label_limit),
            targets: RwLock::new(HashMap::new()),
            recorder,
            handle,
        }
    }

    /// The shared registry's series, made (at zero) on first use.
    pub fn registry(&self) -> &RegistryMetrics {
        self.registry.get_or_init(|| RegistryMetrics {
            errors: RegistryOp::ALL.map(|op| {
                self.recorder.register_counter(
                    &Key::from_parts(REGISTRY_ERRORS_TOTAL, vec![Label::new("op", op.as_str())]),
                    &METADATA,
                )
            }),
            connected: self
                .recorder
                .register_gauge(&Key::from_name(REGISTRY_CONNECTED), &METADATA),
            resyncs: self
                .recorder
                .register_counter(&Key::from_name(REGISTRY_RESYNCS_TOTAL), &METADATA),
        })
    }

    /// The proxy's series, made (at zero) on first use.
    pub fn proxy(&self) -> &ProxyMetrics {
        self.proxy.get_or_init(|| ProxyMetrics {
            messages: Direction::ALL.map(|direction| {
                Relayed::ALL.map(|what| {
                    self.recorder.register_counter(
                        &Key::from_parts(
                            PROXY_MESSAGES_TOTAL,
                            vec![
                                Label::new("direction", direction.as_str()),
                                Label::new("kind", what.as_str()),
                            ],
                        ),
                        &METADATA,
                    )
                })
            }),
        })
    }

    /// The Prometheus text exposition of every series.
    pub fn render(&self) -> String {
        self.handle.render()
    }

    /// Folds the histogram samples recorded since the last fold into their buckets. The exporter
    /// keeps each sample until then, so without this (or a scrape) memory would grow with every
    /// check; [`Metrics::keep_up`] runs it on a timer.
    pub fn run_upkeep(&self) {
        self.handle.run_upkeep();
    }

    /// Runs [`Metrics::run_upkeep`] every `interval` on a thread of its own, for as long as
    /// `metrics` lives.
    pub fn keep_up(metrics: &Arc<Metrics>, interval: Duration) -> std::io::Result<()> {
        let weak = Arc::downgrade(metrics);
        std::thread::Builder::new()
            .name("schemagate-upkeep".into())
            .spawn(move || loop {
                std::thread::sleep(interval);
                match weak.upgrade() {
                    Some(metrics) => metrics.run_upkeep(),
                    None => break,
                }
            })
            .map(drop)
    }

    pub fn duration(&self, transport: Transport) -> &Histogram {
        match transport {
            Transport::Rest => &self.duration_rest,
            Transport::Grpc => &self.duration_grpc,
            Transport::Proxy => &self.duration_proxy,
        }
    }

    /// The resolved series for a server and tool (`None` labels as `_none`).
    pub fn target(&self, server: Option<&str>, tool: Option<&str>) -> Arc<TargetMetrics> {
        let server = server.unwrap_or(NONE_LABEL);
        let tool = tool.unwrap_or(NONE_LABEL);
        if let Ok(targets) = self.targets.read() {
            if let Some(t) = targets.get(&PairRef(server, tool)) {
                return Arc::clone(t);
            }
        }
        let server_label = self.servers.fold(server);
        let tool_label = self.tools.fold(tool);
        let target = self.resolve_target(server_label, tool_label);
        // Only pairs whose names were kept are remembered by their raw names, so the map stays
        // within the labels' bounds.
        if *target.server == *server && *target.tool == *tool {
            if let Ok(mut targets) = self.targets.write() {
                targets.insert(
                    PairKey(Arc::from(server), Arc::from(tool)),
                    Arc::clone(&target),
                );
            }
        }
        target
    }

    fn resolve_target(&self, server: Arc<str>, tool: Arc<str>) -> Arc<TargetMetrics> {
        if let Ok(targets) = self.targets.read() {
            if let Some(t) = targets.get(&PairRef(&server, &tool)) {
                return Arc::clone(t);
            }
        }
        // Past the family's bound, new pairs share the `_other` pair's series.
        let other = *server == *OTHER_LABEL && *tool == *OTHER_LABEL;
        if !other && !self.pair_budget.take() {
            return self.resolve_target(Arc::from(OTHER_LABEL), Arc::from(OTHER_LABEL));
        }
        let validations: Validations = Tier::ALL.map(|tier| {
            Attempt::ALL.map(|attempt| {
                Outcome::ALL.map(|outcome| {
                    let labels = vec![
                        Label::new("server", SharedString::from(server.to_string())),
                        Label::new("tool", SharedString::from(tool.to_string())),
                        Label::new("tier", tier.as_str()),
                        Label::new("attempt", attempt.as_str()),
                        Label::new("outcome", outcome.as_str()),
                    ];
                    self.recorder
                        .register_counter(&Key::from_parts(VALIDATIONS_TOTAL, labels), &METADATA)
                })
            })
        });
        let drift = self.recorder.register_counter(
            &Key::from_parts(
                TEXT_DRIFT_TOTAL,
                vec![
                    Label::new("server", server.to_string()),
                    Label::new("tool", tool.to_string()),
                ],
            ),
            &METADATA,
        );
        let target = Arc::new(TargetMetrics {
            server: Arc::clone(&server),
            tool: Arc::clone(&tool),
            validations,
            folded: other.then(|| self.folded_validations.clone()),
            drift,
            fields: RwLock::new(HashMap::new()),
        });
        if let Ok(mut targets) = self.targets.write() {
            return Arc::clone(
                targets
                    .entry(PairKey(server, tool))
                    .or_insert_with(|| Arc::clone(&target)),
            );
        }
        target
    }

    /// Counts one failing field of `target` (the path already folded to `*` indices).
    pub fn field_failure(&self, target: &TargetMetrics, path: &str, keyword: &str) {
        if let Ok(fields) = target.fields.read() {
            if let Some(c) = fields.get(&FieldRef(path, keyword)) {
                c.increment(1);
                return;
            }
        }
        let path_label = self.paths.fold(path);
        // A path past its label bound is kept under `_other`: look that up before taking a new
        // combination from the family's budget.
        if let Ok(fields) = target.fields.read() {
            if let Some(c) = fields.get(&FieldRef(&path_label, keyword)) {
                c.increment(1);
                return;
            }
        }
        if !self.field_budget.take() {
            self.folded_fields.increment(1);
            let other = self.other_field.get_or_init(|| {
                let labels = ["server", "tool", "path", "keyword"]
                    .map(|name| Label::new(name, OTHER_LABEL))
                    .to_vec();
                self.recorder
                    .register_counter(&Key::from_parts(FIELD_FAILURES_TOTAL, labels), &METADATA)
            });
            other.increment(1);
            return;
        }
        let counter = self.recorder.register_counter(
            &Key::from_parts(
                FIELD_FAILURES_TOTAL,
                vec![
                    Label::new("server", target.server.to_string()),
                    Label::new("tool", target.tool.to_string()),
                    Label::new("path", path_label.to_string()),
                    Label::new("keyword", keyword.to_owned()),
                ],
            ),
            &METADATA,
        );
        counter.increment(1);
        if let Ok(mut fields) = target.fields.write() {
            fields.insert((path_label, keyword.to_owned()), counter);
        }
    }

    /// Counts a refused check.
    pub fn request_error(&self, transport: Transport, error: &CheckError) {
        self.request_errors[transport.index()][error.code_index()].increment(1);
    }

    /// Counts a request refused as overloaded.
    pub fn shed(&self, transport: Transport) {
        self.shed[transport.index()].increment(1);
    }

    /// Counts a request refused for its credentials (other errors are not counted here).
    pub fn auth_failure(&self, transport: Transport, error: &CheckError) {
        use crate::error::{Denied, Unauthenticated};
        let reason = match error {
            CheckError::Unauthenticated(Unauthenticated::Missing) => 0,
            CheckError::Unauthenticated(Unauthenticated::Unknown) => 1,
            CheckError::Forbidden {
                denied: Denied::Scope(_),
                ..
            } => 2,
            CheckError::Forbidden {
                denied: Denied::Server { .. },
                ..
            } => 3,
            _ => return,
        };
        self.auth_failures[transport.index()][reason].increment(1);
    }

    /// Counts checks never started because their request went away.
    pub fn cancelled(&self, transport: Transport, checks: usize) {
        self.cancelled[transport.index()].increment(checks as u64);
    }

    /// Counts a policy reload, `ok` or `error`.
    pub fn policy_reload(&self, ok: bool) {
        self.policy_reloads[usize::from(!ok)].increment(1);
    }
}

fn describe(recorder: &PrometheusRecorder) {
    for series in SERIES {
        let (name, help) = (series.name.into(), series.help.into());
        match series.kind {
            Kind::Counter => recorder.describe_counter(name, None, help),
            Kind::Gauge => recorder.describe_gauge(name, None, help),
            Kind::Histogram => recorder.describe_histogram(name, Some(Unit::Seconds), help),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_fold_past_their_bound() {
        let folder = LabelFolder::new(2);
        assert_eq!(&*folder.fold("a"), "a");
        assert_eq!(&*folder.fold("b"), "b");
        assert_eq!(&*folder.fold("c"), OTHER_LABEL);
        assert_eq!(&*folder.fold("a"), "a");
    }

    #[test]
    fn targets_render_with_their_labels() {
        let metrics = Metrics::new(1, 10_000);
        let t = metrics.target(Some("crm"), Some("get"));
        t.validation(Tier::Untrusted, Attempt::Retry, Outcome::Invalid)
            .increment(2);
        let other = metrics.target(Some("shop"), Some("buy"));
        other
            .validation(Tier::Trusted, Attempt::First, Outcome::Skipped)
            .increment(1);
        metrics.field_failure(&t, "/items/*/id", "type");
        let text = metrics.render();
        assert!(text.contains(r#"schemagate_validations_total{server="crm",tool="get",tier="untrusted",attempt="retry",outcome="invalid"} 2"#), "{text}");
        assert!(text.contains(r#"schemagate_validations_total{server="_other",tool="_other",tier="trusted",attempt="first",outcome="skipped"} 1"#), "{text}");
        assert!(text.contains(r#"schemagate_field_failures_total{server="crm",tool="get",path="/items/*/id",keyword="type"} 1"#), "{text}");
    }

    #[test]
    fn label_combinations_fold_past_the_series_limit() {
        // 30 series per pair: room for 2 pairs of their own plus the `_other` pair.
        let metrics = Metrics::new(1_000, 90);
        for i in 0..50 {
            let t = metrics.target(Some(&format!("s{i}")), Some(&format!("t{i}")));
            t.count(Tier::Untrusted, Attempt::First, Outcome::Valid);
            metrics.field_failure(&t, &format!("/f{i}"), "type");
        }
        let text = metrics.render();
        let pairs: std::collections::BTreeSet<&str> = text
            .lines()
            .filter(|l| l.starts_with("schemagate_validations_total{"))
            .filter_map(|l| l.split(",tier=").next())
            .collect();
        assert_eq!(pairs.len(), 3, "{pairs:?}");
        assert!(text.contains(r#"schemagate_validations_total{server="_other",tool="_other",tier="untrusted",attempt="first",outcome="valid"} 48"#), "{text}");
        let fields = text
            .lines()
            .filter(|l| l.starts_with("schemagate_field_failures_total{"))
            .count();
        assert!(fields <= 90, "{fields}");
        assert!(
            text.contains(
                r#"schemagate_series_folded_total{family="schemagate_validations_total"} 48"#
            ),
            "{text}"
        );
    }

    #[test]
    fn a_repeated_folded_path_takes_one_combination() {
        // One path value kept; every other path folds to `_other`, which is one combination
        // however often it recurs: 200 of them do not spend a budget of 59 field series.
        let metrics = Metrics::new(1, 60);
        let t = metrics.target(Some("crm"), Some("get"));
        metrics.field_failure(&t, "/a", "type");
        for i in 0..200 {
            metrics.field_failure(&t, &format!("/p{i}"), "type");
        }
        metrics.field_failure(&t, "/a", "format");
        let text = metrics.render();
        assert!(text.contains(r#"schemagate_field_failures_total{server="crm",tool="get",path="_other",keyword="type"} 200"#), "{text}");
        assert!(text.contains(r#"schemagate_field_failures_total{server="crm",tool="get",path="/a",keyword="format"} 1"#), "{text}");
        assert!(
            !text.contains(r#"family="schemagate_field_failures_total"} 1"#),
            "{text}"
        );
    }

    #[test]
    fn error_and_reload_counters_exist_from_the_start() {
        let metrics = Metrics::new(10, 10_000);
        metrics.request_error(Transport::Grpc, &CheckError::MissingPayload);
        metrics.policy_reload(false);
        let text = metrics.render();
        assert!(
            text.contains(
                r#"schemagate_request_errors_total{transport="rest",code="schema_invalid"} 0"#
            ),
            "{text}"
        );
        assert!(
            text.contains(
                r#"schemagate_request_errors_total{transport="grpc",code="missing_payload"} 1"#
            ),
            "{text}"
        );
        assert!(
            text.contains(r#"schemagate_policy_reloads_total{result="ok"} 0"#),
            "{text}"
        );
        assert!(
            text.contains(r#"schemagate_policy_reloads_total{result="error"} 1"#),
            "{text}"
        );
    }
}
