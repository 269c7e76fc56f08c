//! `ValidateStream`: checks flow in, each answered as soon as it is ready, with bounded work.
//!
//! Each check of a stream goes through the same [`Gate::check_with`] as a unary `Validate` (in
//! place when cheap, on the worker pool otherwise), so a slow check never holds up the answers
//! of the quick ones around it. At most [`IN_FLIGHT`] checks of one stream run at once and at
//! most [`BUFFERED`] answers wait for the client: a client that does not read its answers stops
//! the reading of its checks, and HTTP/2 flow control then slows its sending. Nothing grows
//! without bound.
//!
//! The stream ends when the client has sent its last check and every check is answered. A client
//! that goes away takes its checks in flight with it. When the server drains, it stops reading,
//! answers the checks it has read, then ends the stream with UNAVAILABLE: checks whose id got no
//! answer were not read, and can be sent to another instance.

use super::{convert, proto, status};
use crate::error::CheckError;
use crate::gate::Gate;
use crate::metrics::Transport;
use futures_util::FutureExt;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tonic::{Status, Streaming};

/// Checks of one stream in progress at once, at most.
pub const IN_FLIGHT: usize = 64;
/// Answers of one stream waiting for the client to read them, at most.
pub const BUFFERED: usize = 128;

pub type Answers = mpsc::Receiver<Result<proto::StreamAnswer, Status>>;

/// Starts answering `incoming`; the answers arrive on the returned channel.
pub fn spawn(
    gate: Arc<Gate>,
    incoming: Streaming<proto::StreamCheck>,
    draining: CancellationToken,
) -> Answers {
    let (tx, rx) = mpsc::channel(BUFFERED);
    tokio::spawn(pump(gate, incoming, tx, draining));
    rx
}

async fn pump(
    gate: Arc<Gate>,
    mut incoming: Streaming<proto::StreamCheck>,
    tx: mpsc::Sender<Result<proto::StreamAnswer, Status>>,
    draining: CancellationToken,
) {
    // Dropping the set (on any return) aborts the checks still in it.
    let mut in_flight = JoinSet::new();
    let mut reading = true;
    // How the stream ends once every check read is answered; `None` is a clean end.
    let mut end: Option<Status> = None;
    // Built once, not on every turn of the loop.
    let client_gone = tx.closed();
    tokio::pin!(client_gone);
    let drain = draining.cancelled();
    tokio::pin!(drain);
    while reading || !in_flight.is_empty() {
        tokio::select! {
            biased;
            () = &mut client_gone => return,
            Some(done) = in_flight.join_next() => {
                // A check cannot fail to join: the set aborts nothing while it is alive, and
                // `answer` turns a panic into an INTERNAL answer.
                let Ok(answer) = done else { continue };
                if tx.send(Ok(answer)).await.is_err() {
                    return;
                }
            }
            () = &mut drain, if reading => {
                reading = false;
                let refusal = CheckError::Unavailable;
                gate.metrics().request_error(Transport::Grpc, refusal.code());
                end = Some(status(&refusal));
            }
            next = incoming.message(), if reading && in_flight.len() < IN_FLIGHT => match next {
                Ok(Some(msg)) => {
                    in_flight.spawn(answer(Arc::clone(&gate), msg));
                }
                Ok(None) => reading = false,
                // A message that cannot be decoded (or is over the size limit) breaks the
                // stream's framing: answer what was read, then pass the status on.
                Err(broken) => {
                    reading = false;
                    end = Some(broken);
                }
            },
        }
    }
    if let Some(status) = end {
        let _ = tx.send(Err(status)).await;
    }
}

/// Answers one check of a stream, tagged with its id.
async fn answer(gate: Arc<Gate>, msg: proto::StreamCheck) -> proto::StreamAnswer {
    let proto::StreamCheck { id, check } = msg;
    let size = check.as_ref().map_or(0, super::size_of);
    let checked = gate.check_with(size, Transport::Grpc, move |limits| match &check {
        Some(check) => convert::check(check, limits),
        None => Err(CheckError::InvalidField(
            "StreamCheck.check is missing: send the check to validate".into(),
        )),
    });
    let result = AssertUnwindSafe(checked)
        .catch_unwind()
        .await
        .unwrap_or_else(|_| {
            tracing::error!(id = %id, "a streamed check panicked; it was answered as internal");
            let e = CheckError::Internal;
            gate.metrics().request_error(Transport::Grpc, e.code());
            Err(e)
        });
    let answer = match result {
        Ok(v) => proto::stream_answer::Answer::Verdict(convert::verdict(v)),
        Err(e) => proto::stream_answer::Answer::Error(convert::error(&e)),
    };
    proto::StreamAnswer {
        id,
        answer: Some(answer),
    }
}
