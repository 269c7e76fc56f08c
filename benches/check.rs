//! In-process costs of the hot path: compile, a cache hit plus validation of a ~2 KB MCP result
//! (valid, and invalid with errors collected), parsing a check, reading a batch of 100, comparing a
//! text copy with its structured content (by value, by tokens, and as the escaped copy it usually
//! is), reading an MCP answer's envelope, writing an answer, and building feedback.
//! `cargo bench --bench check`

use schemagate_testkit::corpus;
#[path = "support/service.rs"]
mod service;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use schemagate::core::check::{batch_from_json, Check};
use schemagate::core::document::Document;
use schemagate::core::drift::{first_difference, same_tokens};
use schemagate::core::metrics::Transport;
use schemagate::core::schema::compile::compile;
use schemagate::core::text_copy::TextCopy;
use schemagate::core::verdict::{feedback, ValidationFailure};
use serde_json::Value;
use std::hint::black_box;
use std::time::Duration;

/// The body of the first item whose check body is near `size` bytes and whose outcome is `expect`.
fn body_near(corpus: &corpus::Corpus, expect: &str, size: usize) -> Bytes {
    corpus
        .items
        .iter()
        .filter(|i| i.expect == expect)
        .map(corpus::Corpus::check_text)
        .min_by_key(|b| b.len().abs_diff(size))
        .map(Bytes::from)
        .expect("an item")
}

fn benches(c: &mut Criterion) {
    let corpus = corpus::Corpus::generate(2_000, 7);
    let gate = service::gate(1, &corpus.tools);

    let schema = corpus.tools["servers"]["crm"]["tools"][1]["outputSchema"].to_string();
    let (options, limits) = service::compile_settings();
    let mut group = c.benchmark_group("compile");
    group.throughput(Throughput::Elements(1));
    group.bench_function("list_customers_output_schema", |b| {
        b.iter(|| compile(black_box(schema.as_bytes()), options, &limits).expect("compiles"))
    });
    group.finish();

    for (name, expect) in [("valid_2kb", "valid"), ("invalid_2kb_errors", "invalid")] {
        let body = body_near(&corpus, expect, 2048);
        let mut group = c.benchmark_group("check");
        group.throughput(Throughput::Elements(1));
        group.bench_function(format!("parse_hit_validate_{name}"), |b| {
            b.iter(|| {
                let check = Check::from_json(black_box(&body), 64).expect("parses");
                let verdict = gate.check(&check, Transport::Rest).expect("verdict");
                assert_eq!(verdict.valid, Some(expect == "valid"));
                verdict
            })
        });
        let check = Check::from_json(&body, 64).expect("parses");
        group.bench_function(format!("hit_validate_{name}"), |b| {
            b.iter(|| {
                gate.check(black_box(&check), Transport::Rest)
                    .expect("verdict")
            })
        });
        group.bench_function(format!("parse_{name}"), |b| {
            b.iter(|| Check::from_json(black_box(&body), 64).expect("parses"))
        });
        group.finish();
    }

    let batch = Bytes::from(corpus::Corpus::batch_text(&corpus.items[..100]));
    let mut group = c.benchmark_group("batch");
    group.throughput(Throughput::Elements(100));
    group.bench_function("read_100_checks", |b| {
        b.iter(|| batch_from_json(black_box(&batch), 64, 10_000).expect("a batch"))
    });
    group.finish();

    // The payload reader alone against serde_json's `Value`, over every result's
    // structuredContent: the reference corpus (SCHEMAGATE_CORPUS or ../shared/corpus) when it is
    // there, the generated one otherwise.
    let reference = std::env::var_os("SCHEMAGATE_CORPUS")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/corpus").into());
    let loaded = corpus::Corpus::load(&reference).ok();
    let documents: Vec<String> = loaded
        .as_ref()
        .unwrap_or(&corpus)
        .items
        .iter()
        .filter_map(|i| i.result.get("structuredContent").map(|v| v.to_string()))
        .collect();
    let total: usize = documents.iter().map(String::len).sum();
    let mut group = c.benchmark_group("read");
    group.throughput(Throughput::Bytes(total as u64));
    group.bench_function(format!("document_{}_payloads", documents.len()), |b| {
        b.iter(|| {
            for text in &documents {
                black_box(Document::read(black_box(text.as_bytes()), 64).expect("reads"));
            }
        })
    });
    group.bench_function(
        format!("serde_json_value_{}_payloads", documents.len()),
        |b| {
            b.iter(|| {
                for text in &documents {
                    black_box(
                        serde_json::from_slice::<Value>(black_box(text.as_bytes())).expect("reads"),
                    );
                }
            })
        },
    );
    group.finish();

    let item = corpus
        .items
        .iter()
        .filter(|i| i.expect == "valid")
        .min_by_key(|i| i.result.to_string().len().abs_diff(2048))
        .expect("an item");
    let structured = item.result["structuredContent"].clone();
    let text = item.result["content"][0]["text"]
        .as_str()
        .expect("a text copy")
        .to_owned();
    let mut group = c.benchmark_group("drift");
    group.throughput(Throughput::Elements(1));
    // The slow path: both texts read with exact numbers and compared as values.
    let structured_text = structured.to_string();
    group.bench_function("text_copy_equals_structured_2kb", |b| {
        b.iter(|| {
            first_difference(
                black_box(text.as_bytes()),
                black_box(structured_text.as_bytes()),
            )
        })
    });
    // The fast path: the copy is structuredContent's own text, as sent or spaced otherwise.
    let sent = structured.to_string();
    let spaced = serde_json::to_string_pretty(&structured).expect("serialises");
    group.bench_function("same_text_2kb", |b| {
        b.iter(|| same_tokens(black_box(sent.as_bytes()), black_box(sent.as_bytes())))
    });
    group.bench_function("same_tokens_other_spacing_2kb", |b| {
        b.iter(|| same_tokens(black_box(spaced.as_bytes()), black_box(sent.as_bytes())))
    });
    // The usual copy: structuredContent's own text written as a JSON string, compared as sent.
    let literal = serde_json::to_string(&sent).expect("serialises");
    let copy = TextCopy::new(Bytes::copy_from_slice(
        &literal.as_bytes()[1..literal.len() - 1],
    ))
    .expect("a copy");
    group.bench_function("escaped_copy_2kb", |b| {
        b.iter(|| black_box(&copy).is_escaped(black_box(sent.as_bytes())))
    });
    group.finish();

    // What the MCP boundary reads of every message before anything else: the envelope, found by
    // structure (the result is skipped over, not parsed).
    let line = serde_json::to_vec(&serde_json::json!({
        "jsonrpc": "2.0", "id": 7, "result": item.result
    }))
    .expect("serialises");
    let mut group = c.benchmark_group("envelope");
    group.throughput(Throughput::Bytes(line.len() as u64));
    group.bench_function("tools_call_answer_2kb", |b| {
        b.iter(|| schemagate::mcp::framing(black_box(&line)))
    });
    group.finish();

    let mut group = c.benchmark_group("answer");
    group.throughput(Throughput::Elements(1));
    for expect in ["valid", "invalid"] {
        let body = body_near(&corpus, expect, 2048);
        let check = Check::from_json(&body, 64).expect("parses");
        let verdict = gate.check(&check, Transport::Rest).expect("verdict");
        group.bench_function(format!("{expect}_verdict_to_json"), |b| {
            b.iter(|| {
                let mut out = Vec::with_capacity(verdict.json_size_hint());
                black_box(&verdict).write_json(&mut out).expect("writes");
                out
            })
        });
    }
    group.finish();

    let errors: Vec<ValidationFailure> = (0..20)
        .map(|i| ValidationFailure {
            instance_path: format!("/items/{i}/plan"),
            schema_path: "/$defs/row/properties/plan/enum".into(),
            keyword: "enum".into(),
            message: r#""gold" is not one of "free", "pro" or "enterprise""#.into(),
        })
        .collect();
    let mut group = c.benchmark_group("feedback");
    group.throughput(Throughput::Elements(1));
    group.bench_function("twenty_errors", |b| {
        b.iter(|| feedback("Output", black_box(&errors), true))
    });
    group.finish();
}

criterion_group! {
    name = check;
    config = Criterion::default()
        .sample_size(30)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    targets = benches
}
criterion_main!(check);
