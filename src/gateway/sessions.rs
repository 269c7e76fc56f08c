//! The MCP sessions this replica holds: each the rules of one session ([`Boundary`]), by route,
//! caller (a token's session is never another token's) and `Mcp-Session-Id`. Bounded in number, and forgotten after an idle time, so a client that
//! never says DELETE costs nothing for long.

use crate::mcp::Boundary;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::RwLock;

/// One session held: its rules, and the order its requests reach the upstream in. A GET the
/// client opened holds `order` until the upstream's head for it arrives (at most
/// [`ORDER_WAIT`]), and a POST waits for it before it is sent: a server that sends a message on
/// the GET stream as it handles the POST would otherwise find no stream and drop it.
#[derive(Clone)]
pub struct Held {
    pub boundary: Arc<Boundary>,
    pub order: Arc<RwLock<()>>,
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

/// How many sessions are held, and for how long unused.
#[derive(Debug, Clone, Copy)]
pub struct SessionLimits {
    pub max_sessions: u64,
    pub idle: Duration,
}

/// What a session is held under: the route's name, the caller's name, the session id.
type Key = (Box<str>, Box<str>, Box<str>);

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
        self.held.get(&(route.into(), caller.into(), id.into()))
    }

    /// Session `id` is `caller`'s: the upstream issued it for a session begun here, or
    /// answered it for one held elsewhere until now.
    pub fn insert(&self, route: &str, caller: &str, id: &str, boundary: Arc<Boundary>) {
        self.held.insert(
            (route.into(), caller.into(), id.into()),
            Held::new(boundary),
        );
    }

    /// Session `id` ended (DELETE) or the upstream no longer knows it.
    pub fn remove(&self, route: &str, caller: &str, id: &str) {
        self.held
            .invalidate(&(route.into(), caller.into(), id.into()));
    }
}
