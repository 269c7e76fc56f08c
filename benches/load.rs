//! The load harness: in one run, on one corpus, the in-process ceiling and every transport.
//!
//! ```sh
//! cargo bench --bench load                                   # generated corpus, every leg
//! cargo bench --bench load -- --corpus ../shared/corpus      # the reference corpus (or SCHEMAGATE_CORPUS)
//! ```
//!
//! Flags (after `--`): `--corpus DIR` (`tools.json` + `results.jsonl`), `--seconds N` (each leg's
//! length, default 3), `--only GROUPS` (comma-separated: `in-process`, `rest`, `grpc`,
//! `memory`), `--skip-memory`, `--memory-only`, and `--pin` (server threads on the first half of
//! the cores, client threads on the other half; off by default, since on two cores it leaves the
//! server one).
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
//!   so the client costs little beside the server. gRPC is driven by tonic's client.
//!
//! The server runs in this process on its own runtime (threads `sg-server`) and worker pool
//! (`schemagate-worker-*`); the clients run on another runtime (`sg-client`). CPU is read per
//! thread from /proc, so server and client CPU are reported apart; but unless `--pin` is given
//! both share the machine's cores. The memory leg runs in a child process of its own, so that its
//! resident sizes start from a fresh heap.

#[path = "support/corpus.rs"]
mod corpus;
#[path = "support/service.rs"]
mod service;

use bytes::{Bytes, BytesMut};
use schemagate::check::Check;
use schemagate::compile::compile;
use schemagate::config::ServeArgs;
use schemagate::gate::Gate;
use schemagate::grpc::proto;
use schemagate::metrics::Transport;
use serde_json::{json, Value};
use std::alloc::{GlobalAlloc, Layout};
use std::collections::HashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// mimalloc, as the service uses, with an allocation counter that is on only while
/// [`allocations_per_check`] measures.
struct CountingAlloc;

static COUNTING: AtomicBool = AtomicBool::new(false);
static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);
static ALLOCATED_BYTES: AtomicU64 = AtomicU64::new(0);

unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if COUNTING.load(Ordering::Relaxed) {
            ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
            ALLOCATED_BYTES.fetch_add(layout.size() as u64, Ordering::Relaxed);
        }
        // SAFETY: forwarded unchanged to the allocator the service uses.
        unsafe { mimalloc::MiMalloc.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `alloc` or `realloc` above, which forward to mimalloc.
        unsafe { mimalloc::MiMalloc.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if COUNTING.load(Ordering::Relaxed) {
            ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
            ALLOCATED_BYTES.fetch_add(new_size as u64, Ordering::Relaxed);
        }
        // SAFETY: as for `dealloc`.
        unsafe { mimalloc::MiMalloc.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: CountingAlloc = CountingAlloc;

struct Opts {
    corpus: Option<String>,
    seconds: f64,
    /// The leg groups asked for with `--only`; all when `None`.
    only: Option<Vec<String>>,
    memory_only: bool,
    /// Only the regex part of the memory leg (run by `--memory-only` in a process of its own).
    regex_memory_only: bool,
    skip_memory: bool,
    pin: bool,
}

impl Opts {
    fn from_args() -> Opts {
        let args: Vec<String> = std::env::args().collect();
        let value = |flag: &str| {
            args.iter()
                .position(|a| a == flag)
                .and_then(|i| args.get(i + 1).cloned())
        };
        let has = |flag: &str| args.iter().any(|a| a == flag);
        let only = value("--only").map(|v| {
            v.split(',')
                .map(|g| g.trim().to_owned())
                .collect::<Vec<_>>()
        });
        Opts {
            corpus: value("--corpus").or_else(|| std::env::var("SCHEMAGATE_CORPUS").ok()),
            seconds: value("--seconds")
                .and_then(|s| s.parse().ok())
                .unwrap_or(3.0),
            only,
            memory_only: has("--memory-only"),
            regex_memory_only: has("--regex-memory-only"),
            skip_memory: has("--skip-memory"),
            pin: has("--pin"),
        }
    }

    /// Whether the legs of `group` (`in-process`, `rest-single`, `rest-batch`, `grpc-unary`,
    /// `grpc-batch`, `grpc-stream`, `memory`) run: `--only rest` asks for every `rest-*` group.
    fn wants(&self, group: &str) -> bool {
        if group == "memory" {
            if self.memory_only {
                return true;
            }
            if self.skip_memory {
                return false;
            }
        } else if self.memory_only {
            return false;
        }
        match &self.only {
            None => true,
            Some(asked) => asked.iter().any(|a| {
                group == a
                    || group
                        .strip_prefix(a.as_str())
                        .is_some_and(|r| r.starts_with('-'))
            }),
        }
    }

    fn only_memory(&self) -> bool {
        self.wants("memory")
            && !self.wants("in-process")
            && !TRANSPORT_GROUPS.iter().any(|g| self.wants(g))
    }
}

const TRANSPORT_GROUPS: [&str; 5] = [
    "rest-single",
    "rest-batch",
    "grpc-unary",
    "grpc-batch",
    "grpc-stream",
];

/// Pins the calling thread to `cpus` (no-op where that is not possible).
fn pin_current_thread(cpus: &[usize]) {
    // SAFETY: `set` is a plain bit set, initialised by CPU_ZERO before use; the call only reads it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_ZERO(&mut set);
        for &cpu in cpus {
            libc::CPU_SET(cpu, &mut set);
        }
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

/// CPU seconds used so far by this process's threads whose name starts with one of `prefixes`.
fn thread_cpu(prefixes: &[&str]) -> f64 {
    let ticks = 100.0; // USER_HZ on Linux
    let mut total = 0u64;
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return f64::NAN;
    };
    for task in tasks.flatten() {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if !prefixes.iter().any(|p| comm.starts_with(p)) {
            continue;
        }
        let stat = std::fs::read_to_string(task.path().join("stat")).unwrap_or_default();
        total += stat_cpu_ticks(&stat);
    }
    total as f64 / ticks
}

/// utime + stime from a /proc stat line.
fn stat_cpu_ticks(stat: &str) -> u64 {
    // Fields after the command name (which is in parentheses): utime is 14th, stime 15th.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or_default();
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let t = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    t(11) + t(12)
}

fn process_cpu() -> f64 {
    stat_cpu_ticks(&std::fs::read_to_string("/proc/self/stat").unwrap_or_default()) as f64 / 100.0
}

const SERVER_THREADS: [&str; 2] = ["sg-server", "schemagate-work"];
const CLIENT_THREADS: [&str; 1] = ["sg-client"];

fn rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with("VmRSS:")).and_then(|l| {
                l.split_whitespace()
                    .nth(1)
                    .and_then(|v| v.parse::<f64>().ok())
            })
        })
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

/// What one leg measured.
struct Leg {
    name: String,
    checks: u64,
    /// Bytes of check JSON carried (payload throughput, so legs of different item sizes compare).
    bytes: u64,
    seconds: f64,
    /// Per request (a request may carry many checks), in microseconds.
    latencies: Vec<u32>,
    server_cpu: f64,
    /// NaN when the client is the server (in-process legs).
    client_cpu: f64,
}

impl Leg {
    fn rate(&self) -> f64 {
        self.checks as f64 / self.seconds
    }
    fn mb_per_s(&self) -> f64 {
        self.bytes as f64 / self.seconds / 1e6
    }
    fn percentile(&self, p: f64) -> f64 {
        if self.latencies.is_empty() {
            return f64::NAN;
        }
        let mut l = self.latencies.clone();
        l.sort_unstable();
        let i = ((l.len() as f64 - 1.0) * p).round() as usize;
        f64::from(l[i]) / 1000.0
    }
    fn per_k(&self, cpu: f64) -> String {
        if cpu.is_nan() {
            "-".to_owned()
        } else {
            format!("{:.4}", cpu / self.checks.max(1) as f64 * 1000.0)
        }
    }
    fn print(&self, ceiling: f64) {
        println!(
            "{:<44} {:>9.0} {:>7.1} {:>8.3} {:>8.3} {:>10} {:>10} {:>7.2}x",
            self.name,
            self.rate(),
            self.mb_per_s(),
            self.percentile(0.5),
            self.percentile(0.99),
            self.per_k(self.server_cpu),
            self.per_k(self.client_cpu),
            self.rate() / ceiling
        );
    }
}

/// A check body with what it carries: its JSON text and whether it is a batch of many.
#[derive(Clone)]
struct Body {
    json: Bytes,
    checks: u64,
}

/// The output schemas of every tool, compiled as the service compiles them, by server and tool.
type Validators = HashMap<String, HashMap<String, jsonschema::Validator>>;

fn validators(tools: &Value) -> Validators {
    let (options, limits) = service::compile_settings();
    let mut out = Validators::new();
    for (server, list) in tools["servers"].as_object().expect("servers") {
        for tool in list["tools"].as_array().into_iter().flatten() {
            let (Some(name), Some(schema)) = (tool["name"].as_str(), tool.get("outputSchema"))
            else {
                continue;
            };
            let compiled =
                compile(schema.to_string().as_bytes(), options, &limits).expect("compiles");
            out.entry(server.clone())
                .or_default()
                .insert(name.to_owned(), compiled.validator);
        }
    }
    out
}

/// The ceiling's work for one check: parse it into a `serde_json::Value` (the plain parse, not the
/// service's reader, so the ceiling does not move with the service's own choices), find its
/// validator, `is_valid`.
fn ceiling_check(validators: &Validators, body: &Bytes) -> bool {
    let check: Value = serde_json::from_slice(body).expect("parses");
    let (Some(server), Some(tool)) = (check["server"].as_str(), check["tool"].as_str()) else {
        return false;
    };
    let result = &check["result"];
    if result["isError"] == Value::Bool(true) {
        return true;
    }
    result
        .get("structuredContent")
        .is_some_and(|doc| validators[server][tool].is_valid(doc))
}

/// The core's work for one check: parse, check, and the answer as JSON (as REST writes it).
fn core_check(gate: &Gate, body: &Bytes) -> usize {
    let check = Check::from_json(body, 64).expect("parses");
    let verdict = gate.check(&check, Transport::Rest).expect("verdict");
    answer_json(&verdict).len()
}

fn answer_json(verdict: &schemagate::verdict::Verdict) -> Vec<u8> {
    let mut out = Vec::with_capacity(verdict.json_size_hint());
    verdict.write_json(&mut out).expect("serialises");
    out
}

/// Checks every item once and lists the verdicts that disagree with the corpus's `expect`.
fn agreement(gate: &Gate, corpus: &corpus::Corpus, bodies: &[Body]) -> Vec<String> {
    let mut differ = Vec::new();
    for (item, body) in corpus.items.iter().zip(bodies) {
        let check = Check::from_json(&body.json, 64).expect("parses");
        let got = match gate.check(&check, Transport::Rest) {
            Ok(v) => v.outcome.as_str().to_owned(),
            Err(e) => format!("error {}", e.code()),
        };
        if got != item.expect {
            differ.push(format!(
                "{}/{}: expected {}, got {got}",
                item.server, item.tool, item.expect
            ));
        }
    }
    differ
}

/// Allocations (count, bytes) per check of `work` over `bodies`, on this thread alone.
fn allocations_per_check(bodies: &[Body], work: impl Fn(&Bytes)) -> (f64, f64) {
    for body in bodies {
        work(&body.json); // warm: first-use allocations are not the hot path's
    }
    ALLOCATIONS.store(0, Ordering::Relaxed);
    ALLOCATED_BYTES.store(0, Ordering::Relaxed);
    COUNTING.store(true, Ordering::Relaxed);
    for body in bodies {
        work(&body.json);
    }
    COUNTING.store(false, Ordering::Relaxed);
    let n = bodies.len().max(1) as f64;
    (
        ALLOCATIONS.load(Ordering::Relaxed) as f64 / n,
        ALLOCATED_BYTES.load(Ordering::Relaxed) as f64 / n,
    )
}

/// Runs `work` over `bodies` on `threads` threads for `seconds`.
fn in_process(
    name: &str,
    bodies: &[Body],
    threads: usize,
    seconds: f64,
    work: impl Fn(&Bytes) + Sync,
) -> Leg {
    let stop = AtomicBool::new(false);
    let start = Instant::now();
    let cpu0 = process_cpu();
    let (checks, bytes, latencies) = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let (stop, work) = (&stop, &work);
                s.spawn(move || {
                    let (mut n, mut bytes) = (0u64, 0u64);
                    let mut lat = Vec::new();
                    let mut i = t * 7919;
                    while !stop.load(Ordering::Relaxed) {
                        let body = &bodies[i % bodies.len()];
                        if n % 16 == 0 {
                            let t0 = Instant::now();
                            work(&body.json);
                            lat.push(t0.elapsed().as_micros() as u32);
                        } else {
                            work(&body.json);
                        }
                        n += 1;
                        bytes += body.json.len() as u64;
                        i += 1;
                    }
                    (n, bytes, lat)
                })
            })
            .collect();
        std::thread::sleep(Duration::from_secs_f64(seconds));
        stop.store(true, Ordering::Relaxed);
        handles
            .into_iter()
            .fold((0, 0, Vec::new()), |(n, b, mut l), h| {
                let (hn, hb, hl) = h.join().expect("thread");
                l.extend(hl);
                (n + hn, b + hb, l)
            })
    });
    Leg {
        name: name.into(),
        checks,
        bytes,
        seconds: start.elapsed().as_secs_f64(),
        latencies,
        server_cpu: process_cpu() - cpu0,
        client_cpu: f64::NAN,
    }
}

/// Runs one loop per state, each calling `step` (which returns its state and the checks and bytes
/// its request carried) until `seconds` are over, on the client runtime.
async fn drive<S, F, Fut>(name: String, states: Vec<S>, seconds: f64, step: F) -> Leg
where
    S: Send + 'static,
    F: Fn(S, usize, u64) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = (S, u64, u64)> + Send,
{
    let step = Arc::new(step);
    let deadline = Instant::now() + Duration::from_secs_f64(seconds);
    let cpu0 = thread_cpu(&SERVER_THREADS);
    let client0 = thread_cpu(&CLIENT_THREADS);
    let start = Instant::now();
    let mut handles = Vec::new();
    for (task, state) in states.into_iter().enumerate() {
        let step = Arc::clone(&step);
        handles.push(tokio::spawn(async move {
            let mut state = state;
            let (mut checks, mut bytes) = (0u64, 0u64);
            let mut lat = Vec::new();
            let mut i = 0u64;
            while Instant::now() < deadline {
                let t0 = Instant::now();
                let (next, c, b) = step(state, task, i).await;
                state = next;
                lat.push(t0.elapsed().as_micros() as u32);
                checks += c;
                bytes += b;
                i += 1;
            }
            (checks, bytes, lat)
        }));
    }
    let (mut checks, mut bytes, mut latencies) = (0, 0, Vec::new());
    for h in handles {
        let (c, b, l) = h.await.expect("task");
        checks += c;
        bytes += b;
        latencies.extend(l);
    }
    Leg {
        name,
        checks,
        bytes,
        seconds: start.elapsed().as_secs_f64(),
        latencies,
        server_cpu: thread_cpu(&SERVER_THREADS) - cpu0,
        client_cpu: thread_cpu(&CLIENT_THREADS) - client0,
    }
}

/// A keep-alive HTTP/1.1 connection that sends pre-built requests and reads each answer whole by
/// its Content-Length, as wrk does: no pool and no header map, so the client stays cheap.
struct HttpConnection {
    stream: tokio::net::TcpStream,
    buf: BytesMut,
}

impl HttpConnection {
    async fn connect(addr: SocketAddr) -> anyhow::Result<Self> {
        let stream = tokio::net::TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        Ok(Self {
            stream,
            buf: BytesMut::with_capacity(64 * 1024),
        })
    }

    /// Sends `request` and reads the answer; returns its status.
    async fn round_trip(&mut self, request: &[u8]) -> anyhow::Result<u16> {
        self.stream.write_all(request).await?;
        self.buf.clear();
        loop {
            self.buf.reserve(64 * 1024);
            if self.stream.read_buf(&mut self.buf).await? == 0 {
                anyhow::bail!("the server closed the connection");
            }
            let mut headers = [httparse::EMPTY_HEADER; 16];
            let mut response = httparse::Response::new(&mut headers);
            let httparse::Status::Complete(head) = response.parse(&self.buf)? else {
                continue;
            };
            let status = response.code.unwrap_or(0);
            let length: usize = response
                .headers
                .iter()
                .find(|h| h.name.eq_ignore_ascii_case("content-length"))
                .and_then(|h| std::str::from_utf8(h.value).ok()?.parse().ok())
                .ok_or_else(|| anyhow::anyhow!("an answer without Content-Length"))?;
            while self.buf.len() < head + length {
                self.buf.reserve(head + length - self.buf.len());
                if self.stream.read_buf(&mut self.buf).await? == 0 {
                    anyhow::bail!("the server closed the connection mid-answer");
                }
            }
            return Ok(status);
        }
    }
}

fn grpc_check(item: &corpus::Item) -> proto::Check {
    proto::Check {
        server: item.server.clone(),
        tool: item.tool.clone(),
        payload: Some(proto::check::Payload::Result(
            item.result_text.clone().into(),
        )),
        attempt: 1,
        ..Default::default()
    }
}

fn bodies_of(items: &[corpus::Item]) -> Vec<Body> {
    items
        .iter()
        .map(|i| Body {
            json: Bytes::from(corpus::Corpus::check_text(i)),
            checks: 1,
        })
        .collect()
}

/// Batch bodies of `size` items (whole batches only, unless there are fewer items).
fn batches_of(items: &[corpus::Item], size: usize) -> Vec<Body> {
    items
        .chunks(size)
        .filter(|c| c.len() == size || items.len() < size)
        .map(|c| Body {
            json: Bytes::from(corpus::Corpus::batch_text(c)),
            checks: c.len() as u64,
        })
        .collect()
}

fn subset(corpus: &corpus::Corpus, expect: &str) -> Vec<corpus::Item> {
    corpus
        .items
        .iter()
        .filter(|i| i.expect == expect)
        .cloned()
        .collect()
}

/// One line of the closing summary: a target, the figures that decide it, and whether it is met.
fn verdict_line(target: &str, figures: String, met: bool) {
    println!(
        "  [{}] {target}: {figures}",
        if met { "met" } else { "NOT MET" }
    );
}

fn main() -> anyhow::Result<()> {
    let opts = Opts::from_args();
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
        "machine: {cores} cores; the clients and the server share this machine and this process (separate runtimes and threads, CPU counted per thread); {}; {:.0} s per leg",
        if pin {
            format!("pinned: server on CPUs {server_cpus:?}, client on CPUs {client_cpus:?}")
        } else {
            "not pinned: clients and server compete for every core".to_owned()
        },
        opts.seconds
    );

    let mut legs = Vec::new();
    let mut ceiling = f64::NAN;
    if opts.wants("in-process") {
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
        legs.push(in_process(
            "core: parse + check + answer, 1 thread",
            &bodies,
            1,
            opts.seconds,
            core_work,
        ));
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

    if TRANSPORT_GROUPS.iter().any(|g| opts.wants(g)) {
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
    println!("MB/s = check JSON carried per second; server s/k = server CPU seconds per 1,000 checks, from the server's threads (in-process legs: the whole process);");
    println!("client s/k = the same for the client's threads; x ceil = checks/s over the ceiling on all threads.");
    summary(&legs, ceiling);

    if opts.wants("memory") && !opts.memory_only {
        // A fresh process, so that resident sizes start from a fresh heap.
        let status = std::process::Command::new(std::env::current_exe()?)
            .arg("--memory-only")
            .status()?;
        anyhow::ensure!(status.success(), "memory leg failed: {status}");
    }
    Ok(())
}

/// The targets, judged on this run's figures.
fn summary(legs: &[Leg], ceiling: f64) {
    let find = |prefix: &str| legs.iter().find(|l| l.name.starts_with(prefix));
    println!();
    println!("targets:");
    if let Some(batch) = find("REST batch 100,") {
        let ratio = batch.rate() / ceiling;
        verdict_line(
            "REST batches of 100 >= 0.6x the ceiling on all threads",
            format!("{:.0} checks/s = {ratio:.2}x", batch.rate()),
            ratio >= 0.6,
        );
    }
    if let Some(single) = find("REST single") {
        let p99 = single.percentile(0.99);
        verdict_line(
            "REST single >= 100k checks/s with p99 < 5 ms at 32 connections",
            format!("{:.0} checks/s, p99 {p99:.2} ms", single.rate()),
            single.rate() >= 100_000.0 && p99 < 5.0,
        );
    }
    if let (Some(stream), Some(batch)) = (find("gRPC stream"), find("REST batch 100,")) {
        verdict_line(
            "gRPC stream >= REST batch 100",
            format!(
                "{:.0} vs {:.0} checks/s ({:.2}x)",
                stream.rate(),
                batch.rate(),
                stream.rate() / batch.rate()
            ),
            stream.rate() >= batch.rate(),
        );
    }
    for (what, invalid, valid) in [
        ("in-process core", "core, ", "core, "),
        (
            "REST batch 100",
            "REST batch 100, invalid",
            "REST batch 100, valid",
        ),
    ] {
        let invalid = legs
            .iter()
            .find(|l| l.name.starts_with(invalid) && l.name.ends_with("invalid only"));
        let valid = legs.iter().find(|l| {
            l.name.starts_with(valid)
                && l.name.ends_with("valid only")
                && !l.name.ends_with("invalid only")
        });
        if let (Some(invalid), Some(valid)) = (invalid, valid) {
            let by_checks = invalid.rate() / valid.rate();
            let mean_kb = |leg: &Leg| leg.bytes as f64 / leg.checks.max(1) as f64 / 1024.0;
            verdict_line(
                &format!("{what}: all invalid (errors collected) >= 0.5x all valid"),
                format!(
                    "{by_checks:.2}x in checks/s ({:.2}x in MB/s; the invalid items average {:.1} KB, the valid {:.1} KB)",
                    invalid.mb_per_s() / valid.mb_per_s(),
                    mean_kb(invalid),
                    mean_kb(valid)
                ),
                by_checks >= 0.5,
            );
        }
    }
}

/// A runtime of `threads` threads named `name`, each pinned to `cpus` when given.
fn runtime(
    name: &str,
    threads: usize,
    cpus: Option<&[usize]>,
) -> std::io::Result<tokio::runtime::Runtime> {
    let cpus = cpus.map(<[usize]>::to_vec);
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .thread_name(name)
        .on_thread_start(move || {
            if let Some(cpus) = &cpus {
                pin_current_thread(cpus);
            }
        })
        .enable_all()
        .build()
}

/// The REST and gRPC legs, against a server started in this process.
struct TransportRun<'a> {
    opts: &'a Opts,
    cores: usize,
    corpus: &'a corpus::Corpus,
    bodies: &'a [Body],
    valid: &'a [corpus::Item],
    invalid: &'a [corpus::Item],
    server_cpus: &'a [usize],
    client_cpus: &'a [usize],
}

impl TransportRun<'_> {
    fn legs(&self, legs: &mut Vec<Leg>) -> anyhow::Result<()> {
        // The server, on its own runtime; its worker pool is created from one of these threads and
        // inherits their CPU affinity.
        let pin = self.opts.pin && self.cores >= 2;
        let server_rt = runtime("sg-server", self.cores, pin.then_some(self.server_cpus))?;
        let (http_addr, grpc_addr, stop) = server_rt.block_on(async {
            let http = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
            let grpc = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
            let (http_addr, grpc_addr) = (http.local_addr()?, grpc.local_addr()?);
            let (tx, rx) = tokio::sync::oneshot::channel::<()>();
            let args = <ServeArgs as clap::Parser>::parse_from(["serve", "--log-level", "error"]);
            // Spawned, so that the core (and its worker pool) is built on a server thread.
            tokio::spawn(schemagate::run(
                args,
                schemagate::Listeners { http, grpc },
                async move {
                    let _ = rx.await;
                },
            ));
            anyhow::Ok((http_addr, grpc_addr, tx))
        })?;
        let client_rt = runtime("sg-client", self.cores, pin.then_some(self.client_cpus))?;
        client_rt.block_on(async {
            let base = format!("http://{http_addr}");
            let http = reqwest::Client::new();
            for (server, list) in self.corpus.tools["servers"].as_object().expect("servers") {
                let r = http
                    .put(format!("{base}/v1/servers/{server}/tools"))
                    .body(list.to_string())
                    .send()
                    .await?;
                anyhow::ensure!(r.status().is_success(), "registration failed");
            }
            let compiles = || async {
                let text = http
                    .get(format!("{base}/metrics"))
                    .send()
                    .await?
                    .text()
                    .await?;
                let value = |name: &str| {
                    text.lines()
                        .find_map(|l| {
                            l.strip_prefix(name)
                                .and_then(|v| v.trim().parse::<f64>().ok())
                        })
                        .unwrap_or(0.0)
                };
                anyhow::Ok((
                    value("schemagate_schema_compiles_total "),
                    value("schemagate_cache_hits_total "),
                ))
            };
            let (compiles_before, hits_before) = compiles().await?;
            self.rest_legs(http_addr, legs).await?;
            self.grpc_legs(grpc_addr, legs).await?;
            // A cache hit neither parses nor compiles a schema: every compile happened at
            // registration, none during the legs.
            let (compiles_after, hits_after) = compiles().await?;
            println!(
                "server cache: {compiles_before} schema compiles at registration; during the transport legs {} compiles and {} cache hits",
                compiles_after - compiles_before,
                hits_after - hits_before
            );
            anyhow::Ok(())
        })?;
        let _ = stop.send(());
        drop(client_rt);
        drop(server_rt);
        Ok(())
    }

    async fn rest_legs(&self, addr: SocketAddr, legs: &mut Vec<Leg>) -> anyhow::Result<()> {
        let seconds = self.opts.seconds;
        let single = self
            .bodies
            .iter()
            .map(|b| Request::post("/v1/validate", b))
            .collect();
        if self.opts.wants("rest-single") {
            // The HTTP stack's own cost per request on this machine: an endpoint with no check.
            legs.push(
                rest_leg(
                    "REST GET /healthz (no check), 32 conns".into(),
                    addr,
                    32,
                    seconds,
                    vec![Request::get("/healthz")],
                )
                .await?,
            );
            legs.push(
                rest_leg(
                    "REST single, 32 connections".into(),
                    addr,
                    32,
                    seconds,
                    single,
                )
                .await?,
            );
        }
        if !self.opts.wants("rest-batch") {
            return Ok(());
        }
        for (label, items, size, connections) in [
            (
                "REST batch 100, 8 connections",
                &self.corpus.items[..],
                100,
                8,
            ),
            (
                "REST batch 1000, 4 connections",
                &self.corpus.items[..],
                1000,
                4,
            ),
            ("REST batch 100, valid only", self.valid, 100, 8),
            ("REST batch 100, invalid only", self.invalid, 100, 8),
        ] {
            let batches = batches_of(items, size)
                .iter()
                .map(|b| Request::post("/v1/validate/batch", b))
                .collect();
            legs.push(rest_leg(label.into(), addr, connections, seconds, batches).await?);
        }
        Ok(())
    }

    async fn grpc_legs(&self, addr: SocketAddr, legs: &mut Vec<Leg>) -> anyhow::Result<()> {
        let seconds = self.opts.seconds;
        let checks: Vec<proto::Check> = self.corpus.items.iter().map(grpc_check).collect();
        let sizes: Vec<u64> = self.bodies.iter().map(|b| b.json.len() as u64).collect();
        let grpc = GrpcConnection::connect(addr).await?;
        if self.opts.wants("grpc-unary") {
            let calls = checks
                .iter()
                .zip(&sizes)
                .map(|(check, &size)| GrpcCall::new("Validate", [check], 1, size))
                .collect();
            legs.push(grpc_leg("gRPC unary, 32 in flight".into(), &grpc, 32, seconds, calls).await);
        }
        if self.opts.wants("grpc-batch") {
            let calls = checks
                .chunks(100)
                .zip(sizes.chunks(100))
                .map(|(items, sizes)| {
                    let batch = proto::ValidateBatchRequest {
                        items: items.to_vec(),
                    };
                    let n = batch.items.len() as u64;
                    GrpcCall::new("ValidateBatch", [&batch], n, sizes.iter().sum())
                })
                .collect();
            legs.push(
                grpc_leg(
                    "gRPC batch 100, 8 in flight".into(),
                    &grpc,
                    8,
                    seconds,
                    calls,
                )
                .await,
            );
        }
        if self.opts.wants("grpc-stream") {
            // Each call is a window of 1,000 checks sent on one stream and all their answers
            // read; 4 streams in flight.
            let calls = (0..checks.len().min(16))
                .map(|w| {
                    let start = w * 997;
                    let window: Vec<proto::StreamCheck> = (0..1000)
                        .map(|k| proto::StreamCheck {
                            id: k.to_string(),
                            check: Some(checks[(start + k) % checks.len()].clone()),
                        })
                        .collect();
                    let bytes = (0..1000).map(|k| sizes[(start + k) % sizes.len()]).sum();
                    GrpcCall::new("ValidateStream", window.iter(), 1000, bytes)
                })
                .collect();
            legs.push(grpc_leg("gRPC stream, 4 streams".into(), &grpc, 4, seconds, calls).await);
        }
        Ok(())
    }
}

/// A pre-encoded gRPC call: its path, its request messages framed as on the wire, and what it
/// carries.
struct GrpcCall {
    path: String,
    frames: Bytes,
    /// Answer messages expected: one per check for a stream, else one.
    answers: u64,
    checks: u64,
    bytes: u64,
}

impl GrpcCall {
    fn new<'m, M: prost::Message + 'm>(
        method: &str,
        messages: impl IntoIterator<Item = &'m M>,
        checks: u64,
        bytes: u64,
    ) -> GrpcCall {
        let mut frames = BytesMut::new();
        let mut count = 0;
        for message in messages {
            let encoded = message.encode_to_vec();
            frames.extend_from_slice(&[0]);
            frames.extend_from_slice(&(encoded.len() as u32).to_be_bytes());
            frames.extend_from_slice(&encoded);
            count += 1;
        }
        GrpcCall {
            path: format!("/schemagate.v1.Validator/{method}"),
            frames: frames.freeze(),
            answers: if method == "ValidateStream" { count } else { 1 },
            checks,
            bytes,
        }
    }
}

/// One HTTP/2 connection that sends pre-encoded gRPC calls and counts the answer messages
/// without decoding them: the gRPC twin of [`HttpConnection`], so the client stays cheap.
#[derive(Clone)]
struct GrpcConnection {
    h2: h2::client::SendRequest<Bytes>,
    authority: String,
}

impl GrpcConnection {
    async fn connect(addr: SocketAddr) -> anyhow::Result<Self> {
        let tcp = tokio::net::TcpStream::connect(addr).await?;
        tcp.set_nodelay(true)?;
        let (h2, connection) = h2::client::Builder::new()
            .initial_window_size(4 << 20)
            .initial_connection_window_size(16 << 20)
            .handshake(tcp)
            .await?;
        tokio::spawn(async move {
            let _ = connection.await;
        });
        Ok(Self {
            h2,
            authority: addr.to_string(),
        })
    }

    /// Makes `call`; returns how many answer messages came back, after checking grpc-status.
    async fn call(&mut self, call: &GrpcCall) -> anyhow::Result<u64> {
        let request = http::Request::builder()
            .method("POST")
            .uri(format!("http://{}{}", self.authority, call.path))
            .header("content-type", "application/grpc")
            .header("te", "trailers")
            .body(())?;
        let mut h2 = self.h2.clone().ready().await?;
        let (response, mut send) = h2.send_request(request, false)?;
        send.send_data(call.frames.clone(), true)?;
        let mut body = response.await?.into_body();
        let mut frames = FrameCounter::default();
        while let Some(chunk) = body.data().await {
            let chunk = chunk?;
            body.flow_control().release_capacity(chunk.len())?;
            frames.feed(&chunk);
        }
        let status = body
            .trailers()
            .await?
            .and_then(|t| t.get("grpc-status").cloned());
        anyhow::ensure!(
            status.as_ref().is_some_and(|s| s == "0"),
            "a call ended with grpc-status {status:?}"
        );
        Ok(frames.messages)
    }
}

/// Counts length-prefixed gRPC messages across the chunks of a body.
#[derive(Default)]
struct FrameCounter {
    messages: u64,
    /// Bytes of the current message's 5-byte prefix seen so far, and the prefix itself.
    head: Vec<u8>,
    /// Bytes of the current message's body still to come.
    remaining: usize,
}

impl FrameCounter {
    fn feed(&mut self, mut chunk: &[u8]) {
        while !chunk.is_empty() {
            if self.remaining > 0 {
                let take = self.remaining.min(chunk.len());
                self.remaining -= take;
                chunk = &chunk[take..];
                continue;
            }
            let take = (5 - self.head.len()).min(chunk.len());
            self.head.extend_from_slice(&chunk[..take]);
            chunk = &chunk[take..];
            if self.head.len() == 5 {
                self.remaining =
                    u32::from_be_bytes([self.head[1], self.head[2], self.head[3], self.head[4]])
                        as usize;
                self.head.clear();
                self.messages += 1;
            }
        }
    }
}

/// A gRPC leg: `in_flight` calls at once on one connection, each making the pre-encoded calls
/// in turn.
async fn grpc_leg(
    name: String,
    connection: &GrpcConnection,
    in_flight: usize,
    seconds: f64,
    calls: Vec<GrpcCall>,
) -> Leg {
    let calls = Arc::new(calls);
    drive(
        name,
        vec![connection.clone(); in_flight],
        seconds,
        move |mut grpc, task, i| {
            let calls = Arc::clone(&calls);
            async move {
                let call = &calls[(task * 7919 + i as usize) % calls.len()];
                let answers = grpc.call(call).await.expect("a gRPC answer");
                assert_eq!(answers, call.answers, "every check answered");
                (grpc, call.checks, call.bytes)
            }
        },
    )
    .await
}

/// A pre-built HTTP request and what it carries.
struct Request {
    http: Bytes,
    checks: u64,
    /// The check JSON in the body (not the HTTP head).
    bytes: u64,
}

impl Request {
    /// A whole HTTP/1.1 GET of `path`. It carries no check, but counts as one in the table so
    /// that its row reads as requests per second.
    fn get(path: &str) -> Request {
        Request {
            http: Bytes::from(format!("GET {path} HTTP/1.1\r\nhost: schemagate\r\n\r\n")),
            checks: 1,
            bytes: 0,
        }
    }

    /// A whole HTTP/1.1 POST of `body` to `path`.
    fn post(path: &str, body: &Body) -> Request {
        let mut http = format!(
            "POST {path} HTTP/1.1\r\nhost: schemagate\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
            body.json.len()
        )
        .into_bytes();
        http.extend_from_slice(&body.json);
        Request {
            http: Bytes::from(http),
            checks: body.checks,
            bytes: body.json.len() as u64,
        }
    }
}

/// A REST leg: `connections` keep-alive connections, each sending the pre-built requests in turn.
async fn rest_leg(
    name: String,
    addr: SocketAddr,
    connections: usize,
    seconds: f64,
    requests: Vec<Request>,
) -> anyhow::Result<Leg> {
    let requests = Arc::new(requests);
    let mut states = Vec::with_capacity(connections);
    for _ in 0..connections {
        states.push(HttpConnection::connect(addr).await?);
    }
    Ok(drive(name, states, seconds, move |mut conn, task, i| {
        let requests = Arc::clone(&requests);
        async move {
            let request = &requests[(task * 7919 + i as usize) % requests.len()];
            let status = conn.round_trip(&request.http).await.expect("answer");
            assert_eq!(status, 200, "a request was refused");
            (conn, request.checks, request.bytes)
        }
    })
    .await)
}

/// Resident size while 2,500 distinct schemas with one large compiled pattern each pass through
/// the cache, and how long hostile regex schemas take to be answered.
fn regex_memory_leg(cores: usize) {
    println!();
    println!("memory, regexes: 2,500 distinct schemas with one large pattern each (default --cache-max-bytes), in a fresh process");
    let gate = service::bare_gate(cores);
    let check = |body: Value| {
        let body = Bytes::from(body.to_string());
        let start = Instant::now();
        let answer = Check::from_json(&body, 64).and_then(|c| gate.check(&c, Transport::Rest));
        (answer, start.elapsed())
    };
    println!("{:>8} {:>10}", "schemas", "RSS MiB");
    println!("{:>8} {:>10.1}", 0, rss_mib());
    for i in 0..2_500u64 {
        // Distinct patterns of 500 to 999 repetitions (past about 1,050 the engines' size limit
        // refuses one by itself).
        let class = (b'a' + (i / 500) as u8) as char;
        let schema =
            json!({"type": "string", "pattern": format!("[^{class}]{{{}}}", 500 + i % 500)});
        let (answer, _) = check(json!({"schema": schema, "instance": "b"}));
        answer.expect("verdict");
        if (i + 1) % 500 == 0 {
            println!("{:>8} {:>10.1}", i + 1, rss_mib());
        }
    }
    let many: Vec<Value> = (0..10_000)
        .map(|n| json!({"pattern": format!("[^{}]{{{}}}", (b'a' + (n / 100 % 26) as u8) as char, 900 + n % 100)}))
        .collect();
    let (answer, took) = check(json!({"schema": {"anyOf": many}, "instance": "b"}));
    println!(
        "10,000 large patterns in one schema: {} in {:.1} ms, RSS {:.1} MiB",
        answer.map_or_else(|e| e.code().to_owned(), |v| v.outcome.as_str().to_owned()),
        took.as_secs_f64() * 1e3,
        rss_mib()
    );
    let patterns: Vec<Value> = (0..1_000)
        .map(|n| json!({"pattern": format!("[^ab]{{{}}}", 1 + n % 50)}))
        .collect();
    let strings = vec!["a".repeat(30_000); 100];
    let (answer, took) =
        check(json!({"schema": {"items": {"anyOf": patterns}}, "instance": strings}));
    println!(
        "anyOf of 1,000 patterns over 3 MB of strings: {} in {:.1} ms",
        answer.map_or_else(|e| e.code().to_owned(), |v| v.outcome.as_str().to_owned()),
        took.as_secs_f64() * 1e3
    );
    let text = gate.render_metrics();
    let entries = text
        .lines()
        .find_map(|l| l.strip_prefix("schemagate_cache_entries "))
        .unwrap_or("?");
    println!("cache: {entries} entries at the end");
}

/// Resident size while 100,000 distinct schemas pass through the cache.
fn memory_leg(cores: usize) {
    println!();
    println!("memory: 100,000 distinct schemas through the cache (default --cache-max-bytes), in a fresh process");
    let gate = service::bare_gate(cores);
    let base_rss = rss_mib();
    let start = Instant::now();
    println!("{:>8} {:>10} {:>12}", "schemas", "RSS MiB", "compiles/s");
    println!("{:>8} {:>10.1} {:>12}", 0, base_rss, "-");
    let mut last = Instant::now();
    for i in 0..100_000u64 {
        let body = Bytes::from(
            json!({"schema": {"type": "object", "properties": {"n": {"const": i}, "name": {"type": "string", "pattern": "^[a-z]+$"}}},
                   "instance": {"n": i, "name": "abc"}})
            .to_string(),
        );
        let check = Check::from_json(&body, 64).expect("parses");
        gate.check(&check, Transport::Rest).expect("verdict");
        if (i + 1) % 10_000 == 0 {
            println!(
                "{:>8} {:>10.1} {:>12.0}",
                i + 1,
                rss_mib(),
                10_000.0 / last.elapsed().as_secs_f64()
            );
            last = Instant::now();
        }
    }
    let text = gate.render_metrics();
    let value = |name: &str| {
        text.lines()
            .find_map(|l| {
                l.strip_prefix(name)
                    .and_then(|v| v.trim().parse::<f64>().ok())
            })
            .unwrap_or(0.0)
    };
    println!(
        "{:.1} s; cache: {} entries at the end, {} evictions",
        start.elapsed().as_secs_f64(),
        value("schemagate_cache_entries "),
        value("schemagate_cache_evictions_total ")
    );
}
