//! The abuse leg: a benign client and a new-schema probe, alone and then beside each kind of
//! hostile or careless client, with the server's resident size before, during and after.
//!
//! The server runs in this (fresh) process with its default flags except shorter connection
//! timeouts (`--header-read-timeout-secs 2 --write-timeout-secs 2`), so that a phase of a few
//! seconds sees them act. In every phase:
//!
//! - **benign**: 4 keep-alive connections sending the corpus's single checks (schemas cached);
//! - **probe**: one connection sending a check with a schema never seen before, every 20 ms (the
//!   figure the fair scheduler is for: it needs a worker, for a compile).
//!
//! Beside them, one phase each of: nothing; 2,000 connections sending a header byte a second;
//! 20 clients that send a 10,000-item batch (an answer of about 30 MB) and never read the answer; a 10,000-item expensive
//! batch (every item a compile) abandoned after one second; the same batch running to its end;
//! a batch of heavy items (each an array checked against `anyOf` of 9,990 `const` branches, many
//! milliseconds an item) running; a compile storm (8 connections of new-schema checks without
//! pause). Beside the heavy batch, the probe's p99 is held to 100 ms: a check with a new schema is
//! not queued behind a batch.

use super::*;

const PROBE_EVERY: Duration = Duration::from_millis(20);

/// What one phase measured.
struct Phase {
    name: &'static str,
    benign: Latencies,
    probe: Latencies,
    rss_before: f64,
    rss_peak: f64,
    rss_after: f64,
}

#[derive(Default)]
struct Latencies {
    times: Vec<Duration>,
    failed: u64,
}

impl Latencies {
    fn quantile(&mut self, q: f64) -> f64 {
        if self.times.is_empty() {
            return f64::NAN;
        }
        self.times.sort_unstable();
        let i = ((self.times.len() - 1) as f64 * q).round() as usize;
        self.times[i].as_secs_f64() * 1000.0
    }
}

/// A batch whose every item brings a schema of its own, with ten patterns: each costs a compile
/// (about 0.7 ms in a release build here, so 10,000 keep two workers busy for seconds).
fn expensive_batch(n: usize, salt: &str) -> Bytes {
    let items: Vec<Value> = (0..n)
        .map(|i| {
            let mut properties = serde_json::Map::new();
            let mut instance = serde_json::Map::new();
            for p in 0..10 {
                let key = format!("{salt}{i}p{p}");
                properties.insert(
                    key.clone(),
                    json!({"type": "string", "pattern": format!("^{key}[a-z]{{2,40}}(-[0-9]{{1,8}})?$")}),
                );
                instance.insert(key.clone(), json!(format!("{key}abc-12")));
            }
            json!({"schema": {"type": "object", "properties": properties}, "instance": instance})
        })
        .collect();
    Bytes::from(json!({ "items": items }).to_string())
}

/// The heavy batch's schema: each item an array of numbers, each number `anyOf` 9,990 `const`
/// branches.
fn heavy_schema() -> Value {
    let consts: Vec<Value> = (0..9_990).map(|i| json!({ "const": i })).collect();
    json!({"type": "array", "items": {"anyOf": consts}})
}

/// A batch of `n` checks of the schema known by `hash` (see [`heavy_schema`]), each of an array
/// of 100 numbers spread over the branches.
fn heavy_batch(n: usize, hash: &str) -> Bytes {
    let instance: Vec<u64> = (0..100).map(|i| (i * 97) % 9_990).collect();
    let item = json!({ "schema_hash": hash, "instance": instance });
    Bytes::from(json!({ "items": vec![item; n] }).to_string())
}

/// The abusive bodies the phases send.
struct Bodies {
    /// 10,000 items whose answer is about 30 MB, never read.
    unread: Bytes,
    /// [`heavy_batch`].
    heavy: Bytes,
}

/// The probe's p99 beside the heavy batch must stay within this.
const PROBE_BESIDE_HEAVY_MS: f64 = 100.0;
/// The heavy batch's phase, by name.
const HEAVY: &str = "600-item batch of a 9,990-const schema running";

/// Runs the abuse leg (in a process of its own, for clean resident sizes).
pub(crate) fn abuse_leg(cores: usize, seconds: f64, corpus: &corpus::Corpus) -> anyhow::Result<()> {
    let seconds = seconds.max(4.0);
    let server_rt = runtime("sg-server", cores, None)?;
    let (http_addr, _stop) = server_rt.block_on(async {
        let http = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let grpc = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let http_addr = http.local_addr()?;
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let args = <ServeArgs as clap::Parser>::parse_from([
            "serve",
            "--log-level",
            "error",
            "--header-read-timeout-secs",
            "2",
            "--write-timeout-secs",
            "2",
        ]);
        tokio::spawn(schemagate::run(
            args,
            schemagate::Listeners { http, grpc },
            async move {
                let _ = rx.await;
            },
        ));
        anyhow::Ok((http_addr, tx))
    })?;
    let client_rt = runtime("sg-client", cores, None)?;
    let bodies = bodies_of(&corpus.items);
    let singles: Arc<Vec<Vec<u8>>> = Arc::new(
        bodies
            .iter()
            .map(|b| http_post("/v1/validate", &b.json))
            .collect(),
    );
    // Every item fails on twenty fields: an answer of about 30 MB that the client never reads.
    let unread_item = json!({"schema": {"type": "array", "items": {"type": "string"}}, "instance": (0..20).collect::<Vec<u32>>()});
    let unread = Bytes::from(json!({ "items": vec![unread_item; 10_000] }).to_string());
    let phases = client_rt.block_on(async {
        // Register the corpus's tools.
        let http = crate::http_client::client();
        // The heavy schema, made known once; its batch names it by hash.
        let known: Value = http
            .post(format!("http://{http_addr}/v1/validate"))
            .body(json!({"schema": heavy_schema(), "instance": [1]}).to_string())
            .send()
            .await?
            .json()
            .await?;
        let hash = known["schema_hash"]
            .as_str()
            .ok_or_else(|| anyhow::anyhow!("no schema_hash in {known}"))?;
        let bodies = Bodies {
            unread,
            heavy: heavy_batch(600, hash),
        };
        for (server, list) in corpus.tools["servers"].as_object().expect("servers") {
            http.put(format!("http://{http_addr}/v1/servers/{server}/tools"))
                .body(list.to_string())
                .send()
                .await?;
        }
        let mut phases = Vec::new();
        let kinds: [(&'static str, Abuse); 7] = [
            ("alone", Abuse::None),
            ("2,000 slow-header connections", Abuse::SlowHeaders(2_000)),
            ("20 clients not reading 30 MB answers", Abuse::Unread(20)),
            (
                "10,000-item expensive batch abandoned after 1 s",
                Abuse::Abandoned,
            ),
            ("10,000-item expensive batch running", Abuse::Running),
            (HEAVY, Abuse::Heavy),
            (
                "compile storm: 8 connections of new schemas",
                Abuse::CompileStorm(8),
            ),
        ];
        for (i, (name, abuse)) in kinds.into_iter().enumerate() {
            let phase = run_phase(
                name,
                http_addr,
                Arc::clone(&singles),
                &bodies,
                abuse,
                i,
                seconds,
            )
            .await?;
            phases.push(phase);
        }
        let text = http
            .get(format!("http://{http_addr}/metrics"))
            .send()
            .await?
            .text()
            .await?;
        let counters: Vec<String> = text
            .lines()
            .filter(|l| {
                !l.starts_with('#')
                    && [
                        "schemagate_cancelled_total",
                        "schemagate_shed_total",
                        "schemagate_connections_",
                    ]
                    .iter()
                    .any(|name| l.starts_with(name))
            })
            .map(str::to_owned)
            .collect();
        anyhow::Ok((phases, counters))
    })?;
    let (phases, counters) = phases;
    println!();
    println!("abuse: a benign client (4 connections of cached single checks) and a probe (a new schema every 20 ms) beside each abuse; {seconds:.0} s each; --header-read-timeout-secs 2 --write-timeout-secs 2");
    println!(
        "{:<50} {:>9} {:>8} {:>8} {:>6} {:>9} {:>9} {:>6} {:>8} {:>8} {:>8}",
        "beside",
        "benign/s",
        "p50 ms",
        "p99 ms",
        "fail",
        "probe p50",
        "probe p99",
        "fail",
        "RSS bef",
        "RSS max",
        "RSS aft"
    );
    let mut beside_heavy = f64::NAN;
    for mut p in phases {
        if p.name == HEAVY {
            beside_heavy = p.probe.quantile(0.99);
        }
        let rate = p.benign.times.len() as f64 / seconds;
        println!(
            "{:<50} {:>9.0} {:>8.2} {:>8.2} {:>6} {:>9.2} {:>9.2} {:>6} {:>8.0} {:>8.0} {:>8.0}",
            p.name,
            rate,
            p.benign.quantile(0.5),
            p.benign.quantile(0.99),
            p.benign.failed,
            p.probe.quantile(0.5),
            p.probe.quantile(0.99),
            p.probe.failed,
            p.rss_before,
            p.rss_peak,
            p.rss_after
        );
    }
    println!("fail = requests not answered 200 (refused, shed or timed out); RSS in MiB (after: 2 s after the abusive clients left)");
    crate::verdict_line(
        "a check with a new schema is answered within 100 ms (p99) while a heavy batch runs",
        format!("{beside_heavy:.1} ms"),
        beside_heavy <= PROBE_BESIDE_HEAVY_MS,
    );
    println!("the server's counters after every phase:");
    for line in counters {
        println!("  {line}");
    }
    Ok(())
}

#[derive(Clone, Copy)]
enum Abuse {
    None,
    SlowHeaders(usize),
    Unread(usize),
    Abandoned,
    Running,
    Heavy,
    CompileStorm(usize),
}

async fn run_phase(
    name: &'static str,
    addr: SocketAddr,
    singles: Arc<Vec<Vec<u8>>>,
    bodies: &Bodies,
    abuse: Abuse,
    salt: usize,
    seconds: f64,
) -> anyhow::Result<Phase> {
    let rss_before = rss_mib();
    let stop = Arc::new(AtomicBool::new(false));
    let mut abusers = tokio::task::JoinSet::new();
    match abuse {
        Abuse::None => {}
        Abuse::SlowHeaders(n) => {
            for _ in 0..n {
                let stop = Arc::clone(&stop);
                abusers.spawn(async move {
                    let Ok(mut tcp) = tokio::net::TcpStream::connect(addr).await else {
                        return;
                    };
                    let head =
                        b"POST /v1/validate HTTP/1.1\r\nhost: 127.0.0.1\r\nx-slow: aaaaaaaaaaaaaaaaaaaa";
                    // Reconnect when closed: the abuse lasts the whole phase.
                    let mut i = 0;
                    while !stop.load(Ordering::Relaxed) {
                        if tcp.write_all(&head[i % head.len()..][..1]).await.is_err() {
                            match tokio::net::TcpStream::connect(addr).await {
                                Ok(t) => tcp = t,
                                Err(_) => return,
                            }
                        }
                        i += 1;
                        tokio::time::sleep(Duration::from_secs(1)).await;
                    }
                });
            }
        }
        Abuse::Unread(n) => {
            let request = Arc::new(http_post("/v1/validate/batch", &bodies.unread));
            for _ in 0..n {
                let (stop, request) = (Arc::clone(&stop), Arc::clone(&request));
                abusers.spawn(async move {
                    while !stop.load(Ordering::Relaxed) {
                        let Ok(mut tcp) = tokio::net::TcpStream::connect(addr).await else {
                            return;
                        };
                        if tcp.write_all(&request).await.is_err() {
                            continue;
                        }
                        // Never read: hold the connection for 4 s (the server gives up on it
                        // at its write timeout), then send again.
                        tokio::time::sleep(Duration::from_secs(4)).await;
                        drop(tcp);
                    }
                });
            }
        }
        Abuse::Abandoned | Abuse::Running => {
            let request = http_post(
                "/v1/validate/batch",
                &expensive_batch(10_000, &format!("s{salt}x")),
            );
            let abandon = matches!(abuse, Abuse::Abandoned);
            abusers.spawn(async move {
                let Ok(mut conn) = HttpConnection::connect(addr).await else {
                    return;
                };
                if abandon {
                    let _ = conn.stream.write_all(&request).await;
                    tokio::time::sleep(Duration::from_secs(1)).await;
                } else {
                    let start = Instant::now();
                    let status = conn.round_trip(&request).await;
                    println!(
                        "(the running 10,000-item expensive batch was answered {status:?} after {:.1} s)",
                        start.elapsed().as_secs_f64()
                    );
                }
            });
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        Abuse::Heavy => {
            // Sent and held until the phase ends (then dropped, and the batch with it).
            let request = http_post("/v1/validate/batch", &bodies.heavy);
            abusers.spawn(async move {
                let Ok(mut conn) = HttpConnection::connect(addr).await else {
                    return;
                };
                let _ = conn.round_trip(&request).await;
            });
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        Abuse::CompileStorm(n) => {
            for c in 0..n {
                let stop = Arc::clone(&stop);
                abusers.spawn(async move {
                    let Ok(mut conn) = HttpConnection::connect(addr).await else {
                        return;
                    };
                    let mut i = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        let body = new_schema_check(&format!("storm{salt}c{c}n{i}"));
                        if conn
                            .round_trip(&http_post("/v1/validate", &body))
                            .await
                            .is_err()
                        {
                            return;
                        }
                        i += 1;
                    }
                });
            }
        }
    }
    let peak = Arc::new(AtomicU64::new(rss_before.to_bits()));
    let sampler = {
        let (stop, peak) = (Arc::clone(&stop), Arc::clone(&peak));
        tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                let now = rss_mib();
                if now > f64::from_bits(peak.load(Ordering::Relaxed)) {
                    peak.store(now.to_bits(), Ordering::Relaxed);
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    };
    let deadline = Instant::now() + Duration::from_secs_f64(seconds);
    let mut benign = tokio::task::JoinSet::new();
    for c in 0..4usize {
        let singles = Arc::clone(&singles);
        benign.spawn(async move {
            let mut l = Latencies::default();
            let Ok(mut conn) = HttpConnection::connect(addr).await else {
                l.failed += 1;
                return l;
            };
            let mut i = c * 7919;
            while Instant::now() < deadline {
                let start = Instant::now();
                match conn.round_trip(&singles[i % singles.len()]).await {
                    Ok(200) => l.times.push(start.elapsed()),
                    _ => {
                        l.failed += 1;
                        match HttpConnection::connect(addr).await {
                            Ok(c) => conn = c,
                            Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
                        }
                    }
                }
                i += 1;
            }
            l
        });
    }
    let probe = tokio::spawn(async move {
        let mut l = Latencies::default();
        let Ok(mut conn) = HttpConnection::connect(addr).await else {
            l.failed += 1;
            return l;
        };
        let mut i = 0u64;
        while Instant::now() < deadline {
            let request = http_post(
                "/v1/validate",
                &new_schema_check(&format!("probe{salt}n{i}")),
            );
            let start = Instant::now();
            match conn.round_trip(&request).await {
                Ok(200) => l.times.push(start.elapsed()),
                _ => {
                    l.failed += 1;
                    if let Ok(c) = HttpConnection::connect(addr).await {
                        conn = c;
                    }
                }
            }
            i += 1;
            tokio::time::sleep(PROBE_EVERY).await;
        }
        l
    });
    let mut benign_all = Latencies::default();
    while let Some(l) = benign.join_next().await {
        let l = l?;
        benign_all.times.extend(l.times);
        benign_all.failed += l.failed;
    }
    let probe = probe.await?;
    stop.store(true, Ordering::Relaxed);
    abusers.abort_all();
    while abusers.join_next().await.is_some() {}
    let _ = sampler.await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    Ok(Phase {
        name,
        benign: benign_all,
        probe,
        rss_before,
        rss_peak: f64::from_bits(peak.load(Ordering::Relaxed)),
        rss_after: rss_mib(),
    })
}

fn new_schema_check(name: &str) -> Vec<u8> {
    json!({
        "schema": {"type": "object", "properties": {name: {"type": "integer", "minimum": 0}}, "required": [name]},
        "instance": {name: 1}
    })
    .to_string()
    .into_bytes()
}
