//! The load harness: in one run, on one corpus, the in-process ceiling and every transport.
//!
//! ```sh
//! cargo bench --bench load                                   # generated corpus, every leg
//! cargo bench --bench load -- --corpus ../shared/corpus      # the reference corpus (or SCHEMAGATE_CORPUS)
//! ```
//!
//! Flags (after `--`; `--help` lists them): `--corpus DIR` (`tools.json` + `results.jsonl`),
//! `--seconds N` (each leg's length, default 3), `--only GROUPS` (comma-separated: `in-process`,
//! `rest`, `grpc`, `proxy`, `gateway`, `memory`, `abuse`), `--skip-memory`, `--memory-only`, `--abuse-only`, `--pin` (server threads on the
//! first half of the cores, client threads on the other half; off by default, since on two cores
//! it leaves the server one), `--with-token` (authentication on) and `--with-redis` (the
//! registry in a redis-server the harness starts, plus the registration and propagation
//! figures of [`registry`]).
//!
//! The rooms: [`opts`] (flags and leg groups), [`server`] (the server process the transport legs
//! run against), [`proxy`] (the MCP proxy over stdio, beside [`bare_stdio`], the plain relay it
//! is measured against), [`gateway`] (the MCP gateway on Streamable HTTP, beside [`bare_relay`],
//! the plain relay it is measured against), [`alloc`] (allocation counting), [`cpu`] (CPU and
//! resident size from /proc), [`http1`] and [`grpc`] (the pre-built clients), [`legs`] (every
//! leg, in process and over the transports, and the memory curves), [`report`] (figures and
//! targets).
//!
//! What each leg measures:
//!
//! - The ceiling: what any service could reach with this parser and validator, with no transport
//!   and no bookkeeping: parse a check into a `serde_json::Value`, look its validator up in a
//!   plain map, run `is_valid`.
//! - The core: parse, `Gate::check` (policy, cache, validation, errors, drift, metrics) and the
//!   answer serialised to JSON, all in this process.
//! - The transports: a real server on loopback ports. REST is driven the way wrk drives it:
//!   pre-built requests on keep-alive connections, answers read whole by their Content-Length,
//!   so the client costs little beside the server. gRPC is driven the same way: pre-encoded
//!   calls on a bare HTTP/2 connection, answers counted, not decoded.
//!
//! The transport legs' server is `schemagate serve` (the binary cargo builds beside this harness)
//! in a process of its own, so its clients are another process, as wrk is; its CPU is read from
//! /proc for the whole process, the clients' per thread (runtime `sg-client`). Unless `--pin` is
//! given both share the machine's cores. The memory and abuse legs run in child processes of
//! their own (the abuse leg with its server in that process), so that their resident sizes start
//! from a fresh heap.

use schemagate_testkit::corpus;
use schemagate_testkit::http_client;
use schemagate_testkit::mcp_test_server;
use schemagate_testkit::redis_server;
#[path = "../support/service.rs"]
mod service;

mod abuse;
mod alloc;
mod bare_relay;
mod bare_stdio;
mod cpu;
mod gateway;
mod grpc;
mod http1;
mod legs;
mod opts;
mod proxy;
mod registry;
mod report;
mod server;

use abuse::*;
use alloc::*;
use cpu::*;
use grpc::*;
use http1::*;
use legs::*;
use opts::*;
use report::*;
use server::*;

/// The recording legs' per-file and directory bound (4 GiB): past what a run writes, so every
/// line is written and none is counted and dropped at a bound.
const RECORD_BOUND: &str = "4294967296";
/// How many turns of each core the rule legs' CPU ratio alternates (even: the order is ABBA).
const RATIO_TURNS: usize = 4;

use bytes::{Bytes, BytesMut};
use schemagate::config::ServeArgs;
use schemagate::core::check::Check;
use schemagate::core::gate::Gate;
use schemagate::core::metrics::Transport;
use schemagate::core::schema::compile::compile;
use schemagate::grpc::proto;
use serde_json::{json, Value};
use std::alloc::{GlobalAlloc, Layout};
use std::collections::HashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn main() -> anyhow::Result<()> {
    let opts = Opts::from_args();
    if let Some(upstream) = &opts.bare_relay {
        return bare_relay::run(upstream);
    }
    if opts.bare_stdio_relay {
        return bare_stdio::run(&opts.command);
    }
    if opts.with_token {
        let _ = http1::TOKEN.set("bench-token-5d0c7e2a9f".to_owned());
    }
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    if opts.regex_memory_only {
        regex_memory_leg(cores);
        return Ok(());
    }
    if opts.only_memory() {
        // The regex curve first, in a fresh process of its own.
        let status = std::process::Command::new(std::env::current_exe()?)
            .arg("--regex-memory-only")
            .status()?;
        anyhow::ensure!(status.success(), "regex memory leg failed: {status}");
        memory_leg(cores);
        return Ok(());
    }
    let corpus = match &opts.corpus {
        Some(dir) => corpus::Corpus::load(std::path::Path::new(dir))?,
        None => corpus::Corpus::generate(2_000, 20_261_122),
    };
    if opts.abuse_only {
        return abuse_leg(cores, opts.seconds, &corpus);
    }
    let bodies = bodies_of(&corpus.items);
    let valid = subset(&corpus, "valid");
    let invalid = subset(&corpus, "invalid");
    let (valid_bodies, invalid_bodies) = (bodies_of(&valid), bodies_of(&invalid));
    let sizes: Vec<usize> = bodies.iter().map(|b| b.json.len()).collect();
    let count = |e: &str| corpus.items.iter().filter(|i| i.expect == e).count();
    println!("schemagate load harness");
    println!(
        "corpus: {}: {} results ({} valid, {} invalid, {} isError), {:.1} to {:.1} KB, mean {:.1} KB",
        corpus.source,
        corpus.items.len(),
        count("valid"),
        count("invalid"),
        count("tool_error"),
        *sizes.iter().min().unwrap_or(&0) as f64 / 1024.0,
        *sizes.iter().max().unwrap_or(&0) as f64 / 1024.0,
        sizes.iter().sum::<usize>() as f64 / sizes.len().max(1) as f64 / 1024.0
    );
    let pin = opts.pin && cores >= 2;
    let (server_cpus, client_cpus): (Vec<usize>, Vec<usize>) = if pin {
        ((0..cores / 2).collect(), (cores / 2..cores).collect())
    } else {
        ((0..cores).collect(), (0..cores).collect())
    };
    println!(
        "machine: {cores} cores; the clients and the transport legs' server share this machine (the server a process of its own, CPU counted per process and per client thread); {}; {:.0} s per leg",
        if pin {
            format!("pinned: server on CPUs {server_cpus:?}, client on CPUs {client_cpus:?}")
        } else {
            "not pinned: clients and server compete for every core".to_owned()
        },
        opts.seconds
    );

    let mut legs = Vec::new();
    let mut ceiling = f64::NAN;
    if opts.wants(Group::InProcess) {
        let gate = service::gate(cores, &corpus.tools);
        let differ = agreement(&gate, &corpus, &bodies);
        println!(
            "verdicts: {} of {} agree with the corpus's `expect`{}",
            corpus.items.len() - differ.len(),
            corpus.items.len(),
            if differ.is_empty() {
                String::new()
            } else {
                format!("; e.g. {}", differ[..differ.len().min(3)].join("; "))
            }
        );
        let validators = validators(&corpus.tools);
        let ceiling_work = |b: &Bytes| {
            std::hint::black_box(ceiling_check(&validators, b));
        };
        let core_work = |b: &Bytes| {
            std::hint::black_box(core_check(&gate, b));
        };
        for (label, set) in [("all checks", &bodies), ("valid checks", &valid_bodies)] {
            let parse = allocations_per_check(set, |b| {
                std::hint::black_box(Check::from_json(b, 64).expect("parses"));
            });
            let checked = allocations_per_check(set, |b| {
                let check = Check::from_json(b, 64).expect("parses");
                std::hint::black_box(gate.check(&check, Transport::Rest).expect("verdict"));
            });
            let answered = allocations_per_check(set, core_work);
            println!(
                "allocations per check, {label}: parse {:.1} ({:.0} bytes: the documents and names), check {:.1}, answer {:.1}",
                parse.0,
                parse.1,
                checked.0 - parse.0,
                answered.0 - checked.0
            );
        }
        let rss_before = rss_mib();
        legs.push(in_process(
            "ceiling: parse + lookup + is_valid, 1 thread",
            &bodies,
            1,
            opts.seconds,
            ceiling_work,
        ));
        let all = in_process(
            &format!("ceiling: parse + lookup + is_valid, {cores} thr"),
            &bodies,
            cores,
            opts.seconds,
            ceiling_work,
        );
        ceiling = all.rate();
        legs.push(all);
        let plain = in_process(
            "core: parse + check + answer, 1 thread",
            &bodies,
            1,
            opts.seconds,
            core_work,
        );
        // The same with one policy rule per tool on its results (docs/rules.md): one reading a
        // member, one the whole result.
        let mut ruled = Vec::new();
        for (what, expr) in [
            ("a member", "!has(result.error)"),
            ("the whole result", "size(result) <= 1000"),
        ] {
            let policy = service::one_rule_per_tool(&corpus.tools, expr);
            let gate = service::gate_with_policy(cores, &corpus.tools, &policy);
            // Warmed as the plain leg's core is (every schema compiled) before it is measured.
            for body in &bodies {
                core_check(&gate, &body.json);
            }
            let ruled_work = |b: &Bytes| {
                std::hint::black_box(core_check(&gate, b));
            };
            let leg = in_process(
                &format!("core, 1 thread, a rule per tool on {what}"),
                &bodies,
                1,
                opts.seconds,
                ruled_work,
            );
            // The ratio: the plain core and this one measured in turns, in the order ABBA ABBA,
            // so that the machine's drift over the run (4% between legs here) falls on both alike.
            let per_check = |leg: &Leg| leg.server_cpu / leg.checks as f64;
            let turn = opts.seconds / RATIO_TURNS as f64;
            let (mut base, mut with) = (Vec::new(), Vec::new());
            for i in 0..RATIO_TURNS {
                let plain_first = i % 2 == 0;
                for plain_now in [plain_first, !plain_first] {
                    if plain_now {
                        base.push(per_check(&in_process("", &bodies, 1, turn, core_work)));
                    } else {
                        with.push(per_check(&in_process("", &bodies, 1, turn, ruled_work)));
                    }
                }
            }
            let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
            ruled.push((what, mean(&base), mean(&with)));
            legs.push(leg);
        }
        legs.push(plain);
        for (what, base, with) in ruled {
            verdict_line(
                &format!("a policy rule per tool (reading {what}) costs < 10% more CPU per check in the core"),
                format!("{:.2} against {:.2} us per check ({:+.1}%; {RATIO_TURNS} turns of each, alternated)", with * 1e6, base * 1e6, (with / base - 1.0) * 100.0),
                with / base < 1.1,
            );
        }
        for (name, set) in [
            (
                format!("core: parse + check + answer, {cores} thr"),
                &bodies,
            ),
            (format!("core, {cores} thr, valid only"), &valid_bodies),
            (format!("core, {cores} thr, invalid only"), &invalid_bodies),
        ] {
            legs.push(in_process(&name, set, cores, opts.seconds, core_work));
        }
        let checks: u64 = legs.iter().map(|l| l.checks).sum();
        println!(
            "resident size: {rss_before:.0} MiB before the in-process legs, {:.0} MiB after their {checks} checks (no scrape in between)",
            rss_mib()
        );
    }

    if Group::TRANSPORTS.iter().any(|&g| opts.wants(g)) {
        let server = TransportRun {
            opts: &opts,
            cores,
            corpus: &corpus,
            bodies: &bodies,
            valid: &valid,
            invalid: &invalid,
            server_cpus: &server_cpus,
            client_cpus: &client_cpus,
        };
        server.legs(&mut legs)?;
    }

    println!();
    println!(
        "{:<44} {:>9} {:>7} {:>8} {:>8} {:>10} {:>10} {:>8}",
        "leg", "checks/s", "MB/s", "p50 ms", "p99 ms", "server s/k", "client s/k", "x ceil"
    );
    for leg in &legs {
        leg.print(ceiling);
    }
    println!("latency is per request: one check, one batch, or a 1,000-check stream window (in-process: one check, every 16th timed);");
    println!("the /healthz row counts requests (it checks nothing): the HTTP stack's own ceiling for one request at a time.");
    println!("MB/s = check JSON carried per second; server s/k = server CPU seconds per 1,000 checks, from the server process (in-process legs: this whole process);");
    println!("client s/k = the same for the client's threads; x ceil = checks/s over the ceiling on all threads.");
    summary(&legs, ceiling);

    if opts.wants(Group::Proxy) && !opts.memory_only {
        proxy::proxy_leg(opts.seconds)?;
    }
    if opts.wants(Group::Gateway) && !opts.memory_only {
        gateway::gateway_leg(opts.seconds)?;
    }
    if opts.wants(Group::Abuse) && !opts.memory_only {
        // A fresh process, so that resident sizes start from a fresh heap.
        let mut child = std::process::Command::new(std::env::current_exe()?);
        child.args(["--abuse-only", "--seconds", &opts.seconds.to_string()]);
        if let Some(dir) = &opts.corpus {
            child.args(["--corpus", dir]);
        }
        let status = child.status()?;
        anyhow::ensure!(status.success(), "abuse leg failed: {status}");
    }
    if opts.wants(Group::Memory) && !opts.memory_only {
        // A fresh process, so that resident sizes start from a fresh heap.
        let status = std::process::Command::new(std::env::current_exe()?)
            .arg("--memory-only")
            .status()?;
        anyhow::ensure!(status.success(), "memory leg failed: {status}");
    }
    Ok(())
}
