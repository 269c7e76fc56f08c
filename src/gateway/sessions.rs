//! The MCP sessions this replica holds: each the rules of one session ([`Boundary`]), by route
//! and `Mcp-Session-Id`. Bounded in number, and forgotten after an idle time, so a client that
//! never says DELETE costs nothing for long.

use crate::mcp::Boundary;
use std::sync::Arc;
use std::time::Duration;

/// How many sessions are held, and for how long unused.
#[derive(Debug, Clone, Copy)]
pub struct SessionLimits {
    pub max_sessions: u64,
    pub idle: Duration,
}

/// Sessions by route (its index) and session id.
pub struct Sessions {
    held: moka::sync::Cache<(usize, Box<str>), Arc<Boundary>>,
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

    /// The session `id` of `route`, or a new one made by `make` (a session this replica never
    /// saw begin: another replica's, or one that expired here, or an id never issued; the
    /// upstream decides whether it exists).
    pub fn get_or_insert(
        &self,
        route: usize,
        id: &str,
        make: impl FnOnce() -> Arc<Boundary>,
    ) -> Arc<Boundary> {
        self.held.get_with((route, id.into()), make)
    }

    /// The upstream issued session `id` for a session begun here.
    pub fn insert(&self, route: usize, id: &str, boundary: Arc<Boundary>) {
        self.held.insert((route, id.into()), boundary);
    }

    /// Session `id` ended (DELETE) or the upstream no longer knows it.
    pub fn remove(&self, route: usize, id: &str) {
        self.held.invalidate(&(route, id.into()));
    }
}
