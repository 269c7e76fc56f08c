//! `schemagate gateway`: the Streamable HTTP adapter. It stands in front of remote MCP servers
//! (one [`Route`] each; a route may also run a local server on stdio, one process per session,
//! [`stdio`]) and relays MCP's Streamable HTTP transport between their clients and
//! them: a client's POST ([`exchange`]) goes to the upstream through the MCP rules
//! ([`crate::mcp::Boundary`], one per session, [`sessions`]), and the upstream's answer, JSON or
//! server-sent events ([`sse`]), comes back through them ([`pump`]), event by event; GET (the server's
//! stream) and DELETE (a session's end) are relayed the same way. What to do with each message
//! is the rules'; this module only moves bytes, over [`upstream`]'s client and the routes of
//! [`service`].

mod exchange;
mod oauth;
mod pump;
mod routes;
mod service;
mod sessions;
pub mod sse;
mod stdio;
mod upstream;

pub use routes::{read_file as read_routes_file, BadRoute, Route, RouteList, RoutesFile, Target};
pub use sessions::SessionLimits;
pub use upstream::UpstreamConfig;

use crate::core::auth::Caller;
use crate::core::gate::{Gate, GateConfig};
use crate::core::metrics::Transport;
use crate::mcp::{Boundary, BoundaryConfig, Shared};
use crate::net::admin;
use crate::net::listen::{ConnectionLimits, Connections};
use crate::net::origins::{AllowedPeers, Origins};
use crate::net::tls::{Tls, TlsFiles};
use crate::net::Protocols;
use crate::ops::reload;
use arc_swap::ArcSwap;
use sessions::Sessions;
use std::collections::HashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use stdio::{Servers, StdioLimits};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use upstream::Upstream;

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
    /// Longest wait for a client's message to arrive whole.
    pub body_read_timeout: Duration,
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
}

/// The gateway's state, shared by every request.
pub(crate) struct Gateway {
    gate: Arc<Gate>,
    upstream: Upstream,
    sessions: Sessions,
    /// The routes in force, swapped whole when the routes file changes.
    routes: ArcSwap<RouteTable>,
    /// The gateway's URL as clients reach it, when set (`--public-url`).
    public_url: Option<String>,
    /// The listener serves TLS.
    tls: bool,
    max_message_bytes: usize,
    body_read_timeout: Duration,
}

/// One route and what its sessions share.
pub(crate) struct RouteState {
    route: Route,
    config: BoundaryConfig,
    shared: Arc<Shared>,
    upstream: RouteUpstream,
}

/// How a route's server is reached.
pub(crate) enum RouteUpstream {
    /// Over HTTP, at this URL.
    Http(reqwest::Url),
    /// On stdio: its processes, one per session.
    Stdio(Servers),
}

/// The routes in force, by name, and who may reach them from a browser.
pub(crate) struct RouteTable {
    by_name: HashMap<String, Arc<RouteState>>,
    /// The route names, sorted (for a 404's message).
    names: String,
    /// The `Host` and `Origin` checks: the listener's names, the flags' and the routes file's.
    pub(crate) origins: Origins,
}

impl RouteTable {
    /// The table of `routes`. A route that is in `previous` with the same target keeps its
    /// state (its sessions' shared contract status and counters, a stdio route's processes).
    fn build(
        gate: &Gate,
        boundary: &BoundaryConfig,
        stdio: StdioLimits,
        routes: Vec<Route>,
        origins: Origins,
        previous: Option<&RouteTable>,
    ) -> anyhow::Result<RouteTable> {
        anyhow::ensure!(
            !routes.is_empty(),
            "no route: give at least one --route NAME=URL (or a --routes file)"
        );
        let mut by_name = HashMap::new();
        for route in routes {
            anyhow::ensure!(
                !by_name.contains_key(&route.name),
                "route {}: given twice",
                route.name
            );
            let kept = previous
                .and_then(|p| p.by_name.get(&route.name))
                .filter(|state| state.route.target == route.target)
                .cloned();
            let state = kept.unwrap_or_else(|| {
                Arc::new(RouteState {
                    config: BoundaryConfig {
                        server: route.name.clone(),
                        transport: Transport::Gateway,
                        ..boundary.clone()
                    },
                    shared: Arc::new(Shared::new(gate, Transport::Gateway)),
                    upstream: match &route.target {
                        Target::Http(url) => RouteUpstream::Http(url.clone()),
                        Target::Stdio(command) => RouteUpstream::Stdio(Servers::new(
                            &route.name,
                            Arc::clone(command),
                            stdio,
                        )),
                    },
                    route: route.clone(),
                })
            });
            by_name.insert(route.name, state);
        }
        let mut names: Vec<&str> = by_name.keys().map(String::as_str).collect();
        names.sort_unstable();
        let names = names.join(", ");
        Ok(RouteTable {
            by_name,
            names,
            origins,
        })
    }

    fn get(&self, name: &str) -> Option<Arc<RouteState>> {
        self.by_name.get(name).cloned()
    }
}

/// The routes of the flags and of the routes file, if any, and the hosts and origins the file
/// allows.
fn all_routes(
    flags: &[Route],
    file: Option<&std::path::Path>,
) -> anyhow::Result<(Vec<Route>, AllowedPeers)> {
    let mut routes = flags.to_vec();
    let mut allowed = AllowedPeers::default();
    if let Some(path) = file {
        let file = routes::read_file(path)?;
        routes.extend(file.routes);
        allowed = file.allowed;
    }
    Ok((routes, allowed))
}

impl Gateway {
    /// The rules of a new session on `route`, for `caller`.
    fn boundary(&self, route: &RouteState, caller: &Arc<Caller>) -> Arc<Boundary> {
        Arc::new(Boundary::sharing(
            Arc::clone(&self.gate),
            Arc::clone(caller),
            route.config.clone(),
            Arc::clone(&route.shared),
        ))
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
    let gate = Gate::new(config.gate)?;
    let token = CancellationToken::new();
    let _stop = token.clone().drop_guard();
    // With a shared registry: follow it; not ready until it has been read in full.
    gate.start(token.clone());
    gate.watch_files(config.poll_secs, true, &token);
    if let Some(tls) = &tls {
        tls.watch(config.poll_secs, &token);
    }
    if let Some(addr) = config.metrics_listen {
        admin::serve(
            addr,
            Arc::clone(&gate),
            config.connections.clone(),
            Transport::Gateway,
            token.clone(),
        )
        .await?;
    }
    let stdio = StdioLimits {
        sessions: config.sessions,
        max_processes: config.stdio_max_processes,
        write_timeout: config.upstream.timeout,
        max_message_bytes: config.boundary.max_message_bytes,
    };
    let listen = listener.local_addr()?;
    let (routes, allowed) = all_routes(&config.routes, config.routes_file.as_deref())?;
    let table = RouteTable::build(
        &gate,
        &config.boundary,
        stdio,
        routes,
        Origins::for_listener(listen, &config.allowed.with(&allowed)),
        None,
    )?;
    for route in table.by_name.values() {
        tracing::info!(route = %route.route.name, upstream = %route.route.target.public(), "route");
        tracing::debug!(route = %route.route.name, upstream = %route.route.target.redacted(), "route");
    }
    let gateway = Arc::new(Gateway {
        upstream: Upstream::new(&config.upstream)?,
        sessions: Sessions::new(config.sessions),
        max_message_bytes: config.boundary.max_message_bytes,
        body_read_timeout: config.body_read_timeout,
        routes: ArcSwap::from_pointee(table),
        public_url: config.public_url,
        tls: tls.is_some(),
        gate: Arc::clone(&gate),
    });
    if let Some(path) = config.routes_file.clone() {
        let (watched, flags, boundary, allowed_flags) = (
            Arc::clone(&gateway),
            config.routes.clone(),
            config.boundary.clone(),
            config.allowed.clone(),
        );
        let file = path.clone();
        reload::watch(
            "routes",
            path,
            config.poll_secs,
            true,
            token.clone(),
            move || {
                let previous = watched.routes.load();
                let table = all_routes(&flags, Some(&file)).and_then(|(routes, allowed)| {
                    let origins = Origins::for_listener(listen, &allowed_flags.with(&allowed));
                    RouteTable::build(
                        &watched.gate,
                        &boundary,
                        stdio,
                        routes,
                        origins,
                        Some(&previous),
                    )
                });
                match table {
                    Ok(table) => {
                        tracing::info!(routes = %table.names, "routes reloaded");
                        watched.routes.store(Arc::new(table));
                    }
                    Err(e) => {
                        tracing::error!(
                            error = format!("{e:#}"),
                            "the routes file was not reloaded: the routes in force stay"
                        );
                    }
                }
            },
        );
    }
    let addr = listener.local_addr()?;
    tracing::info!(%addr, "schemagate gateway is serving");
    let connections = Connections::new(config.connections, Arc::clone(gate.metrics()));
    let (stop, drain_gate, drain_delay) = (token.clone(), Arc::clone(&gate), config.drain_delay);
    tokio::spawn(async move {
        shutdown.await;
        tracing::info!(
            delay_secs = drain_delay.as_secs(),
            "shutting down: not ready; still answering until the drain delay ends"
        );
        drain_gate.set_draining();
        tokio::time::sleep(drain_delay).await;
        tracing::info!("drain delay over: closing the listener, finishing requests in flight");
        stop.cancel();
    });
    let served = connections.serve(
        listener,
        service::router(gateway),
        Protocols::Http1AndHttp2,
        Transport::Gateway,
        tls,
        token.clone(),
    );
    tokio::pin!(served);
    tokio::select! {
        result = &mut served => result?,
        () = async { token.cancelled().await; tokio::time::sleep(config.shutdown_grace).await } => {
            tracing::warn!("grace period over; stopping with requests still in flight");
        }
    }
    Ok(())
}
