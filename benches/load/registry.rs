//! The shared-registry legs (`--with-redis`): a real `redis-server` (Debian package
//! `redis-server`) on a loopback port, the transport legs run against a replica whose registry is
//! in it, and then, with a second replica on the same Redis: how long a registration takes to be
//! acknowledged, and how long after its acknowledgement another replica uses it.

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A redis-server of the harness's own, stopped when dropped.
pub(crate) struct RedisServer {
    child: Child,
    pub(crate) url: String,
    _dir: tempfile::TempDir,
}

impl RedisServer {
    pub(crate) fn start() -> anyhow::Result<RedisServer> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let dir = tempfile::tempdir()?;
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .arg("--dir")
            .arg(dir.path())
            // As the Kubernetes component runs it: an append-only file, fsync every second.
            .args([
                "--appendonly",
                "yes",
                "--appendfsync",
                "everysec",
                "--save",
                "",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| {
                anyhow::anyhow!(
                    "--with-redis needs redis-server on PATH (apt-get install redis-server): {e}"
                )
            })?;
        let server = RedisServer {
            child,
            url: format!("redis://127.0.0.1:{port}/0"),
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if ping(port) {
                return Ok(server);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        anyhow::bail!("redis-server did not answer within 10 s")
    }
}

fn ping(port: u16) -> bool {
    let Ok(mut stream) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let mut answer = [0u8; 7];
    stream.write_all(b"PING\r\n").is_ok()
        && stream.read_exact(&mut answer).is_ok()
        && &answer == b"+PONG\r\n"
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() as f64 - 1.0) * q).round() as usize]
}

/// Registers a changed contract on `a` `rounds` times and, after each acknowledgement, asks `b`
/// (as fast as it answers) until it uses the new contract; prints both latencies.
pub(crate) async fn propagation_leg(
    a: SocketAddr,
    b: SocketAddr,
    token: Option<&str>,
    rounds: usize,
) -> anyhow::Result<()> {
    let http = reqwest::Client::new();
    let authorised = |r: reqwest::RequestBuilder| match token {
        Some(t) => r.bearer_auth(t),
        None => r,
    };
    let (mut acks, mut reached) = (Vec::with_capacity(rounds), Vec::with_capacity(rounds));
    for round in 0..rounds {
        let server = format!("bench-registry-{}", round % 8);
        let list = serde_json::json!({"tools": [{
            "name": "lookup",
            "outputSchema": {"type": "object", "properties": {"n": {"const": round}}, "required": ["n"]}
        }]});
        let sent = Instant::now();
        let answer: serde_json::Value = authorised(
            http.put(format!("http://{a}/v1/servers/{server}/tools"))
                .body(list.to_string()),
        )
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?;
        let acked = Instant::now();
        acks.push((acked - sent).as_secs_f64() * 1000.0);
        let hash = answer["tools"][0]["output_schema_hash"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        // Another replica uses it once its listing shows the new hash (the listing reads only
        // what the replica holds, never Redis).
        let deadline = acked + Duration::from_secs(5);
        loop {
            let listing: serde_json::Value =
                authorised(http.get(format!("http://{b}/v1/servers/{server}/tools")))
                    .send()
                    .await?
                    .json()
                    .await?;
            if listing["tools"][0]["output_schema_hash"] == hash.as_str() {
                reached.push(acked.elapsed().as_secs_f64() * 1000.0);
                break;
            }
            anyhow::ensure!(
                Instant::now() < deadline,
                "round {round}: the other replica did not see the change within 5 s"
            );
        }
    }
    acks.sort_by(f64::total_cmp);
    reached.sort_by(f64::total_cmp);
    println!(
        "shared registry (Redis), {rounds} registrations on one replica, another replica polled:"
    );
    println!(
        "  registration acknowledged (written to Redis): p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        quantile(&acks, 0.5),
        quantile(&acks, 0.99),
        quantile(&acks, 1.0)
    );
    println!(
        "  used by the other replica, after the acknowledgement: p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms (bound: 1,000 ms)",
        quantile(&reached, 0.5),
        quantile(&reached, 0.99),
        quantile(&reached, 1.0)
    );
    Ok(())
}
