//! The MCP sessions this replica holds: each the rules of one session ([`Boundary`]), by route,
//! caller (a token's session is never another token's) and `Mcp-Session-Id`. Bounded in number, and forgotten after an idle time, so a client that
//! never says DELETE costs nothing for long.

use crate::mcp::Boundary;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::{Notify, OwnedRwLockWriteGuard, RwLock};

/// One session held: its rules, and the order its requests reach the upstream in.
#[derive(Clone)]
pub struct Held {
    pub boundary: Arc<Boundary>,
    pub order: Arc<Order>,
}

impl Held {
    /// A session with `boundary` and no stream being opened.
    pub fn new(boundary: Arc<Boundary>) -> Self {
        Self {
            boundary,
            order: Arc::default(),
        }
    }
}

/// The longest a POST waits for the session's GET to be opened upstream.
pub const ORDER_WAIT: Duration = Duration::from_secs(1);
/// How long after the client says it is initialized its session counts as just begun.
pub const JUST_BEGUN: Duration = Duration::from_millis(100);
/// The longest a request in a session just begun waits for the GET the client may be opening.
pub const FIRST_STREAM_WAIT: Duration = Duration::from_millis(10);

/// The order a session's requests reach the upstream in. A GET the client opened holds `streams`
/// until the upstream's head for it arrives (at most [`ORDER_WAIT`]), and a POST waits for it
/// before it is sent: a server that sends a message on the GET stream as it handles the POST
/// would otherwise find no stream and drop it. Clients open their GET and send their first
/// request at once, right after `notifications/initialized`, and the two may reach the gateway
/// in either order: a request in a session just begun whose client has opened no GET yet waits
/// (at most [`FIRST_STREAM_WAIT`]) for one to arrive.
#[derive(Default)]
pub struct Order {
    streams: Arc<RwLock<()>>,
    /// When the client said it is initialized.
    initialized: Mutex<Option<Instant>>,
    /// The client has opened a GET in this session.
    listened: AtomicBool,
    listening: Notify,
}

impl Order {
    /// The client said it is initialized: its session has just begun.
    pub fn initialized(&self) {
        *self.initialized.lock().unwrap_or_else(|e| e.into_inner()) = Some(Instant::now());
    }

    /// A GET arrived: it holds the order (unless another GET is opening) until its upstream
    /// head arrives or the guard is dropped.
    pub fn opening(&self) -> Option<OwnedRwLockWriteGuard<()>> {
        let guard = Arc::clone(&self.streams).try_write_owned().ok();
        self.listened.store(true, Ordering::Release);
        self.listening.notify_waiters();
        guard
    }

    /// Before a POST is sent: waits for a GET the client is opening (see [`Order`]). `request`:
    /// the POST carries a request (the server may answer on the GET stream as it handles it).
    pub async fn before_post(&self, request: bool) {
        if request && self.just_begun() {
            let listening = self.listening.notified();
            tokio::pin!(listening);
            listening.as_mut().enable();
            if !self.listened.load(Ordering::Acquire) {
                let _ = tokio::time::timeout(FIRST_STREAM_WAIT, listening).await;
            }
        }
        // No GET opening (the usual case): no timer is set.
        if self.streams.try_read().is_err() {
            let _ = tokio::time::timeout(ORDER_WAIT, self.streams.read()).await;
        }
    }

    /// The client said it is initialized less than [`JUST_BEGUN`] ago and has opened no GET.
    fn just_begun(&self) -> bool {
        !self.listened.load(Ordering::Acquire)
            && self
                .initialized
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .is_some_and(|at| at.elapsed() < JUST_BEGUN)
    }
}

/// How many sessions are held, and for how long unused.
#[derive(Debug, Clone, Copy)]
pub struct SessionLimits {
    pub max_sessions: u64,
    pub idle: Duration,
}

/// What a session is held under: the route's name, the caller's name and the session id, in
/// one string (see [`with_key`]).
type Key = Box<str>;

/// Sessions by route, caller and session id.
pub struct Sessions {
    held: moka::sync::Cache<Key, Held>,
}

impl Sessions {
    pub fn new(limits: SessionLimits) -> Self {
        Self {
            held: moka::sync::Cache::builder()
                .max_capacity(limits.max_sessions)
                .time_to_idle(limits.idle)
                .build(),
        }
    }

    /// The session `id` of `route` and `caller`, if held here. One not held (another replica's,
    /// one that expired here, an id never issued) is held only once the upstream answers it,
    /// so ids the upstream does not know never take the place of sessions in use.
    pub fn get(&self, route: &str, caller: &str, id: &str) -> Option<Held> {
        with_key(route, caller, id, |key| self.held.get(key))
    }

    /// Session `id` is `caller`'s: the upstream issued it for a session begun here, or
    /// answered it for one held elsewhere until now.
    pub fn insert(&self, route: &str, caller: &str, id: &str, boundary: Arc<Boundary>) {
        let key: Key = with_key(route, caller, id, |key| key.into());
        self.held.insert(key, Held::new(boundary));
    }

    /// Session `id` ended (DELETE) or the upstream no longer knows it.
    pub fn remove(&self, route: &str, caller: &str, id: &str) {
        with_key(route, caller, id, |key| self.held.invalidate(key));
    }
}

/// `f` of the key of session `id` of `route` and `caller`: each name after its length, so no
/// two triples make one key. Written into a buffer of the thread's own, so a lookup allocates
/// nothing.
fn with_key<T>(route: &str, caller: &str, id: &str, f: impl FnOnce(&str) -> T) -> T {
    use std::fmt::Write;
    thread_local! {
        static KEY: std::cell::RefCell<String> = const { std::cell::RefCell::new(String::new()) };
    }
    KEY.with_borrow_mut(|key| {
        key.clear();
        // Writing into a String cannot fail.
        let _ = write!(key, "{}:{route}{}:{caller}{id}", route.len(), caller.len());
        f(key)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::FutureExt;

    #[test]
    fn no_two_sessions_share_a_key() {
        let key = |route, caller, id| with_key(route, caller, id, |key| key.to_owned());
        assert_ne!(key("a", "bc", "d"), key("ab", "c", "d"));
        assert_ne!(key("a", "b", "cd"), key("a", "bc", "d"));
        assert_eq!(key("crm", "agent", "s1"), key("crm", "agent", "s1"));
    }

    #[tokio::test]
    async fn a_request_in_a_session_just_begun_goes_after_the_get_the_client_is_opening() {
        let order = Order::default();
        order.initialized();
        let post = order.before_post(true);
        tokio::pin!(post);
        assert!(
            post.as_mut().now_or_never().is_none(),
            "it waits for a GET that may be on its way"
        );
        let head_pending = order.opening();
        assert!(head_pending.is_some());
        assert!(
            post.as_mut().now_or_never().is_none(),
            "the GET arrived: it waits for the upstream's head for it"
        );
        drop(head_pending);
        assert!(post.as_mut().now_or_never().is_some(), "the stream is open");
    }

    #[tokio::test]
    async fn requests_wait_for_no_stream_outside_a_sessions_first_moments() {
        let order = Order::default();
        assert!(
            order.before_post(true).now_or_never().is_some(),
            "not initialized here: no wait"
        );
        order.initialized();
        assert!(
            order.before_post(false).now_or_never().is_some(),
            "a notification or an answer does not wait"
        );
        drop(order.opening());
        assert!(
            order.before_post(true).now_or_never().is_some(),
            "its GET is open already"
        );
        let never = Order::default();
        never.initialized();
        tokio::time::timeout(Duration::from_secs(5), never.before_post(true))
            .await
            .expect("a client that opens no GET waits a moment, then goes on");
    }
}
