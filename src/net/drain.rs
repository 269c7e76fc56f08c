//! Start-up and drain, written once for every command that serves: the core built and what
//! follows it started (the shared registry, the configuration files' reloads, the certificate's),
//! and on shutdown the drain every listener goes through: readiness fails first while requests
//! are still answered, then the listeners close, then the requests in flight get a grace period.

use crate::core::gate::{Gate, GateConfig};
use crate::net::tls::Tls;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::{CancellationToken, DropGuard};

/// A command's core, running: the gate, and the token its background work stops on (cancelled
/// when this is dropped, or by the [`Drain`]).
pub struct Started {
    pub gate: Arc<Gate>,
    pub stop: CancellationToken,
    _stopped_when_dropped: DropGuard,
}

/// Builds the core from `config` and starts what follows it: the shared registry (if any), the
/// policy and token files' reloads (every `poll_secs`, and on SIGHUP where `sighup`), and the
/// certificate's (with `tls`).
pub fn start(
    config: GateConfig,
    tls: Option<&Arc<Tls>>,
    poll_secs: u64,
    sighup: bool,
) -> anyhow::Result<Started> {
    let gate = Gate::new(config)?;
    let stop = CancellationToken::new();
    gate.start(stop.clone());
    gate.watch_files(poll_secs, sighup, &stop);
    if let Some(tls) = tls {
        tls.watch(poll_secs, &stop);
    }
    Ok(Started {
        gate,
        _stopped_when_dropped: stop.clone().drop_guard(),
        stop,
    })
}

/// The drain of a serving command, begun by its shutdown signal.
pub struct Drain {
    /// Cancelled at once: readiness fails (and gRPC health says NOT_SERVING), requests are still
    /// answered.
    pub unready: CancellationToken,
}

impl Started {
    /// Once `shutdown` resolves: readiness fails for `delay` while requests are still answered
    /// (time for a load balancer to stop sending any), then [`Started::stop`] is cancelled and the
    /// listeners close.
    pub fn drain_on(
        &self,
        shutdown: impl Future<Output = ()> + Send + 'static,
        delay: Duration,
    ) -> Drain {
        let unready = CancellationToken::new();
        let (gate, unready_tx, stop) = (Arc::clone(&self.gate), unready.clone(), self.stop.clone());
        tokio::spawn(async move {
            shutdown.await;
            tracing::info!(
                delay_secs = delay.as_secs(),
                "shutting down: not ready; still answering until the drain delay ends"
            );
            gate.set_draining();
            unready_tx.cancel();
            tokio::time::sleep(delay).await;
            tracing::info!("drain delay over: closing the listeners, finishing requests in flight");
            stop.cancel();
        });
        Drain { unready }
    }

    /// Runs `served` (the listeners) to its end, or until `grace` after the listeners close:
    /// requests still in flight then are abandoned (logged).
    pub async fn serve_until_grace(
        &self,
        served: impl Future<Output = anyhow::Result<()>>,
        grace: Duration,
    ) -> anyhow::Result<()> {
        tokio::pin!(served);
        tokio::select! {
            result = &mut served => result,
            () = async { self.stop.cancelled().await; tokio::time::sleep(grace).await } => {
                tracing::warn!("grace period over; stopping with requests still in flight");
                Ok(())
            }
        }
    }
}
