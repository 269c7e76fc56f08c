//! The gRPC adapter (tonic): decodes messages, calls the same core as REST, maps the answers.
//! No validation logic lives here.

mod codec;
mod convert;
mod error;
mod health;
mod limits;
mod stream;

pub use error::{code_of, status, ERROR_CODE_KEY};

use crate::core::auth::Caller;
use crate::core::error::CheckError;
use crate::core::gate::{Admit, Gate};
use crate::core::metrics::Transport;
use crate::core::registry::RegisterOptions;
use crate::net::listen::Connections;
use crate::net::Protocols;
use proto::validator_server::{Validator, ValidatorServer};
use std::sync::Arc;
use tokio::net::TcpListener;
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;
use tonic::{Request, Response, Status, Streaming};
use tower_http::catch_panic::CatchPanicLayer;

/// The generated messages, client and server of `schemagate.v1`.
pub mod proto {
    #![allow(missing_docs, clippy::all, clippy::pedantic)]
    tonic::include_proto!("schemagate.v1");

    /// Encoded descriptors of the contract, served by reflection.
    pub const FILE_DESCRIPTOR_SET: &[u8] =
        include_bytes!(concat!(env!("OUT_DIR"), "/schemagate_descriptor.bin"));
}

/// The `schemagate.v1.Validator` service over a shared core.
pub struct ValidatorService {
    gate: Arc<Gate>,
    /// Cancelled when the server drains: open streams stop taking checks (see [`stream`]).
    draining: CancellationToken,
}

impl ValidatorService {
    pub fn new(gate: Arc<Gate>, draining: CancellationToken) -> Self {
        Self { gate, draining }
    }

    fn refuse(&self, e: &CheckError) -> Status {
        self.gate.instrument().refused(Transport::Grpc, e);
        status(e)
    }
}

/// The caller [`limits::CallLimits`] authenticated for this call.
fn caller<T>(request: &Request<T>) -> Result<Arc<Caller>, Status> {
    request
        .extensions()
        .get::<Arc<Caller>>()
        .cloned()
        .ok_or_else(|| status(&CheckError::Internal))
}

fn answer(
    result: Result<crate::core::verdict::Verdict, CheckError>,
) -> proto::check_answer::Answer {
    match result {
        Ok(v) => proto::check_answer::Answer::Verdict(convert::verdict(v)),
        Err(e) => proto::check_answer::Answer::Error(convert::error(&e)),
    }
}

fn size_of(check: &proto::Check) -> usize {
    use proto::check::{Payload as P, SchemaSource as S};
    let schema = match &check.schema_source {
        Some(S::Schema(b)) => b.len(),
        _ => 0,
    };
    let payload = match &check.payload {
        Some(P::Instance(b) | P::Result(b) | P::Arguments(b)) => b.len(),
        None => 0,
    };
    schema + payload
}

#[tonic::async_trait]
impl Validator for ValidatorService {
    async fn validate(
        &self,
        request: Request<proto::Check>,
    ) -> Result<Response<proto::Verdict>, Status> {
        let caller = caller(&request)?;
        let msg = request.into_inner();
        let verdict = self
            .gate
            .check_one(&caller, size_of(&msg), Transport::Grpc, move |limits| {
                convert::check(&msg, limits)
            })
            .await
            .map_err(|e| status(&e))?;
        Ok(Response::new(convert::verdict(verdict)))
    }

    async fn validate_batch(
        &self,
        request: Request<proto::ValidateBatchRequest>,
    ) -> Result<Response<proto::ValidateBatchResponse>, Status> {
        let caller = caller(&request)?;
        let items = request.into_inner().items;
        let bytes = items.iter().map(size_of).sum();
        let gate = Arc::clone(&self.gate);
        let results = self
            .gate
            .check_batch(
                &caller,
                Transport::Grpc,
                (bytes, Admit::Shed),
                move |_| gate.ensure_batch_len(items.len()).map(|()| items),
                |msg, limits| convert::check(&msg, limits),
                |r| proto::CheckAnswer {
                    answer: Some(answer(r)),
                },
            )
            .await
            .map_err(|e| status(&e))?;
        Ok(Response::new(proto::ValidateBatchResponse { results }))
    }

    type ValidateStreamStream = ReceiverStream<Result<proto::StreamAnswer, Status>>;

    async fn validate_stream(
        &self,
        request: Request<Streaming<proto::StreamCheck>>,
    ) -> Result<Response<Self::ValidateStreamStream>, Status> {
        let caller = caller(&request)?;
        let answers = stream::spawn(
            Arc::clone(&self.gate),
            caller,
            request.into_inner(),
            self.draining.clone(),
        );
        Ok(Response::new(ReceiverStream::new(answers)))
    }

    async fn register_tools(
        &self,
        request: Request<proto::RegisterToolsRequest>,
    ) -> Result<Response<proto::RegisterToolsResponse>, Status> {
        let caller = caller(&request)?;
        let msg = request.into_inner();
        let how = RegisterOptions {
            merge: msg.merge,
            protocol_version: convert::protocol_version(&msg.protocol_version)
                .map_err(|e| self.refuse(&e))?,
            learned: false,
            drop_shadow: false,
        };
        let registration = if msg.shadow {
            self.gate
                .register_shadow(&caller, msg.server, msg.tools_list)
                .await
        } else {
            self.gate
                .register(&caller, msg.server, msg.tools_list, how)
                .await
        }
        .map_err(|e| self.refuse(&e))?;
        Ok(Response::new(convert::registration(registration)))
    }

    async fn promote_shadow(
        &self,
        request: Request<proto::PromoteShadowRequest>,
    ) -> Result<Response<proto::RegisterToolsResponse>, Status> {
        let caller = caller(&request)?;
        let msg = request.into_inner();
        let registration = self
            .gate
            .promote_shadow(&caller, &msg.server, &msg.tool)
            .await
            .map_err(|e| self.refuse(&e))?;
        Ok(Response::new(convert::registration(registration)))
    }

    async fn list_servers(
        &self,
        request: Request<proto::ListServersRequest>,
    ) -> Result<Response<proto::ListServersResponse>, Status> {
        let caller = caller(&request)?;
        let servers = self.gate.servers(&caller);
        Ok(Response::new(proto::ListServersResponse {
            servers: servers.into_iter().map(convert::server_summary).collect(),
        }))
    }

    async fn list_tools(
        &self,
        request: Request<proto::ListToolsRequest>,
    ) -> Result<Response<proto::ListToolsResponse>, Status> {
        let caller = caller(&request)?;
        let msg = request.into_inner();
        let listing = self
            .gate
            .server_tools(&caller, &msg.server, msg.schemas)
            .map_err(|e| self.refuse(&e))?;
        Ok(Response::new(convert::server_listing(listing)))
    }

    async fn remove_tools(
        &self,
        request: Request<proto::RemoveToolsRequest>,
    ) -> Result<Response<proto::RemoveToolsResponse>, Status> {
        let caller = caller(&request)?;
        let msg = request.into_inner();
        let tool = (!msg.tool.is_empty()).then_some(msg.tool.as_str());
        let removed = if msg.shadow {
            self.gate.remove_shadow(&caller, &msg.server, tool).await
        } else {
            self.gate.remove_tools(&caller, &msg.server, tool).await
        }
        .map_err(|e| self.refuse(&e))?;
        Ok(Response::new(proto::RemoveToolsResponse {
            server: msg.server,
            removed: u32::try_from(removed).unwrap_or(u32::MAX),
        }))
    }

    async fn accept_contract(
        &self,
        request: Request<proto::AcceptContractRequest>,
    ) -> Result<Response<proto::AcceptContractResponse>, Status> {
        let caller = caller(&request)?;
        let msg = request.into_inner();
        self.gate
            .accept_contract(&caller, &msg.server, &msg.tool, &msg.hash)
            .await
            .map_err(|e| self.refuse(&e))?;
        Ok(Response::new(proto::AcceptContractResponse {
            server: msg.server,
            tool: msg.tool,
            accepted: msg.hash,
        }))
    }

    async fn tool_history(
        &self,
        request: Request<proto::ToolHistoryRequest>,
    ) -> Result<Response<proto::ToolHistoryResponse>, Status> {
        let caller = caller(&request)?;
        let msg = request.into_inner();
        let versions = self
            .gate
            .tool_history(&caller, &msg.server, &msg.tool)
            .await
            .map_err(|e| self.refuse(&e))?;
        Ok(Response::new(proto::ToolHistoryResponse {
            server: msg.server,
            tool: msg.tool,
            versions: versions.into_iter().map(convert::tool_version).collect(),
        }))
    }
}

/// Serves `schemagate.v1.Validator`, the standard health service and reflection on `listener`,
/// under the connection limits of `connections`. When `unready` is cancelled health turns
/// NOT_SERVING while calls are still answered; when `token` is cancelled (a drain delay later), in
/// this order: open streams (and health watches) stop taking checks and end once the checks they
/// read are answered, new connections are refused and requests in flight finish.
pub async fn serve(
    gate: Arc<Gate>,
    listener: TcpListener,
    connections: &Connections,
    max_message_bytes: usize,
    tls: Option<Arc<crate::net::tls::Tls>>,
    unready: CancellationToken,
    token: CancellationToken,
) -> anyhow::Result<()> {
    // Cancelled once health says NOT_SERVING and the drain delay is over: open streams (checks
    // and health watches) end, and the connections close once their requests finish.
    let streams_drain = CancellationToken::new();
    let reporter = tonic_health::server::HealthReporter::new();
    let health = health::service(reporter.clone(), streams_drain.clone());
    // NOT_SERVING until the shared registry (if any) has been read in full.
    let serving = gate.is_ready();
    report(
        &reporter,
        if serving {
            tonic_health::ServingStatus::Serving
        } else {
            tonic_health::ServingStatus::NotServing
        },
    )
    .await;
    let reflection = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(proto::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .build_v1()?;
    let reflection_alpha = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(proto::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .build_v1alpha()?;
    follow_health(
        Arc::clone(&gate),
        reporter,
        serving,
        unready,
        token,
        streams_drain.clone(),
    );
    let validator = ValidatorServer::new(ValidatorService::new(
        Arc::clone(&gate),
        streams_drain.clone(),
    ))
    .max_decoding_message_size(max_message_bytes)
    .max_encoding_message_size(max_message_bytes);
    let routes = tonic::service::Routes::new(health)
        .add_service(reflection)
        .add_service(reflection_alpha)
        .add_service(validator)
        .prepare();
    let service = limits::CallLimits {
        inner: tower::ServiceBuilder::new()
            // A handler that panics answers INTERNAL, as REST answers 500.
            .layer(CatchPanicLayer::custom(|_| {
                tracing::error!("a gRPC handler panicked");
                status(&CheckError::Internal).into_http::<tonic::body::Body>()
            }))
            .service(routes),
        gate,
    };
    connections
        .serve(
            listener,
            service,
            Protocols::Http2,
            Transport::Grpc,
            tls,
            streams_drain,
        )
        .await?;
    Ok(())
}

/// Keeps the health service in step: SERVING once the shared registry (if any) is read, if it
/// was not (`serving`); NOT_SERVING as soon as the drain begins (`unready`), while calls are
/// still answered; once the drain delay is over (`token`, always after `unready`), watchers
/// have had NOT_SERVING, and open streams end (`end_streams`) and the connections close.
fn follow_health(
    gate: Arc<Gate>,
    reporter: tonic_health::server::HealthReporter,
    serving: bool,
    unready: CancellationToken,
    token: CancellationToken,
    end_streams: CancellationToken,
) {
    tokio::spawn(async move {
        if !serving {
            tokio::select! {
                () = gate.synced() => {
                    report(&reporter, tonic_health::ServingStatus::Serving).await;
                }
                () = unready.cancelled() => {}
            }
        }
        unready.cancelled().await;
        report(&reporter, tonic_health::ServingStatus::NotServing).await;
        token.cancelled().await;
        end_streams.cancel();
    });
}

/// Sets the health of the whole server and of the Validator service to `status`.
async fn report(
    reporter: &tonic_health::server::HealthReporter,
    status: tonic_health::ServingStatus,
) {
    reporter.set_service_status("", status).await;
    reporter
        .set_service_status(
            <ValidatorServer<ValidatorService> as tonic::server::NamedService>::NAME,
            status,
        )
        .await;
}
