//! The MCP rules driven through whole sessions in memory: a [`Wire`] records what the rules send
//! each way, no process or socket is involved, and each rule is a test of milliseconds. The
//! end-to-end tests in `tests/api/` prove the wiring of the proxy and the gateway; these prove
//! the rules.

mod calls;
mod listing;
mod reading;

use super::{Boundary, BoundaryConfig, Direction, Judged, Link, Observer, Outgoing, Shared};
use crate::core::auth::{Auth, Caller};
use crate::core::gate::{Gate, GateConfig, QueueLimits};
use crate::core::metrics::Transport;
use crate::core::policy::Policy;
use crate::core::schema::cache::CacheConfig;
use crate::core::Limits;
use bytes::Bytes;
use serde_json::Value;
use std::io;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// One message a session's rules sent.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Sent {
    pub to: Direction,
    /// Written by schemagate (an answer in the server's place, a replaced result, a request of
    /// its own), not relayed as received.
    pub own: bool,
    pub text: String,
}

impl Sent {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.text).unwrap_or_else(|e| panic!("{e}: {}", self.text))
    }
}

/// The recording [`Link`]: what the rules send, in order.
#[derive(Default)]
pub(super) struct Wire {
    sent: Mutex<Vec<Sent>>,
}

impl Link for Wire {
    async fn send(&self, direction: Direction, message: Outgoing<'_>) -> io::Result<()> {
        let (own, bytes) = match message {
            Outgoing::Forward(bytes) => (false, bytes),
            Outgoing::Own(bytes) => (true, bytes),
        };
        self.sent
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Sent {
                to: direction,
                own,
                text: String::from_utf8_lossy(bytes).into_owned(),
            });
        Ok(())
    }
}

/// One payload judged: tool, payload, attempt, outcome (or error code), withheld.
pub(super) type Judgement = (String, &'static str, u32, String, bool);

/// What the rules judged, as an [`Observer`] is told.
#[derive(Default)]
pub(super) struct Seen {
    pub judged: Mutex<Vec<Judgement>>,
}

impl Observer for Seen {
    fn judged(&self, judged: &Judged<'_>) {
        let outcome = match judged.verdict {
            Ok(verdict) => verdict.outcome.as_str().to_owned(),
            Err(error) => error.code().to_owned(),
        };
        self.judged.lock().unwrap_or_else(|e| e.into_inner()).push((
            judged.tool.to_owned(),
            judged.payload.as_str(),
            judged.attempt,
            outcome,
            judged.withheld,
        ));
    }
}

/// A session of server `crm` under the default policy (untrusted), with its wire and what it
/// judged.
pub(super) struct Harness {
    pub boundary: Boundary,
    pub wire: Wire,
    pub seen: Arc<Seen>,
}

/// The core for these tests: the service's usual limits, every server untrusted.
fn gate() -> Arc<Gate> {
    let config = GateConfig {
        limits: Limits {
            max_body_bytes: 1 << 20,
            max_batch_items: 100,
            max_depth: 64,
            max_errors: 20,
            max_schema_bytes: 1 << 20,
            max_schema_cost: 10_000,
            max_schema_regex_bytes: 1 << 20,
            max_check_work: 10_000_000,
            max_error_work: 1_000_000,
            body_read_timeout: Duration::from_secs(10),
        },
        cache: CacheConfig {
            max_bytes: 1 << 24,
            idle: Duration::from_secs(600),
        },
        label_limit: 100,
        series_limit: 1000,
        max_registered_tools: 1000,
        max_schema_text_bytes: 1 << 24,
        registry: None,
        policy: Policy::default(),
        policy_path: None,
        worker_threads: 1,
        queue: QueueLimits {
            max_checks: 1000,
            max_bytes: 1 << 24,
        },
        max_receiving_bytes: 1 << 24,
        auth: Auth::new(None, Vec::new()).expect("no tokens"),
    };
    Gate::new(config).expect("a core")
}

impl Harness {
    pub fn new() -> Self {
        let boundary = Boundary::new(gate(), Caller::open(), Self::config());
        Self::with(boundary)
    }

    /// `n` sessions of one route of server `crm` (a gateway's), sharing one core.
    pub fn sessions_of_one_route(n: usize) -> Vec<Self> {
        let gate = gate();
        let shared = Arc::new(Shared::new(&gate, Transport::Gateway));
        (0..n)
            .map(|_| {
                Self::with(Boundary::session_of(
                    Arc::clone(&gate),
                    Caller::open(),
                    Self::config(),
                    Arc::clone(&shared),
                ))
            })
            .collect()
    }

    fn with(boundary: Boundary) -> Self {
        let seen = Arc::new(Seen::default());
        Harness {
            boundary: boundary.observed(Arc::clone(&seen) as Arc<dyn Observer>),
            wire: Wire::default(),
            seen,
        }
    }

    fn config() -> BoundaryConfig {
        BoundaryConfig {
            server: "crm".into(),
            max_message_bytes: 1 << 20,
            max_in_flight: 16,
            contract_wait: Duration::from_secs(5),
            transport: Transport::Proxy,
            registered_is_current: false,
        }
    }

    /// What the rules sent for `line`, read in `direction`.
    async fn read(&self, direction: Direction, line: &str) -> Vec<Sent> {
        let before = self
            .wire
            .sent
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .len();
        self.boundary
            .relay(
                &self.wire,
                direction,
                &Bytes::copy_from_slice(line.as_bytes()),
            )
            .await
            .expect("the wire takes every message");
        self.wire.sent.lock().unwrap_or_else(|e| e.into_inner())[before..].to_vec()
    }

    /// The client sends `line`: what the rules sent for it.
    pub async fn client(&self, line: &str) -> Vec<Sent> {
        self.read(Direction::ToServer, line).await
    }

    /// The server sends `line`: what the rules sent for it.
    pub async fn server(&self, line: &str) -> Vec<Sent> {
        self.read(Direction::ToClient, line).await
    }

    /// A session whose client listed `tools` (a `tools/list` result's `tools` array, as JSON).
    pub async fn listed(tools: &str) -> Self {
        let session = Self::new();
        session.lists(tools).await;
        session
    }

    /// The client lists the tools, and the server answers `tools`.
    pub async fn lists(&self, tools: &str) {
        let session = self;
        session
            .client(r#"{"jsonrpc":"2.0","id":"l1","method":"tools/list"}"#)
            .await;
        let answer = format!(r#"{{"jsonrpc":"2.0","id":"l1","result":{{"tools":{tools}}}}}"#);
        let sent = session.server(&answer).await;
        assert_eq!(sent, [relayed(Direction::ToClient, &answer)]);
    }

    /// What the rules judged so far.
    pub fn judged(&self) -> Vec<Judgement> {
        self.seen
            .judged
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

/// A message relayed `to` as received.
pub(super) fn relayed(to: Direction, text: &str) -> Sent {
    Sent {
        to,
        own: false,
        text: text.to_owned(),
    }
}

/// The tool every session here lists: `get` returns `{"n": integer}` for an `id`.
pub(super) const TOOLS: &str = r#"[{"name":"get","inputSchema":{"type":"object","properties":{"id":{"type":"integer"}},"required":["id"]},"outputSchema":{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}}]"#;

/// A call of `get` with id `id` (JSON text) and `arguments`.
pub(super) fn call(id: &str, arguments: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"get","arguments":{arguments}}}}}"#
    )
}

/// An answer with id `id` (JSON text) carrying `structuredContent` `structured`.
pub(super) fn answer(id: &str, structured: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"result":{{"content":[],"structuredContent":{structured}}}}}"#
    )
}

/// Whether `sent` is schemagate's tool error in place of a result, carrying its verdict.
pub(super) fn is_replacement(sent: &Sent) -> bool {
    let value = sent.json();
    sent.own
        && value["result"]["isError"] == true
        && value["result"]["_meta"][super::VERDICT_META_KEY]["outcome"].is_string()
}
