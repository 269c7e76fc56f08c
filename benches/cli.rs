//! `schemagate check` against the in-process core, checks per second over the same checks: the
//! reference corpus (SCHEMAGATE_CORPUS or ../shared/corpus) when it is there, the generated one
//! otherwise, repeated `REPEATS` times as one log.
//!
//! - `core_in_process_N_threads`: N threads read and judge their share of the checks and write
//!   each answer, as `gate.check` does for REST (the core alone: no file, no report).
//! - `schemagate_check_N_jobs`: a whole `schemagate check` run with N jobs on the log file:
//!   start-up (the tools registered and compiled), reading, judging, the summary.
//! - `..._verdicts`: the same, writing every verdict to a file as well.
//!
//! `cargo bench --bench cli`

use schemagate_testkit::corpus;
#[path = "support/service.rs"]
#[allow(dead_code)]
mod service;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use bytes::Bytes;
use clap::Parser;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use schemagate::config::{Cli, Command};
use schemagate::core::check::Check;
use schemagate::core::metrics::Transport;
use std::hint::black_box;
use std::io::Write;
use std::time::Duration;

/// How many times the corpus is repeated in the log.
const REPEATS: usize = 50;

fn benches(c: &mut Criterion) {
    let reference = std::env::var_os("SCHEMAGATE_CORPUS")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/corpus").into());
    let corpus =
        corpus::Corpus::load(&reference).unwrap_or_else(|_| corpus::Corpus::generate(2_000, 7));
    eprintln!("corpus: {} ({} results)", corpus.source, corpus.items.len());
    let bodies: Vec<Bytes> = (0..REPEATS)
        .flat_map(|_| {
            corpus
                .items
                .iter()
                .map(|i| Bytes::from(corpus::Corpus::check_text(i)))
        })
        .collect();

    let dir = tempfile::tempdir().expect("a directory");
    let log = dir.path().join("checks.jsonl");
    let tools = dir.path().join("tools.json");
    let verdicts = dir.path().join("verdicts.jsonl");
    {
        let mut file = std::io::BufWriter::new(std::fs::File::create(&log).expect("log"));
        for body in &bodies {
            file.write_all(body).expect("write");
            file.write_all(b"\n").expect("write");
        }
        file.flush().expect("flush");
    }
    std::fs::write(&tools, corpus.tools.to_string()).expect("tools");

    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let mut group = c.benchmark_group("cli");
    group.throughput(Throughput::Elements(bodies.len() as u64));
    let mut threads = vec![1, cores];
    threads.dedup();
    for n in threads {
        let gate = service::gate(1, &corpus.tools);
        group.bench_function(format!("core_in_process_{n}_threads"), |b| {
            b.iter(|| {
                std::thread::scope(|scope| {
                    for share in bodies.chunks(bodies.len().div_ceil(n)) {
                        let gate = &gate;
                        scope.spawn(move || {
                            for body in share {
                                let Ok(check) = Check::from_json(body, 64) else {
                                    continue;
                                };
                                if let Ok(verdict) = gate.check(&check, Transport::Rest) {
                                    let mut out = Vec::with_capacity(verdict.json_size_hint());
                                    let _ = black_box(verdict.write_json(&mut out));
                                }
                            }
                        });
                    }
                })
            })
        });
        for (name, extra) in [
            (format!("schemagate_check_{n}_jobs"), None),
            (
                format!("schemagate_check_{n}_jobs_verdicts"),
                Some(&verdicts),
            ),
        ] {
            group.bench_function(name, |b| {
                b.iter(|| {
                    let jobs = n.to_string();
                    let mut argv = vec![
                        "schemagate".to_owned(),
                        "check".to_owned(),
                        "--tools".to_owned(),
                        tools.display().to_string(),
                        "--jobs".to_owned(),
                        jobs,
                        log.display().to_string(),
                    ];
                    if let Some(path) = extra {
                        argv.push("--verdicts".to_owned());
                        argv.push(path.display().to_string());
                    }
                    let Command::Check(args) = Cli::parse_from(argv).command else {
                        unreachable!("a check command")
                    };
                    let config = args.check_config(false).expect("a configuration");
                    let code = runtime.block_on(schemagate::cli::check::run(
                        config,
                        &mut std::io::sink(),
                        &mut std::io::sink(),
                    ));
                    assert!(code <= 1, "exit code {code}");
                })
            });
        }
    }
    group.finish();
}

criterion_group! {
    name = cli;
    config = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5));
    targets = benches
}
criterion_main!(cli);
