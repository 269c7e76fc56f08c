//! Stdio routes: a route whose server runs on stdio (`--route NAME=stdio:COMMAND ARGS`) gets one
//! process per MCP session. The gateway starts it when a client initializes, issuing the
//! session's `Mcp-Session-Id` itself, and stops it when the session ends (DELETE), is forgotten
//! (idle, or past the session limit), or its route goes. What a Streamable HTTP server does with
//! each client message is done here on the process's stdin and stdout:
//!
//! - a request is written, and its answer is an event stream of every message the server writes
//!   until the answer to it (progress, server requests such as sampling);
//! - a notification or an answer is written and accepted (202);
//! - GET opens the stream of the server messages no request is waiting for.
//!
//! The answers go back to the exchange as [`Upstreamed`], to be relayed through the MCP rules as
//! an HTTP upstream's are. One process serves one session, so the client's JSON-RPC ids reach it
//! unchanged. A client without a session (2026-07-28 has none) is refused: the process would be
//! shared by callers whose ids may collide.

use super::{Failure, Requester, UpstreamRequest, Upstreamed};
use crate::core::error::{Capacity, CheckError};
use crate::core::metrics::{Metrics, Transport};
use crate::gateway::sessions::SessionLimits;
use crate::mcp::{self, Framing};
use crate::ops::child;
use crate::ops::lines::{Line, Lines};
use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderValue};
use http::{Method, StatusCode};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::process::{Child, ChildStdin, ChildStdout};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// After a session's process has its stdin closed: how long before SIGTERM, and again before
/// SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(2);
/// Messages a stream holds before the server's stdout waits for the client to read.
const STREAM_SLACK: usize = 16;
/// How often forgotten sessions (idle past the limit) have their processes stopped, and queued
/// server requests past their time are answered.
const HOUSEKEEPING: Duration = Duration::from_secs(5);
/// Most messages a session holds for a stream the client has not opened yet, and their bytes.
const MAX_QUEUED: usize = 256;
const MAX_QUEUED_BYTES: usize = 4 << 20;

/// How a stdio route's processes are kept.
#[derive(Debug, Clone, Copy)]
pub struct StdioLimits {
    /// Each session's process is stopped after the sessions' idle time.
    pub sessions: SessionLimits,
    /// Most processes one route runs at once; past it, `initialize` is refused (503).
    pub max_processes: usize,
    /// Longest wait for a process to take a message on its stdin.
    pub write_timeout: Duration,
    pub max_message_bytes: usize,
    /// How long a server's request waits for a stream the client opens before the server gets
    /// a JSON-RPC error for it.
    pub server_request_timeout: Duration,
    /// A session with no stream open and no request for this long is ended (a client that left
    /// without DELETE).
    pub idle_without_stream: Duration,
}

/// What a process is kept under: the caller's name and the session id.
type Key = (Box<str>, Box<str>);

/// The processes of one stdio route, one per session. Dropped (the route removed or changed),
/// it stops them all.
pub struct Servers {
    route: String,
    command: Arc<[String]>,
    limits: StdioLimits,
    /// Where a refusal at the cap is counted.
    metrics: Arc<Metrics>,
    running: moka::sync::Cache<Key, Arc<Server>>,
    /// Processes started and not yet exited.
    processes: Arc<AtomicUsize>,
    /// Cancelled when dropped: ends the housekeeping task.
    _housekeeping: tokio_util::sync::DropGuard,
}

impl Drop for Servers {
    fn drop(&mut self) {
        for (_, server) in self.running.iter() {
            server.stop();
        }
        self.running.invalidate_all();
    }
}

/// One session's process: its stdin, and the streams awaiting its messages. Stopped when its
/// session is forgotten (see [`Server::stop`]).
struct Server {
    stdin: tokio::sync::Mutex<Option<ChildStdin>>,
    waiting: Arc<Mutex<Waiting>>,
    /// Its process group (the process leads a group of its own).
    group: Option<i32>,
    /// When the client last sent anything, or the process wrote anything.
    active: Mutex<std::time::Instant>,
    /// Cancelled once the session is forgotten: the process is then stopped.
    stop: CancellationToken,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// A request awaiting its answer.
struct Awaiting {
    /// Its id's key, as the MCP rules (and clients) match answers to it.
    id: mcp::ids::Key,
    /// Whose request: the client's, or the MCP rules' own (a listing).
    requester: Requester,
    stream: mpsc::Sender<Line>,
}

/// Where the server's next messages go.
#[derive(Default)]
struct Waiting {
    /// Requests awaiting their answer, oldest first.
    requests: Vec<Awaiting>,
    /// The stream a GET opened, if any.
    listener: Option<mpsc::Sender<Line>>,
    /// Messages the server wrote while the client had no stream open (a `roots/list` right
    /// after `initialized`), for the next stream it opens; oldest first, bounded.
    queued: VecDeque<Queued>,
    queued_bytes: usize,
    /// Held messages dropped past the bounds since the last log of it, and when that was.
    dropped: u64,
    dropped_logged: Option<std::time::Instant>,
    /// The process closed its stdout: nothing more will come.
    ended: bool,
}

/// A message waiting for a stream.
struct Queued {
    line: Line,
    at: std::time::Instant,
    /// Its id (JSON text), when it is a request of the server's (which waits for an answer).
    request: Option<String>,
}

impl Waiting {
    /// Holds `line` for the next stream; past the bounds, the oldest held goes (logged).
    fn queue(&mut self, line: Line, request: Option<String>, route: &str) {
        self.queued_bytes += line_bytes(&line);
        self.queued.push_back(Queued {
            line,
            at: std::time::Instant::now(),
            request,
        });
        while self.queued.len() > MAX_QUEUED || self.queued_bytes > MAX_QUEUED_BYTES {
            let Some(oldest) = self.queued.pop_front() else {
                break;
            };
            self.queued_bytes -= line_bytes(&oldest.line);
            self.dropped += 1;
        }
        // Logged at most once a second: a server that floods its stdout costs a line a second.
        let due = self
            .dropped_logged
            .is_none_or(|at| at.elapsed() >= Duration::from_secs(1));
        if self.dropped > 0 && due {
            tracing::warn!(
                route,
                dropped = self.dropped,
                "a stdio server's messages waiting for a client stream were dropped (too many held)"
            );
            self.dropped = 0;
            self.dropped_logged = Some(std::time::Instant::now());
        }
    }

    /// A stream for the client, with what was held for it first.
    fn stream(&mut self) -> (mpsc::Sender<Line>, mpsc::Receiver<Line>) {
        let (sender, lines) = mpsc::channel(STREAM_SLACK + self.queued.len());
        for held in self.queued.drain(..) {
            let _ = sender.try_send(held.line);
        }
        self.queued_bytes = 0;
        (sender, lines)
    }

    /// The ids of the server's requests held longer than `timeout`, taken out of the queue.
    fn expired(&mut self, timeout: Duration) -> Vec<String> {
        let mut ids = Vec::new();
        let mut kept = VecDeque::with_capacity(self.queued.len());
        for held in self.queued.drain(..) {
            match &held.request {
                Some(id) if held.at.elapsed() >= timeout => {
                    self.queued_bytes -= line_bytes(&held.line);
                    ids.push(id.clone());
                }
                _ => kept.push_back(held),
            }
        }
        self.queued = kept;
        ids
    }
}

/// A line's bytes, as the queue's bound counts them.
fn line_bytes(line: &Line) -> usize {
    match line {
        Line::Message(bytes) => bytes.len(),
        Line::Oversized { head, .. } => head.len(),
    }
}

impl Servers {
    /// Counts one more process, if the cap allows.
    fn reserve(&self) -> bool {
        self.processes
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < self.limits.max_processes).then_some(n + 1)
            })
            .is_ok()
    }

    /// Ends the session idle longest among those with no stream open (a client that left
    /// without DELETE), and reserves the room its process leaves: whether there was one.
    async fn make_room(&self) -> bool {
        let idle = self
            .running
            .iter()
            .filter(|(_, server)| !server.has_open_stream())
            .max_by_key(|(_, server)| server.idle_for());
        let Some((key, server)) = idle else {
            return false;
        };
        tracing::info!(route = %self.route, session = %key.1, idle_secs = server.idle_for().as_secs(), "at --stdio-max-processes: the session idle longest is ended to make room");
        self.running.invalidate(&*key);
        server.stop();
        // Its process exits once its stdin closes (or is killed after the grace).
        let deadline = tokio::time::Instant::now() + STOP_GRACE * 2 + Duration::from_secs(1);
        while tokio::time::Instant::now() < deadline {
            if self.reserve() {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        false
    }

    /// Ends the sessions with no stream open and no use for `--stdio-idle-secs`.
    fn end_idle(running: &moka::sync::Cache<Key, Arc<Server>>, route: &str, limits: StdioLimits) {
        for (key, server) in running.iter() {
            if !server.has_open_stream() && server.idle_for() >= limits.idle_without_stream {
                tracing::info!(route, session = %key.1, "a stdio session with no stream open was idle past --stdio-idle-secs: ended");
                running.invalidate(&*key);
            }
        }
    }

    /// Whether `caller`'s session `session` runs here.
    pub fn knows(&self, caller: &str, session: &str) -> bool {
        self.running.contains_key(&(caller.into(), session.into()))
    }

    /// Stops every session's process (the gateway shutting down): stdin closed, then its group
    /// signalled after the grace; waits for every group to be gone (killing what is left after
    /// twice the grace and a second).
    pub async fn shut_down(&self) {
        let groups: Vec<i32> = self
            .running
            .iter()
            .filter_map(|(_, server)| {
                server.stop();
                server.group
            })
            .collect();
        let deadline = tokio::time::Instant::now() + STOP_GRACE * 2 + Duration::from_secs(1);
        while groups.iter().any(|g| child::group_alive(*g))
            && tokio::time::Instant::now() < deadline
        {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        for group in groups {
            child::signal_group(group, libc::SIGKILL);
        }
    }

    /// An initialize refused at the cap with every session in use: logged, counted as shed
    /// work, and answered 503 with a JSON-RPC error for `request_id`.
    fn full(&self, request_id: Option<&str>) -> Upstreamed {
        let limit = self.limits.max_processes;
        tracing::warn!(
            route = %self.route,
            max_processes = limit,
            "a stdio route is at --stdio-max-processes with no idle session to end: an initialize was refused (503)"
        );
        self.metrics.shed(Transport::Gateway);
        self.metrics.request_error(
            Transport::Gateway,
            &CheckError::Overloaded(Capacity::Processes { limit }),
        );
        refusal(
            StatusCode::SERVICE_UNAVAILABLE,
            request_id,
            &format!(
                "schemagate gateway: route {} runs its server on stdio and already runs {limit} sessions' processes, all in use (--stdio-max-processes); end a session (DELETE) or try later",
                self.route
            ),
        )
    }

    pub fn new(
        route: &str,
        command: Arc<[String]>,
        limits: StdioLimits,
        metrics: Arc<Metrics>,
    ) -> Self {
        // A session forgotten for any reason (DELETE, idle, its process gone) has its process
        // stopped. The cache is not bounded in number: the process count is, and a new session
        // past it is refused rather than another's process stopped.
        let running: moka::sync::Cache<Key, Arc<Server>> = moka::sync::Cache::builder()
            .time_to_idle(limits.sessions.idle)
            .eviction_listener(|_, server: Arc<Server>, _| server.stop())
            .build();
        // The cache expires entries only when used: an idle route's sessions are swept here.
        let housekeeping = CancellationToken::new();
        let (swept, done) = (running.clone(), housekeeping.clone());
        let route_name = route.to_owned();
        tokio::spawn(async move {
            let mut every = tokio::time::interval(HOUSEKEEPING);
            loop {
                tokio::select! {
                    () = done.cancelled() => return,
                    _ = every.tick() => {
                        swept.run_pending_tasks();
                        Self::end_idle(&swept, &route_name, limits);
                        for (_, server) in swept.iter() {
                            server.answer_expired(&route_name, limits).await;
                        }
                    }
                }
            }
        });
        Self {
            route: route.to_owned(),
            command,
            limits,
            metrics,
            running,
            processes: Arc::default(),
            _housekeeping: housekeeping.drop_guard(),
        }
    }

    /// Does with the client's message (`body`, for a POST) what a Streamable HTTP server would,
    /// in session `session` of `caller`. A request of the MCP rules' own (a listing) gets a
    /// stream that carries nothing but its answer.
    pub async fn send(&self, request: &UpstreamRequest<'_>) -> Result<Upstreamed, Failure> {
        let UpstreamRequest {
            method,
            body,
            caller,
            session,
            requester,
            ..
        } = request;
        let (body, requester) = (body.as_ref(), *requester);
        let framing = body.map(|b| mcp::framing(b));
        let request_id = match &framing {
            Some(Framing::Request { id, .. }) => Some(id.as_str()),
            _ => None,
        };
        let Some(session) = *session else {
            return match (method, &framing) {
                (&Method::POST, Some(Framing::Request { method, .. })) if method == "initialize" => {
                    // The process is counted before it is started: concurrent initializes never
                    // take the route past its cap. At the cap, the session idle longest (no
                    // stream open) makes room.
                    if !self.reserve() && !self.make_room().await {
                        return Ok(self.full(request_id));
                    }
                    let (id, server) = self.start(caller).inspect_err(|_| {
                        self.processes.fetch_sub(1, Ordering::AcqRel);
                    })?;
                    let mut answer = server.request(self, request_id, body, requester).await?;
                    if let Upstreamed::Lines { headers, .. } = &mut answer {
                        if let Ok(value) = HeaderValue::from_str(&id) {
                            headers.insert(super::headers::MCP_SESSION_ID, value);
                        }
                    }
                    Ok(answer)
                }
                _ => Ok(refusal(
                    StatusCode::BAD_REQUEST,
                    request_id,
                    &format!(
                        "schemagate gateway: route {} runs its server on stdio, one process per session: begin with initialize, then send the Mcp-Session-Id it answers with",
                        self.route
                    ),
                )),
            };
        };
        let key: Key = ((*caller).into(), session.into());
        let Some(server) = self.running.get(&key).inspect(|server| server.touch()) else {
            return Ok(refusal(
                StatusCode::NOT_FOUND,
                request_id,
                &format!(
                    "schemagate gateway: route {}: no session {session:?} (it ended, was idle too long, or was never issued); initialize again",
                    self.route
                ),
            ));
        };
        match *method {
            Method::DELETE => {
                self.running.invalidate(&key);
                server.stop();
                Ok(fixed(StatusCode::OK, None))
            }
            Method::GET => Ok(server.listen()),
            _ => server.request(self, request_id, body, requester).await,
        }
    }

    /// Starts a process for a new session of `caller`: its session id, and it.
    fn start(&self, caller: &str) -> Result<(String, Arc<Server>), Failure> {
        // In a process group of its own, so that stopping it stops what it started (`npx`
        // starts `node`).
        let (process, stdin, stdout) = child::spawn(&self.command, true).map_err(|e| {
            tracing::warn!(route = %self.route, error = format!("{e:#}"), "a stdio server could not be started");
            Failure::Unreachable("could not be started (the gateway's log says why)".to_owned())
        })?;
        let id = session_id().map_err(|e| Failure::Unreachable(format!("no session id: {e}")))?;
        let stop = CancellationToken::new();
        let server = Arc::new(Server {
            stdin: tokio::sync::Mutex::new(Some(stdin)),
            waiting: Arc::default(),
            group: process.id().and_then(|p| i32::try_from(p).ok()),
            active: Mutex::new(std::time::Instant::now()),
            stop: stop.clone(),
        });
        let key: Key = (caller.into(), id.as_str().into());
        tracing::info!(route = %self.route, pid = process.id(), session = %id, "a stdio server started for a new session");
        supervise(
            process,
            self.route.clone(),
            stop,
            Arc::clone(&self.processes),
        );
        // Held before its output is read: a process that exits at once ends a session that is
        // there to end.
        self.running.insert(key.clone(), Arc::clone(&server));
        let (waiting, running, route) = (
            Arc::clone(&server.waiting),
            self.running.clone(),
            self.route.clone(),
        );
        let max = self.limits.max_message_bytes;
        tokio::spawn(async move {
            read(stdout, &waiting, max, &route, || {
                // A message is use: a long call or a GET stream keeps its session.
                if let Some(server) = running.get(&key) {
                    server.touch();
                }
            })
            .await;
            // The process is gone: so is its session.
            running.invalidate(&key);
        });
        Ok((id, server))
    }
}

impl Server {
    /// Closes the process's stdin (unless a write holds it: then the signals come sooner) and
    /// has it stopped: signalled if it does not exit by itself.
    fn stop(&self) {
        if let Ok(mut stdin) = self.stdin.try_lock() {
            stdin.take();
        }
        self.stop.cancel();
    }

    /// The session is in use now.
    fn touch(&self) {
        *self.active.lock().unwrap_or_else(|e| e.into_inner()) = std::time::Instant::now();
    }

    /// How long since the session was last in use.
    fn idle_for(&self) -> Duration {
        self.active
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .elapsed()
    }

    /// Whether a client stream of the session is open (a request's, or a GET's).
    fn has_open_stream(&self) -> bool {
        let waiting = self.waiting.lock().unwrap_or_else(|e| e.into_inner());
        waiting.requests.iter().any(|a| !a.stream.is_closed())
            || waiting.listener.as_ref().is_some_and(|l| !l.is_closed())
    }

    /// Answers the server's requests that waited for a client stream past their time with a
    /// JSON-RPC error, so that the server is never left waiting.
    async fn answer_expired(&self, route: &str, limits: StdioLimits) {
        let expired = self
            .waiting
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .expired(limits.server_request_timeout);
        for id in expired {
            tracing::warn!(route, id, "a stdio server's request found no client stream in time: it was answered with an error");
            let message = format!(
                "schemagate gateway: no client stream took this request within {} s (--server-request-timeout-secs)",
                limits.server_request_timeout.as_secs()
            );
            let answer = mcp::error_answer(Some(&id), mcp::UPSTREAM_FAILED, &message);
            let _ = self.write(limits.write_timeout, &answer).await;
        }
    }

    /// Writes the client's message; a request's answer is the stream of what the server writes
    /// until it answers it, anything else is accepted.
    async fn request(
        &self,
        servers: &Servers,
        id: Option<&str>,
        body: Option<&Bytes>,
        requester: Requester,
    ) -> Result<Upstreamed, Failure> {
        let body = body.map_or(&[][..], |b| &b[..]);
        let Some(id) = id.map(mcp::ids::Key::of_request) else {
            self.write(servers.limits.write_timeout, body).await?;
            return Ok(fixed(StatusCode::ACCEPTED, None));
        };
        let lines = {
            let mut waiting = self.waiting.lock().unwrap_or_else(|e| e.into_inner());
            if waiting.ended {
                return Err(Failure::Unreachable("has exited".to_owned()));
            }
            // The client's request stream takes what waited for one; the rules' own does not.
            let (sender, lines) = match requester {
                Requester::Client => waiting.stream(),
                Requester::Rules => mpsc::channel(STREAM_SLACK),
            };
            waiting.requests.push(Awaiting {
                id: id.clone(),
                requester,
                stream: sender,
            });
            lines
        };
        if let Err(failure) = self.write(servers.limits.write_timeout, body).await {
            let mut waiting = self.waiting.lock().unwrap_or_else(|e| e.into_inner());
            waiting.requests.retain(|awaiting| awaiting.id != id);
            return Err(failure);
        }
        Ok(Upstreamed::Lines {
            status: StatusCode::OK,
            headers: event_stream_headers(),
            lines,
        })
    }

    /// Opens the stream of the messages no request awaits (a GET); one opened before ends.
    fn listen(&self) -> Upstreamed {
        let mut waiting = self.waiting.lock().unwrap_or_else(|e| e.into_inner());
        let (sender, lines) = waiting.stream();
        if !waiting.ended {
            waiting.listener = Some(sender);
        }
        Upstreamed::Lines {
            status: StatusCode::OK,
            headers: event_stream_headers(),
            lines,
        }
    }

    /// Writes `message` as one line on the process's stdin. Line breaks in a JSON text are white
    /// space (a string holds none unescaped), so they become spaces and the line stays one.
    async fn write(&self, timeout: Duration, message: &[u8]) -> Result<(), Failure> {
        let mut line: Vec<u8> = message
            .trim_ascii()
            .iter()
            .map(|&b| if b == b'\n' || b == b'\r' { b' ' } else { b })
            .collect();
        line.push(b'\n');
        let mut stdin = self.stdin.lock().await;
        let Some(pipe) = stdin.as_mut() else {
            return Err(Failure::Unreachable("has exited".to_owned()));
        };
        match tokio::time::timeout(timeout, async {
            pipe.write_all(&line).await?;
            pipe.flush().await
        })
        .await
        {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => {
                *stdin = None;
                Err(Failure::Unreachable(format!(
                    "stopped reading its stdin ({e})"
                )))
            }
            Err(_) => {
                // Part of the line may be written: nothing more can follow it. The session ends.
                *stdin = None;
                self.stop.cancel();
                Err(Failure::BadAnswer(format!(
                    "did not take the message on its stdin within {} s (--upstream-timeout-secs); its session is ended",
                    timeout.as_secs_f64()
                )))
            }
        }
    }
}

/// Reads the server's stdout to its end, handing each message to the stream that awaits it: an
/// answer to its request's alone (an answer whose request is no longer awaited, its client
/// gone, is dropped: it is not followed, so it is not relayed); anything else to the oldest
/// open request of the client's (a server writes progress and requests such as sampling while
/// it works on a call), else to the GET stream; with none open, it is dropped (logged). `used`
/// is called for each message.
///
/// A stream whose client does not read holds the reading up (the process waits on its stdout)
/// until the client's connection times out (`--write-timeout-secs`) and the stream closes.
async fn read(
    stdout: ChildStdout,
    waiting: &Mutex<Waiting>,
    max: usize,
    route: &str,
    used: impl Fn(),
) {
    let mut lines = Lines::new(stdout, max);
    loop {
        let line = match lines.next().await {
            Ok(Some(line)) => line,
            Ok(None) => break,
            Err(e) => {
                tracing::warn!(route, error = %e, "reading a stdio server's stdout failed");
                break;
            }
        };
        let head = match &line {
            Line::Message(bytes) if bytes.trim_ascii().is_empty() => continue,
            Line::Message(bytes) => mcp::message_head(bytes),
            Line::Oversized { head, .. } => mcp::message_head(head),
        };
        used();
        let answers = head
            .id
            .as_deref()
            .filter(|_| head.is_answer(mcp::Direction::ToClient))
            .map(mcp::ids::Readings::of_answer);
        let is_answer = answers.is_some();
        let request = head
            .id
            .clone()
            .filter(|_| head.is_request(mcp::Direction::ToClient));
        let sender = {
            let mut waiting = waiting.lock().unwrap_or_else(|e| e.into_inner());
            let sender = match answers {
                Some(readings) => readings
                    .keys
                    .iter()
                    .find_map(|key| waiting.requests.iter().position(|a| a.id == *key))
                    .map(|at| waiting.requests.remove(at).stream),
                None => waiting
                    .requests
                    .iter()
                    .find(|a| a.requester == Requester::Client && !a.stream.is_closed())
                    .map(|a| a.stream.clone())
                    .or_else(|| waiting.listener.clone().filter(|s| !s.is_closed())),
            };
            waiting
                .requests
                .retain(|awaiting| !awaiting.stream.is_closed());
            match sender {
                Some(sender) => sender,
                None if is_answer => {
                    drop(waiting);
                    tracing::debug!(
                        route,
                        id = head.id.as_deref().unwrap_or(""),
                        "a stdio server's answer was dropped: its client has gone"
                    );
                    continue;
                }
                // No stream to take it: held for the next one the client opens.
                None => {
                    waiting.queue(line, request, route);
                    continue;
                }
            }
        };
        if let Err(refused) = sender.send(line).await {
            // The stream closed since: held for the next one.
            if !is_answer {
                let mut waiting = waiting.lock().unwrap_or_else(|e| e.into_inner());
                waiting.queue(refused.0, request, route);
            }
        }
    }
    let mut waiting = waiting.lock().unwrap_or_else(|e| e.into_inner());
    waiting.ended = true;
    waiting.requests.clear();
    waiting.listener = None;
}

/// Waits for the process to exit, and counts it gone. Once its session is forgotten (`stop`), its
/// stdin is closed, and its process group (the process and whatever it started) is signalled
/// after the grace, SIGTERM then SIGKILL, whether or not the leader has exited by then.
fn supervise(
    mut process: Child,
    route: String,
    stop: CancellationToken,
    processes: Arc<AtomicUsize>,
) {
    tokio::spawn(async move {
        let pid = process.id();
        let exited = CancellationToken::new();
        let (forgotten, leader_exited) = (stop.clone(), exited.clone());
        tokio::spawn(async move {
            tokio::select! {
                () = forgotten.cancelled() => {}
                // Gone by itself: what it started goes when its session does.
                () = leader_exited.cancelled() => forgotten.cancelled().await,
            }
            child::stop_after(pid, true, STOP_GRACE, leader_exited).await;
        });
        let status = process.wait().await;
        exited.cancel();
        processes.fetch_sub(1, Ordering::AcqRel);
        match status {
            Ok(status) => tracing::info!(route, ?pid, %status, "a stdio server exited"),
            Err(e) => {
                tracing::warn!(route, ?pid, error = %e, "a stdio server could not be waited for")
            }
        }
    });
}

/// A new session id: 128 random bits, in hex.
fn session_id() -> Result<String, getrandom::Error> {
    let mut bits = [0u8; 16];
    getrandom::fill(&mut bits)?;
    Ok(bits.iter().map(|b| format!("{b:02x}")).collect())
}

fn event_stream_headers() -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers
}

/// An answer of the gateway's own in the server's place, with `body` (JSON) if any.
fn fixed(status: StatusCode, body: Option<Vec<u8>>) -> Upstreamed {
    let mut response = http::Response::new(body.unwrap_or_default());
    *response.status_mut() = status;
    if !response.body().is_empty() {
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
    }
    Upstreamed::Http(response.into())
}

/// A JSON-RPC error answer to the request `id` (if one), as the process's server would refuse it.
fn refusal(status: StatusCode, id: Option<&str>, message: &str) -> Upstreamed {
    fixed(
        status,
        Some(mcp::error_answer(id, mcp::INVALID_REQUEST, message)),
    )
}
