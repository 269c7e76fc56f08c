//! `ValidateStream`: checks flow in, answers flow out as they are ready, with bounded work.
//!
//! The checks that have already arrived are read together, up to [`CHUNK`], and answered as one
//! job on the worker pool through the same [`Gate::check_batch`] as a batch, while the connection's
//! thread goes on reading and writing frames. A check with more than [`OWN_JOB_BYTES`] of JSON is
//! a job of its own, so a slow check does not hold up the quick ones around it. At most
//! [`IN_FLIGHT`] checks of one stream are in progress, at most [`WAITING`] more wait for a place
//! (together at most [`IN_FLIGHT_BYTES`] of JSON), and at most [`BUFFERED`] answers wait for the
//! client: a client that does not read its answers stops the reading of its checks, and HTTP/2
//! flow control then slows its sending. Nothing grows without bound.
//!
//! The stream ends when the client has sent its last check and every check is answered. A client
//! that goes away takes its checks in flight with it. When the server drains, it stops reading,
//! answers the checks it has read, then ends the stream with UNAVAILABLE: checks whose id got no
//! answer were not read, and can be sent to another instance.

use super::{convert, proto, status};
use crate::core::auth::Caller;
use crate::core::error::CheckError;
use crate::core::gate::{Admit, Gate};
use crate::core::metrics::Transport;
use futures_util::FutureExt;
use proto::stream_answer::Answer;
use std::collections::VecDeque;
use std::sync::Arc;
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tonic::{Status, Streaming};

/// Checks of one stream in progress at once, at most.
pub const IN_FLIGHT: usize = 256;
/// Checks of one stream read and waiting for a place in flight, at most. The stream goes on
/// reading while its checks wait for the workers, so that a client sending one small check per
/// HTTP/2 frame is not taken for a flood of small frames (which the HTTP/2 layer answers with
/// GOAWAY) merely because the workers are busy.
pub const WAITING: usize = 16 * 1024;
/// JSON bytes of one stream's checks read and not yet answered, at most (one check may pass it
/// alone).
pub const IN_FLIGHT_BYTES: usize = 16 * 1024 * 1024;
/// Checks answered together as one job, at most.
pub const CHUNK: usize = 64;
/// A check with more JSON than this is a job of its own.
pub const OWN_JOB_BYTES: usize = 64 * 1024;
/// Answers of one stream waiting for the client to read them, at most.
pub const BUFFERED: usize = 128;

pub type Answers = mpsc::Receiver<Result<proto::StreamAnswer, Status>>;

/// Starts answering `incoming`; the answers arrive on the returned channel.
pub fn spawn(
    gate: Arc<Gate>,
    caller: Arc<Caller>,
    incoming: Streaming<proto::StreamCheck>,
    draining: CancellationToken,
) -> Answers {
    let (tx, rx) = mpsc::channel(BUFFERED);
    tokio::spawn(pump(gate, caller, incoming, tx, draining));
    rx
}

async fn pump(
    gate: Arc<Gate>,
    caller: Arc<Caller>,
    mut incoming: Streaming<proto::StreamCheck>,
    tx: mpsc::Sender<Result<proto::StreamAnswer, Status>>,
    draining: CancellationToken,
) {
    // Dropping the set (on any return) aborts the jobs still in it.
    let mut jobs = JoinSet::new();
    // Checks read and not yet handed to a job, and the JSON bytes of those read and unanswered.
    let mut waiting: VecDeque<(proto::StreamCheck, usize)> = VecDeque::new();
    let (mut in_flight, mut held_bytes) = (0usize, 0usize);
    let mut reading = true;
    // How the stream ends once every check read is answered; `None` is a clean end.
    let mut end: Option<Status> = None;
    // Built once, not on every turn of the loop.
    let client_gone = tx.closed();
    tokio::pin!(client_gone);
    let drain = draining.cancelled();
    tokio::pin!(drain);
    while reading || !jobs.is_empty() || !waiting.is_empty() {
        tokio::select! {
            biased;
            () = &mut client_gone => return,
            Some(done) = jobs.join_next() => {
                // A job cannot fail to join: the set aborts nothing while it is alive, and
                // `answer` turns a fault into INTERNAL answers.
                let Ok((answers, bytes)) = done else { continue };
                let answers: Vec<proto::StreamAnswer> = answers;
                in_flight -= answers.len();
                held_bytes -= bytes;
                for answer in answers {
                    if tx.send(Ok(answer)).await.is_err() {
                        return;
                    }
                }
            }
            () = &mut drain, if reading => {
                reading = false;
                let refusal = CheckError::Unavailable;
                gate.instrument().refused(Transport::Grpc, &refusal);
                end = Some(status(&refusal));
            }
            next = incoming.message(),
                if reading && waiting.len() < WAITING && held_bytes < IN_FLIGHT_BYTES =>
            {
                let mut next = Some(next);
                let mut read = 0;
                // The first message waited for; then whatever has already arrived.
                while let Some(message) = next.take() {
                    match message {
                        Ok(Some(msg)) => {
                            let size = size_of(&msg);
                            held_bytes += size;
                            waiting.push_back((msg, size));
                            read += 1;
                        }
                        Ok(None) => reading = false,
                        // A message that cannot be decoded (or is over the size limit, or past
                        // the receiving budget) breaks the stream's framing: answer what was
                        // read, then pass the status on.
                        Err(broken) => {
                            reading = false;
                            end = Some(broken);
                        }
                    }
                    if reading && read < CHUNK && waiting.len() < WAITING && held_bytes < IN_FLIGHT_BYTES {
                        next = incoming.message().now_or_never();
                    }
                }
            }
        }
        // Hand what waits to jobs, as far as the in-flight bound allows.
        dispatch(&gate, &caller, &mut waiting, &mut in_flight, &mut jobs);
    }
    if let Some(status) = end {
        let _ = tx.send(Err(status)).await;
    }
}

/// Hands the checks waiting to jobs, as far as the in-flight bound allows: small ones in chunks
/// of [`CHUNK`], a large one in a job of its own.
fn dispatch(
    gate: &Arc<Gate>,
    caller: &Arc<Caller>,
    waiting: &mut VecDeque<(proto::StreamCheck, usize)>,
    in_flight: &mut usize,
    jobs: &mut JoinSet<(Vec<proto::StreamAnswer>, usize)>,
) {
    while *in_flight < IN_FLIGHT && !waiting.is_empty() {
        let (mut chunk, mut chunk_bytes) = (Vec::new(), 0);
        while let Some((msg, size)) = waiting.pop_front() {
            *in_flight += 1;
            if size > OWN_JOB_BYTES {
                jobs.spawn(answer(
                    Arc::clone(gate),
                    Arc::clone(caller),
                    vec![msg],
                    size,
                ));
            } else {
                chunk.push(msg);
                chunk_bytes += size;
            }
            if chunk.len() == CHUNK || *in_flight == IN_FLIGHT {
                break;
            }
        }
        if !chunk.is_empty() {
            jobs.spawn(answer(
                Arc::clone(gate),
                Arc::clone(caller),
                chunk,
                chunk_bytes,
            ));
        }
    }
}

fn size_of(msg: &proto::StreamCheck) -> usize {
    msg.check.as_ref().map_or(0, super::size_of)
}

/// Answers `checks` (holding `bytes` of JSON) as one job on the worker pool, each answer tagged
/// with its check's id; also gives back the bytes, for the stream's in-flight count.
async fn answer(
    gate: Arc<Gate>,
    caller: Arc<Caller>,
    checks: Vec<proto::StreamCheck>,
    bytes: usize,
) -> (Vec<proto::StreamAnswer>, usize) {
    let (ids, checks): (Vec<String>, Vec<Option<proto::Check>>) =
        checks.into_iter().map(|m| (m.id, m.check)).unzip();
    let answers = gate
        .check_batch(
            &caller,
            Transport::Grpc,
            // The stream never sheds: it holds its own bounds and waits instead.
            (bytes, Admit::Always),
            move |_| Ok(checks),
            read_check,
            |result| match result {
                Ok(v) => Answer::Verdict(convert::verdict(v)),
                Err(e) => Answer::Error(convert::error(&e)),
            },
        )
        .await;
    let answers = match answers {
        Ok(answers) => ids
            .into_iter()
            .zip(answers)
            .map(|(id, answer)| proto::StreamAnswer {
                id,
                answer: Some(answer),
            })
            .collect(),
        // The job was lost: every check of it is answered INTERNAL (counted once, by the gate).
        Err(e) => {
            tracing::error!(
                checks = ids.len(),
                "streamed checks failed; answered as internal"
            );
            ids.into_iter()
                .map(|id| proto::StreamAnswer {
                    id,
                    answer: Some(Answer::Error(convert::error(&e))),
                })
                .collect()
        }
    };
    (answers, bytes)
}

fn read_check(
    check: Option<proto::Check>,
    limits: &crate::core::Limits,
) -> Result<crate::core::check::Check, CheckError> {
    match check {
        Some(check) => convert::check(&check, limits),
        None => Err(CheckError::InvalidField(
            "StreamCheck.check is missing: send the check to validate".into(),
        )),
    }
}
