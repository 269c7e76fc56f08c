//! The policy's rules (`[[rules]]`, docs/rules.md): a typical rule judged alone, and the core's
//! check of every result of the corpus with one rule per tool, beside the same checks without.
//!
//! - `rule/comparison`: `arguments.amount <= 1000 || caller.scopes.exists(...)` on a small call;
//! - `rule/within_roots_one_path`: `within_roots(arguments.path)` with two roots;
//! - `rule/typical`: both rules on one call (a comparison and a `within_roots` of one path);
//! - `rule/paths_one_pointer`: `paths = ["/path"]`;
//! - `core/N_results_without_rules`, `core/N_results_one_member_rule_per_tool` and
//!   `core/N_results_one_whole_result_rule_per_tool`: `gate.check` of each result of the
//!   reference corpus (SCHEMAGATE_CORPUS or ../shared/corpus) when it is there, the generated
//!   one otherwise; each tool's rule reads one member (`!has(result.error)`), or the whole
//!   result (`size(result) <= 1000`).
//!
//! `cargo bench --bench rules`

use schemagate_testkit::corpus;
#[path = "support/service.rs"]
#[allow(dead_code)]
mod service;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use schemagate::core::check::Check;
use schemagate::core::domain::Tier;
use schemagate::core::metrics::Transport;
use schemagate::core::policy::Policy;
use schemagate::core::rule::{Facts, RulePayload};
use serde_json::json;
use std::hint::black_box;
use std::time::Duration;

const COMPARISON: &str = r#"
[[rules]]
name = "transfer_limit"
payload = "arguments"
expr = "arguments.amount <= 1000 || caller.scopes.exists(s, s == 'admin')"
"#;

const WITHIN_ROOTS: &str = r#"
[[rules]]
name = "in_roots"
payload = "arguments"
expr = "within_roots(arguments.path)"
"#;

const PATHS: &str = r#"
[[rules]]
name = "paths_in_roots"
payload = "arguments"
paths = ["/path"]
"#;

fn benches(c: &mut Criterion) {
    let call = json!({"amount": 250, "to": "acct-7", "path": "/srv/shared/reports/q3.csv"});
    let roots = [
        "file:///srv/shared".to_owned(),
        "/home/ann/project".to_owned(),
    ];
    let scopes = ["check"];
    let facts = Facts {
        server: "bank-eu",
        tool: "transfer",
        caller: ("agent", &scopes),
        roots: Some(&roots),
        tier: Tier::Untrusted,
    };
    let mut group = c.benchmark_group("rule");
    group.throughput(Throughput::Elements(1));
    for (name, policy) in [
        ("comparison", COMPARISON.to_owned()),
        ("within_roots_one_path", WITHIN_ROOTS.to_owned()),
        ("typical", format!("{COMPARISON}{WITHIN_ROOTS}")),
        ("paths_one_pointer", PATHS.to_owned()),
    ] {
        let policy = Policy::from_toml_str(&policy).expect("the policy loads");
        let rules = policy.rule_set();
        assert!(rules
            .judge(RulePayload::Arguments, &call, &facts)
            .is_empty());
        group.bench_function(name, |b| {
            b.iter(|| rules.judge(RulePayload::Arguments, black_box(&call), &facts))
        });
    }
    group.finish();

    let generated = corpus::Corpus::generate(2_000, 7);
    let reference = std::env::var_os("SCHEMAGATE_CORPUS")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/corpus").into());
    let loaded = corpus::Corpus::load(&reference).ok();
    let corpus = loaded.as_ref().unwrap_or(&generated);
    // One rule per tool: reading one member of the result, or the whole result.
    let (member, whole) = (
        service::one_rule_per_tool(&corpus.tools, "!has(result.error)"),
        service::one_rule_per_tool(&corpus.tools, "size(result) <= 1000"),
    );
    let checks: Vec<Check> = corpus
        .items
        .iter()
        .map(|item| {
            Check::from_json(&Bytes::from(corpus::Corpus::check_text(item)), 64).expect("parses")
        })
        .collect();
    let mut group = c.benchmark_group("core");
    group.throughput(Throughput::Elements(checks.len() as u64));
    for (name, policy) in [
        ("without_rules", None),
        ("one_member_rule_per_tool", Some(member.as_str())),
        ("one_whole_result_rule_per_tool", Some(whole.as_str())),
    ] {
        let gate = match policy {
            Some(policy) => service::gate_with_policy(1, &corpus.tools, policy),
            None => service::gate(1, &corpus.tools),
        };
        group.bench_function(format!("{}_results_{name}", checks.len()), |b| {
            b.iter(|| {
                for check in &checks {
                    black_box(
                        gate.check(black_box(check), Transport::Rest)
                            .expect("verdict"),
                    );
                }
            })
        });
    }
    group.finish();
}

criterion_group! {
    name = rules;
    config = Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    targets = benches
}
criterion_main!(rules);
