//! The shutdown signals: SIGINT or SIGTERM for `serve` (which reloads on SIGHUP, see
//! [`super::reload`]), and SIGHUP as well for `schemagate proxy`, whose host hanging up means the
//! session is over.

#[cfg(unix)]
use tokio::signal::unix::SignalKind;

/// Resolves on SIGINT or SIGTERM.
pub async fn signal() {
    tokio::select! {
        () = ctrl_c() => {}
        () = unix_signal(terminate(), "SIGTERM") => {}
    }
}

/// Resolves on SIGINT, SIGTERM or SIGHUP. The handlers are in place when this returns, before
/// the future is first polled: from then on none of the three ends the process by itself.
#[cfg(unix)]
pub fn signal_or_hangup() -> impl std::future::Future<Output = ()> + Send + 'static {
    let streams = [
        (SignalKind::interrupt(), "SIGINT"),
        (SignalKind::terminate(), "SIGTERM"),
        (SignalKind::hangup(), "SIGHUP"),
    ]
    .map(|(kind, name)| {
        tokio::signal::unix::signal(kind)
            .map_err(|e| tracing::error!(error = %e, "cannot listen for {name}"))
            .ok()
    });
    async move {
        let [interrupt, terminate, hangup] = streams;
        let recv = |stream: Option<tokio::signal::unix::Signal>| async move {
            match stream {
                Some(mut s) => {
                    s.recv().await;
                }
                None => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            () = recv(interrupt) => {}
            () = recv(terminate) => {}
            () = recv(hangup) => {}
        }
    }
}

#[cfg(not(unix))]
pub fn signal_or_hangup() -> impl std::future::Future<Output = ()> + Send + 'static {
    signal()
}

async fn ctrl_c() {
    if let Err(e) = tokio::signal::ctrl_c().await {
        tracing::error!(error = %e, "cannot listen for SIGINT");
        std::future::pending::<()>().await;
    }
}

#[cfg(unix)]
fn terminate() -> SignalKind {
    SignalKind::terminate()
}

#[cfg(unix)]
async fn unix_signal(kind: SignalKind, name: &'static str) {
    match tokio::signal::unix::signal(kind) {
        Ok(mut s) => {
            s.recv().await;
        }
        Err(e) => {
            tracing::error!(error = %e, "cannot listen for {name}");
            std::future::pending::<()>().await;
        }
    }
}

#[cfg(not(unix))]
fn terminate() {}

#[cfg(not(unix))]
async fn unix_signal(_kind: (), _name: &'static str) {
    std::future::pending::<()>().await;
}
