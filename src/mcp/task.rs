//! The task rules (MCP tasks). A followed `tools/call` may be answered with a task created
//! instead of its result: under 2025-11-25, `{"task": {"taskId", ...}}` when the call asked for
//! one with `params.task`; under 2026-07-28's tasks extension, `{"resultType": "task", "taskId",
//! ...}`. The result comes later: as the answer to `tasks/result` (2025-11-25), or inside a
//! completed task's `tasks/get` answer or `notifications/tasks` (2026-07-28). The boundary
//! records each task a followed call creates (task id -> the call) and judges its result,
//! whichever way it comes, exactly as the call's direct answer. A result of a task the session
//! never saw created cannot be judged (its tool is unknown): it counts as unchecked and is
//! withheld where the server is untrusted.

use super::envelope::members;
use super::scan::Unread;
use super::session::{Call, Pending, TaskRead};
use super::{reply, Boundary, Direction, Link, Relayed};
use crate::core::check::PayloadKind;
use crate::core::domain::Tier;
use crate::core::metrics::Attempt;
use crate::core::verdict::Outcome;
use bytes::Bytes;
use serde_json::value::RawValue;
use std::borrow::Cow;
use std::io;
use std::time::Duration;

/// The verdict code of a result withheld because its task is unknown.
pub const UNKNOWN_TASK: &str = "unknown_task";

/// Whether a server notification is a task's status (2025-11-25's `notifications/tasks/status`,
/// 2026-07-28's `notifications/tasks`, which holds a completed task's result).
pub fn is_status(method: &str) -> bool {
    matches!(method, "notifications/tasks" | "notifications/tasks/status")
}

/// A task created by the answer to a followed call.
#[derive(Debug, PartialEq)]
pub struct Created<'a> {
    pub task_id: Cow<'a, str>,
    /// How long the server keeps the task, from now; `None`: no limit said.
    pub ttl: Option<Duration>,
    /// The answer also carries a tool result's members, which are judged as one.
    pub carries_result: bool,
}

/// The members of a task's wire forms the boundary reads (a `CreateTaskResult`, a `tasks/get`
/// answer, a status notification's params), both revisions', each as its JSON text: whatever
/// else a server sends there, the rest is still read, and a repeated member is read as the peer
/// reads it (its last value).
#[derive(Default)]
struct Wire<'a> {
    result_type: Option<Unread<'a>>,
    task_id: Option<Unread<'a>>,
    ttl: Option<Unread<'a>>,
    ttl_ms: Option<Unread<'a>>,
    result: Option<Unread<'a>>,
    task: Option<Unread<'a>>,
    content: Option<Unread<'a>>,
    structured: Option<Unread<'a>>,
}

impl<'a> Wire<'a> {
    fn read(text: &'a [u8]) -> Option<Self> {
        let [result_type, task_id, ttl, ttl_ms, result, task, content, structured] = members(
            text,
            [
                "resultType",
                "taskId",
                "ttl",
                "ttlMs",
                "result",
                "task",
                "content",
                "structuredContent",
            ],
        )?;
        Some(Self {
            result_type,
            task_id,
            ttl,
            ttl_ms,
            result,
            task,
            content,
            structured,
        })
    }

    fn task_id(&self) -> Option<Cow<'a, str>> {
        self.task_id?.string()
    }

    /// `ttlMs` (2026-07-28) or `ttl` (2025-11-25), in milliseconds; `null` or absent: no limit.
    fn ttl(&self) -> Option<Duration> {
        let ms: f64 = self.ttl_ms.or(self.ttl)?.parse()?;
        (ms.is_finite() && ms >= 0.0).then(|| Duration::from_secs_f64((ms / 1000.0).min(1e12)))
    }

    fn says(&self, result_type: &str) -> bool {
        self.result_type
            .and_then(Unread::string)
            .is_some_and(|t| t == result_type)
    }
}

/// The task a `tools/call` answer's `result` creates, if it is a task created: `resultType:
/// "task"` with a `taskId` (2026-07-28), or, for a call that asked for a task, a `task` with a
/// `taskId` (2025-11-25).
pub fn created(result: Unread<'_>, task_asked: bool) -> Option<Created<'_>> {
    let text = result.bytes();
    if !task_asked && memchr::memmem::find(text, b"\"resultType\"").is_none() {
        return None;
    }
    let wire = Wire::read(text)?;
    let carries_result = wire.content.is_some() || wire.structured.is_some();
    let is_task = wire.says("task");
    if is_task {
        if let Some(task_id) = wire.task_id() {
            return Some(Created {
                task_id,
                ttl: wire.ttl(),
                carries_result,
            });
        }
    }
    if !(is_task || task_asked) {
        return None;
    }
    let nested = Wire::read(wire.task?.bytes())?;
    Some(Created {
        task_id: nested.task_id()?,
        ttl: nested.ttl(),
        carries_result,
    })
}

impl Boundary {
    /// Records a task a followed call created.
    pub(super) fn task_created(&self, task: &Created<'_>, call: &Call) {
        tracing::debug!(
            server = %self.config.server,
            tool = &*call.tool,
            task_id = %task.task_id,
            ttl_ms = task.ttl.map(|t| t.as_millis() as u64),
            "a call created a task: its result will be checked when it comes"
        );
        self.session
            .task_created(&task.task_id, call.clone(), task.ttl);
    }

    /// What a `tasks/result` or `tasks/get` request (`params`) follows: the task it reads, and
    /// the call that created it if this session saw that.
    pub(super) fn task_read(&self, read: TaskRead, params: Option<Unread<'_>>) -> Pending {
        let task_id: Box<str> = params
            .and_then(|p| Wire::read(p.bytes()))
            .and_then(|w| w.task_id())
            .map(Into::into)
            .unwrap_or_default();
        let call = self.session.task(&task_id);
        Pending::TaskRead {
            read,
            task_id,
            call,
        }
    }

    /// The answer to a `tasks/result` or `tasks/get`: the tool result it carries (all of a
    /// `tasks/result` answer; a `tasks/get` answer's `result`) is judged, then forwarded as
    /// received or replaced.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn task_answer(
        &self,
        link: &impl Link,
        line: &Bytes,
        text: &[u8],
        id: &RawValue,
        result: Option<Unread<'_>>,
        read: TaskRead,
        task_id: &str,
        call: Option<Call>,
    ) -> io::Result<()> {
        let carried = match (read, result) {
            (TaskRead::Result, Some(result)) => Some(result),
            (TaskRead::Get, Some(result)) => self.task_state(Wire::read(result.bytes()), task_id),
            // A JSON-RPC error is not a tool result.
            (_, None) => None,
        };
        let Some(carried) = carried else {
            return self
                .forward(link, Direction::ToClient, Relayed::Forwarded, text)
                .await;
        };
        let body = line.slice_ref(carried.bytes());
        let replacement = self
            .task_result(call.as_ref(), task_id, id.get(), body)
            .await;
        let Some(replacement) = replacement else {
            return self
                .forward(link, Direction::ToClient, Relayed::Forwarded, text)
                .await;
        };
        let answer = match read {
            TaskRead::Result => reply::answer(id, &replacement),
            TaskRead::Get => splice(text, carried.bytes(), &replacement),
        };
        self.answer(link, Direction::ToClient, Relayed::Replaced, &answer)
            .await
    }

    /// A task's status from the server (`params` of a status notification): a result it holds
    /// is judged, the notification forwarded as received or with the result replaced.
    pub(super) async fn task_status(
        &self,
        link: &impl Link,
        line: &Bytes,
        text: &[u8],
        params: Unread<'_>,
    ) -> io::Result<()> {
        let wire = Wire::read(params.bytes());
        let task_id: Box<str> = wire
            .as_ref()
            .and_then(Wire::task_id)
            .map(Into::into)
            .unwrap_or_default();
        let Some(carried) = self.task_state(wire, &task_id) else {
            return self
                .forward(link, Direction::ToClient, Relayed::Forwarded, text)
                .await;
        };
        let call = self.session.task(&task_id);
        let body = line.slice_ref(carried.bytes());
        let call_id = serde_json::to_string(&*task_id).unwrap_or_default();
        match self
            .task_result(call.as_ref(), &task_id, &call_id, body)
            .await
        {
            Some(replacement) => {
                let message = splice(text, carried.bytes(), &replacement);
                // A notification is not answered: it is passed on, its result replaced.
                self.shared
                    .counts
                    .count(Direction::ToClient, Relayed::Replaced);
                link.send(Direction::ToClient, super::Outgoing::Own(&message))
                    .await
            }
            None => {
                self.forward(link, Direction::ToClient, Relayed::Forwarded, text)
                    .await
            }
        }
    }

    /// Reads a task's state (a `tasks/get` answer, a status notification): a `ttl` it changes is
    /// noted; the `result` it holds, whatever its `status` says, is returned to be judged.
    fn task_state<'a>(&self, wire: Option<Wire<'a>>, task_id: &str) -> Option<Unread<'a>> {
        let wire = wire?;
        if wire.ttl.is_some() || wire.ttl_ms.is_some() {
            self.session.task_ttl_changed(task_id, wire.ttl());
        }
        wire.result
    }

    /// Judges the result of task `task_id` (`body`, carried by message `call_id`) as the answer
    /// to `call`, the call that created it; with no such call, as an unknown task's. `None` when it
    /// passes, else the result that replaces it.
    async fn task_result(
        &self,
        call: Option<&Call>,
        task_id: &str,
        call_id: &str,
        body: Bytes,
    ) -> Option<Vec<u8>> {
        let Some(call) = call else {
            return self.unknown_task(task_id, call_id);
        };
        let replacement = self
            .judge_payload(PayloadKind::Result, call, call_id, (body, None))
            .await;
        // A result read twice (polled again, or announced and then fetched) is judged each
        // time, but moves the run of rejections once.
        if self.session.task_first_delivery(task_id) {
            self.session.concluded(&call.tool, replacement.is_some());
        }
        replacement
    }

    /// A result of a task this session never saw created: counted as unchecked (its tool
    /// unknown), logged, and withheld where the server is untrusted.
    fn unknown_task(&self, task_id: &str, call_id: &str) -> Option<Vec<u8>> {
        let server = Some(&*self.config.server);
        let tier = self.rules(None).tier;
        self.gate.metrics().target(server, None).count(
            tier,
            PayloadKind::Result,
            Attempt::of(1),
            Outcome::Unchecked,
        );
        let withheld = tier == Tier::Untrusted;
        tracing::warn!(
            server = %self.config.server,
            task_id,
            withheld,
            "the result of a task this session never saw created could not be checked"
        );
        let message = "this session never saw a tools/call create this task (or it outlived its ttl), so the tool it belongs to, and the outputSchema its result must match, are unknown";
        self.observe_unjudged(super::Unjudged {
            call_id,
            code: UNKNOWN_TASK,
            message,
            withheld,
            counted: true,
        });
        withheld.then(|| {
            reply::unchecked(
                &format!("the result of task {task_id:?}"),
                tier,
                UNKNOWN_TASK,
                message,
                self.session.protocol(),
            )
        })
    }
}

/// `text` with `part` (a slice of it) replaced by `with`.
fn splice(text: &[u8], part: &[u8], with: &[u8]) -> Vec<u8> {
    let start = (part.as_ptr() as usize).wrapping_sub(text.as_ptr() as usize);
    let end = start.wrapping_add(part.len());
    let (Some(before), Some(after)) = (text.get(..start), text.get(end..)) else {
        // `part` is always a slice of `text`; were it not, nothing of `text` is kept.
        return with.to_vec();
    };
    [before, with, after].concat()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(text: &str) -> Unread<'_> {
        Unread::new(text.as_bytes())
    }

    #[test]
    fn tasks_created_are_read_in_both_revisions() {
        let old = raw(r#"{"task":{"taskId":"t-1","status":"working","ttl":60000}}"#);
        assert_eq!(
            created(old, true),
            Some(Created {
                task_id: "t-1".into(),
                ttl: Some(Duration::from_secs(60)),
                carries_result: false
            })
        );
        assert_eq!(
            created(old, false),
            None,
            "only a call that asked makes a task"
        );
        let new = raw(r#"{"resultType":"task","taskId":"t-2","status":"working","ttlMs":null}"#);
        assert_eq!(
            created(new, false),
            Some(Created {
                task_id: "t-2".into(),
                ttl: None,
                carries_result: false
            })
        );
        let both = raw(r#"{"task":{"taskId":"t-3"},"structuredContent":{}}"#);
        assert!(created(both, true).is_some_and(|c| c.carries_result));
        assert_eq!(
            created(raw(r#"{"content":[],"structuredContent":{}}"#), false),
            None
        );
        assert_eq!(
            created(raw(r#"{"resultType":"task","taskId":7}"#), false),
            None
        );
    }

    #[test]
    fn a_part_is_replaced_in_place() {
        let text = br#"{"id":1,"result":{"status":"completed","result":{"n":"x"}}}"#;
        let at = text
            .windows(9)
            .position(|w| w == br#"{"n":"x"}"#)
            .expect("found");
        let part = &text[at..at + 9];
        assert_eq!(
            splice(text, part, br#"{"isError":true}"#),
            br#"{"id":1,"result":{"status":"completed","result":{"isError":true}}}"#
        );
    }
}
