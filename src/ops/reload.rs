//! Reloading a configuration file without a restart: on SIGHUP, and when the file's content
//! changes (polled). The one file-watch helper: the policy, the token file and the TLS
//! certificate all reload this way, under every command.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Calls `reload` on SIGHUP (when `sighup`: `schemagate proxy` takes SIGHUP as its host hanging
/// up, not as a reload), and when the content of `path` changes (polled every `poll_secs`; 0
/// turns polling off). `what` names the file in logs. Stops when `token` is cancelled.
pub fn watch(
    what: &'static str,
    path: PathBuf,
    poll_secs: u64,
    sighup: bool,
    token: CancellationToken,
    reload: impl Fn() + Send + Sync + 'static,
) {
    let reload = Arc::new(reload);
    #[cfg(unix)]
    if sighup {
        let (reload, token) = (Arc::clone(&reload), token.clone());
        tokio::spawn(async move {
            let Ok(mut hup) =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
            else {
                tracing::warn!(
                    what,
                    "cannot listen for SIGHUP; reload through the admin endpoint"
                );
                return;
            };
            loop {
                tokio::select! {
                    () = token.cancelled() => return,
                    got = hup.recv() => {
                        if got.is_none() { return; }
                        tracing::info!(what, "SIGHUP: reloading");
                        reload();
                    }
                }
            }
        });
    }
    if poll_secs == 0 {
        return;
    }
    let digest = |bytes: &[u8]| blake3::hash(bytes);
    // Read now, at start-up, not when the task first runs: a change made before then would
    // otherwise be taken for the content in force and never reloaded.
    let mut last = std::fs::read(&path).ok().map(|b| digest(&b));
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(poll_secs));
        tick.tick().await;
        loop {
            tokio::select! {
                () = token.cancelled() => return,
                _ = tick.tick() => {}
            }
            let now = tokio::fs::read(&path).await.ok().map(|b| digest(&b));
            if now.is_some() && now != last {
                last = now;
                tracing::info!(what, path = %path.display(), "file changed: reloading");
                reload();
            }
        }
    });
}
