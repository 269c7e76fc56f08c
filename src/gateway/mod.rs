//! `schemagate gateway`: the Streamable HTTP adapter. It stands in front of remote MCP servers
//! (one [`Route`] each, [`routes`]; a route's [`upstream`] is reached over HTTP, or runs on stdio,
//! one process per session) and relays MCP's Streamable HTTP transport between their clients
//! and them: a client's POST ([`exchange`]) goes to the upstream through the MCP rules
//! ([`crate::mcp::Boundary`], one per session, [`sessions`]), and the upstream's answer, JSON or
//! server-sent events ([`sse`]), comes back through them (the exchange's pump), event by event; GET (the
//! server's stream) and DELETE (a session's end) are relayed the same way. What to do with each
//! message is the rules'; this module only moves bytes, on the HTTP routes of [`service`].

mod exchange;
mod oauth;
mod routes;
mod service;
mod sessions;
pub mod sse;
mod upstream;

pub use routes::{read_file as read_routes_file, BadRoute, Route, RouteList, RoutesFile, Target};
pub use sessions::SessionLimits;
pub use upstream::UpstreamConfig;

use crate::core::auth::Caller;
use crate::core::gate::{Gate, GateConfig};
use crate::core::metrics::Transport;
use crate::mcp::record::{session_name, RecordSettings, SessionRecorder};
use crate::mcp::{Boundary, BoundaryConfig};
use crate::net::admin;
use crate::net::drain;
use crate::net::listen::{ConnectionLimits, Connections};
use crate::net::origins::{AllowedPeers, Origins};
use crate::net::tls::{Tls, TlsFiles};
use crate::net::Protocols;
use crate::ops::record::RecordConfig;
use crate::ops::reload;
use arc_swap::ArcSwap;
use routes::{all_routes, RouteState, RouteTable};
use sessions::Sessions;
use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use upstream::stdio::StdioLimits;
use upstream::HttpClient;

/// Everything `schemagate gateway` needs, built from its flags.
#[derive(Debug)]
pub struct GatewayConfig {
    /// The core: policy, limits, tokens, the shared registry if any.
    pub gate: GateConfig,
    /// TLS for the listener, if any.
    pub tls: Option<TlsFiles>,
    /// Hosts and origins the listener answers besides its own names (a routes file may add
    /// more).
    pub allowed: AllowedPeers,
    /// The rules of every session; `server` is each route's name.
    pub boundary: BoundaryConfig,
    /// The routes given as flags.
    pub routes: Vec<Route>,
    /// A routes file, read with the flags' routes and reloaded when it changes.
    pub routes_file: Option<PathBuf>,
    /// The gateway's URL as clients reach it (for OAuth metadata), when the `Host` they send
    /// does not say it (behind an ingress that terminates TLS, say).
    pub public_url: Option<String>,
    pub upstream: UpstreamConfig,
    pub sessions: SessionLimits,
    /// Most processes each stdio route runs at once (one per session).
    pub stdio_max_processes: usize,
    /// How long a stdio server's request waits for a client stream before it is answered with
    /// an error.
    pub server_request_timeout: Duration,
    /// How long a stdio session with no stream open and no use is kept.
    pub stdio_idle: Duration,
    /// The limits every connection is served under.
    pub connections: ConnectionLimits,
    /// Where to serve `/metrics` and `/healthz` apart, if anywhere.
    pub metrics_listen: Option<SocketAddr>,
    /// How often the policy file is polled for changes (0: only on SIGHUP).
    pub poll_secs: u64,
    /// How long readiness fails before the listener closes, requests still answered.
    pub drain_delay: Duration,
    /// How long requests in flight get to finish once the listener closes.
    pub shutdown_grace: Duration,
    /// Where sessions are recorded, if they are (`--record`).
    pub record: Option<RecordSettings>,
}

/// The gateway's state, shared by every request.
pub(crate) struct Gateway {
    gate: Arc<Gate>,
    upstream: HttpClient,
    sessions: Sessions,
    /// The routes in force, swapped whole when the routes file changes.
    routes: ArcSwap<RouteTable>,
    /// The gateway's URL as clients reach it, when set (`--public-url`).
    public_url: Option<String>,
    /// The listener serves TLS.
    tls: bool,
    /// Where sessions are recorded, if they are (`--record`).
    recorder: Option<SessionRecorder>,
}

impl Gateway {
    /// The rules of a new session on `route`, for `caller`: a session's own (`session`: the
    /// request begins or names one), or a request's alone, sharing the route's contract status.
    /// Recorded (`--record`): a session in a file of its own; requests of no session, in the
    /// route's one file for them.
    fn boundary(&self, route: &RouteState, caller: &Arc<Caller>, session: bool) -> Arc<Boundary> {
        let make = match session {
            true => Boundary::session_of,
            false => Boundary::sharing,
        };
        let name = &route.route.name;
        let recording = self.recorder.as_ref().and_then(|recorder| {
            let own = route.record.load();
            match session {
                true => recorder.session(name, &session_name(), &own),
                false => route
                    .sessionless
                    .get_or_init(|| recorder.session(name, "sessionless", &own))
                    .clone(),
            }
        });
        Arc::new(
            make(
                Arc::clone(&self.gate),
                Arc::clone(caller),
                route.config.clone(),
                Arc::clone(&route.shared),
            )
            .recorded(recording),
        )
    }
}

/// Runs `schemagate gateway` on `listener` until `shutdown`; then drains as `serve` does:
/// readiness fails for the drain delay while requests are still answered, then the listener
/// closes and the requests in flight finish (for up to the grace period).
pub async fn run(
    config: GatewayConfig,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    // Certificates are read before anything starts, so a bad pair stops start-up.
    let tls = config.tls.map(Tls::load).transpose()?;
    // With a shared registry: follow it; not ready until it has been read in full.
    let started = drain::start(config.gate, tls.as_ref(), config.poll_secs, true)?;
    let gate = &started.gate;
    if let Some(addr) = config.metrics_listen {
        admin::serve(
            addr,
            Arc::clone(gate),
            config.connections.clone(),
            Transport::Gateway,
            started.stop.clone(),
        )
        .await?;
    }
    let max_message_bytes = config.boundary.max_message_bytes;
    let tables = Tables {
        listen: listener.local_addr()?,
        flags: config.routes,
        file: config.routes_file,
        allowed: config.allowed,
        boundary: config.boundary,
        record: config.record.as_ref().map(|r| r.config.clone()),
        stdio: StdioLimits {
            sessions: config.sessions,
            max_processes: config.stdio_max_processes,
            write_timeout: config.upstream.timeout,
            max_message_bytes,
            server_request_timeout: config.server_request_timeout,
            idle_without_stream: config.stdio_idle,
        },
    };
    let table = tables.build(gate, None)?;
    for route in table.by_name.values() {
        tracing::info!(route = %route.route.name, upstream = %route.route.target.public(), "route");
        tracing::debug!(route = %route.route.name, upstream = %route.route.target.redacted(), "route");
    }
    let recorder = SessionRecorder::start(config.record, gate, Transport::Gateway)?;
    let gateway = Arc::new(Gateway {
        recorder: recorder.clone(),
        upstream: HttpClient::new(&config.upstream)?,
        sessions: Sessions::new(config.sessions),
        routes: ArcSwap::from_pointee(table),
        public_url: config.public_url,
        tls: tls.is_some(),
        gate: Arc::clone(gate),
    });
    tables.watch(&gateway, config.poll_secs, &started.stop);
    tracing::info!(addr = %tables.listen, "schemagate gateway is serving");
    let connections = Connections::new(config.connections, Arc::clone(gate.metrics()));
    let _drain = started.drain_on(shutdown, config.drain_delay);
    // When the listener closes, stdio routes' processes are stopped (their clients in flight get
    // a JSON-RPC error as their streams end), and the gateway waits for their groups to be gone.
    let stopped = {
        let (gateway, stop) = (Arc::clone(&gateway), started.stop.clone());
        tokio::spawn(async move {
            stop.cancelled().await;
            gateway.routes.load_full().shut_down_stdio().await;
        })
    };
    let served = connections.serve(
        listener,
        service::service(gateway),
        Protocols::Http1AndHttp2,
        Transport::Gateway,
        tls,
        started.stop.clone(),
    );
    let served = async { served.await.map_err(anyhow::Error::from) };
    let result = started
        .serve_until_grace(served, config.shutdown_grace)
        .await;
    started.stop.cancel();
    let _ = stopped.await;
    if let Some(recorder) = recorder {
        recorder.finish().await;
    }
    result
}

/// Refuses a route's own recording settings that the flags' recording cannot hold.
fn check_record(route: &Route, record: Option<&RecordConfig>) -> anyhow::Result<()> {
    let own = &route.record;
    if own.off || own.is_default() {
        return Ok(());
    }
    let Some(record) = record else {
        anyhow::bail!(
            "route {}: its record settings apply to a recording: give --record DIR",
            route.name
        );
    };
    if let Some(max) = own.max_bytes {
        anyhow::ensure!(
            max <= record.max_total_bytes,
            "route {}: record.max_bytes ({max}) must be at most --record-max-total-bytes ({})",
            route.name,
            record.max_total_bytes
        );
    }
    Ok(())
}

/// What the route table is built from: the flags, the routes file (re-read when it changes),
/// and the listener its `Host` checks are for.
#[derive(Clone)]
struct Tables {
    listen: SocketAddr,
    flags: Vec<Route>,
    file: Option<PathBuf>,
    allowed: AllowedPeers,
    boundary: BoundaryConfig,
    stdio: StdioLimits,
    /// The flags' recording, which routes' own settings refine.
    record: Option<RecordConfig>,
}

impl Tables {
    /// The table of the flags' routes and the file's; routes unchanged since `previous` keep
    /// their state.
    fn build(&self, gate: &Gate, previous: Option<&RouteTable>) -> anyhow::Result<RouteTable> {
        let (routes, allowed) = all_routes(&self.flags, self.file.as_deref())?;
        for route in &routes {
            check_record(route, self.record.as_ref())?;
        }
        let origins = Origins::for_listener(self.listen, &self.allowed.with(&allowed));
        RouteTable::build(gate, &self.boundary, self.stdio, routes, origins, previous)
    }

    /// Re-reads the routes file (if any) when it changes, and puts the table it makes in force;
    /// a file that cannot be read keeps the routes in force.
    fn watch(&self, gateway: &Arc<Gateway>, poll_secs: u64, stop: &CancellationToken) {
        let Some(path) = self.file.clone() else {
            return;
        };
        let tables = self.clone();
        let watched = Arc::clone(gateway);
        reload::watch("routes", path, poll_secs, true, stop.clone(), move || {
            let previous = watched.routes.load();
            match tables.build(&watched.gate, Some(&previous)) {
                Ok(table) => {
                    tracing::info!(routes = %table.names, "routes reloaded");
                    watched.routes.store(Arc::new(table));
                }
                Err(e) => tracing::error!(
                    error = format!("{e:#}"),
                    "the routes file was not reloaded: the routes in force stay"
                ),
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mcp::record::RecordOverride;

    #[test]
    fn a_routes_own_recording_needs_the_flags_recording_and_fits_its_bounds() {
        let mut route: Route = "crm=http://crm.internal/mcp".parse().expect("a route");
        assert!(check_record(&route, None).is_ok(), "nothing of its own");
        route.record = RecordOverride {
            off: true,
            ..RecordOverride::default()
        };
        assert!(check_record(&route, None).is_ok(), "off needs no recording");
        route.record = RecordOverride {
            max_bytes: Some(1 << 20),
            ..RecordOverride::default()
        };
        let error = check_record(&route, None).expect_err("no --record");
        assert!(error.to_string().contains("give --record DIR"), "{error}");
        let record = RecordConfig {
            dir: "/unused".into(),
            max_file_bytes: 1024,
            max_total_bytes: 4096,
            sample: 1.0,
        };
        let error = check_record(&route, Some(&record)).expect_err("past the total");
        assert!(
            error
                .to_string()
                .contains("--record-max-total-bytes (4096)"),
            "{error}"
        );
    }
}
