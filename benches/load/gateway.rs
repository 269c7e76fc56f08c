//! The gateway leg: `tools/call` round trips on Streamable HTTP, straight to an MCP server and
//! through `schemagate gateway` in front of it, with results of 1 KB and 64 KB (records and their
//! JSON copy, as tools send them) answered as JSON and as a server-sent event. The server is
//! examples/mcp_test_server.rs `--raw --http` (every call answered with the same pre-built
//! result); the client is this process, on keep-alive HTTP/1.1 (reqwest), as an MCP client is.
//! Latency is one call at a time, the direct calls and the relays' made in turn (so that a moment
//! when the machine is slower slows every path alike); the rate is with 64 calls in flight, on one
//! path at a time. Calls are requests of their own (no session), and for 1 KB JSON also calls in
//! one session the gateway holds (its rules and its own listing kept between calls).

use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const IN_FLIGHT: usize = 64;
/// Calls in flight where the CPU per call is compared with the bare relay's.
const FEW_IN_FLIGHT: usize = 4;

fn call(id: u64) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"sized","arguments":{{"id":7}}}}}}"#
    )
}

/// A child process of the leg, killed and reaped when dropped: none outlives the leg, whether
/// it ends, fails, or a later spawn fails.
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A child process that prints its URL on its first line of stdout.
fn spawn_with_url(mut command: Command) -> anyhow::Result<(Reaped, String)> {
    use std::io::BufRead;
    let mut child = Reaped(
        command
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()?,
    );
    let stdout = child
        .0
        .stdout
        .take()
        .ok_or_else(|| anyhow::anyhow!("stdout"))?;
    let mut line = String::new();
    std::io::BufReader::new(stdout).read_line(&mut line)?;
    Ok((child, line.trim().to_owned()))
}

/// The width of a row's label: "1 KB JSON in a session, recorded through the gateway" and the
/// rest line up.
const LABEL: usize = 52;

struct Figures {
    /// CPU per call in the rate phase (`cpu_us`): this process (the client), the process it
    /// talks to (the server, or a relay), and the server behind the relay.
    timing: crate::Timing,
    answer: String,
    /// The same with [`FEW_IN_FLIGHT`] calls in flight.
    cpu4_us: [f64; 3],
    /// The relay's (the process answering) with one call at a time, in the latency phase: the
    /// work on each call's path, where the added latency is that work and the wake-ups.
    cpu1_us: f64,
}

/// Posts `body` to `url`, in `session` if any: the answer's body.
async fn ask(
    client: &reqwest::Client,
    url: &str,
    session: Option<&str>,
    body: String,
) -> anyhow::Result<String> {
    let mut request = client
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-11-25");
    if let Some(session) = session {
        request = request.header("mcp-session-id", session);
    }
    let response = request.body(body).send().await?;
    anyhow::ensure!(response.status() == 200, "status {}", response.status());
    Ok(response.text().await?)
}

/// Begins a session at `url` (2025-11-25's `initialize`, then `notifications/initialized`): its
/// `Mcp-Session-Id`.
async fn begin(client: &reqwest::Client, url: &str) -> anyhow::Result<String> {
    let initialize = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"load","version":"1"}}}"#;
    let response = client
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(initialize)
        .send()
        .await?;
    let session = response
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .ok_or_else(|| anyhow::anyhow!("no Mcp-Session-Id in the answer to initialize"))?
        .to_owned();
    response.text().await?;
    let initialized = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
    client
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-11-25")
        .header("mcp-session-id", &session)
        .body(initialized)
        .send()
        .await?;
    // Past the moments just after `initialized`, when a call waits for a GET that may come.
    tokio::time::sleep(Duration::from_millis(150)).await;
    Ok(session)
}

/// The calls answered by `in_flight` tasks calling `path` for `span`, their rate, and the CPU
/// microseconds per call of this process and of the path's processes (as [`crate::Timing::cpu_us`]).
async fn flight(path: &Path, in_flight: usize, span: Duration) -> anyhow::Result<(f64, [f64; 3])> {
    let answered = Arc::new(AtomicU64::new(0));
    let cpu0 = cpu(path.pids);
    let start = Instant::now();
    let mut tasks = Vec::new();
    for task in 0..in_flight as u64 {
        let (client, url, answered) =
            (path.client.clone(), path.url.clone(), Arc::clone(&answered));
        let session = path.session.clone();
        tasks.push(tokio::spawn(async move {
            let mut id = 1_000_000 * (task + 1);
            while start.elapsed() < span {
                ask(&client, &url, session.as_deref(), call(id)).await?;
                answered.fetch_add(1, Ordering::Relaxed);
                id += 1;
            }
            anyhow::Ok(())
        }));
    }
    for task in tasks {
        task.await??;
    }
    let elapsed = start.elapsed().as_secs_f64();
    let answered = answered.load(Ordering::Relaxed);
    Ok((
        answered as f64 / elapsed,
        per_call(cpu0, cpu(path.pids), answered),
    ))
}

/// CPU seconds so far: this process (the client), then the processes `pids` names.
fn cpu(pids: [Option<u32>; 2]) -> [f64; 3] {
    [
        crate::process_cpu(),
        pids[0].map_or(f64::NAN, |pid| crate::cpu_of(&pid.to_string())),
        pids[1].map_or(f64::NAN, |pid| crate::cpu_of(&pid.to_string())),
    ]
}

/// CPU microseconds per call of each process, from `before` to `after` over `calls` calls.
fn per_call(before: [f64; 3], after: [f64; 3], calls: u64) -> [f64; 3] {
    std::array::from_fn(|i| (after[i] - before[i]) / calls.max(1) as f64 * 1e6)
}

/// One path the leg calls: straight to the server, through the bare relay or through the
/// gateway.
struct Path {
    url: String,
    client: reqwest::Client,
    /// The session the calls are made in, if any.
    session: Option<String>,
    /// The process answering and the one behind it, if any.
    pids: [Option<u32>; 2],
    /// The answer to the first call.
    answer: String,
}

impl Path {
    /// A client of its own for `url`, in a session begun first where `in_session` (the gateway
    /// holds its rules, its own listing among them; else each call is a request of its own), and
    /// the first call made (it lets the gateway list the tools and compile the schema).
    async fn open(url: &str, pids: [Option<u32>; 2], in_session: bool) -> anyhow::Result<Path> {
        let client = crate::http_client::builder()
            .http1_only()
            .pool_max_idle_per_host(IN_FLIGHT)
            .build()?;
        let session = match in_session {
            true => Some(begin(&client, url).await?),
            false => None,
        };
        let answer = ask(&client, url, session.as_deref(), call(1)).await?;
        Ok(Path {
            url: url.to_owned(),
            client,
            session,
            pids,
            answer,
        })
    }

    async fn ask(&self, id: u64) -> anyhow::Result<String> {
        ask(&self.client, &self.url, self.session.as_deref(), call(id)).await
    }
}

/// Round trips one at a time for `span` in all, to each of `paths` in turn (the first of a round
/// rotating), so that every path's calls are made in the same moments of the machine: each
/// path's times, sorted, and the CPU microseconds per call of the process answering it: a relay
/// answers only its own path's calls, and sits idle through the others' (the server behind them
/// answers every path's, so the direct path's figure is no figure of its own, and is not shown).
async fn latencies(paths: &[Path], span: Duration) -> anyhow::Result<Vec<(Vec<Duration>, f64)>> {
    let mut times = vec![Vec::new(); paths.len()];
    let cpu0: Vec<[f64; 3]> = paths.iter().map(|p| cpu(p.pids)).collect();
    let start = Instant::now();
    let (mut id, mut round) = (10, 0);
    while start.elapsed() < span {
        for k in 0..paths.len() {
            let at = (round + k) % paths.len();
            let t = Instant::now();
            paths[at].ask(id).await?;
            times[at].push(t.elapsed());
            id += 1;
        }
        round += 1;
    }
    Ok(times
        .into_iter()
        .zip(paths.iter().zip(cpu0))
        .map(|(mut times, (path, cpu0))| {
            let cpu1_us = per_call(cpu0, cpu(path.pids), times.len() as u64)[1];
            times.sort_unstable();
            (times, cpu1_us)
        })
        .collect())
}

/// Each of `paths` called one at a time, interleaved (see [`latencies`]), a third of `seconds`
/// per path, then on each in turn 4 in flight (the CPU per call) and 64 in flight (the rate) for
/// a third each: their figures, in order.
async fn drive(paths: Vec<Path>, seconds: f64) -> anyhow::Result<Vec<Figures>> {
    let third = Duration::from_secs_f64(seconds / 3.0);
    let latency = latencies(&paths, third * paths.len() as u32).await?;
    let mut figures = Vec::with_capacity(paths.len());
    for (path, (times, cpu1_us)) in paths.into_iter().zip(latency) {
        let (_, cpu4_us) = flight(&path, FEW_IN_FLIGHT, third).await?;
        let (rate, cpu_us) = flight(&path, IN_FLIGHT, third).await?;
        figures.push(Figures {
            timing: crate::Timing {
                p50_us: crate::percentile(&times, 0.50),
                p99_us: crate::percentile(&times, 0.99),
                rate,
                cpu_us,
            },
            answer: path.answer,
            cpu4_us,
            cpu1_us,
        });
    }
    Ok(figures)
}

/// Prints the gateway's figures: direct and through the gateway, for each result size and each
/// answer form.
pub(crate) fn gateway_leg(seconds: f64) -> anyhow::Result<()> {
    let server = crate::mcp_test_server::build()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    println!();
    println!("gateway: tools/call on Streamable HTTP, one call at a time (latency) and {IN_FLIGHT} in flight (rate), {seconds:.0} s per pair");
    println!(
        "{:<LABEL$} {:>10} {:>10} {:>12} {:>14} {:>14}   CPU us per call: client, gateway, server",
        "result / answer / path", "p50 us", "p99 us", "calls/s", "added p50 us", "added p99 us"
    );
    let mut worst_added_p50_1kb = f64::NAN;
    let mut worst_ratio_1kb = f64::NAN;
    // Sessionless requests (each call a request of its own), and, for 1 KB JSON, calls in a
    // session the gateway holds.
    // The last: 1 KB JSON in a session, recorded (`--record`).
    let variants = [
        (1024usize, false, false, false),
        (1024, true, false, false),
        (1024, false, true, false),
        (64 * 1024, false, false, false),
        (64 * 1024, true, false, false),
        (1024, false, true, true),
    ];
    let mut in_session_rate = f64::NAN;
    let (mut worst_latency_ratio, mut worst_cpu_ratio) = (f64::NAN, f64::NAN);
    let mut recorded_ratio = f64::NAN;
    for (size, sse, in_session, record) in variants {
        let recordings = tempfile::tempdir()?;
        let mut upstream = Command::new(&server);
        upstream.args([
            "--raw",
            "--http",
            "127.0.0.1:0",
            "--result-bytes",
            &size.to_string(),
        ]);
        if sse {
            upstream.arg("--sse");
        }
        let (upstream, url) = spawn_with_url(upstream)?;
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let mut gateway = Command::new(env!("CARGO_BIN_EXE_schemagate"));
        gateway
            .args(["gateway", "--log-level", "warn", "--listen"])
            .arg(format!("127.0.0.1:{port}"))
            .arg("--route")
            .arg(format!("bench={url}"));
        if record {
            // Bounds past what a run writes: every line is written, none counted and dropped.
            gateway
                .arg("--record")
                .arg(recordings.path())
                .args(["--record-max-bytes", crate::RECORD_BOUND])
                .args(["--record-max-total-bytes", crate::RECORD_BOUND]);
        }
        let gateway = Reaped(gateway.spawn()?);
        let through = format!("http://127.0.0.1:{port}/mcp/bench");
        // The floor: the bare relay on the same upstream, for sessionless calls.
        let bare = match (in_session, record) {
            (false, false) => {
                let mut relay = Command::new(std::env::current_exe()?);
                relay.arg("--bare-relay").arg(&url);
                Some(spawn_with_url(relay)?)
            }
            _ => None,
        };
        let figures = runtime.block_on(async {
            let health = format!("http://127.0.0.1:{port}/healthz");
            for _ in 0..200 {
                if crate::http_client::get(&health).await.is_ok() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(25)).await;
            }
            // Direct, through the bare relay (if any) and through the gateway, one at a time in
            // turn: each relay's added latency is of calls made in the same moments.
            let upstream_pid = Some(upstream.0.id());
            let mut paths = vec![Path::open(&url, [upstream_pid, None], in_session).await?];
            if let Some((relay, relayed)) = &bare {
                let pids = [Some(relay.0.id()), upstream_pid];
                paths.push(Path::open(relayed, pids, in_session).await?);
            }
            let pids = [Some(gateway.0.id()), upstream_pid];
            paths.push(Path::open(&through, pids, in_session).await?);
            let mut figures = drive(paths, seconds).await?.into_iter();
            let d = figures.next().ok_or_else(|| anyhow::anyhow!("direct"))?;
            let g = figures
                .next_back()
                .ok_or_else(|| anyhow::anyhow!("gateway"))?;
            anyhow::Ok((d, figures.next(), g))
        });
        drop((gateway, upstream, bare));
        let (d, b, g) = figures?;
        if let Some(b) = &b {
            crate::unchanged("bare relay", &d.answer, &b.answer)?;
        }
        crate::unchanged("gateway", &d.answer, &g.answer)?;
        let kb = size / 1024;
        let form = match (sse, in_session, record) {
            (true, _, _) => "SSE",
            (false, false, _) => "JSON",
            (false, true, false) => "JSON in a session",
            (false, true, true) => "JSON in a session, recorded",
        };
        println!(
            "{}",
            d.timing
                .direct_row(LABEL, &format!("{kb} KB {form} direct"))
        );
        let relayed = |name: &str, f: &Figures| {
            let label = format!("{kb} KB {form} {name}");
            println!(
                "{}   (at {FEW_IN_FLIGHT} in flight: {:.1}; at 1: {:.1})",
                f.timing.relayed_row(LABEL, &label, &d.timing),
                f.cpu4_us[1],
                f.cpu1_us
            );
        };
        if let Some(b) = &b {
            relayed("through a bare hyper relay", b);
        }
        relayed("through the gateway", &g);
        let added_p50 = g.timing.added_p50_us(&d.timing);
        if let Some(b) = &b {
            // A bare relay that added nothing (or less) leaves no ratio to meet.
            let latency = match b.timing.added_p50_us(&d.timing) {
                bare if bare > 0.0 => added_p50 / bare,
                _ => f64::INFINITY,
            };
            let cpu = g.cpu4_us[1] / b.cpu4_us[1];
            println!(
                "{:<LABEL$} added p50 {latency:.2}x, CPU per call at {FEW_IN_FLIGHT} in flight {cpu:.2}x",
                format!("{kb} KB {form}, gateway / bare relay")
            );
            if size == 1024 {
                worst_latency_ratio = worst_latency_ratio.max(latency);
                worst_cpu_ratio = worst_cpu_ratio.max(cpu);
            }
        }
        match (in_session, record) {
            (true, false) if size == 1024 => in_session_rate = g.timing.rate,
            (true, true) => recorded_ratio = g.timing.rate / in_session_rate,
            _ => {}
        }
        if size == 1024 && !in_session {
            let ratio = g.timing.rate / d.timing.rate;
            worst_added_p50_1kb = worst_added_p50_1kb.max(added_p50);
            worst_ratio_1kb = worst_ratio_1kb.min(ratio);
        }
    }
    crate::verdict_line(
        "the gateway adds < 150 us p50 for 1 KB results (JSON and SSE, the worse)",
        format!("{worst_added_p50_1kb:.1} us"),
        worst_added_p50_1kb < 150.0,
    );
    crate::verdict_line(
        "the gateway's added p50 for 1 KB results <= 1.6x a bare hyper relay's (JSON and SSE, the worse)",
        format!("{worst_latency_ratio:.2}x"),
        worst_latency_ratio <= 1.6,
    );
    crate::verdict_line(
        "the gateway's CPU per call at 4 in flight for 1 KB results <= 1.6x a bare relay's (the worse)",
        format!("{worst_cpu_ratio:.2}x"),
        worst_cpu_ratio <= 1.6,
    );
    crate::verdict_line(
        "--record keeps >= 0.9x the gateway's rate for 1 KB JSON in a session",
        format!("{recorded_ratio:.2}x"),
        recorded_ratio >= 0.9,
    );
    crate::verdict_line(
        "the gateway relays 1 KB results at >= 0.6x the direct rate (the worse)",
        format!("{worst_ratio_1kb:.2}x"),
        worst_ratio_1kb >= 0.6,
    );
    Ok(())
}
