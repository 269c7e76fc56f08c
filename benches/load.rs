//! The load harness: in one run, on one corpus, the in-process ceiling and every transport.
//!
//! ```sh
//! cargo bench --bench load                                   # generated corpus, every leg
//! cargo bench --bench load -- --corpus /work/shared/corpus   # the reference corpus (or SCHEMAGATE_CORPUS)
//! ```
//!
//! Flags (after `--`): `--corpus DIR` (`tools.json` + `results.jsonl`), `--seconds N` (each leg's
//! length, default 3), `--only GROUPS` (comma-separated: `in-process`, `rest`, `grpc`,
//! `memory`), `--skip-memory`, `--memory-only`, and `--pin` (server threads on the first half of
//! the cores, client threads on the other half; off by default, since on two cores it leaves the
//! server one).
//!
//! The server runs in this process on its own runtime (threads `sg-server`) and worker pool
//! (`schemagate-worker-*`); the clients run on another runtime (`sg-client`). CPU is read per
//! thread from /proc, so server and client CPU are reported apart; but unless `--pin` is given
//! both share the machine's cores. The memory leg runs in a child process of its own, so that its
//! resident sizes start from a fresh heap.

#[path = "support/corpus.rs"]
mod corpus;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use bytes::Bytes;
use schemagate::check::Check;
use schemagate::config::ServeArgs;
use schemagate::gate::Gate;
use schemagate::grpc::proto::{self, validator_client::ValidatorClient};
use schemagate::metrics::Transport;
use schemagate::verdict::Outcome;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

struct Opts {
    corpus: Option<String>,
    seconds: f64,
    in_process: bool,
    rest: bool,
    grpc: bool,
    memory: bool,
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
        let group = |name: &str| match &only {
            Some(groups) => groups.iter().any(|g| g == name),
            None => true,
        };
        let memory_only = has("--memory-only");
        Opts {
            corpus: value("--corpus").or_else(|| std::env::var("SCHEMAGATE_CORPUS").ok()),
            seconds: value("--seconds")
                .and_then(|s| s.parse().ok())
                .unwrap_or(3.0),
            in_process: group("in-process") && !memory_only,
            rest: group("rest") && !memory_only,
            grpc: group("grpc") && !memory_only,
            memory: (group("memory") || memory_only) && !has("--skip-memory"),
            pin: has("--pin"),
        }
    }

    fn only_memory(&self) -> bool {
        self.memory && !self.in_process && !self.rest && !self.grpc
    }
}

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
            "{:<38} {:>10.0} {:>8.3} {:>8.3} {:>10} {:>10} {:>8.2}x",
            self.name,
            self.rate(),
            self.percentile(0.5),
            self.percentile(0.99),
            self.per_k(self.server_cpu),
            self.per_k(self.client_cpu),
            self.rate() / ceiling
        );
    }
}

fn build_gate(threads: usize) -> Arc<Gate> {
    let threads = threads.to_string();
    let args = <ServeArgs as clap::Parser>::parse_from(["serve", "--worker-threads", &threads]);
    Gate::new(args.gate_config().expect("config")).expect("gate")
}

fn register(gate: &Gate, tools: &Value) {
    for (server, list) in tools["servers"].as_object().expect("servers") {
        gate.register(server, &Bytes::from(list.to_string()))
            .expect("register");
    }
}

/// Checks every item once and counts the verdicts that disagree with the corpus's `expect`.
fn agreement(gate: &Gate, corpus: &corpus::Corpus, bodies: &[Bytes]) -> (usize, Vec<String>) {
    let mut differ = Vec::new();
    for (item, body) in corpus.items.iter().zip(bodies) {
        let check = Check::from_json(body, 64).expect("parses");
        let got = match gate.check(&check, Transport::Rest) {
            Ok(v) => match v.outcome {
                Outcome::Valid => "valid",
                Outcome::Invalid => "invalid",
                Outcome::ToolError => "tool_error",
                Outcome::Skipped => "skipped",
            }
            .to_owned(),
            Err(e) => format!("error {}", e.code()),
        };
        if got != item.expect {
            differ.push(format!(
                "{}/{}: expected {}, got {got}",
                item.server, item.tool, item.expect
            ));
        }
    }
    (corpus.items.len() - differ.len(), differ)
}

/// Parse + cache hit + validate in this process, on `threads` threads.
fn in_process(name: &str, gate: &Arc<Gate>, bodies: &[Bytes], threads: usize, seconds: f64) -> Leg {
    let stop = AtomicBool::new(false);
    let start = Instant::now();
    let cpu0 = process_cpu();
    let (checks, latencies) = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let stop = &stop;
                s.spawn(move || {
                    let mut n = 0u64;
                    let mut lat = Vec::new();
                    let mut i = t * 7919;
                    while !stop.load(Ordering::Relaxed) {
                        let body = &bodies[i % bodies.len()];
                        let t0 = Instant::now();
                        let check = Check::from_json(body, 64).expect("parses");
                        let verdict = gate.check(&check, Transport::Rest);
                        std::hint::black_box(verdict.ok());
                        if n % 16 == 0 {
                            lat.push(t0.elapsed().as_micros() as u32);
                        }
                        n += 1;
                        i += 1;
                    }
                    (n, lat)
                })
            })
            .collect();
        std::thread::sleep(Duration::from_secs_f64(seconds));
        stop.store(true, Ordering::Relaxed);
        handles.into_iter().fold((0, Vec::new()), |(n, mut l), h| {
            let (hn, hl) = h.join().expect("thread");
            l.extend(hl);
            (n + hn, l)
        })
    });
    Leg {
        name: name.into(),
        checks,
        seconds: start.elapsed().as_secs_f64(),
        latencies,
        server_cpu: process_cpu() - cpu0,
        client_cpu: f64::NAN,
    }
}

/// Runs `tasks` concurrent loops of `request` (each returning how many checks it carried) for
/// `seconds`, on the client runtime.
async fn drive<F, Fut>(name: String, tasks: usize, seconds: f64, request: F) -> Leg
where
    F: Fn(usize, u64) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = u64> + Send,
{
    let request = Arc::new(request);
    let deadline = Instant::now() + Duration::from_secs_f64(seconds);
    let cpu0 = thread_cpu(&SERVER_THREADS);
    let client0 = thread_cpu(&CLIENT_THREADS);
    let start = Instant::now();
    let mut handles = Vec::new();
    for task in 0..tasks {
        let request = Arc::clone(&request);
        handles.push(tokio::spawn(async move {
            let mut checks = 0u64;
            let mut lat = Vec::new();
            let mut i = 0u64;
            while Instant::now() < deadline {
                let t0 = Instant::now();
                checks += request(task, i).await;
                lat.push(t0.elapsed().as_micros() as u32);
                i += 1;
            }
            (checks, lat)
        }));
    }
    let mut checks = 0;
    let mut latencies = Vec::new();
    for h in handles {
        let (c, l) = h.await.expect("task");
        checks += c;
        latencies.extend(l);
    }
    Leg {
        name,
        checks,
        seconds: start.elapsed().as_secs_f64(),
        latencies,
        server_cpu: thread_cpu(&SERVER_THREADS) - cpu0,
        client_cpu: thread_cpu(&CLIENT_THREADS) - client0,
    }
}

/// POSTs `body`, reads the whole answer, and counts `checks` checks.
async fn post(http: reqwest::Client, url: String, body: Bytes, checks: u64) -> u64 {
    let r = http.post(url).body(body).send().await.expect("request");
    assert!(r.status().is_success(), "{}", r.status());
    r.bytes().await.expect("body");
    checks
}

fn grpc_check(item: &corpus::Item) -> proto::Check {
    proto::Check {
        server: item.server.clone(),
        tool: item.tool.clone(),
        payload: Some(proto::check::Payload::Result(
            item.result.to_string().into(),
        )),
        attempt: 1,
        ..Default::default()
    }
}

/// REST bodies of batches of `size` items (whole batches only, unless there are fewer items).
fn rest_batches(items: &[corpus::Item], size: usize) -> Vec<Bytes> {
    items
        .chunks(size)
        .filter(|c| c.len() == size || items.len() < size)
        .map(|c| {
            let list: Vec<Value> = c.iter().map(corpus::Corpus::check_json).collect();
            Bytes::from(json!({"items": list}).to_string())
        })
        .collect()
}

fn main() -> anyhow::Result<()> {
    let opts = Opts::from_args();
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    if opts.only_memory() {
        memory_leg(cores);
        return Ok(());
    }
    let corpus = match &opts.corpus {
        Some(dir) => corpus::Corpus::load(std::path::Path::new(dir))?,
        None => corpus::Corpus::generate(2_000, 20_261_122),
    };
    let sizes: Vec<usize> = corpus
        .items
        .iter()
        .map(|i| corpus::Corpus::check_json(i).to_string().len())
        .collect();
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
    let (server_cpus, client_cpus): (Vec<usize>, Vec<usize>) = if opts.pin && cores >= 2 {
        ((0..cores / 2).collect(), (cores / 2..cores).collect())
    } else {
        ((0..cores).collect(), (0..cores).collect())
    };
    println!(
        "machine: {cores} cores; client and server share this machine and this process (separate runtimes and threads, CPU counted per thread); {}; {:.0} s per leg",
        if opts.pin && cores >= 2 {
            format!("pinned: server on CPUs {server_cpus:?}, client on CPUs {client_cpus:?}")
        } else {
            "not pinned: client and server compete for every core".to_owned()
        },
        opts.seconds
    );
    let bodies: Vec<Bytes> = corpus
        .items
        .iter()
        .map(|i| Bytes::from(corpus::Corpus::check_json(i).to_string()))
        .collect();
    let invalid: Vec<corpus::Item> = corpus.invalid_only();
    let invalid_bodies: Vec<Bytes> = invalid
        .iter()
        .map(|i| Bytes::from(corpus::Corpus::check_json(i).to_string()))
        .collect();

    let mut legs = Vec::new();
    let mut ceiling = f64::NAN;
    if opts.in_process {
        let gate = build_gate(cores);
        register(&gate, &corpus.tools);
        let (agree, differ) = agreement(&gate, &corpus, &bodies);
        println!(
            "verdicts: {agree} of {} agree with the corpus's `expect`{}",
            corpus.items.len(),
            if differ.is_empty() {
                String::new()
            } else {
                format!(
                    "; {} differ, e.g. {}",
                    differ.len(),
                    differ[..differ.len().min(3)].join("; ")
                )
            }
        );
        let one = in_process("in-process, 1 thread", &gate, &bodies, 1, opts.seconds);
        let all = in_process(
            &format!("in-process, {cores} threads (ceiling)"),
            &gate,
            &bodies,
            cores,
            opts.seconds,
        );
        ceiling = all.rate();
        let invalid_in = in_process(
            &format!("in-process, {cores} threads, all invalid"),
            &gate,
            &invalid_bodies,
            cores,
            opts.seconds,
        );
        legs.extend([one, all, invalid_in]);
    }

    if opts.rest || opts.grpc {
        transport_legs(
            &opts,
            cores,
            &corpus,
            &bodies,
            &invalid,
            &server_cpus,
            &client_cpus,
            &mut legs,
        )?;
    }

    println!();
    println!(
        "{:<38} {:>10} {:>8} {:>8} {:>10} {:>10} {:>9}",
        "leg", "checks/s", "p50 ms", "p99 ms", "server s/k", "client s/k", "x ceiling"
    );
    for leg in &legs {
        leg.print(ceiling);
    }
    println!("latency is per request: one check, one batch, or a 1,000-check stream window (in-process: one check, every 16th timed).");
    println!("server s/k = server CPU seconds per 1,000 checks, from the server's threads (in-process legs: the whole process);");
    println!(
        "client s/k = the same for the client's threads; ceiling = in-process on all threads."
    );

    if opts.memory {
        // A fresh process, so that resident sizes start from a fresh heap.
        let status = std::process::Command::new(std::env::current_exe()?)
            .arg("--memory-only")
            .status()?;
        anyhow::ensure!(status.success(), "memory leg failed: {status}");
    }
    Ok(())
}

/// The REST and gRPC legs, against a server started in this process.
#[allow(clippy::too_many_arguments)]
fn transport_legs(
    opts: &Opts,
    cores: usize,
    corpus: &corpus::Corpus,
    bodies: &[Bytes],
    invalid: &[corpus::Item],
    server_cpus: &[usize],
    client_cpus: &[usize],
    legs: &mut Vec<Leg>,
) -> anyhow::Result<()> {
    // The server, on its own runtime; its worker pool is created from one of these threads and
    // inherits their CPU affinity.
    let pin = opts.pin && cores >= 2;
    let server_set = server_cpus.to_vec();
    let server_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(cores)
        .thread_name("sg-server")
        .on_thread_start(move || {
            if pin {
                pin_current_thread(&server_set);
            }
        })
        .enable_all()
        .build()?;
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
    let client_set = client_cpus.to_vec();
    let client_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(cores)
        .thread_name("sg-client")
        .on_thread_start(move || {
            if pin {
                pin_current_thread(&client_set);
            }
        })
        .enable_all()
        .build()?;
    let seconds = opts.seconds;
    let (want_rest, want_grpc) = (opts.rest, opts.grpc);
    client_rt.block_on(async {
        let base = format!("http://{http_addr}");
        let http = reqwest::Client::builder()
            .pool_max_idle_per_host(64)
            .build()?;
        for (server, list) in corpus.tools["servers"].as_object().expect("servers") {
            let r = http
                .put(format!("{base}/v1/servers/{server}/tools"))
                .body(list.to_string())
                .send()
                .await?;
            anyhow::ensure!(r.status().is_success(), "registration failed");
        }
        if want_rest {
            let bodies = Arc::new(bodies.to_vec());
            // REST, one check per request, 32 connections.
            let (client, url, single) = (
                http.clone(),
                format!("{base}/v1/validate"),
                Arc::clone(&bodies),
            );
            legs.push(
                drive(
                    "REST single, 32 connections".into(),
                    32,
                    seconds,
                    move |task, i| {
                        let body = single[(task * 7919 + i as usize) % single.len()].clone();
                        post(client.clone(), url.clone(), body, 1)
                    },
                )
                .await,
            );
            // REST batches.
            for (size, tasks, all_invalid) in
                [(100usize, 8usize, false), (1000, 4, false), (100, 8, true)]
            {
                let items = if all_invalid { invalid } else { &corpus.items[..] };
                let batches = rest_batches(items, size);
                let n = items.len().min(size) as u64;
                let (client, url) = (http.clone(), format!("{base}/v1/validate/batch"));
                let label = if all_invalid {
                    format!("REST batch {size}, {tasks} in flight, all invalid")
                } else {
                    format!("REST batch {size}, {tasks} in flight")
                };
                legs.push(
                    drive(label, tasks, seconds, move |task, i| {
                        let body = batches[(task * 31 + i as usize) % batches.len()].clone();
                        post(client.clone(), url.clone(), body, n)
                    })
                    .await,
                );
            }
        }
        if want_grpc {
            grpc_legs(grpc_addr, corpus, seconds, legs).await?;
        }
        // A cache hit neither parses nor compiles a schema: every compile of the run happened
        // at registration.
        let metrics = http.get(format!("{base}/metrics")).send().await?.text().await?;
        let value = |name: &str| {
            metrics
                .lines()
                .find_map(|l| l.strip_prefix(name).and_then(|v| v.trim().parse::<f64>().ok()))
                .unwrap_or(0.0)
        };
        println!(
            "server cache over the transport legs: {} schema compiles (all at registration), {} misses, {} hits",
            value("schemagate_schema_compiles_total "),
            value("schemagate_cache_misses_total "),
            value("schemagate_cache_hits_total ")
        );
        anyhow::Ok(())
    })?;
    let _ = stop.send(());
    drop(client_rt);
    drop(server_rt);
    Ok(())
}

/// gRPC unary, batch and stream legs.
async fn grpc_legs(
    grpc_addr: std::net::SocketAddr,
    corpus: &corpus::Corpus,
    seconds: f64,
    legs: &mut Vec<Leg>,
) -> anyhow::Result<()> {
    let channel = tonic::transport::Channel::from_shared(format!("http://{grpc_addr}"))?
        .connect()
        .await?;
    let grpc = ValidatorClient::new(channel)
        .max_decoding_message_size(256 << 20)
        .max_encoding_message_size(256 << 20);
    let checks: Arc<Vec<proto::Check>> = Arc::new(corpus.items.iter().map(grpc_check).collect());
    {
        let (grpc, checks) = (grpc.clone(), Arc::clone(&checks));
        legs.push(
            drive(
                "gRPC unary, 32 in flight".into(),
                32,
                seconds,
                move |task, i| {
                    let check = checks[(task * 7919 + i as usize) % checks.len()].clone();
                    let mut grpc = grpc.clone();
                    async move {
                        grpc.validate(check).await.expect("verdict");
                        1
                    }
                },
            )
            .await,
        );
    }
    {
        let batches: Vec<proto::ValidateBatchRequest> = checks
            .chunks(100)
            .map(|c| proto::ValidateBatchRequest { items: c.to_vec() })
            .collect();
        let grpc = grpc.clone();
        legs.push(
            drive(
                "gRPC batch 100, 8 in flight".into(),
                8,
                seconds,
                move |task, i| {
                    let batch = batches[(task * 31 + i as usize) % batches.len()].clone();
                    let n = batch.items.len() as u64;
                    let mut grpc = grpc.clone();
                    async move {
                        grpc.validate_batch(batch).await.expect("batch");
                        n
                    }
                },
            )
            .await,
        );
    }
    {
        // Streams: each request is a window of 1,000 checks sent on one stream and all their
        // answers read; 4 streams in flight.
        let (grpc, checks) = (grpc.clone(), Arc::clone(&checks));
        legs.push(
            drive(
                "gRPC stream, 4 streams".into(),
                4,
                seconds,
                move |task, i| {
                    let start = (task * 7919 + i as usize * 1000) % checks.len();
                    let window: Vec<proto::StreamCheck> = (0..1000)
                        .map(|k| proto::StreamCheck {
                            id: k.to_string(),
                            check: Some(checks[(start + k) % checks.len()].clone()),
                        })
                        .collect();
                    let mut grpc = grpc.clone();
                    async move {
                        let mut answers = grpc
                            .validate_stream(tokio_stream::iter(window))
                            .await
                            .expect("stream")
                            .into_inner();
                        let mut n = 0;
                        while answers.message().await.expect("answer").is_some() {
                            n += 1;
                        }
                        n
                    }
                },
            )
            .await,
        );
    }
    Ok(())
}

/// Resident size while 100,000 distinct schemas pass through the cache.
fn memory_leg(cores: usize) {
    println!();
    println!("memory: 100,000 distinct schemas through the cache (default --cache-max-bytes), in a fresh process");
    let gate = build_gate(cores);
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
