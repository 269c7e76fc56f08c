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
    let mut leader_gone = false;
    for (wait, signal) in steps {
        if leader_gone {
            tokio::time::sleep(wait).await;
        } else {
            tokio::select! {
                () = exited.cancelled() => {
                    // The leader's exit ends it alone: what it started may still run in its
                    // group, and is signalled all the same.
                    if !group {
                        return;
                    }
                    leader_gone = true;
                    tokio::time::sleep(wait).await;
                }
                () = tokio::time::sleep(wait) => {}
            }
        }
        if group && !group_alive(pid) {
            return;
        }
        tracing::info!(
            pid,
            signal,
            group,
            "the MCP server has not exited: signalling it"
        );
        // SAFETY: kill(2) takes plain integers and touches no memory of ours. Without `group`,
        // `pid` is our own child, not yet reaped (`exited` is cancelled only after it is waited
        // for); with `group`, the id of a process group of its own, which no other group takes
        // while a member of it lives.
        unsafe {
            libc::kill(if group { -pid } else { pid }, signal);
        }
    }
}

/// Whether any process of the group `pgid` still runs.
pub fn group_alive(pgid: i32) -> bool {
    // SAFETY: kill(2) with signal 0 sends nothing; it only says whether the group has members.
    unsafe { libc::kill(-pgid, 0) == 0 }
}

/// Signals every process of the group `pgid` with `signal`, if any runs.
pub fn signal_group(pgid: i32, signal: libc::c_int) {
    if group_alive(pgid) {
        // SAFETY: as in `group_alive`; `pgid` names a group this process made.
        unsafe {
            libc::kill(-pgid, signal);
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
