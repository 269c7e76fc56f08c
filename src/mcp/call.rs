//! The client's side of the rules: a `tools/call`'s arguments are checked before the server sees
//! them (per the policy the call passes, is logged, or is answered in the server's place with a
//! tool execution error carrying the verdict) and the call is followed, so that its result is
//! judged when it comes ([`super::answers`]); listings, task reads and cancellations are noted.

use super::envelope::Message;
use super::scan::Unread;
use super::session::{Call, ListPage, Pending, TaskRead, Untracked};
use super::view::Offered;
use super::{meta_protocol, reply, Boundary, Direction, Judged, Link, Relayed};
use crate::core::check::{Check, Payload, PayloadKind, SchemaSource, ToolResult};
use crate::core::domain::{ProtocolVersion, Tier};
use crate::core::error::CheckError;
use crate::core::metrics::Attempt;
use crate::core::policy::UnknownTools;
use crate::core::verdict::{Action, Outcome, Verdict};
use bytes::Bytes;
use serde::Deserialize;
use serde_json::value::RawValue;
use std::borrow::Cow;
use std::io;
use std::sync::Arc;

/// A payload to judge: its JSON text, how the check reads it, and, for a result read ahead with
/// its message's envelope ([`super::envelope::ReadAhead`]), what was read.
struct Unjudged {
    text: Bytes,
    read: fn(Bytes, usize) -> Result<Payload, CheckError>,
    ahead: Option<Box<ToolResult>>,
}

#[derive(Deserialize)]
struct CallParams<'a> {
    #[serde(borrow)]
    name: Cow<'a, str>,
    #[serde(borrow, default)]
    arguments: Option<&'a RawValue>,
    #[serde(borrow, default, rename = "_meta")]
    meta: Option<&'a RawValue>,
    /// Task augmentation (2025-11-25): the answer is a task created, not the result.
    #[serde(borrow, default)]
    task: Option<&'a RawValue>,
}

#[derive(Deserialize, Default)]
struct ListParams<'a> {
    #[serde(borrow, default)]
    cursor: Option<Cow<'a, str>>,
    #[serde(borrow, default, rename = "_meta")]
    meta: Option<&'a RawValue>,
}

/// Why a payload was not checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Unchecked {
    /// The check failed (no contract, a schema refused, no capacity...).
    Failed,
    /// The session's own listing did not offer the tool.
    NotOffered,
}

impl Boundary {
    /// One message from the client; `text` is its bytes (the line, or one item of a batch).
    pub(super) async fn client_message(
        &self,
        link: &impl Link,
        line: &Bytes,
        text: &[u8],
        message: Message<'_>,
    ) -> io::Result<()> {
        match message {
            Message::Request { id, method, params } => match method.as_ref() {
                "initialize" => {
                    let _ = self.session.track(id.get(), Pending::Initialize);
                }
                "tools/list" => {
                    let params: ListParams<'_> = params.and_then(Unread::parse).unwrap_or_default();
                    let pending = Pending::ToolsList(ListPage {
                        first_page: params.cursor.is_none(),
                        ours: false,
                        protocol: meta_protocol(params.meta).or(self.session.protocol()),
                        meta: None,
                    });
                    if let Err(untracked) = self.session.track(id.get(), pending) {
                        return self.untracked(link, id, untracked).await;
                    }
                }
                "tools/call" => {
                    // Params that are not JSON cannot be checked: answered as missing.
                    let params = params.and_then(Unread::parse::<CallParams<'_>>);
                    return self.call(link, line, text, id, params).await;
                }
                "tasks/result" | "tasks/get" => {
                    let read = match method.as_ref() {
                        "tasks/result" => TaskRead::Result,
                        _ => TaskRead::Get,
                    };
                    if let Err(untracked) =
                        self.session.track(id.get(), self.task_read(read, params))
                    {
                        return self.untracked(link, id, untracked).await;
                    }
                }
                _ => {}
            },
            Message::Response {
                id: Some(id),
                result,
                ..
            } => {
                self.session.roots.answered(id, result.map(Unread::bytes));
            }
            Message::Notification { method, .. }
                if method == "notifications/roots/list_changed" =>
            {
                self.session.roots.changed();
            }
            Message::Notification { method, params } if method == "notifications/cancelled" => {
                #[derive(Deserialize)]
                struct Cancelled<'a> {
                    #[serde(borrow, rename = "requestId")]
                    request_id: &'a RawValue,
                }
                if let Some(c) = params.and_then(Unread::parse::<Cancelled<'_>>) {
                    self.session.cancelled(c.request_id.get());
                }
            }
            _ => {}
        }
        self.forward(link, Direction::ToServer, Relayed::Forwarded, text)
            .await
    }

    /// Answers a request whose answer cannot be followed, instead of forwarding it unchecked.
    async fn untracked(
        &self,
        link: &impl Link,
        id: &RawValue,
        untracked: Untracked,
    ) -> io::Result<()> {
        let (code, message) = match untracked {
            Untracked::Full { limit } => (
                reply::TOO_MANY_IN_FLIGHT,
                format!(
                    "schemagate: {limit} requests are already in flight to the server (--max-calls-in-flight); wait for some to finish and send this one again"
                ),
            ),
            Untracked::InUse => (
                reply::INVALID_REQUEST,
                format!(
                    "schemagate: a request with id {} is already in flight in this session (or was cancelled and may still be answered); JSON-RPC ids must be unique: send it with another id",
                    id.get()
                ),
            ),
        };
        self.answer(
            link,
            Direction::ToServer,
            Relayed::Answered,
            &reply::error(Some(id), code, &message),
        )
        .await
    }

    /// A `tools/call`: its arguments are checked (the contract asked for first if need be); a
    /// rejected call is answered here, any other is followed and forwarded.
    async fn call(
        &self,
        link: &impl Link,
        line: &Bytes,
        text: &[u8],
        id: &RawValue,
        params: Option<CallParams<'_>>,
    ) -> io::Result<()> {
        let Some(params) = params else {
            return self.answer(link, Direction::ToServer, Relayed::Answered, &reply::error(
                    Some(id),
                    reply::INVALID_PARAMS,
                    "tools/call needs params with the tool's `name` (a string) and, optionally, `arguments` (an object)",
                ))
                .await;
        };
        let tool: Arc<str> = Arc::from(&*params.name);
        let protocol = meta_protocol(params.meta).or(self.session.protocol());
        self.ensure_contract(link, params.meta).await?;
        let attempt = self.session.attempt(&tool);
        let arguments = match params.arguments {
            Some(raw) => line.slice_ref(raw.get().as_bytes()),
            None => Bytes::from_static(b"{}"),
        };
        let call = Call {
            id: Arc::from(id.get()),
            tool,
            attempt,
            protocol,
        };
        if let Some(refusal) = self
            .judge_payload(PayloadKind::Arguments, &call, id.get(), (arguments, None))
            .await
        {
            self.session.concluded(&call.tool, true);
            return self
                .answer(
                    link,
                    Direction::ToServer,
                    Relayed::Answered,
                    &reply::answer(id, &refusal),
                )
                .await;
        }
        let pending = Pending::ToolsCall {
            call,
            task_asked: params.task.is_some(),
        };
        if let Err(untracked) = self.session.track(id.get(), pending) {
            return self.untracked(link, id, untracked).await;
        }
        self.forward(link, Direction::ToServer, Relayed::Forwarded, text)
            .await
    }

    /// Judges a payload of `call` (`payload`: its arguments, carried by the request `call_id`,
    /// or its result, carried by the answer `call_id`): `None` when it passes, else the tool
    /// error result that takes its place (an answer in the server's place, a replaced result).
    pub(super) async fn judge_payload(
        &self,
        payload: PayloadKind,
        call: &Call,
        call_id: &str,
        (body, read): (Bytes, Option<Box<ToolResult>>),
    ) -> Option<Vec<u8>> {
        let Call {
            id,
            tool,
            attempt,
            protocol,
        } = call;
        let arguments = payload == PayloadKind::Arguments;
        let read_payload: fn(Bytes, usize) -> Result<Payload, CheckError> = if arguments {
            |text, depth| {
                Ok(Payload::Arguments(Payload::document_from_json(
                    "arguments",
                    &text,
                    depth,
                )?))
            }
        } else {
            |text, depth| Ok(Payload::Result(Payload::result_from_json(&text, depth)?))
        };
        let schema = self.schema_for(tool);
        let offered = schema.is_some();
        let judged = match schema {
            Some(schema) => {
                // The request's id, where the message carrying the payload writes it alike.
                let call_id = if **id == *call_id {
                    Arc::clone(id)
                } else {
                    Arc::from(call_id)
                };
                let payload = Unjudged {
                    text: body,
                    read: read_payload,
                    ahead: read,
                };
                self.judge(tool, call_id, *attempt, *protocol, schema, payload)
                    .await
            }
            None => Err(CheckError::UnknownTool {
                server: self.config.server.to_string(),
                tool: tool.to_string(),
            }),
        };
        let subject = payload.as_str();
        let what = if arguments { "call" } else { "result" };
        let replacement = match &judged {
            Ok(verdict) if verdict.action == Action::Reject => {
                self.log_rejection(tool, call_id, subject, verdict);
                Some(reply::rejected(tool, arguments, verdict, *protocol))
            }
            Ok(_) => None,
            Err(e) if !offered => self
                .unchecked(tool, call_id, *attempt, payload, e, Unchecked::NotOffered)
                .map(|tier| reply::not_offered(tool, what, tier, *protocol)),
            Err(e) => self
                .unchecked(tool, call_id, *attempt, payload, e, Unchecked::Failed)
                .map(|tier| reply::unchecked_by(tool, what, tier, e, *protocol)),
        };
        self.observe(Judged {
            tool,
            call_id,
            payload,
            attempt: *attempt,
            verdict: judged.as_ref(),
            withheld: replacement.is_some(),
        });
        replacement
    }

    /// What a payload of `tool` is judged against in this session: the registered contract;
    /// the schemas this session's own listing gave the tool, where the registered ones are others
    /// (another session's listing registered since) and no pin holds them; `None` for a tool its
    /// own listing did not offer, under untrusted (withheld: a call to a tool the server did not
    /// offer this session must not reach it unchecked).
    fn schema_for(&self, tool: &str) -> Option<SchemaSource> {
        let server = &self.config.server;
        match self.session.offered(tool) {
            Offered::NoView | Offered::Tool(None) => Some(SchemaSource::Registered),
            Offered::Tool(Some(schemas)) => {
                let held = self.gate.registers(server, tool, &schemas)
                    || (self.rules(Some(tool)).pin && self.gate.has_tool(server, tool));
                Some(match held {
                    true => SchemaSource::Registered,
                    false => SchemaSource::Listed(schemas),
                })
            }
            // Not in this session's listing: a tool of the server's contract not offered to this
            // session is withheld under untrusted; one no contract names either (a name the model
            // made up, a tool kept from this client) as `unknown_tools` says.
            Offered::Absent => {
                let rules = self.rules(Some(tool));
                let passes = match self.gate.has_tool(server, tool) {
                    true => rules.tier != Tier::Untrusted,
                    false => rules.unknown_tools == UnknownTools::Pass,
                };
                passes.then_some(SchemaSource::Registered)
            }
        }
    }

    /// The policy's rules for this session's server, and `tool` if named.
    pub(super) fn rules(&self, tool: Option<&str>) -> crate::core::policy::Rules {
        self.gate
            .policy()
            .load()
            .rules_for(Some(&self.config.server), tool)
    }

    /// Judges `payload` of a call of `tool` (`call_id`: the id of the message that carries it,
    /// as JSON text) against `schema`.
    async fn judge(
        &self,
        tool: &Arc<str>,
        call_id: Arc<str>,
        attempt: u32,
        protocol: Option<ProtocolVersion>,
        schema: SchemaSource,
        payload: Unjudged,
    ) -> Result<Verdict, CheckError> {
        let (server, tool) = (Arc::clone(&self.config.server), Arc::clone(tool));
        let size = payload.text.len();
        let roots = self.session.roots.known();
        self.gate
            .check_one(&self.caller, size, self.config.transport, move |limits| {
                let payload = match payload.ahead {
                    Some(result) => Payload::Result(*result),
                    None => (payload.read)(payload.text, limits.max_depth)?,
                };
                let result_bytes = matches!(payload, Payload::Result(_)).then_some(size);
                Ok(Check {
                    server: Some(server),
                    tool: Some(tool),
                    schema,
                    payload,
                    attempt,
                    call_id: Some(call_id),
                    protocol_version: protocol,
                    roots,
                    result_bytes,
                })
            })
            .await
    }

    /// A call's `subject` could not be checked (`error`): counted as unchecked and logged; says
    /// the tier when the policy withholds it. A tool the server never listed has no contract, and what
    /// has no contract passes as a schema-less tool's does; a listed tool whose contract cannot
    /// be enforced (a refused schema, a result that cannot be read, no capacity) is withheld
    /// where the policy rejects: for arguments, `arguments = "reject"`; for results, untrusted.
    /// A tool the session's own listing did not offer is withheld under untrusted.
    fn unchecked(
        &self,
        tool: &str,
        call_id: &str,
        attempt: u32,
        payload: PayloadKind,
        error: &CheckError,
        why: Unchecked,
    ) -> Option<Tier> {
        let rules = self.rules(Some(tool));
        let unlisted = why == Unchecked::Failed
            && matches!(error, CheckError::UnknownTool { .. })
            && !self.session.is_unenforceable(tool);
        self.gate
            .metrics()
            .target(Some(&self.config.server), Some(tool))
            .count(
                rules.tier,
                payload,
                Attempt::of(attempt),
                Outcome::Unchecked,
            );
        let withheld = match why {
            Unchecked::NotOffered => {
                rules.tier == Tier::Untrusted || rules.unknown_tools == UnknownTools::Reject
            }
            Unchecked::Failed => {
                !unlisted
                    && match payload {
                        PayloadKind::Arguments => {
                            rules.arguments == crate::core::policy::ArgumentsMode::Reject
                        }
                        _ => rules.tier == Tier::Untrusted,
                    }
            }
        };
        tracing::warn!(
            server = %self.config.server,
            tool,
            call_id,
            subject = payload.as_str(),
            code = error.code(),
            error = %error,
            withheld,
            "could not be checked"
        );
        withheld.then_some(rules.tier)
    }

    fn log_rejection(&self, tool: &str, call_id: &str, subject: &str, verdict: &Verdict) {
        let paths: Vec<&str> = verdict
            .errors
            .iter()
            .map(|e| e.instance_path.as_str())
            .collect();
        let keywords: Vec<&str> = verdict.errors.iter().map(|e| e.keyword.as_str()).collect();
        tracing::warn!(
            server = %self.config.server,
            tool,
            call_id,
            subject,
            tier = verdict.tier.as_str(),
            ?paths,
            ?keywords,
            "rejected"
        );
    }
}
