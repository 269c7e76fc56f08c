//! The tasks a session saw created by the calls it follows (MCP tasks): task id -> the call, so
//! that the task's result, whenever and however it comes (`tasks/result`, a completed
//! `tasks/get`, a status notification), is judged against that tool's contract. Bounded in
//! number; a record lives as long as its task's `ttl` says the server keeps the task.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

/// Most tasks one session follows; past it, the oldest record is forgotten (logged).
pub const MAX_TASKS: usize = 10_000;

#[derive(Debug)]
struct Record<C> {
    call: C,
    created: Instant,
    /// From creation; `None` is the protocol's unlimited `ttl: null`.
    ttl: Option<Duration>,
    /// The task's result reached the client once already (the run of rejections moved).
    delivered: bool,
}

impl<C> Record<C> {
    fn expired(&self, now: Instant) -> bool {
        self.ttl
            .is_some_and(|ttl| now.saturating_duration_since(self.created) > ttl)
    }
}

/// Task id -> `C`, the call that created the task.
#[derive(Debug)]
pub struct TaskRecords<C> {
    records: HashMap<Box<str>, Record<C>>,
    /// Task ids, oldest first.
    order: VecDeque<Box<str>>,
    limit: usize,
}

impl<C: Clone> Default for TaskRecords<C> {
    fn default() -> Self {
        Self::with_limit(MAX_TASKS)
    }
}

impl<C: Clone> TaskRecords<C> {
    pub fn with_limit(limit: usize) -> Self {
        Self {
            records: HashMap::new(),
            order: VecDeque::new(),
            limit: limit.max(1),
        }
    }

    /// A followed call created task `task_id`, kept `ttl` from now by the server.
    pub fn created(&mut self, task_id: &str, call: C, ttl: Option<Duration>, now: Instant) {
        if self.records.remove(task_id).is_some() {
            self.order.retain(|t| &**t != task_id);
        }
        if self.records.len() >= self.limit {
            self.records.retain(|_, r| !r.expired(now));
            let records = &self.records;
            self.order.retain(|t| records.contains_key(t));
        }
        while self.records.len() >= self.limit {
            let Some(oldest) = self.order.pop_front() else {
                break;
            };
            self.records.remove(&oldest);
            tracing::warn!(
                task_id = %oldest,
                limit = self.limit,
                "a task is no longer followed: its result will be treated as that of an unknown task"
            );
        }
        self.order.push_back(task_id.into());
        self.records.insert(
            task_id.into(),
            Record {
                call,
                created: now,
                ttl,
                delivered: false,
            },
        );
    }

    /// The call that created task `task_id`, unless the task is unknown or past its `ttl`.
    pub fn call(&mut self, task_id: &str, now: Instant) -> Option<C> {
        let record = self.records.get(task_id)?;
        if record.expired(now) {
            self.records.remove(task_id);
            self.order.retain(|t| &**t != task_id);
            return None;
        }
        Some(record.call.clone())
    }

    /// The server said task `task_id` is now kept `ttl` from its creation (the `ttl` may change
    /// over a task's life).
    pub fn ttl_changed(&mut self, task_id: &str, ttl: Option<Duration>) {
        if let Some(record) = self.records.get_mut(task_id) {
            record.ttl = ttl;
        }
    }

    /// Whether this is the first time task `task_id`'s result reaches the client.
    pub fn first_delivery(&mut self, task_id: &str) -> bool {
        self.records
            .get_mut(task_id)
            .is_some_and(|r| !std::mem::replace(&mut r.delivered, true))
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.records.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(tool: &str) -> String {
        tool.to_owned()
    }

    #[test]
    fn a_task_is_followed_for_its_ttl_and_no_longer() {
        let mut tasks = TaskRecords::<String>::default();
        let t0 = Instant::now();
        tasks.created("t1", call("a"), Some(Duration::from_secs(60)), t0);
        tasks.created("t2", call("b"), None, t0);
        assert_eq!(
            tasks.call("t1", t0 + Duration::from_secs(59)),
            Some(call("a"))
        );
        assert_eq!(tasks.call("t1", t0 + Duration::from_secs(61)), None);
        assert_eq!(tasks.call("t1", t0), None, "an expired task is forgotten");
        assert_eq!(
            tasks.call("t2", t0 + Duration::from_secs(86_400)),
            Some(call("b")),
            "ttl null keeps the task"
        );
        tasks.ttl_changed("t2", Some(Duration::from_secs(1)));
        assert_eq!(tasks.call("t2", t0 + Duration::from_secs(2)), None);
        assert_eq!(tasks.call("never", t0), None);
    }

    #[test]
    fn records_are_bounded_expired_first_then_oldest() {
        let mut tasks = TaskRecords::<String>::with_limit(2);
        let t0 = Instant::now();
        tasks.created("short", call("a"), Some(Duration::from_millis(1)), t0);
        tasks.created("old", call("b"), None, t0);
        let later = t0 + Duration::from_secs(1);
        tasks.created("new", call("c"), None, later);
        assert_eq!(tasks.len(), 2);
        assert_eq!(
            tasks.call("old", later),
            Some(call("b")),
            "the expired one went first"
        );
        tasks.created("newest", call("d"), None, later);
        assert_eq!(tasks.call("old", later), None, "then the oldest");
        assert_eq!(tasks.call("new", later), Some(call("c")));
        assert_eq!(tasks.call("newest", later), Some(call("d")));
    }

    #[test]
    fn a_result_is_delivered_first_once() {
        let mut tasks = TaskRecords::<String>::default();
        tasks.created("t", call("a"), None, Instant::now());
        assert!(tasks.first_delivery("t"));
        assert!(!tasks.first_delivery("t"));
        assert!(!tasks.first_delivery("unknown"));
    }
}
