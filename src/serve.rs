//! `schemagate serve`: the service's start-up and drain. It builds the core, follows the shared
//! registry and the configuration files, serves REST and gRPC on the listeners it is given, and
//! drains on shutdown: readiness first, then the listeners, then the checks in flight.

use crate::core::gate::GateConfig;
use crate::core::metrics::Transport;
use crate::net::drain;
use crate::net::listen::{ConnectionLimits, Connections};
use crate::net::origins::{AllowedPeers, Origins};
use crate::net::tls::{Tls, TlsFiles};
use crate::net::Protocols;
use crate::{grpc, rest};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;

/// Everything `schemagate serve` needs, built from its flags.
#[derive(Debug)]
pub struct ServeConfig {
    pub gate: GateConfig,
    /// TLS for both ports, if any.
    pub tls: Option<TlsFiles>,
    /// Hosts and origins the REST port's `/v1/` routes answer besides its own names.
    pub allowed: AllowedPeers,
    /// The limits every connection is served under.
    pub connections: ConnectionLimits,
    pub grpc_max_message_bytes: usize,
    /// How often the policy, token and certificate files are polled for changes (0: only on
    /// SIGHUP).
    pub poll_secs: u64,
    /// How long readiness fails before the listeners close, checks still answered.
    pub drain_delay: Duration,
    /// How long checks in flight get to finish once the listeners close.
    pub shutdown_grace: Duration,
}

/// The sockets the service answers on, bound by the caller (tests bind port 0).
pub struct Listeners {
    pub http: TcpListener,
    pub grpc: TcpListener,
}

/// Runs REST and gRPC until `shutdown` resolves, then drains: readiness fails and the gRPC health
/// service reports NOT_SERVING while checks are still answered for the drain delay; then new
/// connections are refused and checks in flight finish (for up to the grace period).
pub async fn run(
    config: ServeConfig,
    listeners: Listeners,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    // Certificates are read before anything starts, so a bad pair stops start-up.
    let tls = config.tls.map(Tls::load).transpose()?;
    // With a shared registry: follow it; not ready until it has been read in full.
    let started = drain::start(config.gate, tls.as_ref(), config.poll_secs, true)?;
    let drain = started.drain_on(shutdown, config.drain_delay);
    let gate = &started.gate;

    let http_addr = listeners.http.local_addr()?;
    let grpc_addr = listeners.grpc.local_addr()?;
    tracing::info!(%http_addr, %grpc_addr, "schemagate is serving");

    let connections = Connections::new(config.connections, Arc::clone(gate.metrics()));
    let http = connections.serve(
        listeners.http,
        rest::service(
            Arc::clone(gate),
            Origins::for_listener(http_addr, &config.allowed),
        ),
        Protocols::Http1AndHttp2,
        Transport::Rest,
        tls.clone(),
        started.stop.clone(),
    );
    let grpc = grpc::serve(
        Arc::clone(gate),
        listeners.grpc,
        &connections,
        config.grpc_max_message_bytes,
        tls,
        drain.unready,
        started.stop.clone(),
    );
    let both = async {
        tokio::try_join!(async { http.await.map_err(anyhow::Error::from) }, grpc).map(|_| ())
    };
    started.serve_until_grace(both, config.shutdown_grace).await
}
