//! The gRPC adapter (tonic): decodes messages, calls the same core as REST, maps the answers.
//! No validation logic lives here.

mod convert;
mod error;

pub use error::{code_of, status, ERROR_CODE_KEY};

use crate::error::CheckError;
use crate::gate::Gate;
use crate::metrics::Transport;
use futures_util::StreamExt;
use proto::validator_server::{Validator, ValidatorServer};
use std::pin::Pin;
use std::sync::Arc;
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::Stream;
use tokio_util::sync::CancellationToken;
use tonic::{Request, Response, Status, Streaming};

/// The generated messages, client and server of `schemagate.v1`.
pub mod proto {
    #![allow(missing_docs, clippy::all, clippy::pedantic)]
    tonic::include_proto!("schemagate.v1");

    /// Encoded descriptors of the contract, served by reflection.
    pub const FILE_DESCRIPTOR_SET: &[u8] =
        include_bytes!(concat!(env!("OUT_DIR"), "/schemagate_descriptor.bin"));
}

/// Checks of one stream handled together on the worker pool, at most.
const STREAM_CHUNK: usize = 256;
/// Answers of one stream waiting for the client to read them, at most.
const STREAM_BUFFER: usize = 256;

/// The `schemagate.v1.Validator` service over a shared core.
pub struct ValidatorService {
    gate: Arc<Gate>,
}

impl ValidatorService {
    pub fn new(gate: Arc<Gate>) -> Self {
        Self { gate }
    }

    fn refuse(&self, e: &CheckError) -> Status {
        self.gate.metrics().request_error(Transport::Grpc, e.code());
        status(e)
    }
}

fn answer(result: Result<crate::verdict::Verdict, CheckError>) -> proto::check_answer::Answer {
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

type AnswerStream = Pin<Box<dyn Stream<Item = Result<proto::StreamAnswer, Status>> + Send>>;

#[tonic::async_trait]
impl Validator for ValidatorService {
    async fn validate(
        &self,
        request: Request<proto::Check>,
    ) -> Result<Response<proto::Verdict>, Status> {
        let msg = request.into_inner();
        let verdict = self
            .gate
            .check_with(size_of(&msg), Transport::Grpc, move |limits| {
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
        let items = request.into_inner().items;
        self.gate
            .ensure_batch_len(items.len())
            .map_err(|e| self.refuse(&e))?;
        let gate = Arc::clone(&self.gate);
        let results = self
            .gate
            .offload(move || gate.check_many(items, Transport::Grpc, convert::check))
            .await
            .map_err(|e| self.refuse(&e))?;
        Ok(Response::new(proto::ValidateBatchResponse {
            results: results
                .into_iter()
                .map(|r| proto::CheckAnswer {
                    answer: Some(answer(r)),
                })
                .collect(),
        }))
    }

    type ValidateStreamStream = AnswerStream;

    async fn validate_stream(
        &self,
        request: Request<Streaming<proto::StreamCheck>>,
    ) -> Result<Response<Self::ValidateStreamStream>, Status> {
        let incoming = request.into_inner();
        let (tx, rx) = mpsc::channel(STREAM_BUFFER);
        let gate = Arc::clone(&self.gate);
        tokio::spawn(async move {
            // Whatever has arrived (up to a chunk) is checked together on the worker pool; the
            // next chunk is read only once this one's answers are queued, so a reader that does
            // not read stops the reading of checks instead of growing a buffer.
            let mut chunks = incoming.ready_chunks(STREAM_CHUNK);
            while let Some(chunk) = chunks.next().await {
                let mut ids = Vec::with_capacity(chunk.len());
                let mut checks = Vec::with_capacity(chunk.len());
                let mut broken = None;
                for item in chunk {
                    match item {
                        Ok(msg) => {
                            ids.push(msg.id);
                            checks.push(msg.check);
                        }
                        Err(status) => {
                            broken = Some(status);
                            break;
                        }
                    }
                }
                let worker = Arc::clone(&gate);
                let results = gate
                    .offload(move || {
                        worker.check_many(checks, Transport::Grpc, |check, limits| match check {
                            Some(check) => convert::check(check, limits),
                            None => Err(CheckError::InvalidField(
                                "StreamCheck.check is missing: send the check to validate".into(),
                            )),
                        })
                    })
                    .await;
                let results = match results {
                    Ok(results) => results,
                    Err(e) => {
                        let _ = tx.send(Err(status(&e))).await;
                        return;
                    }
                };
                for (id, result) in ids.into_iter().zip(results) {
                    let answer = match result {
                        Ok(v) => proto::stream_answer::Answer::Verdict(convert::verdict(v)),
                        Err(e) => proto::stream_answer::Answer::Error(convert::error(&e)),
                    };
                    let message = proto::StreamAnswer {
                        id,
                        answer: Some(answer),
                    };
                    if tx.send(Ok(message)).await.is_err() {
                        // The client went away: stop reading and checking.
                        return;
                    }
                }
                if let Some(status) = broken {
                    let _ = tx.send(Err(status)).await;
                    return;
                }
            }
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }

    async fn register_tools(
        &self,
        request: Request<proto::RegisterToolsRequest>,
    ) -> Result<Response<proto::RegisterToolsResponse>, Status> {
        let msg = request.into_inner();
        let gate = Arc::clone(&self.gate);
        let registration = self
            .gate
            .offload(move || gate.register(&msg.server, &msg.tools_list))
            .await
            .and_then(|r| r)
            .map_err(|e| self.refuse(&e))?;
        Ok(Response::new(convert::registration(registration)))
    }
}

/// Serves `schemagate.v1.Validator`, the standard health service and reflection on `listener`
/// until `token` is cancelled; health turns NOT_SERVING first.
pub async fn serve(
    gate: Arc<Gate>,
    listener: TcpListener,
    max_message_bytes: usize,
    token: CancellationToken,
) -> anyhow::Result<()> {
    let (reporter, health) = tonic_health::server::health_reporter();
    reporter
        .set_serving::<ValidatorServer<ValidatorService>>()
        .await;
    reporter
        .set_service_status("", tonic_health::ServingStatus::Serving)
        .await;
    let reflection = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(proto::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .build_v1()?;
    let reflection_alpha = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(proto::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .build_v1alpha()?;
    let validator = ValidatorServer::new(ValidatorService::new(gate))
        .max_decoding_message_size(max_message_bytes)
        .max_encoding_message_size(max_message_bytes);
    tonic::transport::Server::builder()
        .add_service(health)
        .add_service(reflection)
        .add_service(reflection_alpha)
        .add_service(validator)
        // No Nagle delay: small answers go out at once.
        .serve_with_incoming_shutdown(
            tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true)),
            async move {
                token.cancelled().await;
                reporter
                    .set_not_serving::<ValidatorServer<ValidatorService>>()
                    .await;
                reporter
                    .set_service_status("", tonic_health::ServingStatus::NotServing)
                    .await;
            },
        )
        .await?;
    Ok(())
}
