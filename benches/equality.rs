//! `const`, `enum` and `uniqueItems` on the service's document representation against the
//! validator on `serde_json::Value`, the same schema and instance (issue: numbers compared as
//! fast as the validator compares them):
//!
//! - `anyof_9990_consts_1000_items`: an array of 1,000 numbers, each item `anyOf` 9,990 `const`
//!   branches;
//! - `enum_200_strings_1000_items`, `enum_200_numbers_1000_items`: each item one of a 200-value
//!   `enum`;
//! - `unique_1000_numbers`: `uniqueItems` over 1,000 numbers.
//!
//! Each as `service/...` (`gate.check` of a parsed check, the schema compiled once: the
//! instance read into a document, the check's fixed costs), `document/...` (the validator on the
//! document representation, the instance read once: what item 3 compares) and `serde_json/...`
//! (`jsonschema::validator_for(...).is_valid`).
//!
//! `cargo bench --bench equality`

#[path = "support/service.rs"]
#[allow(dead_code)]
mod service;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use schemagate::core::check::Check;
use schemagate::core::document::{Document, DocumentJson};
use schemagate::core::metrics::Transport;
use serde_json::{json, Value};
use std::hint::black_box;
use std::time::Duration;

fn cases() -> Vec<(&'static str, Value, Value)> {
    let consts: Vec<Value> = (0..9_990).map(|i| json!({"const": i})).collect();
    let numbers: Vec<u64> = (0..1_000).map(|i| (i * 9) % 9_990).collect();
    let words: Vec<String> = (0..200).map(|i| format!("value-{i:03}")).collect();
    let picked_words: Vec<&String> = (0..1_000).map(|i| &words[(i * 7) % 200]).collect();
    let enum_numbers: Vec<u64> = (0..200).map(|i| i * 1_000 + 7).collect();
    let picked_numbers: Vec<u64> = (0..1_000).map(|i| enum_numbers[(i * 7) % 200]).collect();
    let unique: Vec<u64> = (0..1_000).map(|i| i * 3 + 1).collect();
    vec![
        (
            "anyof_9990_consts_1000_items",
            json!({"type": "array", "items": {"anyOf": consts}}),
            json!(numbers),
        ),
        (
            "enum_200_strings_1000_items",
            json!({"type": "array", "items": {"enum": words}}),
            json!(picked_words),
        ),
        (
            "enum_200_numbers_1000_items",
            json!({"type": "array", "items": {"enum": enum_numbers}}),
            json!(picked_numbers),
        ),
        (
            "unique_1000_numbers",
            json!({"type": "array", "uniqueItems": true}),
            json!(unique),
        ),
    ]
}

fn benches(c: &mut Criterion) {
    let gate = service::bare_gate(1);
    let mut group = c.benchmark_group("equality");
    group.throughput(Throughput::Elements(1));
    for (name, schema, instance) in cases() {
        let body = Bytes::from(json!({"schema": schema, "instance": instance}).to_string());
        let check = Check::from_json(&body, 64).expect("parses");
        let verdict = gate.check(&check, Transport::Rest).expect("a verdict");
        assert_eq!(verdict.valid, Some(true), "{name}: {:?}", verdict.errors);
        group.bench_function(format!("service/{name}"), |b| {
            b.iter(|| {
                gate.check(black_box(&check), Transport::Rest)
                    .expect("a verdict")
            })
        });
        // The document representation alone: the instance read once, the validator over it.
        let document =
            Document::read(&serde_json::to_vec(&instance).expect("JSON"), 64).expect("a document");
        let on_documents = jsonschema::options_for::<DocumentJson>()
            .build(&schema)
            .expect("compiles");
        assert!(on_documents.is_valid(document.root()), "{name}");
        group.bench_function(format!("document/{name}"), |b| {
            b.iter(|| on_documents.is_valid(black_box(document.root())))
        });
        let validator = jsonschema::validator_for(&schema).expect("compiles");
        assert!(validator.is_valid(&instance), "{name}");
        group.bench_function(format!("serde_json/{name}"), |b| {
            b.iter(|| validator.is_valid(black_box(&instance)))
        });
    }
    group.finish();
}

criterion_group! {
    name = equality;
    config = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    targets = benches
}
criterion_main!(equality);
