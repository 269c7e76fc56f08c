//! The MCP rules, with no transport: what schemagate does with each message of an MCP session,
//! whichever wire carries it (the stdio proxy, the Streamable HTTP gateway).
//!
//! A [`Boundary`] is one session's rules: it learns the server's contract from `tools/list`
//! answers ([`learn`]), checks `tools/call` arguments before the server sees them and results
//! before the client does ([`call`], [`answers`]), and per the policy passes, logs, or answers with a tool
//! execution error that carries the verdict ([`reply`]). A result that comes through an MCP task
//! is judged the same way, against the contract of the call that created the task ([`task`]).
//! It reads only each message's envelope
//! ([`envelope`]) and remembers what the session needs ([`session`]). What passes is handed back
//! to the transport to forward exactly as received; the transport, through its [`Link`], only
//! moves bytes.
//!
//! The rules hand messages to a [`Link`] rather than returning them because one decision needs a
//! round trip in the middle: a call that arrives before the contract is known makes the boundary
//! ask the server for `tools/list` and wait for the answer before the call is judged.

mod answers;
mod call;
mod envelope;
pub mod ids;
mod learn;
mod metrics;
pub mod record;
mod reply;
mod roots;
mod scan;
mod session;
mod task;
mod task_records;
#[cfg(test)]
mod tests;
mod view;

/// A message's top-level `id` and whether it has a `method`, read from its first bytes (or all
/// of them): how a transport that is not one request, one answer (stdio) finds who awaits it.
pub use envelope::{head as message_head, Envelope, Head as MessageHead};
use metrics::{MessageMetrics, Relayed};
/// Where a replaced result carries its verdict: the key in its `_meta`.
pub use reply::VERDICT_META_KEY;
/// JSON-RPC error codes a transport answers with itself (see [`error_answer`]).
pub use reply::{HEADER_MISMATCH, INVALID_REQUEST, PARSE_ERROR, UPSTREAM_FAILED};

use crate::core::auth::Caller;
use crate::core::check::PayloadKind;
use crate::core::error::CheckError;
use crate::core::gate::Gate;
use crate::core::metrics::Transport;
use crate::core::verdict::Verdict;
use bytes::Bytes;
use envelope::{Message, Parsed};
use serde::Deserialize;
use serde_json::value::RawValue;
use session::ContractStatus;
use session::{ListPage, Pending, Session};
use std::borrow::Cow;
use std::future::Future;
use std::io;
use std::sync::Arc;
use std::time::Duration;

/// `_meta` key of a 2026-07-28 request that names its revision.
const PROTOCOL_META_KEY: &str = "io.modelcontextprotocol/protocolVersion";

/// How one session's rules run.
#[derive(Debug, Clone)]
pub struct BoundaryConfig {
    /// The server's name in the registry, the policy and the metrics (shared with each check).
    pub server: Arc<str>,
    /// Longest message relayed, in bytes (what an oversized message's error names).
    pub max_message_bytes: usize,
    /// Most requests in flight whose answers are read (tool calls, listings).
    pub max_in_flight: usize,
    /// How long a call waits for the contract the boundary asked the server for.
    pub contract_wait: Duration,
    /// The transport the session runs on, as the metrics name it.
    pub transport: Transport,
    /// A contract registered for the server (by another replica, through the shared registry)
    /// counts as current until the server says its tools changed: the boundary does not list
    /// them again itself.
    pub registered_is_current: bool,
}

/// A message the boundary hands its transport, and what it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outgoing<'a> {
    /// Forwarded exactly as received (the transport may hold it back briefly to write several
    /// at once).
    Forward(&'a [u8]),
    /// Written by schemagate: a reply in the server's place, a replaced result, or a request of
    /// the boundary's own (to be sent at once).
    Own(&'a [u8]),
}

/// Which way a message crosses the boundary: where a [`Link`] sends it, and the `direction` of
/// `schemagate_proxy_messages_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// From the MCP client to the server.
    ToServer,
    /// From the MCP server to the client.
    ToClient,
}

impl Direction {
    pub const ALL: [Direction; 2] = [Direction::ToServer, Direction::ToClient];

    pub fn as_str(self) -> &'static str {
        match self {
            Direction::ToServer => "to_server",
            Direction::ToClient => "to_client",
        }
    }
}

/// What carries a session's messages: the transport under the boundary.
pub trait Link: Send + Sync {
    /// Sends `message` the way `direction` says (to the server, or to the client).
    fn send(
        &self,
        direction: Direction,
        message: Outgoing<'_>,
    ) -> impl Future<Output = io::Result<()>> + Send;
}

/// One payload the rules judged: what a transport that reports decisions is told (see
/// [`Observer`]).
#[derive(Debug)]
pub struct Judged<'a> {
    pub tool: &'a str,
    /// The JSON-RPC id of the message that carried the payload (the call, or the answer), as
    /// JSON text.
    pub call_id: &'a str,
    pub payload: PayloadKind,
    /// 1 for a first attempt; counted from the traffic, as the metrics count it.
    pub attempt: u32,
    /// The verdict, or why none could be made.
    pub verdict: Result<&'a Verdict, &'a CheckError>,
    /// The client got schemagate's answer in the payload's place: the verdict rejects it, or it
    /// could not be checked where the policy withholds what cannot be.
    pub withheld: bool,
}

/// A result the rules could not judge because no call it belongs to is known.
#[derive(Debug)]
pub struct Unjudged<'a> {
    /// The JSON-RPC id of the message that carried it, as JSON text.
    pub call_id: &'a str,
    /// Why: `unknown_task` (a task this session never saw created) or `unknown_call` (an
    /// answer carrying a tool result to a request not followed).
    pub code: &'static str,
    pub message: &'a str,
    /// The client got schemagate's answer in its place.
    pub withheld: bool,
    /// Counted as an unchecked result in `schemagate_validations_total`.
    pub counted: bool,
}

/// Why an answer to a request not followed was withheld (see [`Unjudged`]).
pub const UNKNOWN_CALL: &str = "unknown_call";

/// Told of every payload a session's rules judge, as they judge it (`schemagate check --format
/// jsonrpc` reports them); what the client gets is unchanged.
pub trait Observer: Send + Sync {
    fn judged(&self, judged: &Judged<'_>);

    /// A result no call is known for: withheld, or passed unjudged.
    fn unjudged(&self, _unjudged: &Unjudged<'_>) {}
}

/// What every session of one server shares: whether its contract is current (one listing
/// serves them all), and its message counters.
pub struct Shared {
    contract: Arc<ContractStatus>,
    counts: MessageMetrics,
}

impl Shared {
    /// For the sessions of a server on `transport`; its message series exist from now on, at
    /// zero.
    pub fn new(gate: &Gate, transport: Transport) -> Self {
        Self {
            contract: Arc::default(),
            counts: MessageMetrics::new(gate.metrics(), transport),
        }
    }
}

/// One MCP session's rules, between a client and the server `config.server`.
pub struct Boundary {
    gate: Arc<Gate>,
    caller: Arc<Caller>,
    config: BoundaryConfig,
    session: Session,
    shared: Arc<Shared>,
    observer: Option<Arc<dyn Observer>>,
    recording: Option<Arc<record::Recording>>,
}

impl Boundary {
    /// The rules of a new session, the server's only one; its message series exist from now
    /// on, at zero.
    pub fn new(gate: Arc<Gate>, caller: Arc<Caller>, config: BoundaryConfig) -> Self {
        let shared = Arc::new(Shared::new(&gate, config.transport));
        Self::sharing(gate, caller, config, shared)
    }

    /// The rules of a request with no session of its own, to a server with other sessions: a
    /// listing any of them registers makes the contract current for all, and a `list_changed`
    /// read in any makes it stale for all.
    pub fn sharing(
        gate: Arc<Gate>,
        caller: Arc<Caller>,
        config: BoundaryConfig,
        shared: Arc<Shared>,
    ) -> Self {
        let route = Arc::clone(&shared.contract);
        Self::with_session(
            Session::new(config.max_in_flight, Arc::clone(&route), route),
            gate,
            caller,
            config,
            shared,
        )
    }

    /// The rules of a new session of a server with others (a gateway route's): until it lists
    /// the tools itself, it judges by the server's registered contract, current once any session
    /// listed; from its own listing on, by the tools that listing offered it. A `list_changed`
    /// read in it makes only its own view stale.
    pub fn session_of(
        gate: Arc<Gate>,
        caller: Arc<Caller>,
        config: BoundaryConfig,
        shared: Arc<Shared>,
    ) -> Self {
        let session = Session::new(
            config.max_in_flight,
            Arc::default(),
            Arc::clone(&shared.contract),
        );
        Self::with_session(session, gate, caller, config, shared)
    }

    fn with_session(
        session: Session,
        gate: Arc<Gate>,
        caller: Arc<Caller>,
        config: BoundaryConfig,
        shared: Arc<Shared>,
    ) -> Self {
        Self {
            session,
            shared,
            gate,
            caller,
            config,
            observer: None,
            recording: None,
        }
    }

    /// These rules, recording the session (see [`record`]).
    pub fn recorded(mut self, recording: Option<Arc<record::Recording>>) -> Self {
        self.recording = recording;
        self
    }

    /// These rules, telling `observer` of every payload they judge.
    pub fn observed(mut self, observer: Arc<dyn Observer>) -> Self {
        self.observer = Some(observer);
        self
    }

    fn observe(&self, judged: Judged<'_>) {
        if let Some(observer) = &self.observer {
            observer.judged(&judged);
        }
    }

    fn observe_unjudged(&self, unjudged: Unjudged<'_>) {
        if let Some(observer) = &self.observer {
            observer.unjudged(&unjudged);
        }
    }

    /// The revision the transport says the session speaks (Streamable HTTP names it in a
    /// header of every request), for a session that has not seen its `initialize`.
    pub fn assume_protocol(&self, protocol: crate::core::domain::ProtocolVersion) {
        if self.session.protocol().is_none() {
            self.session.set_protocol(protocol);
        }
    }

    /// `request`, sent to the server, will never be answered (the transport failed, or the
    /// server refused it without a JSON-RPC answer): it is no longer followed, and calls waiting
    /// for a listing it asked for go on.
    pub fn unanswered(&self, request: &[u8]) {
        if let Some(id) = request_id(request) {
            self.unanswered_id(id);
        }
    }

    /// As [`Boundary::unanswered`], for the request whose id is `id` ([`request_id`]).
    pub fn unanswered_id(&self, id: &str) {
        if let Some(Pending::ToolsList(ListPage { ours: true, .. })) = self.session.answered(id) {
            self.session.listing_ended(false, true);
        }
    }

    /// A listing the rules of a recorded session sent the server themselves (a replay reads it
    /// from the recording, marked): followed as this boundary's own, so the server's answer,
    /// which comes later in the recording, is read as the live session read it (registered, not
    /// forwarded). Anything else is passed over.
    pub fn adopt_own_request(&self, request: &[u8]) {
        let Some(Message::Request { id, method, params }) =
            envelope::message(request, Direction::ToServer)
        else {
            return;
        };
        if method != "tools/list" {
            return;
        }
        #[derive(Deserialize)]
        struct Params<'a> {
            #[serde(default, borrow)]
            cursor: Option<&'a RawValue>,
            #[serde(default, borrow, rename = "_meta")]
            meta: Option<&'a RawValue>,
        }
        let params = params
            .and_then(|p| p.parse::<Params<'_>>())
            .unwrap_or(Params {
                cursor: None,
                meta: None,
            });
        let pending = Pending::ToolsList(ListPage {
            first_page: params.cursor.is_none(),
            ours: true,
            protocol: self.session.protocol(),
            meta: params.meta.map(|m| m.get().into()),
        });
        let _ = self.session.track(id.get(), pending);
    }

    /// Whether the answer to the request whose id is `id` ([`request_id`]), sent to the server,
    /// is still awaited (followed and not yet come).
    pub fn awaits_answer(&self, id: &str) -> bool {
        self.session.awaits(id)
    }

    pub fn config(&self) -> &BoundaryConfig {
        &self.config
    }

    /// Forwards `bytes` in `direction` as received, counted as `kind`.
    async fn forward(
        &self,
        link: &impl Link,
        direction: Direction,
        kind: Relayed,
        bytes: &[u8],
    ) -> io::Result<()> {
        self.shared.counts.count(direction, kind);
        link.send(direction, Outgoing::Forward(bytes)).await
    }

    /// Sends the client a message schemagate wrote in place of one read in `read` (a request it
    /// answers itself, a result it replaces), counted under `read` as `kind`.
    async fn answer(
        &self,
        link: &impl Link,
        read: Direction,
        kind: Relayed,
        message: &[u8],
    ) -> io::Result<()> {
        self.shared.counts.count(read, kind);
        link.send(Direction::ToClient, Outgoing::Own(message)).await
    }

    /// One whole message (or JSON-RPC batch) read in `direction`: a message is handled, a batch
    /// (not MCP since 2025-06-18) holding something the boundary acts on is handled one message
    /// at a time (so nothing in it passes unchecked), anything else is forwarded as it came. A
    /// recorded session records it once it is handled, and what schemagate wrote meanwhile.
    pub async fn relay(
        &self,
        link: &impl Link,
        direction: Direction,
        line: &Bytes,
    ) -> io::Result<()> {
        let parsed = envelope::parse_reading(line, direction, self.read_ahead(direction, line));
        self.relay_parsed(link, direction, line, parsed).await
    }

    /// As [`Boundary::relay`], for the client's message `scanned` already (a gateway's POST,
    /// whose envelope says how it is served): its line is not scanned again.
    pub async fn relay_scanned(&self, link: &impl Link, scanned: &Envelope) -> io::Result<()> {
        let line = scanned.line();
        let parsed = scanned.parsed(line, Direction::ToServer);
        self.relay_parsed(link, Direction::ToServer, line, parsed)
            .await
    }

    /// As [`Boundary::relay`], for a line that must hold one JSON-RPC message (an answer owed
    /// to a client's HTTP request): `false`, with nothing relayed or recorded, when it holds
    /// anything else. The line is read once for both.
    pub async fn relay_message(
        &self,
        link: &impl Link,
        direction: Direction,
        line: &Bytes,
    ) -> io::Result<bool> {
        let parsed = envelope::parse_reading(line, direction, self.read_ahead(direction, line));
        if !matches!(parsed, Parsed::One(_)) {
            return Ok(false);
        }
        self.relay_parsed(link, direction, line, parsed).await?;
        Ok(true)
    }

    /// How a server's message in `line` is read so that a tool result it carries is read once
    /// (see [`envelope::ReadAhead`]): while a request awaits its answer, and where the check
    /// would read the result on the relaying task (larger ones are read on the check's workers).
    fn read_ahead(&self, direction: Direction, line: &Bytes) -> Option<envelope::ReadAhead> {
        let reads = direction == Direction::ToClient
            && self.gate.reads_inline(line.len())
            && self.session.awaits_answers();
        reads.then(|| envelope::ReadAhead {
            depth_limit: self.gate.limits().max_depth,
        })
    }

    async fn relay_parsed(
        &self,
        link: &impl Link,
        direction: Direction,
        line: &Bytes,
        parsed: Parsed<'_>,
    ) -> io::Result<()> {
        let taped = Taped {
            link,
            recording: self.recording.as_deref(),
        };
        let relayed = self.relay_one(&taped, direction, line, parsed).await;
        if let Some(recording) = &self.recording {
            recording.received(line);
        }
        relayed
    }

    async fn relay_one(
        &self,
        link: &impl Link,
        direction: Direction,
        line: &Bytes,
        parsed: Parsed<'_>,
    ) -> io::Result<()> {
        let items = match parsed {
            Parsed::One(message) => {
                return self.message(link, direction, line, line, message).await
            }
            Parsed::Batch(items) => items,
            Parsed::NotJsonRpc => {
                return self
                    .forward(link, direction, Relayed::NotJsonRpc, line)
                    .await
            }
        };
        let messages: Vec<(Bytes, Option<Message<'_>>)> = items
            .into_iter()
            .map(|item| {
                let text = line.slice_ref(item.get().as_bytes());
                (text, envelope::message(item.get().as_bytes(), direction))
            })
            .collect();
        let acts = messages
            .iter()
            .any(|(_, m)| m.as_ref().is_some_and(|m| self.acts_on(direction, m)));
        if !acts {
            return self
                .forward(link, direction, Relayed::NotJsonRpc, line)
                .await;
        }
        for (text, message) in messages {
            match message {
                Some(message) => self.message(link, direction, line, &text, message).await?,
                None => {
                    self.forward(link, direction, Relayed::NotJsonRpc, &text)
                        .await?
                }
            }
        }
        Ok(())
    }

    async fn message(
        &self,
        link: &impl Link,
        direction: Direction,
        line: &Bytes,
        text: &[u8],
        message: Message<'_>,
    ) -> io::Result<()> {
        match direction {
            Direction::ToServer => self.client_message(link, line, text, message).await,
            Direction::ToClient => self.server_message(link, line, text, message).await,
        }
    }

    /// Whether `message`, read in `direction`, is one the boundary acts on: from the client a
    /// call, a listing, a read of a task or `initialize`; from the server an answer it follows
    /// (or may withhold), `list_changed`, or a task's status.
    fn acts_on(&self, direction: Direction, message: &Message<'_>) -> bool {
        match (direction, message) {
            (Direction::ToServer, Message::Request { method, .. }) => {
                matches!(
                    method.as_ref(),
                    "tools/call" | "tools/list" | "initialize" | "tasks/result" | "tasks/get"
                )
            }
            // Whatever `server_message` may judge, replace or withhold.
            (
                Direction::ToClient,
                Message::Response {
                    id,
                    result,
                    unreadable_id,
                    ..
                },
            ) => {
                // A request followed is known without reading the result again.
                let carries = || result.is_some_and(answers::carries_tool_result);
                match id {
                    Some(id) => {
                        self.session.follows(id.get())
                            || carries()
                            || ids::Readings::of_answer(id.get()).doubtful
                    }
                    None => *unreadable_id && carries(),
                }
            }
            (Direction::ToClient, Message::Notification { method, .. }) => {
                method == "notifications/tools/list_changed" || task::is_status(method)
            }
            _ => false,
        }
    }

    /// A message past the transport's size limit (`len` bytes, `head` its first bytes): not
    /// relayed. A request is answered with a JSON-RPC error to its sender; an answer to a
    /// request, with one to the side awaiting it.
    pub async fn oversized(
        &self,
        link: &impl Link,
        direction: Direction,
        head: &[u8],
        len: usize,
    ) -> io::Result<()> {
        let link = &Taped {
            link,
            recording: self.recording.as_deref(),
        };
        self.shared.counts.count(direction, Relayed::Oversized);
        let head = envelope::head(head);
        let limit = self.config.max_message_bytes;
        tracing::warn!(
            server = %self.config.server,
            direction = direction.as_str(),
            bytes = len,
            limit,
            id = head.id.as_deref().unwrap_or(""),
            "a message past --max-message-bytes was not relayed"
        );
        let is_request = head.is_request(direction);
        let Some(id) = head.id.and_then(|id| RawValue::from_string(id).ok()) else {
            return Ok(());
        };
        let from = match direction {
            Direction::ToServer => "client",
            Direction::ToClient => "server",
        };
        let message = format!(
            "schemagate: a message of {len} bytes from the {from} exceeds --max-message-bytes ({limit}); it was not relayed"
        );
        let answer = reply::error(Some(&id), reply::INVALID_REQUEST, &message);
        // A request goes back to its sender; an answer on to the side that awaits it.
        let to_client = (direction == Direction::ToServer) == is_request;
        if to_client {
            match self.session.answered(id.get()) {
                Some(Pending::ToolsCall { call, .. }) => self.session.concluded(&call.tool, true),
                // The answer to the boundary's own listing: no client awaits it, and calls
                // waiting for the contract go on.
                Some(Pending::ToolsList(ListPage { ours: true, .. })) => {
                    self.session.listing_ended(false, true);
                    return Ok(());
                }
                _ => {}
            }
            link.send(Direction::ToClient, Outgoing::Own(&answer)).await
        } else {
            link.send(Direction::ToServer, Outgoing::Own(&answer)).await
        }
    }
}

/// A session's link with its recording, if it is recorded: what schemagate writes itself is
/// recorded, marked, as it is sent.
struct Taped<'a, L> {
    link: &'a L,
    recording: Option<&'a record::Recording>,
}

impl<L: Link> Link for Taped<'_, L> {
    async fn send(&self, direction: Direction, message: Outgoing<'_>) -> io::Result<()> {
        if let (Some(recording), Outgoing::Own(bytes)) = (self.recording, &message) {
            recording.wrote(direction, bytes);
        }
        self.link.send(direction, message).await
    }
}

/// The id (its JSON text) of `message`, sent to the server, when it is a request: read once for
/// [`Boundary::awaits_answer`] and [`Boundary::unanswered_id`].
pub fn request_id(message: &[u8]) -> Option<&str> {
    match envelope::message(message, Direction::ToServer)? {
        Message::Request { id, .. } => Some(id.get()),
        _ => None,
    }
}

/// As [`request_id`], for `message` read through `scanned`, its envelope when it is the message
/// scanned (see [`Envelope`]).
pub fn scanned_request_id<'a>(scanned: &Envelope, message: &'a [u8]) -> Option<&'a str> {
    match scanned.parsed(message, Direction::ToServer) {
        Parsed::One(Message::Request { id, .. }) => Some(id.get()),
        _ => None,
    }
}

/// What one message sent on its own (a Streamable HTTP POST's body) is, read from its envelope
/// alone: what a transport needs to know of it before the rules see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Framing<'a> {
    /// A request: `id` its JSON-RPC id, as JSON text; `method` its method. Both borrowed from
    /// the message (the method decoded if it holds an escape).
    Request { id: &'a str, method: Cow<'a, str> },
    /// A notification (`method`), or an answer to a request of the server (`None`).
    Other { method: Option<Cow<'a, str>> },
    /// A JSON array: a JSON-RPC batch.
    Batch,
    /// Not JSON, or JSON that is not a JSON-RPC message.
    NotJsonRpc,
}

/// Reads `bytes`' envelope (see [`Framing`]).
pub fn framing(bytes: &[u8]) -> Framing<'_> {
    Framing::of(envelope::parse(bytes, Direction::ToServer))
}

impl<'a> Framing<'a> {
    /// What a client's message is, read from its envelope `scanned` (see [`Envelope`]).
    pub fn scanned(scanned: &Envelope, bytes: &'a [u8]) -> Self {
        Self::of(scanned.parsed(bytes, Direction::ToServer))
    }

    fn of(parsed: Parsed<'a>) -> Self {
        match parsed {
            Parsed::One(Message::Request { id, method, .. }) => Framing::Request {
                id: id.get(),
                method,
            },
            Parsed::One(Message::Notification { method, .. }) => Framing::Other {
                method: Some(method),
            },
            Parsed::One(_) => Framing::Other { method: None },
            Parsed::Batch(_) => Framing::Batch,
            Parsed::NotJsonRpc => Framing::NotJsonRpc,
        }
    }
}

/// The tool the `tools/call` request `scanned` names, if it is one (see [`Envelope`]).
pub fn called_tool(scanned: &Envelope) -> Option<String> {
    #[derive(Deserialize)]
    struct Named<'a> {
        #[serde(borrow)]
        name: Cow<'a, str>,
    }
    match scanned.parsed(scanned.line(), Direction::ToServer) {
        Parsed::One(Message::Request { method, params, .. }) if method == "tools/call" => {
            let named: Named<'_> = params?.parse()?;
            Some(named.name.into_owned())
        }
        _ => None,
    }
}

/// A JSON-RPC error answer schemagate writes itself: `id` the request's id as JSON text
/// (`None`: the request could not be read), `code` and `message`. For transports that answer
/// before the rules see a message (a body not JSON-RPC, an upstream down).
pub fn error_answer(id: Option<&str>, code: i64, message: &str) -> Vec<u8> {
    let id = id.and_then(|id| RawValue::from_string(id.to_owned()).ok());
    reply::error(id.as_deref(), code, message)
}

#[derive(Deserialize)]
struct RequestMeta<'a> {
    #[serde(borrow, default, rename = "io.modelcontextprotocol/protocolVersion")]
    protocol: Option<Cow<'a, str>>,
}

/// The revision a request's `_meta` names (2026-07-28 requests carry it).
fn meta_protocol(meta: Option<&RawValue>) -> Option<crate::core::domain::ProtocolVersion> {
    let meta: RequestMeta<'_> = serde_json::from_str(meta?.get()).ok()?;
    crate::core::domain::ProtocolVersion::parse(meta.protocol?.as_ref()).ok()
}
