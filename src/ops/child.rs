//! An MCP server as a child process (of `schemagate proxy`, or of a gateway's stdio route):
//! started with piped stdin and stdout, stopped when its client goes (its stdin closed, then
//! SIGTERM, then SIGKILL, each after the grace) or when schemagate itself is told to stop (SIGTERM
//! at once, SIGKILL soon after), and its exit status turned into the proxy's own exit code.

use anyhow::Context;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio_util::sync::CancellationToken;

/// Starts `command` (program and arguments) with its stdin and stdout piped to us and its stderr
/// inherited (hosts log it); with `own_group`, in a process group of its own (then stopping it
/// signals the group: what it started goes with it).
pub fn spawn(
    command: &[String],
    own_group: bool,
) -> anyhow::Result<(Child, ChildStdin, ChildStdout)> {
    let (program, args) = command.split_first().context("no server command")?;
    let mut child = Command::new(program);
    if own_group {
        child.process_group(0);
    }
    let mut child = child
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("cannot start the MCP server {program:?}"))?;
    let (Some(server_in), Some(server_out)) = (child.stdin.take(), child.stdout.take()) else {
        anyhow::bail!("the MCP server's stdin and stdout were not piped");
    };
    Ok((child, server_in, server_out))
}

/// Stops process `pid` that was asked to exit (its stdin closed): SIGTERM after `grace`, SIGKILL
/// after another, unless it exited (`exited`) first. With `group`, its process group (see
/// [`spawn`]) is signalled.
pub async fn stop_after(pid: Option<u32>, group: bool, grace: Duration, exited: CancellationToken) {
    signal_unless_exited(
        pid,
        group,
        [(grace, libc::SIGTERM), (grace, libc::SIGKILL)],
        exited,
    )
    .await;
}

/// Stops process `pid` now, the proxy itself being stopped: SIGTERM at once, SIGKILL after
/// `kill_after`, unless it exited (`exited`) first. A host that signals its MCP server (the proxy)
/// kills it soon after, and a server left behind would outlive its session.
pub async fn stop_now(pid: Option<u32>, kill_after: Duration, exited: CancellationToken) {
    signal_unless_exited(
        pid,
        false,
        [(Duration::ZERO, libc::SIGTERM), (kill_after, libc::SIGKILL)],
        exited,
    )
    .await;
}

async fn signal_unless_exited(
    pid: Option<u32>,
    group: bool,
    steps: [(Duration, libc::c_int); 2],
    exited: CancellationToken,
) {
    let Some(pid) = pid.and_then(|p| i32::try_from(p).ok()) else {
        return;
    };
    for (wait, signal) in steps {
        tokio::select! {
            () = exited.cancelled() => return,
            () = tokio::time::sleep(wait) => {}
        }
        tracing::info!(pid, signal, "the MCP server has not exited: signalling it");
        // SAFETY: kill(2) takes plain integers and touches no memory of ours; `pid` is our own
        // child, not yet reaped (`exited` is cancelled only after it is waited for), and with
        // `group` the leader of a group of its own.
        unsafe {
            libc::kill(if group { -pid } else { pid }, signal);
        }
    }
}

/// The exit code that reports `status`: the server's code, or 128 + the signal that ended it.
pub fn exit_code(status: ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(1)
}
