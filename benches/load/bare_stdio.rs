//! The floor the proxy is measured against: a bare stdio relay, with no MCP work at all. It runs
//! the server's command as its child and copies bytes both ways as they come, on the stack the
//! proxy runs on (tokio's current-thread runtime, the pipes read and written on it). The harness
//! runs it in a process of its own (`--bare-stdio-relay -- COMMAND...`). Two blocking threads
//! copying with `std::io::copy` instead measured the same (55.6 and 69.5 us added at p50 on this
//! stack against 62.5 on threads, in alternated runs), so the floor is the extra process and the
//! pipe it adds each way, not the runtime.

use std::os::fd::AsFd;
use std::process::Stdio;
use tokio::net::unix::pipe;

/// Relays between this process's stdin/stdout and `command` until the server closes its stdout
/// (a client that closes its stdin ends it too, once the server, reading its end, exits). Killed
/// (as the harness ends a path), it closes the server's stdin with it, and the server exits there.
pub(crate) fn run(command: &[String]) -> anyhow::Result<()> {
    let (program, args) = command
        .split_first()
        .ok_or_else(|| anyhow::anyhow!("give the server's command after --"))?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let mut child = tokio::process::Command::new(program)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()?;
        let mut to_server = child.stdin.take().ok_or_else(|| anyhow::anyhow!("stdin"))?;
        let mut from_server = child
            .stdout
            .take()
            .ok_or_else(|| anyhow::anyhow!("stdout"))?;
        let mut client_in =
            pipe::Receiver::from_owned_fd(std::io::stdin().as_fd().try_clone_to_owned()?)?;
        let mut client_out =
            pipe::Sender::from_owned_fd(std::io::stdout().as_fd().try_clone_to_owned()?)?;
        let up = tokio::spawn(async move { tokio::io::copy(&mut client_in, &mut to_server).await });
        let _ = tokio::io::copy(&mut from_server, &mut client_out).await;
        up.abort();
        Ok(())
    })
}
