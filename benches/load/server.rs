//! The server the transport legs run against: `schemagate serve` (the binary cargo built beside
//! this harness, in its profile) in a process of its own, so that its clients are another
//! process, as wrk is, and its CPU is read from /proc as a whole.

use super::*;
use anyhow::Context as _;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};

/// A `schemagate serve` process; killed when dropped.
pub(crate) struct ServerProcess {
    child: Child,
    pub(crate) http: SocketAddr,
    pub(crate) grpc: SocketAddr,
}

impl ServerProcess {
    /// Starts `schemagate serve ARGS` on two free loopback ports, its threads on `cpus` when
    /// given. Ready once its `/readyz` answers (see `wait_ready`).
    pub(crate) fn start(args: &[String], cpus: Option<&[usize]>) -> anyhow::Result<ServerProcess> {
        // Both ports are held until both are known, then let go for the server to bind.
        let (http, grpc) = {
            let a = std::net::TcpListener::bind("127.0.0.1:0")?;
            let b = std::net::TcpListener::bind("127.0.0.1:0")?;
            (a.local_addr()?, b.local_addr()?)
        };
        let mut command = Command::new(env!("CARGO_BIN_EXE_schemagate"));
        command
            .arg("serve")
            .args(args)
            .arg(format!("--listen={http}"))
            .arg(format!("--grpc-listen={grpc}"))
            .stdin(Stdio::null());
        if let Some(cpus) = cpus {
            let cpus = cpus.to_vec();
            // SAFETY: the closure only makes the sched_setaffinity system call (no allocation,
            // no lock), which is safe between fork and exec.
            unsafe {
                command.pre_exec(move || {
                    pin_current_thread(&cpus);
                    Ok(())
                });
            }
        }
        let child = command
            .spawn()
            .context("cannot start `schemagate serve` for the transport legs")?;
        Ok(ServerProcess { child, http, grpc })
    }

    /// CPU seconds the server process has used so far (every thread, user and system).
    pub(crate) fn cpu(&self) -> f64 {
        cpu_of(&self.child.id().to_string())
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
