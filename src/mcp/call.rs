//! The call and result rules: a `tools/call`'s arguments are checked before the server sees
//! them, its result before the client does; per the policy each passes, is logged, or is
//! answered in the server's place with a tool execution error carrying the verdict.

use super::envelope::Message;
use super::scan::Unread;
use super::session::{Call, ListPage, Pending, TaskRead, Untracked};
use super::{ids, meta_protocol, reply, Boundary, Direction, Judged, Link, Relayed};
use crate::core::check::{Check, Payload, PayloadKind, SchemaSource};
use crate::core::domain::{ProtocolVersion, Tier};
use crate::core::error::CheckError;
use crate::core::metrics::Attempt;
use crate::core::verdict::{Action, Outcome, Verdict};
use bytes::Bytes;
use serde::de::IgnoredAny;
use serde::Deserialize;
use serde_json::value::RawValue;
use std::borrow::Cow;
use std::io;

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
                    let params = params.and_then(Unread::parse::<&RawValue>);
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
        params: Option<&RawValue>,
    ) -> io::Result<()> {
        let Some(params) =
            params.and_then(|p| serde_json::from_str::<CallParams<'_>>(p.get()).ok())
        else {
            return self.answer(link, Direction::ToServer, Relayed::Answered, &reply::error(
                    Some(id),
                    reply::INVALID_PARAMS,
                    "tools/call needs params with the tool's `name` (a string) and, optionally, `arguments` (an object)",
                ))
                .await;
        };
        let tool = params.name.into_owned();
        let protocol = meta_protocol(params.meta).or(self.session.protocol());
        self.ensure_contract(link, params.meta).await?;
        let attempt = self.session.attempt(&tool);
        let arguments = match params.arguments {
            Some(raw) => line.slice_ref(raw.get().as_bytes()),
            None => Bytes::from_static(b"{}"),
        };
        let judged = self
            .judge(
                &tool,
                id.get(),
                attempt,
                protocol,
                arguments,
                |text, depth| {
                    Ok(Payload::Arguments(Payload::document_from_json(
                        "arguments",
                        &text,
                        depth,
                    )?))
                },
            )
            .await;
        let refusal = match &judged {
            Ok(verdict) if verdict.action == Action::Reject => {
                self.log_rejection(&tool, id.get(), "arguments", verdict);
                Some(reply::rejected(&tool, true, verdict, protocol))
            }
            Ok(_) => None,
            Err(e) => self
                .unchecked(&tool, id.get(), attempt, PayloadKind::Arguments, e)
                .map(|tier| reply::unchecked_by(&tool, "call", tier, e, protocol)),
        };
        self.observe(Judged {
            tool: &tool,
            call_id: id.get(),
            payload: PayloadKind::Arguments,
            attempt,
            verdict: judged.as_ref(),
            withheld: refusal.is_some(),
        });
        if let Some(refusal) = refusal {
            self.session.concluded(&tool, true);
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
            call: Call {
                tool,
                attempt,
                protocol,
            },
            task_asked: params.task.is_some(),
        };
        if let Err(untracked) = self.session.track(id.get(), pending) {
            return self.untracked(link, id, untracked).await;
        }
        self.forward(link, Direction::ToServer, Relayed::Forwarded, text)
            .await
    }

    /// Judges `payload_text` of a call of `tool` (`call_id`: the id of the message that carries
    /// it, as JSON text) against its registered contract.
    async fn judge(
        &self,
        tool: &str,
        call_id: &str,
        attempt: u32,
        protocol: Option<ProtocolVersion>,
        payload_text: Bytes,
        read: fn(Bytes, usize) -> Result<Payload, CheckError>,
    ) -> Result<Verdict, CheckError> {
        let (server, tool, call_id) = (
            self.config.server.clone(),
            tool.to_owned(),
            call_id.to_owned(),
        );
        let size = payload_text.len();
        self.gate
            .check_one(&self.caller, size, self.config.transport, move |limits| {
                Ok(Check {
                    server: Some(server),
                    tool: Some(tool),
                    schema: SchemaSource::Registered,
                    payload: read(payload_text, limits.max_depth)?,
                    attempt,
                    call_id: Some(call_id),
                    protocol_version: protocol,
                })
            })
            .await
    }

    /// A call's `subject` could not be checked (`error`): counted as unchecked and logged; says
    /// the tier when the policy withholds it. A tool the server never listed has no contract, and what
    /// has no contract passes as a schema-less tool's does; a listed tool whose contract cannot
    /// be enforced (a refused schema, a result that cannot be read, no capacity) is withheld
    /// where the policy rejects: for arguments, `arguments = "reject"`; for results, untrusted.
    fn unchecked(
        &self,
        tool: &str,
        call_id: &str,
        attempt: u32,
        payload: PayloadKind,
        error: &CheckError,
    ) -> Option<Tier> {
        let rules = self
            .gate
            .policy()
            .load()
            .rules_for(Some(&self.config.server), Some(tool));
        let unlisted =
            matches!(error, CheckError::UnknownTool { .. }) && !self.session.is_unenforceable(tool);
        self.gate
            .metrics()
            .target(Some(&self.config.server), Some(tool))
            .count(
                rules.tier,
                payload,
                Attempt::of(attempt),
                Outcome::Unchecked,
            );
        let withheld = !unlisted
            && match payload {
                PayloadKind::Arguments => {
                    rules.arguments == crate::core::policy::ArgumentsMode::Reject
                }
                _ => rules.tier == Tier::Untrusted,
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

    pub(super) async fn server_message(
        &self,
        link: &impl Link,
        line: &Bytes,
        text: &[u8],
        message: Message<'_>,
    ) -> io::Result<()> {
        match message {
            Message::Response {
                id: Some(id),
                result,
                ..
            } => match self.session.answered(id.get()) {
                Some(Pending::Initialize) => {
                    #[derive(Deserialize)]
                    struct Initialized<'a> {
                        #[serde(borrow, rename = "protocolVersion")]
                        protocol: Cow<'a, str>,
                    }
                    if let Some(v) = result
                        .and_then(|r| r.parse::<Initialized<'_>>())
                        .and_then(|i| ProtocolVersion::parse(&i.protocol).ok())
                    {
                        self.session.set_protocol(v);
                    }
                }
                Some(Pending::ToolsList(page)) => {
                    let ours = page.ours;
                    self.listed(link, line, id, result, page).await?;
                    if ours {
                        return Ok(());
                    }
                }
                Some(Pending::ToolsCall { call, task_asked }) => {
                    return self
                        .call_answer(link, line, text, id, result, &call, task_asked)
                        .await
                }
                Some(Pending::TaskRead {
                    read,
                    task_id,
                    call,
                }) => {
                    return self
                        .task_answer(link, line, text, id, result, read, &task_id, call)
                        .await
                }
                None => {
                    if let Some(answer) = self.unfollowed(id, result) {
                        return self
                            .answer(link, Direction::ToClient, Relayed::Replaced, &answer)
                            .await;
                    }
                }
            },
            Message::Response {
                id: None,
                result: Some(result),
                unreadable_id: true,
            } if self.withholds_unplaced(result) => {
                tracing::warn!(
                    server = %self.config.server,
                    "an answer carrying structuredContent with an id that is neither a string nor a number was withheld"
                );
                self.shared
                    .counts
                    .count(Direction::ToClient, Relayed::Withheld);
                return Ok(());
            }
            Message::Notification { method, .. }
                if method == "notifications/tools/list_changed" =>
            {
                tracing::info!(server = %self.config.server, "the server's tools changed: the contract is stale until the next tools/list");
                self.session.list_changed();
            }
            Message::Notification {
                method,
                params: Some(params),
            } if super::task::is_status(&method) => {
                return self.task_status(link, line, text, params).await
            }
            _ => {}
        }
        self.forward(link, Direction::ToClient, Relayed::Forwarded, text)
            .await
    }

    /// An answer to a request the boundary does not follow: relayed, unless the server is
    /// untrusted and either it carries a tool result's `structuredContent` (which only a tool
    /// call's answer holds: this is an answer to a cancelled call no longer followed, or one sent
    /// twice), or a client could take its id for a call in flight by rules the boundary does not
    /// model ([`ids::Readings::doubtful`]). Its tool is unknown, so it cannot be judged: the
    /// client gets a JSON-RPC error for that id instead.
    fn unfollowed(&self, id: &RawValue, result: Option<Unread<'_>>) -> Option<Vec<u8>> {
        let doubtful = (ids::Readings::of_answer(id.get()).doubtful
            && self.session.awaits_answers())
            || self.session.ambiguous(id.get());
        if !doubtful && !result.is_some_and(carries_tool_result) {
            return None;
        }
        if !self.untrusted() {
            return None;
        }
        let why = if doubtful {
            "a client could read its id as that of a request in flight (or of two), and which one it answers cannot be told with certainty"
        } else {
            "it carries a tool result (structuredContent), but no tool call with this id is followed (one cancelled long ago, or answered already), so the tool, and the schema it must match, are unknown"
        };
        tracing::warn!(
            server = %self.config.server,
            id = id.get(),
            doubtful,
            "an answer to a request not followed as a tool call was withheld"
        );
        let message = format!(
            "schemagate withheld the server's answer to request {}: {why}",
            id.get()
        );
        self.observe_unjudged(super::Unjudged {
            call_id: id.get(),
            code: super::UNKNOWN_CALL,
            message: &message,
            withheld: true,
            counted: false,
        });
        Some(reply::error(Some(id), reply::WITHHELD, &message))
    }

    /// Whether an answer with an id no client could place (neither a string nor a number), its
    /// `result` `result`, is withheld: where it carries a tool result and the server is
    /// untrusted.
    fn withholds_unplaced(&self, result: Unread<'_>) -> bool {
        carries_tool_result(result) && self.untrusted()
    }

    fn untrusted(&self) -> bool {
        let server = Some(self.config.server.as_str());
        self.gate.policy().load().rules_for(server, None).tier == Tier::Untrusted
    }

    /// The answer to a followed `tools/call`: a task created is recorded (its result is judged
    /// when it comes), a result is judged, then forwarded as received, or replaced where the
    /// policy rejects it.
    #[allow(clippy::too_many_arguments)]
    async fn call_answer(
        &self,
        link: &impl Link,
        line: &Bytes,
        text: &[u8],
        id: &RawValue,
        result: Option<Unread<'_>>,
        call: &Call,
        task_asked: bool,
    ) -> io::Result<()> {
        // A JSON-RPC error is not a tool result.
        let Some(result) = result else {
            return self
                .forward(link, Direction::ToClient, Relayed::Forwarded, text)
                .await;
        };
        let carries_result = match super::task::created(result, task_asked) {
            Some(task) => {
                self.task_created(&task, call);
                task.carries_result
            }
            // A result that is not final (2026-07-28's `input_required`) is followed by
            // another call.
            None => is_final(result),
        };
        if !carries_result {
            return self
                .forward(link, Direction::ToClient, Relayed::Forwarded, text)
                .await;
        }
        let body = line.slice_ref(result.bytes());
        let replacement = self.judge_result(call, id.get(), body).await;
        self.session.concluded(&call.tool, replacement.is_some());
        match replacement {
            Some(replacement) => {
                let answer = reply::answer(id, &replacement);
                self.answer(link, Direction::ToClient, Relayed::Replaced, &answer)
                    .await
            }
            None => {
                self.forward(link, Direction::ToClient, Relayed::Forwarded, text)
                    .await
            }
        }
    }

    /// Judges a result of `call` (`body`, carried by the message `call_id`): `None` when it
    /// passes, else the tool error result that replaces it.
    pub(super) async fn judge_result(
        &self,
        call: &Call,
        call_id: &str,
        body: Bytes,
    ) -> Option<Vec<u8>> {
        let Call {
            tool,
            attempt,
            protocol,
        } = call;
        let judged = self
            .judge(tool, call_id, *attempt, *protocol, body, |text, depth| {
                Ok(Payload::Result(Payload::result_from_json(&text, depth)?))
            })
            .await;
        let replacement = match &judged {
            Ok(verdict) if verdict.action == Action::Reject => {
                self.log_rejection(tool, call_id, "result", verdict);
                Some(reply::rejected(tool, false, verdict, *protocol))
            }
            Ok(_) => None,
            Err(e) => self
                .unchecked(tool, call_id, *attempt, PayloadKind::Result, e)
                .map(|tier| reply::unchecked_by(tool, "result", tier, e, *protocol)),
        };
        self.observe(Judged {
            tool,
            call_id,
            payload: PayloadKind::Result,
            attempt: *attempt,
            verdict: judged.as_ref(),
            withheld: replacement.is_some(),
        });
        replacement
    }
}

/// Whether `result` carries a tool result's `structuredContent`.
pub(super) fn carries_tool_result(result: Unread<'_>) -> bool {
    let text = result.bytes();
    memchr::memmem::find(text, b"structuredContent").is_some()
        && super::envelope::members(text, ["structuredContent"]).is_some_and(|[s]| s.is_some())
}

/// Whether a `tools/call` result is final: `resultType` absent or `"complete"`, or whatever it
/// says, carrying a tool result's `content` or `structuredContent` (a client of an older revision
/// reads those whatever `resultType` says, so they never pass unjudged).
fn is_final(result: Unread<'_>) -> bool {
    let text = result.bytes();
    if memchr::memmem::find(text, b"\"resultType\"").is_none() {
        return true;
    }
    #[derive(Deserialize)]
    struct Kind<'a> {
        #[serde(borrow, default, rename = "resultType")]
        result_type: Option<Cow<'a, str>>,
        #[serde(default)]
        content: Option<IgnoredAny>,
        #[serde(default, rename = "structuredContent")]
        structured: Option<IgnoredAny>,
    }
    serde_json::from_slice::<Kind<'_>>(text)
        .map(|k| {
            k.result_type.is_none_or(|t| t == "complete")
                || k.content.is_some()
                || k.structured.is_some()
        })
        .unwrap_or(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(text: &str) -> Unread<'_> {
        Unread::new(text.as_bytes())
    }

    #[test]
    fn only_complete_results_are_final() {
        assert!(is_final(raw(r#"{"content":[],"structuredContent":{}}"#)));
        assert!(is_final(raw(r#"{"resultType":"complete","content":[]}"#)));
        assert!(!is_final(raw(
            r#"{"resultType":"input_required","inputRequests":{}}"#
        )));
        assert!(!is_final(raw(r#"{"resultType":"task","task":{}}"#)));
        // Whatever it says, what carries a tool result is judged as one.
        assert!(is_final(raw(
            r#"{"resultType":"input_required","inputRequests":{},"structuredContent":{"n":1}}"#
        )));
        assert!(is_final(raw(r#"{"resultType":"task","content":[]}"#)));
        // A string that merely mentions the key is not the key.
        assert!(is_final(raw(
            r#"{"content":[{"type":"text","text":"\"resultType\""}]}"#
        )));
    }
}
