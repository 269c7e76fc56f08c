//! The Prometheus series schemagate exports: their names (one place), their descriptions, and
//! pre-resolved handles so the hot path never builds a label set.
//!
//! Each [`Metrics`] owns its own recorder (no global state), so several instances in one process,
//! as in the tests, keep their figures apart. Every label a client controls (server, tool, path)
//! passes through a [`LabelFolder`]: past its bound, new values fold into `_other`.

mod labels;
mod names;

pub use labels::{Attempt, LabelFolder, RegistryOp, Transport};
pub use names::*;

use crate::core::check::PayloadKind;
use crate::core::domain::Tier;
use crate::core::error::CheckError;
use crate::core::verdict::Outcome;
use hashbrown::{Equivalent, HashMap};
use metrics::{Counter, Gauge, Histogram, Key, Label, Metadata, Recorder, SharedString, Unit};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle, PrometheusRecorder};
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock, RwLock};
use std::time::Duration;

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

const LATENCY_BUCKETS: [f64; 14] = [
    0.000_01, 0.000_025, 0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025,
    0.1, 0.25, 1.0,
];

/// The validation counters of one (server, tool) pair, by tier, payload, attempt and outcome.
type Validations = [[[[Counter; Outcome::ALL.len()]; Attempt::ALL.len()]; PayloadKind::ALL.len()];
    Tier::ALL.len()];

/// Series of `schemagate_validations_total` one (server, tool) pair takes.
pub const SERIES_PER_PAIR: usize =
    Tier::ALL.len() * PayloadKind::ALL.len() * Attempt::ALL.len() * Outcome::ALL.len();

/// One payload's failing fields: (path, keyword) -> its counter.
type FieldCounters = HashMap<(Arc<str>, String), Counter>;

/// The series of one (server, tool) pair, resolved once.
pub struct TargetMetrics {
    server: Arc<str>,
    tool: Arc<str>,
    validations: Validations,
    /// For the `_other` pair: counts what lands in it (see `schemagate_series_folded_total`).
    folded: Option<Counter>,
    drift: Counter,
    /// By payload.
    fields: [RwLock<FieldCounters>; PayloadKind::ALL.len()],
}

impl TargetMetrics {
    pub fn validation(
        &self,
        tier: Tier,
        payload: PayloadKind,
        attempt: Attempt,
        outcome: Outcome,
    ) -> &Counter {
        &self.validations[tier.index()][payload.index()][attempt.index()][outcome.index()]
    }

    /// Counts one check answered with a verdict.
    pub fn count(&self, tier: Tier, payload: PayloadKind, attempt: Attempt, outcome: Outcome) {
        self.validation(tier, payload, attempt, outcome)
            .increment(1);
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
    durations: [Histogram; Transport::ALL.len()],
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
    /// [`SERIES_PER_PAIR`] series of a pair, one pair's worth kept for `_other`).
    pair_budget: SeriesBudget,
    /// Field-failure label combinations that may have a series of their own.
    field_budget: SeriesBudget,
    /// What counts under `_other` in each family, for `schemagate_series_folded_total`.
    folded_validations: Counter,
    folded_fields: Counter,
    /// The one field-failure series past the budget (every label `_other`), made on first use.
    other_field: OnceLock<Counter>,
    registry: OnceLock<RegistryMetrics>,
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
        let connections = Transport::ALL.map(|t| connection_series(&recorder, t));
        Metrics {
            request_errors,
            policy_reloads,
            shed,
            cancelled,
            auth_failures,
            connections,
            pair_budget: SeriesBudget::new((series_limit / SERIES_PER_PAIR).saturating_sub(1)),
            field_budget: SeriesBudget::new(series_limit.saturating_sub(1)),
            folded_validations: folded(VALIDATIONS_TOTAL),
            folded_fields: folded(FIELD_FAILURES_TOTAL),
            other_field: OnceLock::new(),
            registry: OnceLock::new(),
            durations: Transport::ALL.map(|t| histogram(VALIDATION_DURATION_SECONDS, transport(t))),
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

    /// A counter of a family whose labels the caller fixes (not client-controlled), made at
    /// zero: how layers outside the core (the MCP relay's message counts) add their series to
    /// this exposition.
    pub fn counter(&self, name: &'static str, labels: &[(&'static str, &'static str)]) -> Counter {
        let labels = labels
            .iter()
            .map(|&(k, v)| Label::new(k, v))
            .collect::<Vec<_>>();
        self.recorder
            .register_counter(&Key::from_parts(name, labels), &METADATA)
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
        &self.durations[transport.index()]
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
            PayloadKind::ALL.map(|payload| {
                Attempt::ALL.map(|attempt| {
                    Outcome::ALL.map(|outcome| {
                        let labels = vec![
                            Label::new("server", SharedString::from(server.to_string())),
                            Label::new("tool", SharedString::from(tool.to_string())),
                            Label::new("tier", tier.as_str()),
                            Label::new("payload", payload.as_str()),
                            Label::new("attempt", attempt.as_str()),
                            Label::new("outcome", outcome.as_str()),
                        ];
                        self.recorder.register_counter(
                            &Key::from_parts(VALIDATIONS_TOTAL, labels),
                            &METADATA,
                        )
                    })
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
            fields: Default::default(),
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

    /// Counts one failing field of `target`'s `payload` (the path already folded to `*`
    /// indices).
    pub fn field_failure(
        &self,
        target: &TargetMetrics,
        payload: PayloadKind,
        path: &str,
        keyword: &str,
    ) {
        let fields_of = &target.fields[payload.index()];
        if let Ok(fields) = fields_of.read() {
            if let Some(c) = fields.get(&FieldRef(path, keyword)) {
                c.increment(1);
                return;
            }
        }
        let path_label = self.paths.fold(path);
        // A path past its label bound is kept under `_other`: look that up before taking a new
        // combination from the family's budget.
        if let Ok(fields) = fields_of.read() {
            if let Some(c) = fields.get(&FieldRef(&path_label, keyword)) {
                c.increment(1);
                return;
            }
        }
        if !self.field_budget.take() {
            self.folded_fields.increment(1);
            let other = self.other_field.get_or_init(|| {
                let labels = ["server", "tool", "payload", "path", "keyword"]
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
                    Label::new("payload", payload.as_str()),
                    Label::new("path", path_label.to_string()),
                    Label::new("keyword", keyword.to_owned()),
                ],
            ),
            &METADATA,
        );
        counter.increment(1);
        if let Ok(mut fields) = fields_of.write() {
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
        use crate::core::error::{Denied, Unauthenticated};
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
    /// Counts one changed part (`schema`: output, input or annotations) of a registered tool,
    /// with its class. Server and tool fold as checks' do.
    pub fn contract_change(
        &self,
        server: &str,
        tool: &str,
        schema: &'static str,
        class: &'static str,
    ) {
        let target = self.target(Some(server), Some(tool));
        let labels = vec![
            Label::new("server", target.server.to_string()),
            Label::new("tool", target.tool.to_string()),
            Label::new("schema", schema),
            Label::new("class", class),
        ];
        self.recorder
            .register_counter(&Key::from_parts(CONTRACT_CHANGES_TOTAL, labels), &METADATA)
            .increment(1);
    }

    /// Counts one check judged by its tool's shadow schema as well, by how the candidate judged
    /// it.
    pub fn shadow_validation(&self, target: &TargetMetrics, valid: bool) {
        let labels = vec![
            Label::new("server", target.server.to_string()),
            Label::new("tool", target.tool.to_string()),
            Label::new("outcome", if valid { "valid" } else { "invalid" }),
        ];
        self.recorder
            .register_counter(
                &Key::from_parts(SHADOW_VALIDATIONS_TOTAL, labels),
                &METADATA,
            )
            .increment(1);
    }

    pub fn policy_reload(&self, ok: bool) {
        self.policy_reloads[usize::from(!ok)].increment(1);
    }
}

/// The connection series of transport `t`.
fn connection_series(recorder: &PrometheusRecorder, t: Transport) -> ConnectionMetrics {
    let labels = |reason: Option<&'static str>| {
        let mut labels = vec![Label::new("transport", t.as_str())];
        labels.extend(reason.map(|r| Label::new("reason", r)));
        labels
    };
    let counter = |name: &'static str, labels: Vec<Label>| {
        recorder.register_counter(&Key::from_parts(name, labels), &METADATA)
    };
    ConnectionMetrics {
        open: recorder.register_gauge(&Key::from_parts(CONNECTIONS_OPEN, labels(None)), &METADATA),
        refused: counter(CONNECTIONS_REFUSED_TOTAL, labels(None)),
        closed_idle: counter(CONNECTIONS_CLOSED_TOTAL, labels(Some("idle"))),
        closed_write_timeout: counter(CONNECTIONS_CLOSED_TOTAL, labels(Some("write_timeout"))),
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
        t.validation(
            Tier::Untrusted,
            PayloadKind::Result,
            Attempt::Retry,
            Outcome::Invalid,
        )
        .increment(2);
        let other = metrics.target(Some("shop"), Some("buy"));
        other
            .validation(
                Tier::Trusted,
                PayloadKind::Arguments,
                Attempt::First,
                Outcome::Skipped,
            )
            .increment(1);
        metrics.field_failure(&t, PayloadKind::Result, "/items/*/id", "type");
        let text = metrics.render();
        assert!(text.contains(r#"schemagate_validations_total{server="crm",tool="get",tier="untrusted",payload="result",attempt="retry",outcome="invalid"} 2"#), "{text}");
        assert!(text.contains(r#"schemagate_validations_total{server="crm",tool="get",tier="untrusted",payload="arguments",attempt="retry",outcome="invalid"} 0"#), "{text}");
        assert!(text.contains(r#"schemagate_validations_total{server="_other",tool="_other",tier="trusted",payload="arguments",attempt="first",outcome="skipped"} 1"#), "{text}");
        assert!(text.contains(r#"schemagate_field_failures_total{server="crm",tool="get",payload="result",path="/items/*/id",keyword="type"} 1"#), "{text}");
    }

    #[test]
    fn label_combinations_fold_past_the_series_limit() {
        // 90 series per pair: room for 2 pairs of their own plus the `_other` pair.
        let metrics = Metrics::new(1_000, 3 * SERIES_PER_PAIR);
        for i in 0..50 {
            let t = metrics.target(Some(&format!("s{i}")), Some(&format!("t{i}")));
            t.count(
                Tier::Untrusted,
                PayloadKind::Instance,
                Attempt::First,
                Outcome::Valid,
            );
            metrics.field_failure(&t, PayloadKind::Instance, &format!("/f{i}"), "type");
        }
        let text = metrics.render();
        let pairs: std::collections::BTreeSet<&str> = text
            .lines()
            .filter(|l| l.starts_with("schemagate_validations_total{"))
            .filter_map(|l| l.split(",tier=").next())
            .collect();
        assert_eq!(pairs.len(), 3, "{pairs:?}");
        assert!(text.contains(r#"schemagate_validations_total{server="_other",tool="_other",tier="untrusted",payload="instance",attempt="first",outcome="valid"} 48"#), "{text}");
        let fields = text
            .lines()
            .filter(|l| l.starts_with("schemagate_field_failures_total{"))
            .count();
        assert!(fields <= 3 * SERIES_PER_PAIR, "{fields}");
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
        // however often it recurs: 200 of them do not spend a budget of 179 field series.
        let metrics = Metrics::new(1, 2 * SERIES_PER_PAIR);
        let t = metrics.target(Some("crm"), Some("get"));
        metrics.field_failure(&t, PayloadKind::Result, "/a", "type");
        for i in 0..200 {
            metrics.field_failure(&t, PayloadKind::Result, &format!("/p{i}"), "type");
        }
        metrics.field_failure(&t, PayloadKind::Result, "/a", "format");
        let text = metrics.render();
        assert!(text.contains(r#"schemagate_field_failures_total{server="crm",tool="get",payload="result",path="_other",keyword="type"} 200"#), "{text}");
        assert!(text.contains(r#"schemagate_field_failures_total{server="crm",tool="get",payload="result",path="/a",keyword="format"} 1"#), "{text}");
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
