//! The client's answer, as an exchange builds it: its head (status, headers, and whether it is
//! JSON, an event stream, or the upstream's bytes as they are), decided once, from the first
//! message written or a head staged for it; and its body, the messages written into it while it
//! is open.

use super::Exchange;
use crate::gateway::sse::{self, Event};
use crate::gateway::upstream::Requester;
use crate::mcp::Outgoing;
use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;
use futures_util::future::BoxFuture;
use futures_util::FutureExt;
use http::header::{self, HeaderMap, HeaderValue};
use http::StatusCode;
use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// What the client's answer is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// One JSON-RPC message (`application/json`).
    Json,
    /// Server-sent events (`text/event-stream`), one message per event.
    Sse,
    /// The upstream's body as it came: not a JSON-RPC message (an empty 202, an error page).
    Raw,
}

/// The head of the client's answer.
#[derive(Debug)]
pub struct AnswerHead {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub mode: Mode,
}

impl AnswerHead {
    /// A JSON answer schemagate writes itself.
    pub(super) fn json(status: StatusCode) -> Self {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        AnswerHead {
            status,
            headers,
            mode: Mode::Json,
        }
    }

    /// The answer with this head and no body.
    pub fn into_response(self) -> http::Response<axum::body::Body> {
        let mut response = http::Response::new(axum::body::Body::empty());
        *response.status_mut() = self.status;
        *response.headers_mut() = self.headers;
        response
    }

    /// The client's message was taken and nothing answers it.
    pub fn accepted() -> Self {
        AnswerHead {
            status: StatusCode::ACCEPTED,
            headers: HeaderMap::new(),
            mode: Mode::Raw,
        }
    }
}

/// The client's answer, as the exchange builds it, and the exchange's work that builds it.
pub struct Answer {
    pub(super) exchange: Arc<Exchange>,
    pub(super) work: BoxFuture<'static, ()>,
}

/// The handler's hold on the exchange's answer: once it goes (the client went, or the answer is
/// complete), the exchange is told ([`super::handoff::Handoff::leave`]).
struct Reading(Arc<Exchange>);

impl Drop for Reading {
    fn drop(&mut self) {
        self.0.handoff.leave();
    }
}

impl Answer {
    /// The client's answer, built while the exchange's work is driven here: its head once
    /// decided; a JSON answer's one message whole, with its Content-Length; any other body
    /// streamed as the exchange writes it, the rest of the work driven as hyper asks for the body.
    /// `undecided(route)` when the exchange ended with no head decided.
    ///
    /// The work hands the head and the body to this future through the exchange's
    /// [`Handoff`](super::handoff::Handoff), in the same poll of an HTTP/1 connection's task: the
    /// connection is polled [`quietly`](crate::ops::quiet::quietly), so that the handoff wakes no
    /// other thread.
    pub async fn respond(self, undecided: impl FnOnce(&str) -> Response) -> Response {
        let Answer { exchange, work } = self;
        let reading = Reading(exchange);
        let mut work = Driven(Some(work));
        let Some(head) = work.until(reading.0.handoff.head()).await else {
            return undecided(reading.0.route_name());
        };
        let body = match head.mode {
            // A JSON answer holds one message.
            Mode::Json => {
                let message = work.until(reading.0.handoff.chunk()).await;
                // What is left (the answer's bookkeeping) is done here when it needs no wait.
                work.now_or_later();
                Body::from(message.unwrap_or_default())
            }
            // The body drives the rest of the work whenever hyper asks it for more, which it
            // does while it can write or buffer what it is given (a client that stops reading
            // holds the work back once hyper's write buffer and the handoff's slack are full): the
            // answer needs no task of its own. A client that goes leaves the work to a task of
            // its own (`Driven`'s drop).
            _ => {
                let stream = futures_util::stream::unfold(
                    (work, reading),
                    |(mut work, reading)| async move {
                        match work.until(reading.0.handoff.chunk()).await {
                            Some(chunk) => Some((Ok::<_, Infallible>(chunk), (work, reading))),
                            None => {
                                work.now_or_later();
                                None
                            }
                        }
                    },
                );
                Body::from_stream(stream)
            }
        };
        let mut response = Response::new(body);
        *response.status_mut() = head.status;
        *response.headers_mut() = head.headers;
        response
    }
}

/// An exchange's work driven by the handler, then by a streamed answer's body: whatever of it is
/// left when they are done with it (the client went away) goes on in a task of its own, so the
/// exchange always ends as it would have.
struct Driven(Option<BoxFuture<'static, ()>>);

impl Driven {
    /// `wanted`'s output, the work driven meanwhile (and, once it is done, `wanted` alone).
    async fn until<T>(&mut self, wanted: impl Future<Output = T>) -> T {
        tokio::pin!(wanted);
        if let Some(work) = self.0.as_mut() {
            tokio::select! {
                biased;
                out = &mut wanted => return out,
                () = work => self.0 = None,
            }
        }
        wanted.await
    }

    /// Finishes the work now if it needs no wait; else leaves it to a task of its own.
    fn now_or_later(mut self) {
        if let Some(work) = self.0.as_mut() {
            if work.now_or_never().is_some() {
                self.0 = None;
            }
        }
    }
}

impl Drop for Driven {
    fn drop(&mut self) {
        if let Some(work) = self.0.take() {
            tokio::spawn(work);
        }
    }
}

/// Keeps the client's answer open while held: by the task relaying the client's message, and by
/// the pump of the upstream's answer to it. The answer ends when the last is dropped.
pub(in crate::gateway) struct Open(pub(in crate::gateway) Arc<Exchange>);

impl Drop for Open {
    fn drop(&mut self) {
        self.0.handoff.end();
    }
}

pub(super) struct Decided {
    pub(super) mode: Option<Mode>,
    /// The head the first message for the client gives its answer (a JSON answer's, read
    /// whole): staged rather than decided, so that an answer the rules withhold leaves the head
    /// free for the gateway's error.
    pub(super) staged: Option<AnswerHead>,
}

impl Exchange {
    /// Decides the head of the client's answer, if it is not decided yet; answers the mode in
    /// force.
    pub(in crate::gateway) fn decide(&self, head: impl FnOnce() -> AnswerHead) -> Mode {
        let mut decided = self.decided.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(mode) = decided.mode {
            return mode;
        }
        let head = head();
        let mode = head.mode;
        decided.mode = Some(mode);
        self.handoff.decide(head);
        mode
    }

    /// Stages `head` for the client's answer: it is decided with the first message written.
    pub(in crate::gateway) fn stage(&self, head: AnswerHead) {
        self.decided
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .staged = Some(head);
    }

    /// Decides the staged head (or a plain JSON one), if no head is decided yet.
    pub(in crate::gateway) fn decide_staged(&self) -> Mode {
        let staged = self
            .decided
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .staged
            .take();
        self.decide(|| staged.unwrap_or_else(|| AnswerHead::json(StatusCode::OK)))
    }

    pub(in crate::gateway) fn mode(&self) -> Option<Mode> {
        self.decided.lock().unwrap_or_else(|e| e.into_inner()).mode
    }

    /// Writes `chunk` into the client's answer; fails once the client has gone (or the answer
    /// has ended).
    pub(in crate::gateway) async fn write(&self, chunk: Bytes) -> io::Result<()> {
        self.handoff.write(chunk).await
    }

    /// A message for the client: `source` the bytes it was cut from (so a message relayed as
    /// received is not copied), `event` the event it came in (whose `id` and `event` a
    /// rewritten message keeps), `answering` whose request the answer it came on answers (on
    /// the answer to a request of the rules' own it goes only into an event stream, without
    /// event fields, and a client gone does not stop the reading of that answer).
    pub(super) async fn to_client(
        &self,
        message: Outgoing<'_>,
        source: Option<&Bytes>,
        event: Option<&Event>,
        answering: Requester,
    ) -> io::Result<()> {
        let side = answering == Requester::Rules;
        let bytes = match message {
            Outgoing::Forward(bytes) | Outgoing::Own(bytes) => bytes,
        };
        let mode = match self.mode() {
            Some(mode) => mode,
            None if !side => self.decide_staged(),
            None => Mode::Raw,
        };
        if side {
            if mode != Mode::Sse {
                tracing::debug!(
                    route = %self.route.route.name,
                    "a message on the answer to schemagate's own request was not relayed: the client's answer is not an event stream"
                );
                return Ok(());
            }
            let mut out = Vec::with_capacity(bytes.len() + 32);
            sse::write(None, None, bytes, &mut out);
            // The client gone or not, the answer to the rules' request is read to its end.
            let _ = self.write(out.into()).await;
            return Ok(());
        }
        let owned = || match source {
            Some(source) if within(source, bytes) => source.slice_ref(bytes),
            _ => Bytes::copy_from_slice(bytes),
        };
        match mode {
            Mode::Json => {
                if self.json_written.swap(true, Ordering::AcqRel) {
                    tracing::warn!(
                        route = %self.route.route.name,
                        "a second message for a JSON answer (it holds one) was not relayed"
                    );
                    return Ok(());
                }
                self.write(owned()).await
            }
            Mode::Sse => {
                let relayed_whole = matches!(message, Outgoing::Forward(_))
                    && event.is_some_and(|e| {
                        e.data
                            .as_ref()
                            .is_some_and(|d| d.as_ptr() == bytes.as_ptr() && d.len() == bytes.len())
                    });
                match event {
                    Some(event) if relayed_whole => self.write(event.raw.clone()).await,
                    _ => {
                        let mut out = Vec::with_capacity(bytes.len() + 32);
                        sse::write(
                            event.and_then(|e| e.id.as_deref()),
                            event.and_then(|e| e.name.as_deref()),
                            bytes,
                            &mut out,
                        );
                        self.write(out.into()).await
                    }
                }
            }
            Mode::Raw => {
                tracing::warn!(
                    route = %self.route.route.name,
                    "a message for an answer that carries none was not relayed"
                );
                Ok(())
            }
        }
    }
}

/// Whether `part` lies within `whole`'s bytes.
pub(in crate::gateway) fn within(whole: &Bytes, part: &[u8]) -> bool {
    let (start, end) = (
        whole.as_ptr() as usize,
        whole.as_ptr() as usize + whole.len(),
    );
    let at = part.as_ptr() as usize;
    !part.is_empty() && at >= start && at + part.len() <= end
}
