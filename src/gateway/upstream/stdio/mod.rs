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
use http::header::{self, HeaderValue};
use http::{Method, StatusCode};
use http_body_util::{Either, Full};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

mod server;
mod waiting;

use server::{read, supervise, Server};

/// After a session's process has its stdin closed: how long before SIGTERM, and again before
/// SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(2);
/// How often forgotten sessions (idle past the limit) have their processes stopped, and queued
/// server requests past their time are answered.
const HOUSEKEEPING: Duration = Duration::from_secs(5);

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
            scanned,
            caller,
            session,
            requester,
            ..
        } = request;
        let (body, requester) = (body.as_ref(), *requester);
        let framing = body.map(|b| Framing::scanned(scanned, b));
        let request_id = match &framing {
            Some(Framing::Request { id, .. }) => Some(*id),
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
                    let mut answer = server.request(self.limits.write_timeout, request_id, body, requester).await?;
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
                &no_session(&self.route, session),
            ));
        };
        match *method {
            Method::DELETE => {
                self.running.invalidate(&key);
                server.stop();
                Ok(fixed(StatusCode::OK, None))
            }
            Method::GET => Ok(server.listen()),
            _ => {
                server
                    .request(self.limits.write_timeout, request_id, body, requester)
                    .await
            }
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
            route: Arc::from(self.route.as_str()),
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

/// A new session id: 128 random bits, in hex.
fn session_id() -> Result<String, getrandom::Error> {
    let mut bits = [0u8; 16];
    getrandom::fill(&mut bits)?;
    Ok(bits.iter().map(|b| format!("{b:02x}")).collect())
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
    Upstreamed::Http(response.map(|body| Either::Right(Full::from(body))))
}

/// A JSON-RPC error answer to the request `id` (if one), as the process's server would refuse it.
fn refusal(status: StatusCode, id: Option<&str>, message: &str) -> Upstreamed {
    fixed(
        status,
        Some(mcp::error_answer(id, mcp::INVALID_REQUEST, message)),
    )
}

/// What a request naming a session `route` does not run is told (404).
pub fn no_session(route: &str, session: &str) -> String {
    format!(
        "schemagate gateway: route {route}: no session {session:?} (it ended, was idle too long, or was never issued); initialize again"
    )
}
