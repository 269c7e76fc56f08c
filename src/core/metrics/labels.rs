//! The values of the labels schemagate sets itself, and the folder that bounds the labels a
//! client controls.

use super::names::OTHER_LABEL;
use hashbrown::HashSet;
use std::sync::{Arc, RwLock};

/// An operation on the shared registry, the `op` of `schemagate_registry_errors_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RegistryOp {
    Write,
    ReadThrough,
    Sync,
    Subscribe,
    Remember,
}

impl RegistryOp {
    pub const ALL: [RegistryOp; 5] = [
        RegistryOp::Write,
        RegistryOp::ReadThrough,
        RegistryOp::Sync,
        RegistryOp::Subscribe,
        RegistryOp::Remember,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            RegistryOp::Write => "write",
            RegistryOp::ReadThrough => "read_through",
            RegistryOp::Sync => "sync",
            RegistryOp::Subscribe => "subscribe",
            RegistryOp::Remember => "remember",
        }
    }
}

/// Which transport a check came over; a label of the latency series.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    Rest,
    Grpc,
    /// `schemagate proxy`, on the MCP wire over stdio.
    Proxy,
    /// `schemagate gateway`, on the MCP wire over Streamable HTTP.
    Gateway,
}

impl Transport {
    pub const ALL: [Transport; 4] = [
        Transport::Rest,
        Transport::Grpc,
        Transport::Proxy,
        Transport::Gateway,
    ];

    /// Its place in [`Transport::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Transport::Rest => "rest",
            Transport::Grpc => "grpc",
            Transport::Proxy => "proxy",
            Transport::Gateway => "gateway",
        }
    }
}

/// Whether a check is a first attempt or a retry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attempt {
    First,
    Retry,
}

impl Attempt {
    pub const ALL: [Attempt; 2] = [Attempt::First, Attempt::Retry];

    /// Its place in [`Attempt::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }

    pub fn of(attempt: u32) -> Self {
        if attempt <= 1 {
            Attempt::First
        } else {
            Attempt::Retry
        }
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Attempt::First => "first",
            Attempt::Retry => "retry",
        }
    }
}

/// Bounds the distinct values of one label.
#[derive(Debug)]
pub struct LabelFolder {
    limit: usize,
    seen: RwLock<HashSet<Arc<str>>>,
    other: Arc<str>,
}

impl LabelFolder {
    pub fn new(limit: usize) -> Self {
        Self {
            limit,
            seen: RwLock::new(HashSet::new()),
            other: Arc::from(OTHER_LABEL),
        }
    }

    /// The label value for `value`: itself while the bound allows, `_other` after.
    pub fn fold(&self, value: &str) -> Arc<str> {
        if let Ok(seen) = self.seen.read() {
            if let Some(v) = seen.get(value) {
                return Arc::clone(v);
            }
            if seen.len() >= self.limit {
                return Arc::clone(&self.other);
            }
        }
        let Ok(mut seen) = self.seen.write() else {
            return Arc::clone(&self.other);
        };
        if let Some(v) = seen.get(value) {
            return Arc::clone(v);
        }
        if seen.len() >= self.limit {
            return Arc::clone(&self.other);
        }
        let v: Arc<str> = Arc::from(value);
        seen.insert(Arc::clone(&v));
        v
    }
}
