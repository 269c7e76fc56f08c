//! Transcripts: an MCP session's JSON-RPC messages, one per line, replayed through the MCP
//! rules `schemagate proxy` runs ([`crate::mcp::Boundary`]), so each call and result gets the
//! verdict it got, or would have got, on the wire. A transcript is one session, judged in order;
//! several run at once, up to `jobs`.
//!
//! A transcript does not say which way each message went; it is read from the messages:
//! requests go to the server, but for the ones only a server sends (`sampling/createMessage`,
//! `elicitation/create`, `roots/list`, a `ping` whose id the client awaits); an answer goes back
//! to whichever side sent the request it answers (when both await one with its id, the request
//! sent last: a server's request made while the client's call runs); notifications go to the
//! client, but for those only a client sends (`notifications/initialized`,
//! `notifications/roots/list_changed`, and `notifications/cancelled` of a client's request).
//!
//! A recording made without schemagate holds the server's answers to calls the rules would have
//! refused (their arguments rejected): through schemagate the server never saw those calls, so
//! their answers are passed over.

use super::sink::{Batch, Position, Recorder, Sink, Subject, Wire};
use super::tally::Tally;
use super::{InputError, Kept, Run, STDIN};
use crate::core::auth::Caller;
use crate::core::check::PayloadKind;
use crate::core::metrics::Transport;
use crate::mcp::{
    Boundary, BoundaryConfig, Direction, Framing, Judged, Link, Observer, Outgoing, Unjudged,
};
use crate::ops::lines::{Line, Lines};
use futures_util::StreamExt;
use serde_json::value::RawValue;
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::SyncSender;
use std::sync::{Arc, Mutex};
use tokio::io::AsyncRead;

/// Requests only a server sends.
const SERVER_REQUESTS: [&str; 3] = ["sampling/createMessage", "elicitation/create", "roots/list"];
/// Notifications only a client sends (besides `notifications/cancelled`, read by its id).
const CLIENT_NOTIFICATIONS: [&str; 2] = [
    "notifications/initialized",
    "notifications/roots/list_changed",
];
/// Request ids awaiting an answer that are remembered; past it, they are forgotten.
const MAX_PENDING: usize = 65_536;
/// The longest request id remembered.
const MAX_ID_BYTES: usize = 256;
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
        server,
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

/// Lines of a transcript read for its server's name, at most.
const NAMING_LINES: usize = 64;

/// A transcript smaller than this is read whole at once (one read, rather than a read of the
/// blocking pool per buffer).
const WHOLE_FILE_BYTES: u64 = 4 << 20;

/// Where a transcript's lines come from.
enum Input {
    Stdin,
    /// A small file, read whole.
    Whole(Vec<u8>),
    File,
}

impl Input {
    async fn open(path: &std::path::Path) -> std::io::Result<Input> {
        if path.to_str() == Some(STDIN) {
            return Ok(Input::Stdin);
        }
        let len = tokio::fs::metadata(path).await?.len();
        match len <= WHOLE_FILE_BYTES {
            true => Ok(Input::Whole(tokio::fs::read(path).await?)),
            false => Ok(Input::File),
        }
    }
}

/// The server a transcript speaks to, when `--server` does not say: its recording's file name
/// (`SERVER-START-SESSION.jsonl`), else the `serverInfo.name` of the `initialize` answer among
/// its first lines.
async fn server_of(
    path: &std::path::Path,
    input: &Input,
    max_line_bytes: usize,
) -> Result<String, String> {
    if let Some(server) = crate::ops::record::server_of(path) {
        return Ok(server);
    }
    let unnamed = || {
        format!(
            "name its server with --server NAME: it is no recording named SERVER-START-SESSION.jsonl, and no initialize answer with serverInfo.name is among its first {NAMING_LINES} lines"
        )
    };
    let mut lines = match input {
        Input::Stdin => return Err(unnamed()),
        Input::Whole(bytes) => Lines::new(
            Box::new(std::io::Cursor::new(bytes.as_slice()))
                as Box<dyn tokio::io::AsyncRead + Send + Unpin + '_>,
            max_line_bytes,
        ),
        Input::File => {
            let file = tokio::fs::File::open(path)
                .await
                .map_err(|e| format!("cannot read it: {e}"))?;
            Lines::new(
                Box::new(file) as Box<dyn tokio::io::AsyncRead + Send + Unpin + '_>,
                max_line_bytes,
            )
        }
    };
    for _ in 0..NAMING_LINES {
        let Ok(Some(Line::Message(text))) = lines.next().await else {
            break;
        };
        #[derive(serde::Deserialize)]
        struct Info<'a> {
            #[serde(borrow)]
            name: std::borrow::Cow<'a, str>,
        }
        #[derive(serde::Deserialize)]
        struct Initialized<'a> {
            #[serde(borrow, rename = "serverInfo")]
            server_info: Info<'a>,
        }
        #[derive(serde::Deserialize)]
        struct Answer<'a> {
            #[serde(borrow)]
            result: Initialized<'a>,
        }
        if let Ok(answer) = serde_json::from_slice::<Answer<'_>>(&text) {
            let name = answer.result.server_info.name;
            if !name.is_empty() {
                return Ok(name.into_owned());
            }
        }
    }
    Err(unnamed())
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
            Ok(server) => config.server = server,
            Err(message) => return unread(message),
        }
    }
    let observer = Arc::new(Verdicts {
        recorder: run.recorder.clone(),
        server: config.server.clone(),
        state: Mutex::new(State {
            at: Position { file, line: 0 },
            batch: Batch::default(),
            tally: Tally::default(),
            sent: 0,
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
    let mut last = state.batch;
    last.seq = state.sent;
    last.file = file;
    last.last = true;
    let _ = done.send(last);
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

/// One message's way, and the ids the replay follows: a client's request's, an answer's to the
/// client (for a message alone, not in a batch).
struct Read {
    direction: Direction,
    request: Option<String>,
    answer: Option<String>,
}

impl From<Direction> for Read {
    fn from(direction: Direction) -> Self {
        Read {
            direction,
            request: None,
            answer: None,
        }
    }
}

/// Which way each message went, read from the messages (see the module's notes).
#[derive(Default)]
struct Directions {
    /// Requests awaiting their answer, by id: when the client's and the server's were sent
    /// (an order number), for each side that sent one.
    pending: HashMap<Box<str>, [Option<u64>; 2]>,
    sent: u64,
}

/// The sides, as [`Directions::pending`] indexes them.
const CLIENT: usize = 0;
const SERVER: usize = 1;

impl Directions {
    /// `None`: not JSON-RPC. A batch goes the way its first message goes (its items are read
    /// one level deep: an array inside a batch is no message; a batch of none is not JSON-RPC).
    fn of(&mut self, text: &[u8]) -> Option<Read> {
        let batch = text.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'[');
        if !batch {
            return self.one(text);
        }
        let items: Vec<&RawValue> = serde_json::from_slice(text).ok()?;
        let mut first = None;
        for item in items {
            if item.get().starts_with('[') {
                continue;
            }
            let direction = self.one(item.get().as_bytes()).map(|read| read.direction);
            first = first.or(direction);
        }
        first.map(Read::from)
    }

    fn one(&mut self, text: &[u8]) -> Option<Read> {
        match crate::mcp::framing(text) {
            Framing::Request { id, method } => {
                let clients = self
                    .pending
                    .get(id.as_str())
                    .is_some_and(|p| p[CLIENT].is_some());
                // A `ping` with an id the client awaits an answer to is the server's.
                let servers =
                    SERVER_REQUESTS.contains(&method.as_str()) || (method == "ping" && clients);
                if servers {
                    self.sent(id, SERVER);
                    return Some(Direction::ToClient.into());
                }
                self.sent(id.clone(), CLIENT);
                Some(Read {
                    direction: Direction::ToServer,
                    request: Some(id),
                    answer: None,
                })
            }
            Framing::Other {
                method: Some(method),
            } => {
                if CLIENT_NOTIFICATIONS.contains(&method.as_str()) {
                    return Some(Direction::ToServer.into());
                }
                if method == "notifications/cancelled" {
                    // Sent by the side whose request it cancels.
                    let id = cancelled_id(text).unwrap_or_default();
                    let servers = self
                        .pending
                        .get(id.as_str())
                        .is_some_and(|p| p[SERVER].is_some() && p[CLIENT].is_none());
                    let direction = if servers {
                        Direction::ToClient
                    } else {
                        Direction::ToServer
                    };
                    return Some(direction.into());
                }
                Some(Direction::ToClient.into())
            }
            Framing::Other { method: None } => {
                let id = crate::mcp::message_head(text).id.unwrap_or_default();
                let to_client = |id| Read {
                    direction: Direction::ToClient,
                    request: None,
                    answer: Some(id),
                };
                let Some(pending) = self.pending.get_mut(id.as_str()) else {
                    return Some(to_client(id));
                };
                // Both sides await an answer with this id: the request sent last is answered
                // first (a server's request made while the client's call runs).
                let side = match *pending {
                    [Some(client), Some(server)] if server > client => SERVER,
                    [None, Some(_)] => SERVER,
                    _ => CLIENT,
                };
                pending[side] = None;
                if pending.iter().all(Option::is_none) {
                    self.pending.remove(id.as_str());
                }
                Some(if side == SERVER {
                    Direction::ToServer.into()
                } else {
                    to_client(id)
                })
            }
            Framing::Batch | Framing::NotJsonRpc => None,
        }
    }

    /// A request `id` sent by `side`. Ids past [`MAX_ID_BYTES`] are not remembered (their
    /// answers go to the client); past [`MAX_PENDING`], the ones remembered are forgotten.
    fn sent(&mut self, id: String, side: usize) {
        if id.len() > MAX_ID_BYTES {
            return;
        }
        if self.pending.len() >= MAX_PENDING && !self.pending.contains_key(id.as_str()) {
            self.pending.clear();
        }
        self.sent += 1;
        self.pending.entry(id.into()).or_default()[side] = Some(self.sent);
    }
}

/// The `requestId` of a `notifications/cancelled`, as JSON text.
fn cancelled_id(text: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Params<'a> {
        #[serde(borrow, rename = "requestId")]
        request_id: &'a RawValue,
    }
    #[derive(serde::Deserialize)]
    struct Note<'a> {
        #[serde(borrow)]
        params: Params<'a>,
    }
    let note: Note<'_> = serde_json::from_slice(text).ok()?;
    Some(note.params.request_id.get().to_owned())
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

struct State {
    /// The line being replayed.
    at: Position,
    batch: Batch,
    tally: Tally,
    /// Batches sent so far.
    sent: u64,
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
            full.then(|| {
                let mut batch = std::mem::take(&mut state.batch);
                batch.file = state.at.file;
                batch.seq = state.sent;
                state.sent += 1;
                batch
            })
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
        .unwrap_or(State {
            at: Position { file: 0, line: 0 },
            batch: Batch::default(),
            tally: Tally::default(),
            sent: 0,
        })
    }
}

impl Observer for Verdicts {
    fn unjudged(&self, unjudged: &Unjudged<'_>) {
        self.with(|state| {
            let State {
                at, batch, tally, ..
            } = state;
            // Counted as the proxy counts it: a result, of no known tool.
            let subject = Subject {
                server: Some(&self.server),
                tool: None,
                payload: PayloadKind::Result,
                attempt: 1,
                call_id: Some(unjudged.call_id),
            };
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
            let subject = Subject {
                server: Some(&self.server),
                tool: Some(judged.tool),
                payload: judged.payload,
                attempt: judged.attempt,
                call_id: Some(judged.call_id),
            };
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
