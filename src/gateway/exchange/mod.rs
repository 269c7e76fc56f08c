//! One client request and everything it sets moving: the client's message handed to the MCP
//! rules, the upstream's answer relayed back through them, and the client's answer built as that
//! happens. An [`Exchange`] is the rules' [`Link`] on HTTP: a message sent to the server is a
//! request to the upstream, whose answer (JSON, or a stream of server-sent events) is handed to
//! the rules message by message; a message sent to the client goes into the client's answer. The
//! client's message and the upstream's answer to it are relayed by the handler that answers the
//! client ([`Exchange::relay`]); only what outlives the handler (an event stream, a client gone)
//! and the answers to the rules' own requests go on in tasks of their own.
//!
//! The client's answer takes its head (status, headers, and whether it is JSON, an event stream,
//! or the upstream's bytes relayed as they are) from the first of: the upstream's answer to the
//! client's own message, or a message schemagate writes in the server's place (a call whose
//! arguments are rejected is answered without the upstream). It ends when the task relaying the
//! client's message and the pump of the upstream's answer to it have both ended ([`Open`]). Head
//! and body reach the handler through the exchange's own [`Handoff`] (no channel). The
//! answer to a request of the rules' own (a listing) is read to its end whatever the client
//! does, and none of it goes into a JSON answer; in an event stream it goes without event ids,
//! which belong to the stream the client may resume.

mod answer;
mod handoff;
mod pump;

pub(super) use answer::{within, Open};
pub use answer::{Answer, AnswerHead, Mode};

use super::routes::RouteState;
use super::sse::{self, Event};
use super::upstream::headers::{self, MCP_SESSION_ID};
use super::upstream::{Failure, Requester, UpstreamRequest, Upstreamed};
use super::Gateway;
use crate::core::auth::Caller;
use crate::mcp::{self, Boundary, Direction, Envelope, Link, Outgoing};
use answer::Decided;
use bytes::Bytes;
use futures_util::FutureExt;
use handoff::Handoff;
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Method, StatusCode};
use pump::{content_mode, pump, Pump};
use std::io;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// One client request to a route, and the tasks it sets moving.
pub struct Exchange {
    gateway: Arc<Gateway>,
    route: Arc<RouteState>,
    boundary: Arc<Boundary>,
    /// The client's headers, as every request of this exchange to the upstream carries them.
    forwarded: HeaderMap,
    /// The session the client named (`Mcp-Session-Id`), if any.
    session: Option<Box<str>>,
    /// That session is not held here: it is held once the upstream answers it with success.
    adopt: bool,
    /// The client's method: POST, GET or DELETE.
    method: Method,
    /// The client's message is a request (an answer is owed to it).
    expects_answer: bool,
    /// Who sent the request (the session table's key holds its name).
    caller: Arc<Caller>,
    /// The `Host` the client sent (the base of the gateway's URLs in a rewritten challenge).
    host: Option<HeaderValue>,
    /// The client's message (a POST's body), its envelope scanned where it was read.
    envelope: Envelope,
    /// Set with the head, once.
    decided: Mutex<Decided>,
    /// The client's own message has gone to the upstream (later ones are the rules' own).
    forwarded_once: AtomicBool,
    /// A JSON answer's message has been written (a JSON answer holds one).
    json_written: AtomicBool,
    /// The client's answer, handed to the handler that answers the client (it ends with the
    /// last [`Open`]).
    handoff: Handoff,
    /// The upstream's answer to the client's message, relayed by [`Exchange::relay`] once the
    /// message is done with.
    deferred: Mutex<Option<Pump>>,
}

/// What an exchange needs of the client's request.
pub struct ClientRequest {
    pub method: Method,
    pub headers: HeaderMap,
    /// The message (empty for GET and DELETE), its envelope scanned once (the rules read the
    /// message from it).
    pub envelope: Envelope,
    /// The message is a request.
    pub expects_answer: bool,
    /// Who sent it.
    pub caller: Arc<Caller>,
    /// The session it names is not held here (a fresh one was made for it).
    pub adopt: bool,
}

impl Exchange {
    /// An exchange for the client's `request` on `route`, in the session `boundary`: the answer
    /// it builds, with the exchange's work for the handler to drive ([`Answer::respond`]).
    pub fn start(
        gateway: Arc<Gateway>,
        route: Arc<RouteState>,
        boundary: Arc<Boundary>,
        request: ClientRequest,
    ) -> Answer {
        let session = request
            .headers
            .get(MCP_SESSION_ID)
            .and_then(|v| v.to_str().ok())
            .map(Box::from);
        let host = request.headers.get(header::HOST).cloned();
        let exchange = Arc::new(Exchange {
            gateway,
            route,
            boundary,
            forwarded: headers::for_upstream(request.headers),
            session,
            adopt: request.adopt,
            method: request.method,
            expects_answer: request.expects_answer,
            caller: request.caller,
            host,
            envelope: request.envelope,
            decided: Mutex::new(Decided {
                mode: None,
                staged: None,
            }),
            forwarded_once: AtomicBool::new(false),
            json_written: AtomicBool::new(false),
            handoff: Handoff::default(),
            deferred: Mutex::new(None),
        });
        Answer {
            work: Arc::clone(&exchange).relay(),
            exchange,
        }
    }

    /// Relays the client's message: a POST's through the rules, a GET or DELETE straight to the
    /// upstream, whose answer comes back through the rules. The future is the exchange's own
    /// work, driven by the handler that answers the client (no task of its own): it relays the
    /// client's message and then the answer to it (see [`Exchange::answered`]).
    fn relay(self: Arc<Self>) -> futures_util::future::BoxFuture<'static, ()> {
        let exchange = Arc::clone(&self);
        let work = async move {
            let open = Arc::new(Open(Arc::clone(&self)));
            if self.method != Method::POST {
                let sent = self
                    .send(
                        self.method.clone(),
                        &self.forwarded,
                        None,
                        Requester::Client,
                    )
                    .await;
                match sent {
                    Ok(response) => self.answered(response, None, Some(&open)),
                    Err(failure) => self.failed(&failure, None),
                }
            } else {
                let link = Relay {
                    exchange: &self,
                    open: Some(&open),
                    source: Some(self.envelope.line().clone()),
                    event: None,
                };
                if let Err(e) = self.boundary.relay_scanned(&link, &self.envelope).await {
                    tracing::debug!(route = %self.route.route.name, error = %e, "the client's message was not relayed in full");
                }
            }
            drop(open);
            // The answer to the client's message, relayed once the message is done with (a
            // recording holds the message before its answer).
            let deferred = self
                .deferred
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .take();
            if let Some(answer) = deferred {
                pump::run(answer).await;
            }
        };
        // Boxed where it is made: the work's future holds every state of the rules and of the
        // pump, several kilobytes, and each move of it is a copy of all of them.
        let work = Box::pin(work);
        Box::pin(async move {
            // A panic in the rules ends this exchange alone: the client gets the 502 of an
            // answer never decided, and an answer left deferred (which holds the exchange) goes.
            if AssertUnwindSafe(work).catch_unwind().await.is_err() {
                tracing::error!(route = %exchange.route.route.name, "relaying a message panicked");
                exchange
                    .deferred
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .take();
            }
        })
    }

    /// The route's name, as logs and errors give it.
    pub(super) fn route_name(&self) -> &str {
        &self.route.route.name
    }

    /// Resolves once the client has gone (or its answer is complete): nothing written into the
    /// answer now will be read.
    pub(super) async fn client_left(&self) {
        self.handoff.left().await
    }

    /// The longest message relayed.
    pub(super) fn max_message_bytes(&self) -> usize {
        self.route.config.max_message_bytes
    }

    /// The session's MCP rules.
    pub(super) fn boundary(&self) -> &Boundary {
        &self.boundary
    }

    /// The client's message is a request, owed an answer.
    pub(super) fn expects_answer(&self) -> bool {
        self.expects_answer
    }

    /// A message for the upstream: the client's own (the first message relayed as received),
    /// or one the rules wrote (a listing they ask for, an error answer to a server request).
    async fn to_upstream(
        self: &Arc<Self>,
        message: Outgoing<'_>,
        open: Option<&Arc<Open>>,
    ) -> io::Result<()> {
        // The client's own message goes first, as received; anything after is the rules' own.
        let client_s = matches!(message, Outgoing::Forward(_))
            && open.is_some()
            && !self.forwarded_once.swap(true, Ordering::AcqRel);
        let requester = if client_s {
            Requester::Client
        } else {
            Requester::Rules
        };
        let bytes = match message {
            Outgoing::Forward(bytes) | Outgoing::Own(bytes) => bytes,
        };
        let request = self.envelope.line();
        let body = if within(request, bytes) {
            request.slice_ref(bytes)
        } else {
            Bytes::copy_from_slice(bytes)
        };
        let own;
        let headers = if requester == Requester::Rules {
            let mut headers = self.forwarded.clone();
            headers::own_request_headers(&mut headers, &body);
            own = headers;
            &own
        } else {
            &self.forwarded
        };
        let sent = self
            .send(Method::POST, headers, Some(body.clone()), requester)
            .await;
        match sent {
            Ok(response) => self.answered(response, Some(body), open.filter(|_| client_s)),
            Err(failure) => {
                self.unanswered(&body);
                if client_s {
                    self.failed(&failure, Some(&body));
                } else {
                    tracing::warn!(route = %self.route.route.name, error = %failure, "a request of schemagate's own to the upstream failed");
                }
            }
        }
        Ok(())
    }

    /// Sends `method` with `headers` and `body`, `requester`'s, to the route's server: a request
    /// to its URL, or the message to its stdio process for this session.
    async fn send(
        &self,
        method: Method,
        headers: &HeaderMap,
        body: Option<Bytes>,
        requester: Requester,
    ) -> Result<Upstreamed, Failure> {
        let request = UpstreamRequest {
            method,
            headers,
            body,
            scanned: &self.envelope,
            caller: self.caller.name(),
            session: self.session.as_deref(),
            requester,
        };
        self.route
            .upstream
            .send(&self.gateway.upstream, request)
            .await
    }

    /// The upstream's answer to `request` (`None`: the client's GET or DELETE) began. When it
    /// answers the client's own message (`open` is then the client's answer, held open while
    /// the answer is relayed), it gives the client's answer its head: at once for an event
    /// stream or bytes relayed as they are, once read whole for JSON. Its body is relayed by
    /// [`Exchange::relay`] when it answers the client's message, once the rules are done with
    /// that message (so a recording never holds an answer before its request); the answer to a
    /// request of the rules' own is relayed in a task of its own, since the rules may wait for it.
    pub(super) fn answered(
        self: &Arc<Self>,
        mut response: Upstreamed,
        request: Option<Bytes>,
        open: Option<&Arc<Open>>,
    ) {
        let kind = match &response {
            Upstreamed::Http(http) => content_mode(http.headers()),
            Upstreamed::Lines { .. } => Mode::Sse,
        };
        let refusal = self.refusal_of(&response, kind);
        if let Some(why) = refusal {
            // Nothing the rules cannot read goes to the client in place of an answer.
            if let Some(request) = &request {
                self.unanswered(request);
            }
            if open.is_some() {
                let failure = Failure::BadAnswer(why.to_owned());
                self.failed(&failure, request.as_ref());
            }
            return;
        }
        // The headers go to the client's answer (the pump reads the body alone).
        let head = open.map(|_| self.head_for_client(&mut response, kind));
        if kind == Mode::Raw {
            // Not a JSON-RPC answer: a request it was for gets none.
            if let Some(request) = &request {
                self.unanswered(request);
            }
            if open.is_none() {
                return;
            }
        }
        // A JSON answer gives its head once read whole; the others at once.
        let head = match head {
            Some(head) if kind != Mode::Json => {
                self.decide(|| head);
                None
            }
            head => head,
        };
        let deferred = open.is_some();
        let answer = Pump {
            exchange: Arc::clone(self),
            response,
            kind,
            request,
            open: open.cloned(),
            head,
        };
        if deferred {
            *self.deferred.lock().unwrap_or_else(|e| e.into_inner()) = Some(answer);
        } else {
            tokio::spawn(pump(answer));
        }
    }

    /// Why the upstream's answer (of `kind`) cannot be relayed as one, if it cannot: a
    /// redirect, a compressed message, a request answered with something that is no message.
    fn refusal_of(&self, response: &Upstreamed, kind: Mode) -> Option<&'static str> {
        let status = response.status();
        let encoded = response
            .headers()
            .get(header::CONTENT_ENCODING)
            .is_some_and(|v| !v.as_bytes().eq_ignore_ascii_case(b"identity"));
        if status.is_redirection() {
            // Never followed, never relayed: a client that followed it would reach a server no
            // check stands in front of.
            Some("answered with a redirect, which the gateway neither follows nor relays (is the route's URL current?)")
        } else if kind != Mode::Raw && encoded {
            Some("compressed its answer, though the gateway asked for none")
        } else if kind == Mode::Raw && status.is_success() && self.expects_answer {
            Some("answered a request with neither application/json nor text/event-stream")
        } else {
            None
        }
    }

    /// The head the upstream's answer (of `kind`) gives the client's: its status and headers
    /// (those that cross, taken from the answer), an OAuth challenge pointing at the route's
    /// metadata here; the session it names followed.
    fn head_for_client(&self, response: &mut Upstreamed, kind: Mode) -> AnswerHead {
        let status = response.status();
        self.follow_session(status, response.headers());
        let mut headers = headers::for_client(response.take_headers());
        if status == StatusCode::UNAUTHORIZED {
            // The client's OAuth flow reads the route's metadata here, not the upstream's.
            let base = super::oauth::public_base(&self.gateway, self.host.as_ref());
            super::oauth::rewrite_challenges(&mut headers, &base, &self.route.route.name);
        }
        if kind == Mode::Sse {
            headers.insert(
                HeaderName::from_static("x-accel-buffering"),
                HeaderValue::from_static("no"),
            );
        }
        AnswerHead {
            status,
            headers,
            mode: kind,
        }
    }

    /// The id of `request`, a message to the upstream, when it is a request: the client's
    /// message read through its envelope, any other scanned.
    pub(super) fn request_id<'a>(&self, request: &'a [u8]) -> Option<&'a str> {
        mcp::scanned_request_id(&self.envelope, request)
    }

    /// `request`, a message to the upstream, will get no answer (see
    /// [`Boundary::unanswered_id`]): its id read as [`Exchange::request_id`] reads it.
    fn unanswered(&self, request: &[u8]) {
        if let Some(id) = self.request_id(request) {
            self.boundary.unanswered_id(id);
        }
    }

    /// The upstream could not answer the client's message (`request`; `None` for GET and
    /// DELETE): a 502 or 504 with a JSON-RPC error naming the route.
    pub(super) fn failed(&self, failure: &Failure, request: Option<&Bytes>) {
        let route = &self.route.route;
        // The upstream by scheme and host only, to the client and in the log; its whole URL
        // (query values hidden) at debug level.
        let upstream = route.target.public();
        tracing::warn!(route = %route.name, %upstream, error = %failure, "the upstream gave no answer");
        tracing::debug!(route = %route.name, upstream = %route.target.redacted(), "the upstream that gave no answer");
        let id = request.and_then(|r| self.request_id(r));
        let message = format!(
            "schemagate gateway: route {}: the upstream {upstream} {failure}",
            route.name
        );
        let body = mcp::error_answer(id, mcp::UPSTREAM_FAILED, &message);
        let mode = self.decide(|| AnswerHead::json(failure.status()));
        if mode == Mode::Json && !self.json_written.swap(true, Ordering::AcqRel) {
            // Nothing was written before the head was decided: the one message goes now.
            self.handoff.write_now(body.into());
        }
    }

    /// The event stream that answers `request` ended (or was cut off) before its answer: the
    /// client gets a JSON-RPC error for it (`id`, its id), as the stream's last event.
    pub(super) async fn stream_cut(&self, id: &str) {
        if self.mode() != Some(Mode::Sse) {
            return;
        }
        let route = &self.route.route;
        tracing::warn!(route = %route.name, upstream = %route.target.public(), "an event stream from the upstream ended before its answer");
        let message = format!(
            "schemagate gateway: route {}: the upstream {} ended its event stream (or it was cut off) before answering this request",
            route.name,
            route.target.public()
        );
        let body = mcp::error_answer(Some(id), mcp::UPSTREAM_FAILED, &message);
        let mut out = Vec::with_capacity(body.len() + 16);
        sse::write(None, None, &body, &mut out);
        let _ = self.write(out.into()).await;
    }

    /// Keeps the session table in step with the upstream: a session it issued, or one this
    /// replica did not hold and the upstream answered, is held here from now on; one it no longer
    /// knows (404), or one ended by a DELETE it accepted, is forgotten.
    pub(super) fn follow_session(&self, status: StatusCode, headers: &HeaderMap) {
        let (route, caller) = (self.route.route.name.as_str(), self.caller.name());
        let issued = headers.get(MCP_SESSION_ID).and_then(|v| v.to_str().ok());
        let sessions = &self.gateway.sessions;
        match (&self.session, issued) {
            (None, Some(issued)) => {
                sessions.insert(route, caller, issued, Arc::clone(&self.boundary));
            }
            (Some(named), _) if status == StatusCode::NOT_FOUND => {
                sessions.remove(route, caller, named);
            }
            (Some(named), _) if self.method == Method::DELETE && status.is_success() => {
                sessions.remove(route, caller, named);
            }
            (Some(named), _) if self.adopt && status.is_success() => {
                sessions.insert(route, caller, named, Arc::clone(&self.boundary));
            }
            _ => {}
        }
    }
}

/// What a message comes with when the rules relay it: the [`Link`] each relay gets.
pub(super) struct Relay<'a> {
    pub(super) exchange: &'a Arc<Exchange>,
    /// The client's answer held open, when this relays the client's message or the answer to
    /// it; `None` on the answer to a request of the rules' own.
    pub(super) open: Option<&'a Arc<Open>>,
    /// The bytes the message was cut from.
    pub(super) source: Option<Bytes>,
    /// The event it came in, if it came in one.
    pub(super) event: Option<&'a Event>,
}

impl Link for Relay<'_> {
    async fn send(&self, direction: Direction, message: Outgoing<'_>) -> io::Result<()> {
        match direction {
            Direction::ToClient => {
                self.exchange
                    .to_client(
                        message,
                        self.source.as_ref(),
                        self.event,
                        if self.open.is_some() {
                            Requester::Client
                        } else {
                            Requester::Rules
                        },
                    )
                    .await
            }
            Direction::ToServer => self.exchange.to_upstream(message, self.open).await,
        }
    }
}
