//! The proxy leg: `tools/call` round trips over stdio, straight to an MCP server and through
//! `schemagate proxy` in front of the same server, with results of 1 KB and 64 KB (records in
//! `structuredContent` and their JSON copy in a text block, as tools send them). The server is
//! examples/mcp_test_server.rs in `--raw` mode (it answers each call with the same pre-built
//! bytes); the client is this process, writing pre-built requests and reading answers by line, as
//! an MCP host does. Beside them, the same server behind a bare stdio relay ([`crate::bare_stdio`]),
//! the floor of any process in between. Latency is one call at a time, the three paths' calls
//! made in turn (so that a moment when the machine is slower slows all alike); the rate is with
//! 64 calls in flight, on one path at a time.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const IN_FLIGHT: u64 = 64;

struct Peer {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Peer {
    fn spawn(mut command: Command) -> anyhow::Result<Peer> {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()?;
        let stdin = child.stdin.take().ok_or_else(|| anyhow::anyhow!("stdin"))?;
        let stdout = BufReader::with_capacity(
            256 * 1024,
            child
                .stdout
                .take()
                .ok_or_else(|| anyhow::anyhow!("stdout"))?,
        );
        Ok(Peer {
            child,
            stdin,
            stdout,
        })
    }

    fn ask(&mut self, request: &[u8], answer: &mut String) -> anyhow::Result<()> {
        self.stdin.write_all(request)?;
        self.stdin.flush()?;
        answer.clear();
        anyhow::ensure!(
            self.stdout.read_line(answer)? > 0,
            "the server closed its stdout"
        );
        Ok(())
    }
}

struct Figures {
    /// CPU per call in the rate phase (`cpu_us`): this process (the client), the process it
    /// talks to (the server, or the relay), and the relay's child (the server behind it).
    timing: crate::Timing,
    answer: String,
    /// CPU microseconds per call of the process talked to, one call at a time: a relay's own
    /// (without the server behind it), or, for the direct path, its server's. Each path has a
    /// server of its own, so each figure counts only that path's calls.
    cpu1_us: f64,
}

/// The first child of process `pid`, if it has one.
fn child_of(pid: u32) -> Option<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// The width of a row's label: "64 KB through a bare stdio relay" and the rest line up.
const LABEL: usize = 32;

fn call(id: u64) -> Vec<u8> {
    format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"tools/call\",\"params\":{{\"name\":\"sized\",\"arguments\":{{\"id\":7}}}}}}\n"
    )
    .into_bytes()
}

/// Opens the session on `peer` (`initialize`) and makes its first call, which lets a proxy list
/// the tools and compile the schema: that call's answer.
fn open(peer: &mut Peer) -> anyhow::Result<String> {
    let mut answer = String::new();
    peer.ask(
        br#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"load","version":"1"}}}
"#,
        &mut answer,
    )?;
    peer.ask(&call(1), &mut answer)?;
    Ok(answer)
}

/// Round trips one at a time for `span` in all, to each of `peers` in turn (the first of a round
/// rotating), so that every path's calls are made in the same moments of the machine: the p50
/// and p99 of each, in microseconds, and the CPU microseconds per call of the process it talks
/// to (see [`Figures::cpu1_us`]).
fn latencies(
    peers: &mut [Peer],
    requests: &[Vec<u8>],
    span: Duration,
) -> anyhow::Result<Vec<(f64, f64, f64)>> {
    let mut answer = String::new();
    let mut times = vec![Vec::new(); peers.len()];
    let cpu = |peer: &Peer| crate::cpu_of(&peer.child.id().to_string());
    let cpu0: Vec<f64> = peers.iter().map(cpu).collect();
    let start = Instant::now();
    let (mut i, mut round) = (0, 0);
    while start.elapsed() < span {
        for k in 0..peers.len() {
            let at = (round + k) % peers.len();
            let t = Instant::now();
            peers[at].ask(&requests[i % requests.len()], &mut answer)?;
            times[at].push(t.elapsed());
            i += 1;
        }
        round += 1;
    }
    Ok(times
        .into_iter()
        .zip(peers.iter().zip(cpu0))
        .map(|(mut times, (peer, cpu0))| {
            let cpu1_us = (cpu(peer) - cpu0) / times.len().max(1) as f64 * 1e6;
            times.sort_unstable();
            (
                crate::percentile(&times, 0.50),
                crate::percentile(&times, 0.99),
                cpu1_us,
            )
        })
        .collect())
}

/// 64 calls in flight on `peer` for `span`, of `requests` in turn: the rate and the CPU per call
/// (as [`Figures::timing`]). The session ends with it.
fn flight(peer: Peer, requests: &[Vec<u8>], span: Duration) -> anyhow::Result<(f64, [f64; 3])> {
    let Peer {
        child,
        mut stdin,
        mut stdout,
    } = peer;
    let sent = Arc::new(AtomicU64::new(0));
    let received = Arc::new(AtomicU64::new(0));
    // The writer sleeps while 64 calls are in flight and the reader wakes it: a client that
    // spun instead would take a core from the processes it measures.
    let waiting = Arc::new(AtomicBool::new(false));
    let writer = std::thread::current();
    let reader = {
        let (received, waiting) = (Arc::clone(&received), Arc::clone(&waiting));
        std::thread::spawn(move || -> anyhow::Result<()> {
            let mut line = String::new();
            loop {
                line.clear();
                if stdout.read_line(&mut line)? == 0 {
                    break;
                }
                received.fetch_add(1, Ordering::SeqCst);
                if waiting.swap(false, Ordering::SeqCst) {
                    writer.unpark();
                }
            }
            Ok(())
        })
    };
    let (peer_pid, behind) = (child.id(), child_of(child.id()));
    let cpu = || {
        [
            crate::process_cpu(),
            crate::cpu_of(&peer_pid.to_string()),
            behind.map_or(f64::NAN, |pid| crate::cpu_of(&pid.to_string())),
        ]
    };
    let cpu0 = cpu();
    let start = Instant::now();
    let mut n = 0usize;
    while start.elapsed() < span {
        if sent.load(Ordering::Relaxed) - received.load(Ordering::SeqCst) >= IN_FLIGHT {
            waiting.store(true, Ordering::SeqCst);
            if sent.load(Ordering::Relaxed) - received.load(Ordering::SeqCst) >= IN_FLIGHT {
                std::thread::park_timeout(Duration::from_millis(10));
            }
            waiting.store(false, Ordering::SeqCst);
            continue;
        }
        stdin.write_all(&requests[n % requests.len()])?;
        stdin.flush()?;
        sent.fetch_add(1, Ordering::Relaxed);
        n += 1;
    }
    let elapsed = start.elapsed().as_secs_f64();
    let answered = received.load(Ordering::SeqCst);
    let cpu1 = cpu();
    let cpu_us = std::array::from_fn(|i| (cpu1[i] - cpu0[i]) / answered.max(1) as f64 * 1e6);
    // Let the answers still coming arrive, then close the session.
    let drain = Instant::now();
    while received.load(Ordering::SeqCst) < sent.load(Ordering::Relaxed)
        && drain.elapsed() < Duration::from_secs(10)
    {
        std::thread::sleep(Duration::from_millis(1));
    }
    drop(stdin);
    let mut child = child;
    let _ = child.kill();
    let _ = child.wait();
    let _ = reader.join();
    Ok((answered as f64 / elapsed, cpu_us))
}

/// Each of `peers` opened, then their round trips one at a time, interleaved (see
/// [`latencies`]), for `seconds / 2` per peer, then 64 in flight on each in turn for
/// `seconds / 2`: their figures, in order.
fn drive<const N: usize>(mut peers: [Peer; N], seconds: f64) -> anyhow::Result<[Figures; N]> {
    let answers = peers
        .iter_mut()
        .map(open)
        .collect::<anyhow::Result<Vec<_>>>()?;
    let requests: Vec<Vec<u8>> = (0..1024).map(|i| call(10 + i)).collect();
    let half = Duration::from_secs_f64(seconds / 2.0);
    let latency = latencies(&mut peers, &requests, half * N as u32)?;
    let mut figures = Vec::with_capacity(N);
    for ((peer, answer), (p50_us, p99_us, cpu1_us)) in peers.into_iter().zip(answers).zip(latency) {
        let (rate, cpu_us) = flight(peer, &requests, half)?;
        figures.push(Figures {
            timing: crate::Timing {
                p50_us,
                p99_us,
                rate,
                cpu_us,
            },
            answer,
            cpu1_us,
        });
    }
    figures
        .try_into()
        .map_err(|_| anyhow::anyhow!("a figure for each of {N} peers"))
}

/// Rounds of the recorded comparison: the proxy without and with `--record`, alternating.
const RECORD_ROUNDS: usize = 3;

/// `schemagate proxy` in front of `server` answering `size`-byte results, recording into
/// `record` if given.
fn proxy_command(
    server: &std::path::Path,
    size: usize,
    record: Option<&std::path::Path>,
) -> Command {
    let mut proxied = Command::new(env!("CARGO_BIN_EXE_schemagate"));
    proxied.args(["proxy", "--server-name", "bench", "--log-level", "warn"]);
    if let Some(dir) = record {
        proxied
            .arg("--record")
            .arg(dir)
            .args(["--record-max-bytes", crate::RECORD_BOUND])
            .args(["--record-max-total-bytes", crate::RECORD_BOUND]);
    }
    proxied.arg("--").arg(server).args(server_args(size));
    proxied
}

/// The test server's arguments on every path: `--raw`, answering `size`-byte results.
fn server_args(size: usize) -> [String; 3] {
    ["--raw".into(), "--result-bytes".into(), size.to_string()]
}

/// The 1 KB rows through a proxy that records the session (`--record`, in a directory of its
/// own), each beside a run without, alternating: printed, and the median of the rate ratios.
fn recorded(server: &std::path::Path, seconds: f64) -> anyhow::Result<f64> {
    let mut ratios = Vec::with_capacity(RECORD_ROUNDS);
    for round in 1..=RECORD_ROUNDS {
        let dir = tempfile::tempdir()?;
        let peers = [
            Peer::spawn(proxy_command(server, 1024, None))?,
            Peer::spawn(proxy_command(server, 1024, Some(dir.path())))?,
        ];
        let [plain, r] = drive(peers, seconds)?.map(|f| f.timing);
        let written: u64 = std::fs::read_dir(dir.path())?
            .filter_map(Result::ok)
            .filter_map(|e| e.metadata().ok())
            .map(|m| m.len())
            .sum();
        for (path, f) in [("not recorded", &plain), ("recorded", &r)] {
            let label = format!("1 KB, round {round}, {path}");
            println!("{}", f.relay_row(LABEL, &label));
        }
        println!(
            "    ({} MB recorded, {:.2}x)",
            written / 1_000_000,
            r.rate / plain.rate
        );
        ratios.push(r.rate / plain.rate);
    }
    ratios.sort_by(f64::total_cmp);
    Ok(ratios[ratios.len() / 2])
}

/// The direct pair, a bare stdio relay and the proxy in front of `server` answering
/// `size`-byte results, driven together (see [`drive`]), their rows printed: their figures.
fn paths(server: &std::path::Path, size: usize, seconds: f64) -> anyhow::Result<[Figures; 3]> {
    let mut direct = Command::new(server);
    direct.args(server_args(size));
    let mut bare = Command::new(std::env::current_exe()?);
    bare.args(["--bare-stdio-relay", "--"])
        .arg(server)
        .args(server_args(size));
    let proxied = proxy_command(server, size, None);
    // The direct pair's calls, the bare relay's and the proxy's, one at a time, in turn: the
    // added latency is of calls made in the same moments.
    let figures = drive(
        [
            Peer::spawn(direct)?,
            Peer::spawn(bare)?,
            Peer::spawn(proxied)?,
        ],
        seconds,
    )?;
    let [d, b, p] = &figures;
    crate::unchanged("bare relay", &d.answer, &b.answer)?;
    crate::unchanged("proxy", &d.answer, &p.answer)?;
    let kb = size / 1024;
    println!("{}", d.timing.direct_row(LABEL, &format!("{kb} KB direct")));
    for (path, f) in [("a bare stdio relay", b), ("the proxy", p)] {
        let label = format!("{kb} KB through {path}");
        println!("{}", f.timing.relayed_row(LABEL, &label, &d.timing));
    }
    Ok(figures)
}

pub(crate) fn proxy_leg(seconds: f64) -> anyhow::Result<()> {
    let server = crate::mcp_test_server::build()?;
    println!();
    println!("proxy: tools/call over stdio, one call at a time (latency) and {IN_FLIGHT} in flight (rate), {seconds:.0} s per path");
    println!(
        "{:<LABEL$} {:>10} {:>10} {:>12} {:>14} {:>14}   CPU us per call: client, relay, server",
        "result size / path", "p50 us", "p99 us", "calls/s", "added p50 us", "added p99 us"
    );
    let [d, b, p] = paths(&server, 1024, seconds)?;
    let recorded_1kb = recorded(&server, seconds)?;
    paths(&server, 64 * 1024, seconds)?;
    let added_p50_1kb = p.timing.added_p50_us(&d.timing);
    let proxy_cpu_1kb = p.timing.cpu_us[1];
    let ratio_1kb = p.timing.rate / d.timing.rate;
    println!("targets: added p50 < 100 us and p99 < 1000 us for 1 KB results; at least 10,000 calls/s through the proxy");
    crate::verdict_line(
        "the proxy adds <= 20 us p50 at 1 KB results",
        format!("{added_p50_1kb:.1} us"),
        added_p50_1kb <= 20.0,
    );
    // Any process between the pair adds a pipe each way: what the bare relay adds is the floor,
    // and the proxy's own cost is what it adds beyond it (both timed in the same moments, so the
    // difference holds whichever speed the direct pair settled at).
    println!(
        "  the floor: a bare stdio relay adds {:.1} us p50 at 1 KB results; the proxy adds {:.1} us beyond it",
        b.timing.added_p50_us(&d.timing),
        p.timing.added_p50_us(&b.timing)
    );
    println!(
        "  one call at a time, CPU us per call at 1 KB results: the bare relay {:.1}, the proxy {:.1} ({:.2}x)",
        b.cpu1_us,
        p.cpu1_us,
        p.cpu1_us / b.cpu1_us
    );
    crate::verdict_line(
        "the proxy's CPU per call <= 5 us at 1 KB results (64 in flight)",
        format!("{proxy_cpu_1kb:.1} us"),
        proxy_cpu_1kb <= 5.0,
    );
    crate::verdict_line(
        "--record keeps >= 0.9x the proxy's rate at 1 KB results (median of the rounds)",
        format!("{recorded_1kb:.2}x"),
        recorded_1kb >= 0.9,
    );
    crate::verdict_line(
        "the proxy relays 1 KB results at >= 0.8x the rate of the direct stdio pair",
        format!("{ratio_1kb:.2}x"),
        ratio_1kb >= 0.8,
    );
    Ok(())
}
