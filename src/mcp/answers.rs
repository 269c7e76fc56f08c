//! The answer rules: what the server sends is read as the client will read it, an answer to a
//! followed call is judged before the client sees it (passed, logged, or replaced per the
//! policy), and an answer the rules cannot place is withheld where the policy withholds.

use super::envelope::Message;
use super::scan::Unread;
use super::session::{Call, Pending};
use super::{ids, reply, Boundary, Direction, Link, Relayed};
use crate::core::check::{PayloadKind, ToolResult};
use crate::core::domain::{ProtocolVersion, Tier};
use bytes::Bytes;
use serde::de::IgnoredAny;
use serde::Deserialize;
use serde_json::value::RawValue;
use std::borrow::Cow;
use std::io;

impl Boundary {
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
                read,
                ..
            } => {
                let answer = Answered { id, result, read };
                return self.server_answer(link, line, text, answer).await;
            }
            Message::Response {
                id: None,
                result: Some(result),
                unreadable_id: true,
                ..
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
            Message::Request { id, method, .. } if method == "roots/list" => {
                self.session.roots.asked(id);
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
                // Boxed, as the other rare answers: see `server_answer`.
                return Box::pin(self.task_status(link, line, text, params)).await;
            }
            _ => {}
        }
        self.forward(link, Direction::ToClient, Relayed::Forwarded, text)
            .await
    }

    /// An answer from the server (`id` its id, `result` its result if it has one), handled as
    /// the request it answers asks: the revision noted, a listing registered, a call's result or
    /// a task's judged; an answer to nothing followed relayed, or withheld.
    async fn server_answer(
        &self,
        link: &impl Link,
        line: &Bytes,
        text: &[u8],
        answer: Answered<'_>,
    ) -> io::Result<()> {
        let Answered { id, result, read } = answer;
        match self.session.answered(id.get()) {
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
                // Boxed: a listing's (and a task's) handling is large and rare, and unboxed it
                // would be carried in every answer's future, and copied at each of its awaits.
                Box::pin(self.listed(link, line, id, result, page)).await?;
                if ours {
                    return Ok(());
                }
            }
            Some(Pending::ToolsCall { call, task_asked }) => {
                let answer = Answered { id, result, read };
                return self
                    .call_answer(link, line, text, answer, &call, task_asked)
                    .await;
            }
            Some(Pending::TaskRead {
                read,
                task_id,
                call,
            }) => {
                return Box::pin(
                    self.task_answer(link, line, text, id, result, read, &task_id, call),
                )
                .await
            }
            None => {
                if let Some(answer) = self.unfollowed(id, result) {
                    return self
                        .answer(link, Direction::ToClient, Relayed::Replaced, &answer)
                        .await;
                }
            }
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
        self.rules(None).tier == Tier::Untrusted
    }

    /// The answer to a followed `tools/call`: a task created is recorded (its result is judged
    /// when it comes), a result is judged, then forwarded as received, or replaced where the
    /// policy rejects it.
    async fn call_answer(
        &self,
        link: &impl Link,
        line: &Bytes,
        text: &[u8],
        answer: Answered<'_>,
        call: &Call,
        task_asked: bool,
    ) -> io::Result<()> {
        let Answered { id, result, read } = answer;
        // A JSON-RPC error is not a tool result.
        let Some(result) = result else {
            return self
                .forward(link, Direction::ToClient, Relayed::Forwarded, text)
                .await;
        };
        let carries_result = match read {
            // A result read ahead has no `resultType` and no `task`: a final result, no task
            // created unless the call asked for one.
            Some(_) if !task_asked => true,
            _ => match super::task::created(result, task_asked) {
                Some(task) => {
                    self.task_created(&task, call);
                    task.carries_result
                }
                // A result that is not final (2026-07-28's `input_required`) is followed by
                // another call.
                None => is_final(result),
            },
        };
        if !carries_result {
            return self
                .forward(link, Direction::ToClient, Relayed::Forwarded, text)
                .await;
        }
        let body = line.slice_ref(result.bytes());
        let replacement = self
            .judge_payload(PayloadKind::Result, call, id.get(), (body, read))
            .await;
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
}

/// An answer from the server, as its envelope was read: its id, its `result` if it has one, and
/// that result read as a tool result where it was read ahead ([`super::envelope::ReadAhead`]).
pub(super) struct Answered<'a> {
    id: &'a RawValue,
    result: Option<Unread<'a>>,
    read: Option<Box<ToolResult>>,
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
