//! The gRPC adapter (tonic). Placeholder until the Validator service lands: serves the standard
//! health service only.

use crate::gate::Gate;
use std::sync::Arc;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

pub async fn serve(
    _gate: Arc<Gate>,
    listener: TcpListener,
    _max_message_bytes: usize,
    token: CancellationToken,
) -> anyhow::Result<()> {
    let (reporter, health) = tonic_health::server::health_reporter();
    reporter
        .set_service_status("", tonic_health::ServingStatus::Serving)
        .await;
    let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener);
    tonic::transport::Server::builder()
        .add_service(health)
        .serve_with_incoming_shutdown(incoming, async move {
            token.cancelled().await;
            reporter
                .set_service_status("", tonic_health::ServingStatus::NotServing)
                .await;
        })
        .await?;
    Ok(())
}
