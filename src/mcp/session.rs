//! What the MCP rules remember of one session: the requests whose answers it must read (by
//! JSON-RPC id), the revision spoken, and the tools whose last call was rejected (so the next call
//! is a retry); and, in a [`ContractStatus`] the sessions of one server may share, whether the
//! server's contract is current. Every collection here is bounded.
//! Its maps (and the view's), keyed by ids and names the peers choose, are ahash's: a SipHash
//! look-up cost about 150 instructions, and ahash's keys are drawn at random for each process.

use super::ids::{self, Key, Readings};
use super::task_records::TaskRecords;
use super::view::{Offer, Offered, View};
use crate::core::domain::ProtocolVersion;
use ahash::{HashMap, HashSet};
use std::borrow::Cow;
use std::collections::VecDeque;
use std::hash::{BuildHasher, Hasher};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// Most tools whose run of rejections is followed, and most tools marked unenforceable.
const MAX_TRACKED_TOOLS: usize = 10_000;
/// Most calls answered already whose ids stay followed (see `State::answered`).
const MAX_ANSWERED_KEPT: usize = 64;
/// After a listing the boundary asked for failed, how long calls go on with the contract at
/// hand before the boundary asks again.
const LISTING_RETRY_AFTER: Duration = Duration::from_secs(10);

/// A followed `tools/call`: what its result is judged as.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    /// The id of the request that carried it, as JSON text: the call id of its arguments'
    /// check, and of its result's when the answer writes the id alike (shared, not copied).
    pub id: Arc<str>,
    /// Shared with the checks of the call's arguments and result, not copied for each.
    pub tool: Arc<str>,
    pub attempt: u32,
    pub protocol: Option<ProtocolVersion>,
}

/// A request in flight whose answer the boundary reads.
#[derive(Debug, Clone, PartialEq)]
pub enum Pending {
    /// `initialize` (before 2026-07-28): its answer names the revision spoken.
    Initialize,
    /// One page of `tools/list`.
    ToolsList(ListPage),
    /// `tools/call`: its result is checked, or the task it creates is recorded. `task_asked`:
    /// the call carried `params.task` (2025-11-25), so a `task` in its answer is a task created.
    ToolsCall { call: Call, task_asked: bool },
    /// A request that reads a task's result: `tasks/result` (2025-11-25), or `tasks/get`
    /// (2026-07-28, whose answer holds a completed task's result). `call` is the call that
    /// created the task, when this session saw it created.
    TaskRead {
        read: TaskRead,
        task_id: Box<str>,
        call: Option<Call>,
    },
}

/// Which request reads a task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskRead {
    /// `tasks/result`: the answer is the tool's result itself.
    Result,
    /// `tasks/get`: the answer is the task, with a completed task's result under `result`.
    Get,
}

/// A `tools/list` page in flight: the first page replaces the contract, later ones add to it.
#[derive(Debug, Clone, PartialEq)]
pub struct ListPage {
    pub first_page: bool,
    /// Asked by the boundary itself, so its answer is not forwarded.
    pub ours: bool,
    pub protocol: Option<ProtocolVersion>,
    /// For the boundary's own listing: the request `_meta` its later pages carry too (a
    /// 2026-07-28 request names its revision and capabilities in it).
    pub meta: Option<Box<str>>,
}

/// Why a request cannot be followed.
#[derive(Debug, PartialEq)]
pub enum Untracked {
    /// `limit` requests are in flight already.
    Full { limit: usize },
    /// A request with this id is followed already (in flight, or cancelled and still followed):
    /// two answers with one id could not be told apart.
    InUse,
}

/// Where an answer's id places it among the requests followed.
enum Placed<'i> {
    /// Under this key (the id's own text, in the usual case).
    At(Cow<'i, str>),
    /// Nowhere: no request followed has an id a client would match.
    Nowhere,
    /// Under several keys: a client could take it for either request.
    Ambiguous,
}

/// What to do about the contract before a call is checked.
#[derive(Debug, PartialEq)]
pub enum Listing {
    /// It is current (or was asked for and cannot be had): check with what is registered.
    Current,
    /// Ask the server for `tools/list` under this id, then wait for it.
    Ask(String),
    /// The boundary asked already and the answer has not come: wait for it.
    Wait,
}

#[derive(Debug, Default)]
struct Contract {
    /// Tools listed whose registration failed: their results cannot be checked.
    unenforceable: HashSet<String>,
    /// A complete listing was registered since the start or the last `list_changed`.
    current: bool,
    /// The boundary asked for a listing since then.
    asked: bool,
    /// Its answer (all its pages) has not come yet.
    listing: bool,
    /// When the boundary's last listing ended without a complete contract.
    failed_at: Option<Instant>,
    /// The server said its tools changed, since the start.
    changed: bool,
}

#[derive(Debug, Default)]
struct State {
    /// Requests in flight, by their ids' keys (ids as clients match them, [`super::ids`]).
    pending: HashMap<Key, Pending>,
    protocol: Option<ProtocolVersion>,
    /// Rejections in a row, per tool.
    rejections: HashMap<String, u32>,
    next_id: u64,
    /// Calls the client cancelled, still followed so that an answer the server sends anyway is
    /// checked like any other; oldest first, at most `max_in_flight` (a server that honours the
    /// cancellation never answers, so these are not in flight and must not hold its slots).
    cancelled: HashMap<Key, Pending>,
    cancelled_order: VecDeque<Key>,
    /// Calls (and reads of a task's result) answered already, the most recent
    /// [`MAX_ANSWERED_KEPT`]: a second answer with one's id is judged like the first, since a
    /// client that dropped the first (one it could not read as an answer, a `jsonrpc` it does not
    /// take) would read the second.
    answered: Answered,
    /// Tasks created by followed calls.
    tasks: TaskRecords<Call>,
}

impl State {
    /// Whether the request keyed `key` is followed: in flight, cancelled, or answered already.
    fn follows(&self, key: &str) -> bool {
        self.pending.contains_key(key)
            || self.cancelled.contains_key(key)
            || self.answered.position(key).is_some()
    }
}

/// The calls answered already, oldest first, at most [`MAX_ANSWERED_KEPT`]: each key with its
/// hash, so that a look-up (one per request tracked) compares hashes, not keys. The hash is
/// ahash's, as the document's and the rules' maps use (SipHash's keyed strength buys nothing on
/// a list this short: a collision costs one key compared).
#[derive(Debug, Default)]
struct Answered {
    hasher: ahash::RandomState,
    calls: VecDeque<(u64, Key, Pending)>,
}

impl Answered {
    fn position(&self, key: &str) -> Option<usize> {
        let hash = self.hasher.hash_one(key);
        self.calls
            .iter()
            .position(|(h, k, _)| *h == hash && k.as_str() == key)
    }

    fn get(&self, key: &str) -> Option<&Pending> {
        self.position(key).map(|at| &self.calls[at].2)
    }

    fn remove(&mut self, key: &str) {
        if let Some(at) = self.position(key) {
            self.calls.remove(at);
        }
    }

    fn push(&mut self, key: Key, pending: Pending) {
        if self.calls.len() >= MAX_ANSWERED_KEPT {
            self.calls.pop_front();
        }
        let hash = self.hasher.hash_one(key.as_str());
        self.calls.push_back((hash, key, pending));
    }
}

/// Whether a server's contract is current, and the calls waiting for it: one per session, or one
/// shared by every session of a server (the gateway's sessions of one route, and its requests
/// that carry no session), so that one listing serves them all.
#[derive(Debug)]
pub struct ContractStatus {
    state: Mutex<Contract>,
    /// Bumped each time a listing ends (registered in full, or given up): calls waiting for the
    /// contract wake up.
    listed: watch::Sender<u64>,
}

impl Default for ContractStatus {
    fn default() -> Self {
        Self {
            state: Mutex::default(),
            listed: watch::Sender::new(0),
        }
    }
}

impl ContractStatus {
    fn state(&self) -> MutexGuard<'_, Contract> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// One session's state, shared by both directions.
pub struct Session {
    state: Mutex<State>,
    /// Whether the contract is current for this session: its own status, or (a request with no
    /// session of its own) its server's.
    contract: Arc<ContractStatus>,
    /// The server's status, shared by its sessions, when it is not `contract` itself: a listing
    /// any of them completed makes the registered contract current for a session that has
    /// listed nothing itself.
    route: Option<Arc<ContractStatus>>,
    /// The tools this session's own listing offered.
    view: Mutex<View>,
    max_in_flight: usize,
    /// Makes the boundary's own request ids unlike any a client would choose.
    nonce: u64,
    /// The client's roots, as the session learns them.
    pub roots: super::roots::Roots,
}

impl Session {
    /// A session whose contract status is `contract` (its own, or `route`'s, its server's).
    pub fn new(
        max_in_flight: usize,
        contract: Arc<ContractStatus>,
        route: Arc<ContractStatus>,
    ) -> Self {
        let route = (!Arc::ptr_eq(&contract, &route)).then_some(route);
        Self {
            state: Mutex::default(),
            contract,
            route,
            view: Mutex::default(),
            max_in_flight,
            roots: super::roots::Roots::default(),
            nonce: std::collections::hash_map::RandomState::new()
                .build_hasher()
                .finish(),
        }
    }

    fn view(&self) -> MutexGuard<'_, View> {
        // Each method of the view leaves it whole.
        self.view.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // The state stays consistent whatever panicked while holding it: each method leaves it whole.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Follows the answer to request `id` (its JSON text).
    pub fn track(&self, id: &str, pending: Pending) -> Result<(), Untracked> {
        let key = Key::of_request(id);
        let mut state = self.state();
        if state.pending.contains_key(&key) || state.cancelled.contains_key(&key) {
            return Err(Untracked::InUse);
        }
        if state.pending.len() >= self.max_in_flight {
            return Err(Untracked::Full {
                limit: self.max_in_flight,
            });
        }
        // A request that takes the id of one answered before: its answer is this one's.
        state.answered.remove(key.as_str());
        state.pending.insert(key, pending);
        Ok(())
    }

    /// Which request followed (in flight, cancelled, or answered already) an answer with the id
    /// `id` (its JSON text) answers, read as clients read it.
    fn placed<'i>(state: &State, id: &'i str) -> Placed<'i> {
        if let Some(text) = ids::sole_reading(id) {
            return match state.follows(text) {
                true => Placed::At(Cow::Borrowed(text)),
                false => Placed::Nowhere,
            };
        }
        let mut found: Option<Key> = None;
        for key in Readings::of_answer(id).keys {
            if !state.follows(key.as_str()) {
                continue;
            }
            if found.is_some() {
                // Two requests a client could take it for: which it answers is not certain.
                return Placed::Ambiguous;
            }
            found = Some(key);
        }
        found.map_or(Placed::Nowhere, |key| {
            Placed::At(Cow::Owned(key.into_string()))
        })
    }

    /// The request an answer with the id `id` (its JSON text) answers, if the boundary follows
    /// it: in flight, cancelled, or answered already (a second answer is judged as the first).
    /// `None` too when a client could take it for more than one ([`Session::ambiguous`]).
    pub fn answered(&self, id: &str) -> Option<Pending> {
        let mut state = self.state();
        let Placed::At(key) = Self::placed(&state, id) else {
            return None;
        };
        let key: &str = &key;
        // The entry's own key is kept with the answer, not copied.
        let awaited = match state.pending.remove_entry(key) {
            Some(entry) => Some(entry),
            None => state.cancelled.remove_entry(key).inspect(|_| {
                state.cancelled_order.retain(|c| c.as_str() != key);
            }),
        };
        let Some((kept, pending)) = awaited else {
            return state.answered.get(key).cloned();
        };
        if matches!(
            pending,
            Pending::ToolsCall { .. } | Pending::TaskRead { .. }
        ) {
            state.answered.push(kept, pending.clone());
        }
        Some(pending)
    }

    /// Whether an answer with the id `id` is followed (or could be taken for more than one
    /// request followed).
    pub fn follows(&self, id: &str) -> bool {
        !matches!(Self::placed(&self.state(), id), Placed::Nowhere)
    }

    /// Whether a client could take an answer with the id `id` for more than one request
    /// followed.
    pub fn ambiguous(&self, id: &str) -> bool {
        matches!(Self::placed(&self.state(), id), Placed::Ambiguous)
    }

    /// Whether the answer to the request `id` (its JSON text, as sent) has not come yet.
    pub fn awaits(&self, id: &str) -> bool {
        // The usual ids are their own keys: looked up without one made.
        let key: Cow<'_, str> = match ids::sole_reading(id) {
            Some(text) => Cow::Borrowed(text),
            None => Cow::Owned(Key::of_request(id).into_string()),
        };
        let state = self.state();
        state.pending.contains_key(&*key) || state.cancelled.contains_key(&*key)
    }

    /// Whether any request's answer is awaited (cancelled calls included).
    pub fn awaits_answers(&self) -> bool {
        let state = self.state();
        !state.pending.is_empty() || !state.cancelled.is_empty()
    }

    /// The client cancelled request `id`. A call (or a read of a task's result) stays followed,
    /// apart from the calls in flight: an answer the server sends anyway is checked as usual,
    /// never relayed unchecked. Past
    /// `max_in_flight` cancelled calls unanswered, the oldest is forgotten (logged). A listing the
    /// client asked for is no longer awaited.
    pub fn cancelled(&self, id: &str) {
        let mut state = self.state();
        let Placed::At(key) = Self::placed(&state, id) else {
            return;
        };
        let key: &str = &key;
        match state.pending.get(key) {
            Some(Pending::ToolsCall { .. } | Pending::TaskRead { .. }) => {
                let Some((key, call)) = state.pending.remove_entry(key) else {
                    return;
                };
                if state.cancelled.len() >= self.max_in_flight {
                    if let Some(oldest) = state.cancelled_order.pop_front() {
                        state.cancelled.remove(&oldest);
                        tracing::warn!(
                            id = oldest.as_str(),
                            limit = self.max_in_flight,
                            "a cancelled call is no longer followed: an answer to it now would be relayed unchecked"
                        );
                    }
                }
                state.cancelled_order.push_back(key.clone());
                state.cancelled.insert(key, call);
            }
            Some(Pending::ToolsList(ListPage { ours: false, .. })) => {
                state.pending.remove(key);
            }
            _ => {}
        }
    }

    /// Followed call `call` created task `task_id`, which the server keeps `ttl` (`None`:
    /// without limit).
    pub fn task_created(&self, task_id: &str, call: Call, ttl: Option<Duration>) {
        self.state()
            .tasks
            .created(task_id, call, ttl, Instant::now());
    }

    /// The call that created task `task_id`, if this session saw it created and it has not
    /// expired.
    pub fn task(&self, task_id: &str) -> Option<Call> {
        self.state().tasks.call(task_id, Instant::now())
    }

    /// The server changed task `task_id`'s `ttl`.
    pub fn task_ttl_changed(&self, task_id: &str, ttl: Option<Duration>) {
        self.state().tasks.ttl_changed(task_id, ttl);
    }

    /// Whether this is the first time task `task_id`'s result reaches the client.
    pub fn task_first_delivery(&self, task_id: &str) -> bool {
        self.state().tasks.first_delivery(task_id)
    }

    /// The revision the session negotiated with `initialize`.
    pub fn protocol(&self) -> Option<ProtocolVersion> {
        self.state().protocol
    }

    pub fn set_protocol(&self, protocol: ProtocolVersion) {
        self.state().protocol = Some(protocol);
    }

    /// The attempt number of a call of `tool` now: 1, or one more than the rejections in a row.
    pub fn attempt(&self, tool: &str) -> u32 {
        self.state()
            .rejections
            .get(tool)
            .map_or(1, |n| n.saturating_add(1))
    }

    /// A call of `tool` was rejected (its arguments or its result), or conformed (or passed):
    /// the run of rejections grows, or ends.
    pub fn concluded(&self, tool: &str, rejected: bool) {
        let mut state = self.state();
        if !rejected {
            state.rejections.remove(tool);
        } else if let Some(n) = state.rejections.get_mut(tool) {
            *n = n.saturating_add(1);
        } else if state.rejections.len() < MAX_TRACKED_TOOLS {
            state.rejections.insert(tool.to_owned(), 1);
        }
    }

    /// A listed tool could not be registered: its results cannot be checked.
    pub fn mark_unenforceable(&self, tool: &str) {
        for status in self.statuses() {
            let mut state = status.state();
            if state.unenforceable.len() < MAX_TRACKED_TOOLS {
                state.unenforceable.insert(tool.to_owned());
            }
        }
    }

    pub fn is_unenforceable(&self, tool: &str) -> bool {
        self.statuses()
            .any(|status| status.state().unenforceable.contains(tool))
    }

    /// The session's status, and its server's when that is another.
    fn statuses(&self) -> impl Iterator<Item = &ContractStatus> {
        std::iter::once(&*self.contract).chain(self.route.as_deref())
    }

    /// Whether a listing completed in another session of the server (never, for a session whose
    /// status is its server's). Called with the session's status locked: the server's is
    /// locked after it, never before.
    fn route_listed(&self) -> bool {
        self.route
            .as_ref()
            .is_some_and(|route| route.state().current)
    }

    /// A page of this session's own listing: the tools it names, with `own_bytes` of schema text
    /// the registered contract does not hold. Says whether this page took the listing past the
    /// bounds of a view (the route's contract then decides for this session).
    pub fn view_page(
        &self,
        first_page: bool,
        tools: Vec<(String, Offer)>,
        own_bytes: usize,
    ) -> bool {
        self.view().page(first_page, tools, own_bytes)
    }

    /// What this session's own listing says of `tool`.
    pub fn offered(&self, tool: &str) -> Offered {
        self.view().offered(tool)
    }

    /// The server said its tools changed: the contract is stale until the next full listing.
    /// For a session with a status of its own, only for it: its server is its own (a stdio
    /// route's process), or one that tells each session what changed for it.
    pub fn list_changed(&self) {
        let mut contract = self.contract.state();
        contract.current = false;
        contract.asked = false;
        contract.changed = true;
    }

    /// A listing's first page replaces the contract: names marked unenforceable are forgotten.
    pub fn listing_started(&self) {
        // The listing replaces the server's registered contract too: its marks go with it.
        for status in self.statuses() {
            status.state().unenforceable.clear();
        }
    }

    /// A listing ended: `complete` when its last page was registered. Wakes calls waiting.
    pub fn listing_ended(&self, complete: bool, ours: bool) {
        self.view().ended(complete);
        if let Some(route) = self.route.as_ref().filter(|_| complete) {
            route.state().current = true;
            route.listed.send_modify(|n| *n += 1);
        }
        {
            let mut contract = self.contract.state();
            if complete {
                contract.current = true;
                contract.failed_at = None;
            }
            if ours {
                contract.listing = false;
                if !complete {
                    contract.failed_at = Some(Instant::now());
                }
            }
        }
        self.contract.listed.send_modify(|n| *n += 1);
    }

    /// Whether to ask for the contract before checking a call. `registered` says whether a
    /// contract of the server is registered already (by another replica, through the shared
    /// registry, or, when called with `true`, by a listing another session of the server
    /// completed): when it should count, and nothing since the start says it changed, that
    /// contract is current.
    pub fn listing(&self, registered: impl FnOnce(bool) -> bool) -> Listing {
        let mut contract = self.contract.state();
        if contract.current {
            Listing::Current
        } else if !contract.asked && !contract.changed && registered(self.route_listed()) {
            contract.current = true;
            Listing::Current
        } else if contract.listing {
            Listing::Wait
        } else if contract.asked
            && contract
                .failed_at
                .is_none_or(|at| at.elapsed() < LISTING_RETRY_AFTER)
        {
            // Asked and not had: go on with what is registered, and ask again a while later.
            Listing::Current
        } else {
            contract.asked = true;
            contract.listing = true;
            drop(contract);
            Listing::Ask(self.our_id())
        }
    }

    /// A request id of the boundary's own, as JSON text.
    pub fn our_id(&self) -> String {
        let mut state = self.state();
        loop {
            state.next_id += 1;
            let id = format!("\"schemagate-{:016x}-{}\"", self.nonce, state.next_id);
            // Never one a client request in flight already uses (its ids are the client's).
            let key = Key::of_request(&id);
            if !state.pending.contains_key(&key) && !state.cancelled.contains_key(&key) {
                return id;
            }
        }
    }

    /// Changes to the listing count, for a call to wait on.
    pub fn watch_listings(&self) -> watch::Receiver<u64> {
        self.contract.listed.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A session that is its server's only one.
    fn alone(max_in_flight: usize) -> Session {
        let status = Arc::<ContractStatus>::default();
        Session::new(max_in_flight, Arc::clone(&status), status)
    }

    #[test]
    fn a_call_after_a_rejection_is_a_retry_until_one_conforms() {
        let session = alone(10);
        assert_eq!(session.attempt("get"), 1);
        session.concluded("get", true);
        assert_eq!(session.attempt("get"), 2);
        session.concluded("get", true);
        assert_eq!(session.attempt("get"), 3);
        assert_eq!(session.attempt("other"), 1);
        session.concluded("get", false);
        assert_eq!(session.attempt("get"), 1);
    }

    #[test]
    fn requests_followed_are_bounded_and_a_second_answer_is_judged_as_the_first() {
        let session = alone(2);
        let call = |n: u32| Pending::ToolsCall {
            call: Call {
                id: "1".into(),
                tool: "t".into(),
                attempt: n,
                protocol: None,
            },
            task_asked: false,
        };
        session.track("1", call(1)).expect("room for one");
        session.track("2", call(1)).expect("room for two");
        assert_eq!(
            session.track("3", call(1)),
            Err(Untracked::Full { limit: 2 })
        );
        assert_eq!(session.track("2", call(2)), Err(Untracked::InUse));
        assert_eq!(session.answered("1"), Some(call(1)));
        // A second answer with the id is judged as the first was.
        assert_eq!(session.answered("1"), Some(call(1)));
        assert_eq!(session.answered("\"1\""), Some(call(1)));
        assert_eq!(session.answered("2"), Some(call(1)));
        session.track("3", call(1)).expect("room again");
        session.cancelled("3");
        session
            .track("4", call(2))
            .expect("a cancelled call holds no slot");
        assert!(
            session.follows("3"),
            "a cancelled call's answer is still read"
        );
        assert_eq!(session.answered("3"), Some(call(1)));
        assert!(!session.awaits("3"), "answered");
        assert!(session.follows("3"), "still followed for a second answer");
        // An answer a client could take for either of two requests is placed nowhere.
        let session = alone(4);
        session.track("7", call(1)).expect("room");
        session.track("\"0x7\"", call(2)).expect("room");
        assert!(session.ambiguous("\"0x7\""));
        assert_eq!(session.answered("\"0x7\""), None);
        assert_eq!(session.answered("7"), Some(call(1)));
    }

    #[test]
    fn cancelled_calls_followed_are_bounded_oldest_first() {
        let session = alone(2);
        let call = Pending::ToolsCall {
            call: Call {
                id: "1".into(),
                tool: "t".into(),
                attempt: 1,
                protocol: None,
            },
            task_asked: false,
        };
        for id in ["1", "2", "3"] {
            session.track(id, call.clone()).expect("room");
            session.cancelled(id);
        }
        assert!(!session.follows("1"), "the oldest is forgotten");
        assert!(session.follows("2") && session.follows("3"));
    }

    #[test]
    fn the_contract_is_asked_for_once_until_the_tools_change() {
        let session = alone(10);
        let Listing::Ask(id) = session.listing(|_| false) else {
            panic!("a session with no contract asks for one")
        };
        assert!(id.starts_with("\"schemagate-"));
        assert_eq!(session.listing(|_| false), Listing::Wait);
        session.listing_ended(false, true);
        // Asked and not had: calls go on with what is registered.
        assert_eq!(session.listing(|_| false), Listing::Current);
        session.list_changed();
        assert!(matches!(session.listing(|_| false), Listing::Ask(_)));
        session.listing_ended(true, true);
        assert_eq!(session.listing(|_| false), Listing::Current);
        assert_ne!(session.our_id(), session.our_id());
    }
}
