//! The standard `grpc.health.v1` service, with one change: `Watch` streams end when the server
//! drains.
//!
//! tonic-health's `Watch` streams never end on their own, and a graceful shutdown waits for
//! every open stream, so one watcher (a load balancer, a sidecar) would hold the server up for
//! the whole grace period. Here each watcher first receives NOT_SERVING, then its stream ends.

use futures_util::{Stream, StreamExt};
use std::pin::Pin;
use tokio_util::sync::CancellationToken;
use tonic::{Request, Response, Status};
use tonic_health::pb::health_server::{Health, HealthServer};
use tonic_health::pb::{HealthCheckRequest, HealthCheckResponse};
use tonic_health::server::{HealthReporter, HealthService};

/// The health service over `reporter`'s statuses; `draining` is cancelled once NOT_SERVING is set.
pub fn service(reporter: HealthReporter, draining: CancellationToken) -> HealthServer<Draining> {
    HealthServer::new(Draining {
        inner: HealthService::from_health_reporter(reporter),
        draining,
    })
}

/// tonic-health's service, whose `Watch` streams end once `draining` is cancelled.
pub struct Draining {
    inner: HealthService,
    draining: CancellationToken,
}

type WatchStream = Pin<Box<dyn Stream<Item = Result<HealthCheckResponse, Status>> + Send>>;

#[tonic::async_trait]
impl Health for Draining {
    async fn check(
        &self,
        request: Request<HealthCheckRequest>,
    ) -> Result<Response<HealthCheckResponse>, Status> {
        self.inner.check(request).await
    }

    type WatchStream = WatchStream;

    async fn watch(
        &self,
        request: Request<HealthCheckRequest>,
    ) -> Result<Response<Self::WatchStream>, Status> {
        let statuses = self.inner.watch(request).await?.into_inner();
        let draining = self.draining.clone();
        let stream = futures_util::stream::unfold(
            (statuses, draining),
            |(mut statuses, draining)| async move {
                tokio::select! {
                    // A status already sent (NOT_SERVING, when draining) goes out before the end.
                    biased;
                    status = statuses.next() => Some((status?, (statuses, draining))),
                    () = draining.cancelled() => None,
                }
            },
        );
        Ok(Response::new(Box::pin(stream)))
    }
}
