//! A real `redis-server` (Debian package `redis-server`) on a loopback port, with its data (an
//! append-only file, fsync every second, as the Kubernetes component runs it) in a temporary
//! directory of its own, so it can be stopped and started again with what it held. Stopped when
//! dropped. Shared by the shared-registry tests and the load harness.

use std::io::{Read, Write};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct RedisServer {
    child: Option<Child>,
    port: u16,
    dir: tempfile::TempDir,
}

/// Whether `redis-server` is on PATH.
pub fn installed() -> bool {
    std::env::var_os("PATH").is_some_and(|paths| {
        std::env::split_paths(&paths).any(|p| p.join("redis-server").is_file())
    })
}

/// A free port below Linux's ephemeral range (32768 and up): while Redis is stopped, no socket
/// bound to port 0 (another listener, or a client reconnecting to Redis, which could otherwise
/// connect to itself) can take its port.
fn port_outside_the_ephemeral_range() -> anyhow::Result<u16> {
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos()) as usize
        ^ std::process::id() as usize;
    (0..4000)
        .map(|i| 20_000 + ((seed + i * 7919) % 12_000) as u16)
        .find(|&p| std::net::TcpListener::bind(("127.0.0.1", p)).is_ok())
        .ok_or_else(|| anyhow::anyhow!("no free port between 20000 and 32000"))
}

impl RedisServer {
    /// Starts a redis-server and waits until it answers PING.
    pub fn start() -> anyhow::Result<RedisServer> {
        let mut server = RedisServer {
            child: None,
            port: port_outside_the_ephemeral_range()?,
            dir: tempfile::tempdir()?,
        };
        server.resume()?;
        Ok(server)
    }

    /// Its URL, naming database 3 (so the database number in the URL is used).
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/3", self.port)
    }

    /// Starts redis-server (again, with what it held) and waits until it answers PING.
    pub fn resume(&mut self) -> anyhow::Result<()> {
        let log = self.dir.path().join("redis.log");
        let child = Command::new("redis-server")
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .arg("--dir")
            .arg(self.dir.path())
            .args([
                "--appendonly",
                "yes",
                "--appendfsync",
                "everysec",
                "--save",
                "",
            ])
            .args(["--daemonize", "no", "--logfile"])
            .arg(&log)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| {
                anyhow::anyhow!("cannot start redis-server (apt-get install redis-server): {e}")
            })?;
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if self.ping() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        anyhow::bail!(
            "redis-server did not answer PING within 10 s; its log:\n{}",
            std::fs::read_to_string(&log).unwrap_or_default()
        )
    }

    fn ping(&self) -> bool {
        let Ok(mut stream) = std::net::TcpStream::connect(("127.0.0.1", self.port)) else {
            return false;
        };
        let _ = stream.set_read_timeout(Some(Duration::from_secs(1)));
        let mut answer = [0u8; 7];
        stream.write_all(b"PING\r\n").is_ok()
            && stream.read_exact(&mut answer).is_ok()
            && &answer == b"+PONG\r\n"
    }

    /// How many times Redis has run `command` (from INFO commandstats).
    pub fn calls(&self, command: &str) -> anyhow::Result<u64> {
        let mut stream = std::net::TcpStream::connect(("127.0.0.1", self.port))?;
        stream.set_read_timeout(Some(Duration::from_secs(2)))?;
        stream.write_all(b"INFO commandstats\r\n")?;
        let mut text = Vec::new();
        let mut buf = [0u8; 4096];
        // A bulk string: `$LEN\r\n` then LEN bytes and `\r\n`.
        loop {
            let n = stream.read(&mut buf)?;
            anyhow::ensure!(n > 0, "redis closed the connection");
            text.extend_from_slice(&buf[..n]);
            let s = String::from_utf8_lossy(&text);
            if let Some((head, body)) = s.split_once("\r\n") {
                let len: usize = head.trim_start_matches('$').parse()?;
                if body.len() >= len {
                    let prefix = format!("cmdstat_{command}:calls=");
                    return Ok(body
                        .lines()
                        .find_map(|l| l.strip_prefix(&prefix))
                        .and_then(|rest| rest.split(',').next())
                        .and_then(|n| n.parse().ok())
                        .unwrap_or(0));
                }
            }
        }
    }

    /// Stops redis-server at once (as a crash or a lost network would).
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.stop();
    }
}
