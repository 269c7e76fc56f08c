//! `schemagate check` against the in-process core, checks per second over the same checks: the
//! reference corpus (SCHEMAGATE_CORPUS or ../shared/corpus) when it is there, the generated one
//! otherwise, repeated `REPEATS` times as one log.
//!
//! - `core_in_process_N_threads`: N threads read and judge their share of the checks and write
//!   each answer, as `gate.check` does for REST (the core alone: no file, no report).
//! - `schemagate_check_N_jobs`: a whole `schemagate check` run with N jobs on the log file:
//!   start-up (the tools registered and compiled), reading, judging, the summary.
//! - `..._verdicts`: the same, writing every verdict to a file as well.
//! - `transcripts_400_files` and `transcripts_one_file`: `schemagate check --format jsonrpc`
//!   over 400 one-session transcripts of the busiest server (initialize, its listing, five calls
//!   and results each, named by their initialize answers), and over the same lines in one file:
//!   what a transcript costs beyond its lines.
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

    let transcripts = Transcripts::write(&corpus, dir.path());

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
                    run_check(&runtime, argv);
                })
            });
        }
    }
    group.finish();

    let mut group = c.benchmark_group("cli");
    group.throughput(Throughput::Elements(transcripts.checks));
    for (name, logs) in [
        ("transcripts_400_files", &transcripts.files),
        ("transcripts_one_file", &transcripts.one),
    ] {
        group.bench_function(name, |b| {
            b.iter(|| {
                let mut argv: Vec<String> = [
                    "schemagate",
                    "check",
                    "--format",
                    "jsonrpc",
                    "--tools",
                    &tools.display().to_string(),
                    "--policy",
                    &transcripts.policy.display().to_string(),
                ]
                .map(str::to_owned)
                .to_vec();
                argv.extend(logs.iter().map(|p| p.display().to_string()));
                run_check(&runtime, argv);
            })
        });
    }
    group.finish();
}

/// One `schemagate check` run of `argv`, its output discarded; it must pass or reject, never
/// fail on its input.
fn run_check(runtime: &tokio::runtime::Runtime, argv: Vec<String>) {
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
}

/// Transcripts of the corpus's busiest server: 400 one-session files, and their lines in one.
struct Transcripts {
    files: Vec<std::path::PathBuf>,
    one: Vec<std::path::PathBuf>,
    /// `arguments = "off"`: the corpus has results, not the calls' arguments.
    policy: std::path::PathBuf,
    /// Payloads judged in a run (each call's arguments and result).
    checks: u64,
}

impl Transcripts {
    const SESSIONS: usize = 400;
    const CALLS: usize = 5;

    fn write(corpus: &corpus::Corpus, dir: &std::path::Path) -> Self {
        let mut counts = std::collections::HashMap::<&str, usize>::new();
        for item in &corpus.items {
            *counts.entry(item.server.as_str()).or_default() += 1;
        }
        let server = counts
            .iter()
            .max_by_key(|(name, n)| (**n, std::cmp::Reverse(**name)))
            .map(|(name, _)| name.to_string())
            .expect("a server");
        let items: Vec<&corpus::Item> =
            corpus.items.iter().filter(|i| i.server == server).collect();
        let listing = &corpus.tools["servers"][&server];
        let policy = dir.join("policy.toml");
        std::fs::write(&policy, "arguments = \"off\"\n").expect("policy");
        let sessions = dir.join("sessions");
        std::fs::create_dir_all(&sessions).expect("a directory");
        let mut files = Vec::new();
        let mut all = Vec::new();
        for session in 0..Self::SESSIONS {
            let mut text = format!(
                concat!(
                    r#"{{"jsonrpc":"2.0","id":0,"method":"initialize","params":{{"protocolVersion":"2025-11-25","capabilities":{{}},"clientInfo":{{"name":"bench","version":"1"}}}}}}"#,
                    "\n",
                    r#"{{"jsonrpc":"2.0","id":0,"result":{{"protocolVersion":"2025-11-25","capabilities":{{"tools":{{}}}},"serverInfo":{{"name":{},"version":"1"}}}}}}"#,
                    "\n",
                    r#"{{"jsonrpc":"2.0","id":1,"method":"tools/list"}}"#,
                    "\n",
                    r#"{{"jsonrpc":"2.0","id":1,"result":{}}}"#,
                    "\n"
                ),
                serde_json::Value::from(server.as_str()),
                listing
            );
            for call in 0..Self::CALLS {
                let item = items[(session * Self::CALLS + call) % items.len()];
                let id = call + 2;
                text.push_str(&format!(
                    r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":{},"arguments":{{}}}}}}"#,
                    serde_json::Value::from(item.tool.as_str())
                ));
                text.push('\n');
                text.push_str(&format!(
                    r#"{{"jsonrpc":"2.0","id":{id},"result":{}}}"#,
                    item.result_text
                ));
                text.push('\n');
            }
            let file = sessions.join(format!("session-{session:03}.jsonl"));
            std::fs::write(&file, &text).expect("a transcript");
            files.push(file);
            all.push(text);
        }
        let one = dir.join("one-session.jsonl");
        std::fs::write(&one, all.concat()).expect("a transcript");
        Transcripts {
            files,
            one: vec![one],
            policy,
            checks: (Self::SESSIONS * Self::CALLS * 2) as u64,
        }
    }
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
