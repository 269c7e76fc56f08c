//! One client request and everything it sets moving: the client's message handed to the MCP
//! rules, the upstream's answer relayed back through them, and the client's answer built as that
//! happens. An [`Exchange`] is the rules' [`Link`] on HTTP: a message sent to the server is a
//! request to the upstream, whose answer (JSON, or a stream of server-sent events) is read in a
//! task of its own and handed to the rules message by message; a message sent to the client goes
//! into the client's answer.
//!
//! The client's answer takes its head (status, headers, and whether it is JSON, an event stream,
//! or the upstream's bytes relayed as they are) from the first of: the upstream's answer to the
//! client's own message, or a message schemagate writes in the server's place (a call whose
//! arguments are rejected is answered without the upstream). It ends when every task that may
//! still write into it has ended.

use super::sse::{self, Event, Next};
use super::upstream::{self, Failure};
use super::{Gateway, RouteState};
use crate::mcp::{self, Boundary, Direction, Link, Outgoing};
use bytes::{Bytes, BytesMut};
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Method, StatusCode};
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::{mpsc, oneshot};

/// The MCP session header.
pub const MCP_SESSION_ID: &str = "mcp-session-id";
/// Bytes of an oversized JSON answer kept to find its message's `id`.
const HEAD_BYTES: usize = 4096;

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
pub struct Head {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub mode: Mode,
}

impl Head {
    /// A JSON answer schemagate writes itself.
    fn json(status: StatusCode) -> Self {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        Head {
            status,
            headers,
            mode: Mode::Json,
        }
    }

    /// The client's message was taken and nothing answers it.
    pub fn accepted() -> Self {
        Head {
            status: StatusCode::ACCEPTED,
            headers: HeaderMap::new(),
            mode: Mode::Raw,
        }
    }
}

/// The client's answer, as the exchange's tasks build it.
pub struct Answer {
    pub head: oneshot::Receiver<Head>,
    pub body: mpsc::Receiver<Bytes>,
}

/// One client request to a route, and the tasks it sets moving.
pub struct Exchange {
    gateway: Arc<Gateway>,
    route: Arc<RouteState>,
    boundary: Arc<Boundary>,
    /// The client's headers, as every request of this exchange to the upstream carries them.
    forwarded: HeaderMap,
    /// The session the client named (`Mcp-Session-Id`), if any.
    session: Option<Box<str>>,
    /// The client's message (a POST's body).
    request: Bytes,
    /// Set with the head, once.
    decided: Mutex<Decided>,
    /// The client's own message has gone to the upstream (later ones are the rules' own).
    forwarded_once: AtomicBool,
    /// A JSON answer's message has been written (a JSON answer holds one).
    json_written: AtomicBool,
    body: mpsc::Sender<Bytes>,
}

struct Decided {
    head: Option<oneshot::Sender<Head>>,
    mode: Option<Mode>,
}

impl Exchange {
    /// An exchange for the client's `request` (empty for GET and DELETE) on `route`, in the
    /// session `boundary`, and the answer it builds.
    pub fn new(
        gateway: Arc<Gateway>,
        route: Arc<RouteState>,
        boundary: Arc<Boundary>,
        client_headers: &HeaderMap,
        request: Bytes,
    ) -> (Arc<Exchange>, Answer) {
        let (head_tx, head) = oneshot::channel();
        // A few messages of slack: past them a client that does not read holds the upstream back.
        let (body_tx, body) = mpsc::channel(16);
        let session = client_headers
            .get(MCP_SESSION_ID)
            .and_then(|v| v.to_str().ok())
            .map(Box::from);
        let exchange = Arc::new(Exchange {
            gateway,
            route,
            boundary,
            forwarded: upstream::to_upstream(client_headers),
            session,
            request,
            decided: Mutex::new(Decided {
                head: Some(head_tx),
                mode: None,
            }),
            forwarded_once: AtomicBool::new(false),
            json_written: AtomicBool::new(false),
            body: body_tx,
        });
        (exchange, Answer { head, body })
    }

    /// Hands the client's message to the rules (in a task of its own).
    pub fn post(self: Arc<Self>) {
        tokio::spawn(async move {
            let link = Relay::of(&self, Some(self.request.clone()));
            let request = self.request.clone();
            if let Err(e) = self
                .boundary
                .relay(&link, Direction::ToServer, &request)
                .await
            {
                tracing::debug!(route = %self.route.route.name, error = %e, "the client's message was not relayed in full");
            }
        });
    }

    /// Sends the client's GET (the server's stream) or DELETE (the session's end) to the upstream
    /// and relays its answer (in a task of its own).
    pub fn open(self: Arc<Self>, method: Method) {
        tokio::spawn(async move {
            let sent = self
                .gateway
                .upstream
                .send(method, &self.route.route.url, self.forwarded.clone(), None)
                .await;
            match sent {
                Ok(response) => self.answered(response, None, true),
                Err(failure) => self.failed(&failure, None),
            }
        });
    }

    /// Decides the head of the client's answer, if it is not decided yet; answers the mode in
    /// force.
    fn decide(&self, head: impl FnOnce() -> Head) -> Mode {
        let mut decided = self.decided.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(mode) = decided.mode {
            return mode;
        }
        let head = head();
        let mode = head.mode;
        decided.mode = Some(mode);
        if let Some(sender) = decided.head.take() {
            let _ = sender.send(head);
        }
        mode
    }

    fn mode(&self) -> Option<Mode> {
        self.decided.lock().unwrap_or_else(|e| e.into_inner()).mode
    }

    /// Writes `chunk` into the client's answer; fails once the client has gone.
    async fn write(&self, chunk: Bytes) -> io::Result<()> {
        self.body
            .send(chunk)
            .await
            .map_err(|_| io::Error::new(io::ErrorKind::BrokenPipe, "the client has gone"))
    }

    /// A message for the client: `source` the bytes it was cut from (so a message relayed as
    /// received is not copied), `event` the event it came in (whose `id` and `event` a
    /// rewritten message keeps), `side` whether it came on the answer to a request of the
    /// rules' own.
    async fn to_client(
        &self,
        message: Outgoing<'_>,
        source: Option<&Bytes>,
        event: Option<&Event>,
        side: bool,
    ) -> io::Result<()> {
        let bytes = match message {
            Outgoing::Forward(bytes) | Outgoing::Own(bytes) => bytes,
        };
        let mode = match (self.mode(), side) {
            (Some(mode), _) => mode,
            (None, false) => self.decide(|| Head::json(StatusCode::OK)),
            (None, true) => {
                tracing::warn!(
                    route = %self.route.route.name,
                    "a message the upstream sent while answering schemagate's own request, before the client's answer began, was not relayed"
                );
                return Ok(());
            }
        };
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

    /// A message for the upstream: the client's own (the first message relayed as received),
    /// or one the rules wrote (a listing they ask for, an error answer to a server request).
    async fn to_upstream(self: &Arc<Self>, message: Outgoing<'_>) -> io::Result<()> {
        let (bytes, main) = match message {
            Outgoing::Forward(bytes) => (bytes, !self.forwarded_once.swap(true, Ordering::AcqRel)),
            Outgoing::Own(bytes) => (bytes, false),
        };
        let body = if within(&self.request, bytes) {
            self.request.slice_ref(bytes)
        } else {
            Bytes::copy_from_slice(bytes)
        };
        let mut headers = self.forwarded.clone();
        if !main {
            own_request_headers(&mut headers, &body);
        }
        let sent = self
            .gateway
            .upstream
            .send(
                Method::POST,
                &self.route.route.url,
                headers,
                Some(body.clone()),
            )
            .await;
        match sent {
            Ok(response) => self.answered(response, Some(body), main),
            Err(failure) => {
                self.boundary.unanswered(&body);
                if main {
                    self.failed(&failure, Some(&body));
                } else {
                    tracing::warn!(route = %self.route.route.name, error = %failure, "a request of schemagate's own to the upstream failed");
                }
            }
        }
        Ok(())
    }

    /// The upstream could not answer the client's message (`request`; `None` for GET and
    /// DELETE): a 502 or 504 with a JSON-RPC error naming the route.
    fn failed(&self, failure: &Failure, request: Option<&Bytes>) {
        let route = &self.route.route;
        tracing::warn!(route = %route.name, upstream = %route.url, error = %failure, "the upstream gave no answer");
        let id = match request.map(|r| mcp::framing(r)) {
            Some(mcp::Framing::Request { id, .. }) => Some(id),
            _ => None,
        };
        let message = format!(
            "schemagate gateway: route {}: the upstream {} {failure}",
            route.name, route.url
        );
        let body = mcp::error_answer(id.as_deref(), mcp::UPSTREAM_FAILED, &message);
        let mode = self.decide(|| Head::json(failure.status()));
        if mode == Mode::Json && !self.json_written.swap(true, Ordering::AcqRel) {
            // The channel has room: nothing was written before the head was decided.
            let _ = self.body.try_send(body.into());
        }
    }

    /// The upstream's answer to `request` (`None`: the client's GET or DELETE) began: decide
    /// the client's head from it if it answers the client's own message (`main`), and relay
    /// its body in a task of its own.
    fn answered(self: &Arc<Self>, response: reqwest::Response, request: Option<Bytes>, main: bool) {
        let status = response.status();
        let kind = content_mode(response.headers());
        if main {
            self.follow_session(status, response.headers());
            let mut headers = upstream::to_client(response.headers());
            if kind == Mode::Sse {
                headers.insert(
                    HeaderName::from_static("x-accel-buffering"),
                    HeaderValue::from_static("no"),
                );
            }
            self.decide(|| Head {
                status,
                headers,
                mode: kind,
            });
        }
        if kind == Mode::Raw {
            // Not a JSON-RPC answer: a request it was for gets none.
            if let Some(request) = &request {
                self.boundary.unanswered(request);
            }
            if !main {
                return;
            }
        }
        tokio::spawn(pump(Arc::clone(self), response, kind, !main));
    }

    /// Keeps the session table in step with the upstream: a session it issued is held here from
    /// now on; one it no longer knows (404 to a request naming it) is forgotten.
    fn follow_session(&self, status: StatusCode, headers: &HeaderMap) {
        let route = self.route.index;
        match (
            &self.session,
            headers.get(MCP_SESSION_ID).and_then(|v| v.to_str().ok()),
        ) {
            (None, Some(issued)) => {
                self.gateway
                    .sessions
                    .insert(route, issued, Arc::clone(&self.boundary));
            }
            (Some(named), _) if status == StatusCode::NOT_FOUND => {
                self.gateway.sessions.remove(route, named);
            }
            _ => {}
        }
    }

    /// The client sent DELETE for its session: forgotten here whatever the upstream says.
    pub fn ended(&self) {
        if let Some(named) = &self.session {
            self.gateway.sessions.remove(self.route.index, named);
        }
    }
}

/// What a message comes with when the rules relay it: the [`Link`] each relay gets.
struct Relay<'a> {
    exchange: &'a Arc<Exchange>,
    /// The bytes the message was cut from.
    source: Option<Bytes>,
    /// The event it came in, if it came in one.
    event: Option<&'a Event>,
    /// It came on the answer to a request of the rules' own.
    side: bool,
}

impl<'a> Relay<'a> {
    fn of(exchange: &'a Arc<Exchange>, source: Option<Bytes>) -> Self {
        Relay {
            exchange,
            source,
            event: None,
            side: false,
        }
    }
}

impl Link for Relay<'_> {
    async fn send(&self, direction: Direction, message: Outgoing<'_>) -> io::Result<()> {
        match direction {
            Direction::ToClient => {
                self.exchange
                    .to_client(message, self.source.as_ref(), self.event, self.side)
                    .await
            }
            Direction::ToServer => self.exchange.to_upstream(message).await,
        }
    }
}

/// Reads the upstream's answer and relays it: a JSON message, events one by one as they come,
/// or the bytes as they are. Stops when the upstream's answer ends or the client has gone
/// (dropping the answer closes it: for the upstream, the client cancelled).
fn pump(
    exchange: Arc<Exchange>,
    response: reqwest::Response,
    kind: Mode,
    side: bool,
) -> futures_util::future::BoxFuture<'static, ()> {
    Box::pin(async move {
        let relayed = match kind {
            Mode::Json => pump_json(&exchange, response, side).await,
            Mode::Sse => pump_events(&exchange, response, side).await,
            Mode::Raw => pump_raw(&exchange, response).await,
        };
        if let Err(e) = relayed {
            tracing::debug!(route = %exchange.route.route.name, error = %e, "relay of the upstream's answer ended");
        }
    })
}

/// The next chunk of the upstream's answer, or `None` at its end or once the client has gone.
async fn next_chunk(
    exchange: &Exchange,
    response: &mut reqwest::Response,
) -> io::Result<Option<Bytes>> {
    tokio::select! {
        chunk = response.chunk() => chunk.map_err(|e| io::Error::other(format!("reading the upstream's answer: {e}"))),
        () = exchange.body.closed() => Err(io::Error::new(io::ErrorKind::BrokenPipe, "the client has gone")),
    }
}

async fn pump_json(
    exchange: &Arc<Exchange>,
    mut response: reqwest::Response,
    side: bool,
) -> io::Result<()> {
    let max = exchange.route.config.max_message_bytes;
    let mut body = BytesMut::new();
    let mut len = 0usize;
    while let Some(chunk) = next_chunk(exchange, &mut response).await? {
        len += chunk.len();
        if body.len() < max.max(HEAD_BYTES) {
            body.extend_from_slice(&chunk);
        }
    }
    let link = Relay {
        exchange,
        source: None,
        event: None,
        side,
    };
    if len > max {
        let head = &body[..body.len().min(HEAD_BYTES)];
        return exchange
            .boundary
            .oversized(&link, Direction::ToClient, head, len)
            .await;
    }
    let body = body.freeze();
    let link = Relay {
        source: Some(body.clone()),
        ..link
    };
    exchange
        .boundary
        .relay(&link, Direction::ToClient, &body)
        .await
}

async fn pump_events(
    exchange: &Arc<Exchange>,
    mut response: reqwest::Response,
    side: bool,
) -> io::Result<()> {
    let mut reader = sse::Reader::new(exchange.route.config.max_message_bytes);
    loop {
        let chunk = next_chunk(exchange, &mut response).await?;
        match &chunk {
            Some(chunk) => reader.push(chunk),
            None => {
                if let Some(next) = reader.finish() {
                    relay_event(exchange, next, side).await?;
                }
                return Ok(());
            }
        }
        while let Some(next) = reader.next_event() {
            relay_event(exchange, next, side).await?;
        }
    }
}

async fn relay_event(exchange: &Arc<Exchange>, next: Next, side: bool) -> io::Result<()> {
    match next {
        Next::Event(event) => {
            let message = event
                .data
                .clone()
                .filter(|data| !data.iter().all(u8::is_ascii_whitespace));
            let Some(data) = message else {
                // No message (a priming event's empty data, a `retry`): relayed as it came.
                if side || exchange.mode() != Some(Mode::Sse) {
                    return Ok(());
                }
                return exchange.write(event.raw.clone()).await;
            };
            let link = Relay {
                exchange,
                source: Some(data.clone()),
                event: Some(&event),
                side,
            };
            exchange
                .boundary
                .relay(&link, Direction::ToClient, &data)
                .await
        }
        Next::Oversized { id, head, len } => {
            let event = Event {
                raw: Bytes::new(),
                id,
                name: None,
                data: None,
            };
            let link = Relay {
                exchange,
                source: None,
                event: Some(&event),
                side,
            };
            exchange
                .boundary
                .oversized(&link, Direction::ToClient, &head, len)
                .await
        }
    }
}

async fn pump_raw(exchange: &Arc<Exchange>, mut response: reqwest::Response) -> io::Result<()> {
    while let Some(chunk) = next_chunk(exchange, &mut response).await? {
        exchange.write(chunk).await?;
    }
    Ok(())
}

/// The headers of a request the rules wrote (a listing they ask for, an error answer), from the
/// client's: a plain MCP POST, with the headers that describe a request's body (2026-07-28's
/// `Mcp-Method`, `Mcp-Name`, `Mcp-Param-*`) describing this one, not the client's.
fn own_request_headers(headers: &mut HeaderMap, body: &[u8]) {
    let described = headers.contains_key("mcp-method");
    let about_body: Vec<HeaderName> = headers
        .keys()
        .filter(|name| {
            let name = name.as_str();
            name == "mcp-method" || name == "mcp-name" || name.starts_with("mcp-param-")
        })
        .cloned()
        .collect();
    for name in about_body {
        headers.remove(name);
    }
    if described {
        if let mcp::Framing::Request { method, .. } = mcp::framing(body) {
            if let Ok(method) = HeaderValue::from_str(&method) {
                headers.insert(HeaderName::from_static("mcp-method"), method);
            }
        }
    }
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    headers.insert(
        header::ACCEPT,
        HeaderValue::from_static("application/json, text/event-stream"),
    );
}

/// What an answer with these headers holds.
fn content_mode(headers: &HeaderMap) -> Mode {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let essence = content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    match essence.as_str() {
        "text/event-stream" => Mode::Sse,
        "application/json" => Mode::Json,
        _ => Mode::Raw,
    }
}

/// Whether `part` lies within `whole`'s bytes.
fn within(whole: &Bytes, part: &[u8]) -> bool {
    let (start, end) = (
        whole.as_ptr() as usize,
        whole.as_ptr() as usize + whole.len(),
    );
    let at = part.as_ptr() as usize;
    !part.is_empty() && at >= start && at + part.len() <= end
}
