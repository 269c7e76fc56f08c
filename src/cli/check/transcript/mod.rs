//! Transcripts: an MCP session's JSON-RPC messages, one per line, replayed through the MCP
//! rules `schemagate proxy` runs ([`crate::mcp::Boundary`]), so each call and result gets the
//! verdict it got, or would have got, on the wire. A transcript is one session, judged in order;
//! several run at once, up to `jobs`.
//!
//! A transcript does not say which way each message went; it is read from the messages
//! ([`directions`]). Its server is `--server`, or what the transcript says ([`input`]); a
//! recording's marked lines (what schemagate wrote) are passed over or taken as the rules' own
//! requests.
//!
//! A recording made without schemagate holds the server's answers to calls the rules would have
//! refused (their arguments rejected): through schemagate the server never saw those calls, so
//! their answers are passed over.

mod directions;
mod input;

use super::sink::{Batch, Position, Recorder, Sink, Subject, Wire};
use super::tally::Tally;
use super::{InputError, Kept, Run};
use crate::core::auth::Caller;
use crate::core::check::PayloadKind;
use crate::core::metrics::Transport;
use crate::mcp::{Boundary, BoundaryConfig, Direction, Judged, Link, Observer, Outgoing, Unjudged};
use crate::ops::lines::{Line, Lines};
use directions::{Directions, MAX_PENDING};
use futures_util::StreamExt;
use input::{server_of, Input};
use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::SyncSender;
use std::sync::{Arc, Mutex};
use tokio::io::AsyncRead;

/// Verdicts per batch sent to the sink.
const BATCH_CHECKS: u64 = 256;

/// Replays `logs`, each one session with `server` on a core of its own, `jobs` at once;
/// answers the counts, what the sink kept, and any error writing the verdicts.
pub(super) async fn run(
    run: Run,
    logs: &[PathBuf],
    sink: Sink,
    server: String,
    max_in_flight: usize,
) -> anyhow::Result<(Tally, Kept, Option<std::io::Error>)> {
    // Bounded: a slow verdicts file holds the sessions back rather than their batches piling up.
    let (done, batches) = std::sync::mpsc::sync_channel::<Batch>(run.jobs * 4);
    let writer = super::thread("check-sink", move || sink.drain(batches))?;
    let config = BoundaryConfig {
        server: server.into(),
        max_message_bytes: run.max_line_bytes,
        max_in_flight,
        // Nothing answers the rules' own requests: a call judged before any listing is judged
        // by the contract at hand (the tools file's) at once.
        contract_wait: std::time::Duration::ZERO,
        // Counted as the proxy's: a transcript is what the proxy relays.
        transport: Transport::Proxy,
        registered_is_current: true,
    };
    let jobs = run.jobs;
    let run = Arc::new(run);
    // Each session a task of its own: sessions run on every runtime thread at once, at most
    // `jobs` from the oldest unfinished one on (the sink writes their verdicts in the order the
    // files were given, so it holds at most that many sessions' verdicts back).
    let sessions = futures_util::stream::iter(logs.iter().cloned().enumerate())
        .map(|(index, path)| {
            let (run, config, done) = (Arc::clone(&run), config.clone(), done.clone());
            let name = path.display().to_string();
            let task = tokio::spawn(async move { replay(&run, index, &path, config, done).await });
            async move { (name, task.await) }
        })
        .buffered(jobs);
    let replayed: Vec<_> = sessions.collect().await;
    drop(done);
    let mut tally = Tally::default();
    let mut failed = Vec::new();
    for (name, result) in replayed {
        match result {
            Ok(counted) => tally.add(counted),
            Err(e) => {
                tally.input_errors += 1;
                failed.push(InputError {
                    file: name,
                    line: None,
                    code: None,
                    message: format!("its replay stopped: {e}"),
                });
            }
        }
    }
    let (mut kept, written) =
        tokio::task::spawn_blocking(move || writer.join().unwrap_or_default())
            .await
            .unwrap_or_default();
    kept.errors.splice(0..0, failed);
    Ok((tally, kept, written))
}

/// One transcript, replayed as one session on a core of its own (with the tools file's
/// contracts): what it lists is its own.
async fn replay(
    run: &Run,
    file: usize,
    path: &std::path::Path,
    mut config: BoundaryConfig,
    done: SyncSender<Batch>,
) -> Tally {
    let unread = |message: String| {
        let batch = Batch {
            file,
            last: true,
            errors: vec![InputError {
                file: path.display().to_string(),
                line: None,
                code: None,
                message,
            }],
            ..Batch::default()
        };
        let _ = done.send(batch);
        Tally {
            input_errors: 1,
            ..Tally::default()
        }
    };
    let input = match Input::open(path).await {
        Ok(input) => input,
        Err(e) => return unread(format!("cannot read it: {e}")),
    };
    if config.server.is_empty() {
        match server_of(path, &input, run.max_line_bytes).await {
            Ok(server) => config.server = server.into(),
            Err(message) => return unread(message),
        }
    }
    let observer = Arc::new(Verdicts {
        recorder: run.recorder.clone(),
        server: config.server.to_string(),
        state: Mutex::new(State {
            at: Position { file, line: 0 },
            ..State::default()
        }),
    });
    // A core of the session's own, seeded with the tools file's contracts (compiled once).
    let boundary = Boundary::new(run.gate.session(), Caller::open(), config)
        .observed(Arc::clone(&observer) as Arc<dyn Observer>);
    let read = match input {
        Input::Stdin => session(tokio::io::stdin(), run, &boundary, &observer, &done).await,
        Input::Whole(bytes) => {
            let input = std::io::Cursor::new(bytes);
            session(input, run, &boundary, &observer, &done).await
        }
        Input::File => match tokio::fs::File::open(path).await {
            Ok(input) => session(input, run, &boundary, &observer, &done).await,
            Err(e) => Err(e),
        },
    };
    let mut state = observer.take();
    if let Err(e) = read {
        state.tally.input_errors += 1;
        state.batch.errors.insert(
            0,
            InputError {
                file: path.display().to_string(),
                line: None,
                code: None,
                message: format!("cannot read it: {e}"),
            },
        );
    }
    state.at.file = file;
    let _ = done.send(state.cut(true));
    state.tally
}

async fn session(
    input: impl AsyncRead + Unpin,
    run: &Run,
    boundary: &Boundary,
    observer: &Verdicts,
    done: &SyncSender<Batch>,
) -> std::io::Result<()> {
    let mut lines = Lines::new(input, run.max_line_bytes);
    let link = Replay::default();
    let mut directions = Directions::default();
    // Client requests the rules answered themselves, by id.
    let mut refused: HashSet<Box<str>> = HashSet::new();
    let mut number = 0u64;
    while let Some(line) = lines.next().await? {
        number += 1;
        let bytes = match &line {
            Line::Message(text) => text.len() as u64,
            Line::Oversized { len, .. } => *len as u64 + 1,
        };
        observer.at(number, bytes);
        match line {
            Line::Message(text) => {
                if text.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                // What schemagate wrote in a recorded session: what it wrote the client, the replay
                // writes again; what it asked the server is the rules' own request, as it was live.
                if let Some(wrote) = crate::mcp::record::wrote(&text) {
                    if wrote.direction == Direction::ToServer {
                        let request = wrote.message.get().as_bytes();
                        directions.of(request);
                        boundary.adopt_own_request(request);
                    }
                    continue;
                }
                let Some(read) = directions.of(&text) else {
                    // A line that is no JSON-RPC message (a server's banner): the proxy relays it
                    // unjudged, so it is passed over and counted, not an error.
                    observer.passed_over();
                    continue;
                };
                // The recording's answer to a request the rules answered themselves (a call
                // whose arguments they refused): through schemagate, the server never saw the
                // request, so this answer never came.
                if read.answer.is_some_and(|id| refused.remove(id.as_str())) {
                    continue;
                }
                // Nothing is written anywhere: the link only keeps what the rules send themselves.
                link.forwarded.store(false, Ordering::Relaxed);
                let _ = boundary.relay(&link, read.direction, &text).await;
                if let Some(id) = read.request {
                    if link.forwarded.load(Ordering::Relaxed) {
                        // The id used again, for a call that went on: its answer counts.
                        refused.remove(id.as_str());
                    } else {
                        if refused.len() >= MAX_PENDING {
                            refused.clear();
                        }
                        refused.insert(id.into());
                    }
                }
            }
            Line::Oversized { head, len } => {
                observer.broken(format!(
                    "the message is {len} bytes, past the limit of {} (--max-message-bytes): it was not checked",
                    run.max_line_bytes
                ));
                let direction = directions
                    .of(&head)
                    .map_or(Direction::ToClient, |read| read.direction);
                let _ = boundary.oversized(&link, direction, &head, len).await;
            }
        }
        // A request of the rules' own (a listing) is never answered here.
        for request in link.take() {
            boundary.unanswered(&request);
        }
        if let Some(batch) = observer.full() {
            let _ = done.send(batch);
        }
    }
    Ok(())
}

/// The transport under a replayed session: nothing is sent; the rules' own requests are kept
/// so they can be marked unanswered.
#[derive(Default)]
struct Replay {
    own: Mutex<Vec<Vec<u8>>>,
    /// A message was forwarded to the server since this was last cleared.
    forwarded: AtomicBool,
}

impl Replay {
    fn take(&self) -> Vec<Vec<u8>> {
        self.own
            .lock()
            .map(|mut own| std::mem::take(&mut *own))
            .unwrap_or_default()
    }
}

impl Link for Replay {
    async fn send(&self, direction: Direction, message: Outgoing<'_>) -> std::io::Result<()> {
        match (direction, message) {
            (Direction::ToServer, Outgoing::Own(request)) => {
                if let Ok(mut own) = self.own.lock() {
                    own.push(request.to_vec());
                }
            }
            (Direction::ToServer, Outgoing::Forward(_)) => {
                self.forwarded.store(true, Ordering::Relaxed);
            }
            _ => {}
        }
        Ok(())
    }
}

/// A replayed session's verdicts, as the rules judge them.
struct Verdicts {
    recorder: Recorder,
    server: String,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// The line being replayed.
    at: Position,
    batch: Batch,
    tally: Tally,
    /// Batches sent so far.
    sent: u64,
}

impl State {
    /// The batch so far, sent as the transcript's next (`last`: its final one).
    fn cut(&mut self, last: bool) -> Batch {
        let mut batch = std::mem::take(&mut self.batch);
        batch.file = self.at.file;
        batch.seq = self.sent;
        batch.last = last;
        self.sent += 1;
        batch
    }
}

impl Verdicts {
    fn with<T>(&self, f: impl FnOnce(&mut State) -> T) -> Option<T> {
        self.state.lock().ok().map(|mut state| f(&mut state))
    }

    /// The line now replayed, `bytes` long.
    fn at(&self, line: u64, bytes: u64) {
        self.with(|state| {
            state.at.line = line;
            state.batch.bytes += bytes;
        });
    }

    fn passed_over(&self) {
        self.with(|state| state.tally.passed_over += 1);
    }

    fn broken(&self, message: String) {
        self.with(|state| {
            let State {
                at, batch, tally, ..
            } = state;
            self.recorder.broken(batch, tally, *at, message)
        });
    }

    /// The batch, when it holds enough to send.
    fn full(&self) -> Option<Batch> {
        self.with(|state| {
            let full = state.batch.checks >= BATCH_CHECKS
                || state.batch.errors.len() as u64 >= BATCH_CHECKS;
            full.then(|| state.cut(false))
        })
        .flatten()
    }

    fn take(&self) -> State {
        self.with(|state| State {
            at: state.at,
            batch: std::mem::take(&mut state.batch),
            tally: std::mem::take(&mut state.tally),
            sent: state.sent,
        })
        .unwrap_or_default()
    }

    /// The subject of a payload of this transcript's server.
    fn subject<'a>(
        &'a self,
        tool: Option<&'a str>,
        payload: PayloadKind,
        attempt: u32,
        call_id: &'a str,
    ) -> Subject<'a> {
        Subject {
            server: Some(&self.server),
            tool,
            payload,
            attempt,
            call_id: Some(call_id),
        }
    }
}

impl Observer for Verdicts {
    fn unjudged(&self, unjudged: &Unjudged<'_>) {
        self.with(|state| {
            let State {
                at, batch, tally, ..
            } = state;
            // Counted as the proxy counts it: a result, of no known tool.
            let subject = self.subject(None, PayloadKind::Result, 1, unjudged.call_id);
            let wire = Wire {
                withheld: unjudged.withheld,
                counted: unjudged.counted,
            };
            let why = (unjudged.code, unjudged.message.to_owned());
            self.recorder
                .failed(batch, tally, *at, Some(subject), why, Some(wire));
        });
    }

    fn judged(&self, judged: &Judged<'_>) {
        self.with(|state| {
            let State {
                at, batch, tally, ..
            } = state;
            let subject = self.subject(
                Some(judged.tool),
                judged.payload,
                judged.attempt,
                judged.call_id,
            );
            match judged.verdict {
                Ok(verdict) => self.recorder.verdict(
                    batch,
                    tally,
                    *at,
                    subject,
                    verdict,
                    Some(judged.withheld),
                ),
                Err(e) => {
                    self.recorder
                        .error(batch, tally, *at, Some(subject), e, Some(judged.withheld))
                }
            }
        });
    }
}
