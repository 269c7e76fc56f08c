//! One session's process: writing the client's messages to its stdin, reading its stdout into
//! the streams awaiting it, and stopping its whole process group when the session is forgotten.

use super::waiting::{Awaiting, Waiting, STREAM_SLACK};
use super::{fixed, Failure, Requester, StdioLimits, Upstreamed, STOP_GRACE};
use crate::gateway::upstream::GiveBack;
use crate::mcp;
use crate::ops::child;
use crate::ops::lines::{Line, Lines};
use crate::ops::tally::Tally;
use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderValue};
use http::StatusCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::process::{Child, ChildStdin, ChildStdout};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// One session's process: its stdin, and the streams awaiting its messages. Stopped when its
/// session is forgotten (see [`Server::stop`]).
pub(super) struct Server {
    pub(super) stdin: tokio::sync::Mutex<Option<ChildStdin>>,
    pub(super) waiting: Arc<Mutex<Waiting>>,
    /// Its process group (the process leads a group of its own).
    pub(super) group: Option<i32>,
    /// When the client last sent anything, or the process wrote anything.
    pub(super) active: Mutex<std::time::Instant>,
    /// Cancelled once the session is forgotten: the process is then stopped.
    pub(super) stop: CancellationToken,
    /// Its route's name, for the logs.
    pub(super) route: Arc<str>,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl Server {
    /// Closes the process's stdin (unless a write holds it: then the signals come sooner) and
    /// has it stopped: signalled if it does not exit by itself.
    pub(super) fn stop(&self) {
        if let Ok(mut stdin) = self.stdin.try_lock() {
            stdin.take();
        }
        self.stop.cancel();
    }

    /// The session is in use now.
    pub(super) fn touch(&self) {
        *self.active.lock().unwrap_or_else(|e| e.into_inner()) = std::time::Instant::now();
    }

    /// How long since the session was last in use.
    pub(super) fn idle_for(&self) -> Duration {
        self.active
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .elapsed()
    }

    /// Whether a client stream of the session is open (a request's, or a GET's).
    pub(super) fn has_open_stream(&self) -> bool {
        let waiting = self.waiting.lock().unwrap_or_else(|e| e.into_inner());
        waiting.requests.iter().any(|a| !a.stream.is_closed())
            || waiting.listener.as_ref().is_some_and(|l| !l.is_closed())
    }

    /// Answers the server's requests that waited for a client stream past their time with a
    /// JSON-RPC error, so that the server is never left waiting.
    pub(super) async fn answer_expired(&self, route: &str, limits: StdioLimits) {
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

    /// Writes the client's message (waiting at most `write_timeout` for the process to read
    /// it); a request's answer is the stream of what the server writes until it answers it,
    /// anything else is accepted.
    pub(super) async fn request(
        &self,
        write_timeout: Duration,
        id: Option<&str>,
        body: Option<&Bytes>,
        requester: Requester,
    ) -> Result<Upstreamed, Failure> {
        let body = body.map_or(&[][..], |b| &b[..]);
        let Some(id) = id.map(mcp::ids::Key::of_request) else {
            self.write(write_timeout, body).await?;
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
        if let Err(failure) = self.write(write_timeout, body).await {
            let mut waiting = self.waiting.lock().unwrap_or_else(|e| e.into_inner());
            waiting.requests.retain(|awaiting| awaiting.id != id);
            return Err(failure);
        }
        Ok(Upstreamed::Lines {
            status: StatusCode::OK,
            headers: event_stream_headers(),
            lines,
            give_back: self.give_back(),
        })
    }

    /// Takes back a message a stream could not deliver, its client gone: held for the client's
    /// next stream, unless it is an answer (the request's client is the one gone).
    fn give_back(&self) -> GiveBack {
        let (waiting, route) = (Arc::downgrade(&self.waiting), Arc::clone(&self.route));
        Arc::new(move |line: Line| {
            let Some(waiting) = waiting.upgrade() else {
                return;
            };
            let head = match &line {
                Line::Message(bytes) => mcp::message_head(bytes),
                Line::Oversized { head, .. } => mcp::message_head(head),
            };
            let mut waiting = waiting.lock().unwrap_or_else(|e| e.into_inner());
            if !waiting.ended {
                waiting.hold(line, &head, &route);
            }
        })
    }

    /// Opens the stream of the messages no request awaits (a GET); one opened before ends.
    pub(super) fn listen(&self) -> Upstreamed {
        let mut waiting = self.waiting.lock().unwrap_or_else(|e| e.into_inner());
        let (sender, lines) = waiting.stream();
        if !waiting.ended {
            waiting.listener = Some(sender);
        }
        Upstreamed::Lines {
            status: StatusCode::OK,
            headers: event_stream_headers(),
            lines,
            give_back: self.give_back(),
        }
    }

    /// Writes `message` as one line on the process's stdin. Line breaks in a JSON text are white
    /// space (a string holds none unescaped), so they become spaces and the line stays one.
    pub(super) async fn write(&self, timeout: Duration, message: &[u8]) -> Result<(), Failure> {
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
pub(super) async fn read(
    stdout: ChildStdout,
    waiting: &Mutex<Waiting>,
    max: usize,
    route: &str,
    used: impl Fn(),
) {
    let mut lines = Lines::new(stdout, max);
    // Lines that are not JSON (a banner, log lines that belong on stderr): relayed as they came,
    // counted as `not_json_rpc`, and logged at most once a second.
    let mut not_json = Tally::default();
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
            Line::Message(bytes) => {
                let json = matches!(bytes.trim_ascii_start().first(), Some(b'{' | b'['));
                if let Some(lines) = (!json).then(|| not_json.count()).flatten() {
                    tracing::warn!(
                        route,
                        lines,
                        "a stdio server wrote lines that are not JSON on its stdout (MCP's stdio transport carries JSON-RPC messages alone; logs belong on stderr): relayed as they came, logged at most once a second"
                    );
                }
                mcp::message_head(bytes)
            }
            Line::Oversized { head, .. } => mcp::message_head(head),
        };
        used();
        let answers = head
            .id
            .as_deref()
            .filter(|_| head.is_answer(mcp::Direction::ToClient))
            .map(mcp::ids::Readings::of_answer);
        let is_answer = answers.is_some();
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
                    waiting.hold(line, &head, route);
                    continue;
                }
            }
        };
        if let Err(refused) = sender.send(line).await {
            // The stream closed since: held for the next one.
            let mut waiting = waiting.lock().unwrap_or_else(|e| e.into_inner());
            waiting.hold(refused.0, &head, route);
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
pub(super) fn supervise(
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
            // Gone by itself or not, what it started goes when its session does.
            forgotten.cancelled().await;
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

pub(super) fn event_stream_headers() -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers
}
