//! The small admin server of commands that serve no REST port (`schemagate proxy
//! --metrics-listen`): `GET /metrics` (the Prometheus exposition) and `GET /healthz`, under the
//! same connection limits as every other port.

use crate::core::gate::Gate;
use crate::core::metrics::Transport;
use crate::net::listen::{ConnectionLimits, Connections, PortService};
use crate::net::Protocols;
use anyhow::Context;
use bytes::Bytes;
use http_body_util::Full;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// The content type of the Prometheus text exposition.
pub const PROMETHEUS_CONTENT_TYPE: &str = "text/plain; version=0.0.4";

/// Binds `addr` and serves `/metrics` and `/healthz` there until `stop`, counting its
/// connections under `transport`.
pub async fn serve(
    addr: SocketAddr,
    gate: Arc<Gate>,
    limits: ConnectionLimits,
    transport: Transport,
    stop: CancellationToken,
) -> anyhow::Result<()> {
    let listener = TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on {addr} (--metrics-listen)"))?;
    tracing::info!(%addr, "serving /metrics");
    let connections = Connections::new(limits, Arc::clone(gate.metrics()));
    tokio::spawn(async move {
        let served = connections
            .serve(
                listener,
                service(gate),
                Protocols::Http1AndHttp2,
                transport,
                None,
                stop,
            )
            .await;
        if let Err(e) = served {
            tracing::error!(error = %e, "the metrics listener stopped");
        }
    });
    Ok(())
}

/// GET /metrics and GET /healthz; 404 otherwise.
fn service(gate: Arc<Gate>) -> impl PortService<Full<Bytes>> {
    tower::service_fn(move |request: http::Request<hyper::body::Incoming>| {
        let gate = Arc::clone(&gate);
        async move {
            let (status, content_type, body) = match (request.method(), request.uri().path()) {
                (&http::Method::GET, "/metrics") => (
                    http::StatusCode::OK,
                    PROMETHEUS_CONTENT_TYPE,
                    Bytes::from(gate.render_metrics()),
                ),
                (&http::Method::GET, "/healthz") => (
                    http::StatusCode::OK,
                    "text/plain",
                    Bytes::from_static(b"ok\n"),
                ),
                _ => (
                    http::StatusCode::NOT_FOUND,
                    "text/plain",
                    Bytes::from_static(b"schemagate proxy serves GET /metrics and GET /healthz\n"),
                ),
            };
            let mut response = http::Response::new(Full::new(body));
            *response.status_mut() = status;
            response.headers_mut().insert(
                http::header::CONTENT_TYPE,
                http::HeaderValue::from_static(content_type),
            );
            Ok::<_, std::convert::Infallible>(response)
        }
    })
}
