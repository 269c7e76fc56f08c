//! The one shutdown signal (SIGINT or SIGTERM) and the policy reload triggers (SIGHUP, and a
//! change of the policy file's content, which is how a mounted ConfigMap update arrives).

use crate::gate::Gate;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Resolves on SIGINT or SIGTERM.
pub async fn signal() {
    let ctrl_c = async {
        if let Err(e) = tokio::signal::ctrl_c().await {
            tracing::error!(error = %e, "cannot listen for SIGINT");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(e) => {
                tracing::error!(error = %e, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = terminate => {}
    }
}

/// Reloads the policy on SIGHUP, and when the file's content changes (polled every
/// `poll_secs`; 0 turns polling off). Stops when `token` is cancelled.
pub fn watch_policy(gate: Arc<Gate>, poll_secs: u64, token: CancellationToken) {
    let Some(path) = gate.policy_path().cloned() else {
        return;
    };
    #[cfg(unix)]
    {
        let gate = Arc::clone(&gate);
        let token = token.clone();
        tokio::spawn(async move {
            let Ok(mut hup) =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
            else {
                tracing::warn!(
                    "cannot listen for SIGHUP; reload with POST /v1/admin/reload-policy"
                );
                return;
            };
            loop {
                tokio::select! {
                    () = token.cancelled() => return,
                    got = hup.recv() => {
                        if got.is_none() { return; }
                        tracing::info!("SIGHUP: reloading the policy");
                        let _ = gate.reload_policy();
                    }
                }
            }
        });
    }
    if poll_secs == 0 {
        return;
    }
    tokio::spawn(async move {
        let digest = |bytes: &[u8]| blake3::hash(bytes);
        let mut last = tokio::fs::read(&path).await.ok().map(|b| digest(&b));
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
                tracing::info!(path = %path.display(), "policy file changed: reloading");
                let _ = gate.reload_policy();
            }
        }
    });
}
