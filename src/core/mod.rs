//! The core: a check end to end, with no transport. Names and errors, the check as read and its
//! verdict, the trust policy and who may do what, schemas (their analysis, compilation, cache and
//! texts), the registry of contracts, which schema a check is judged against, the judge, where work
//! runs, the gate every adapter calls, and the metrics. Nothing here imports hyper, axum, tonic,
//! clap or a socket: adapters depend on the core, never the other way.

pub mod auth;
pub mod change;
pub mod check;
pub mod document;
pub mod domain;
pub mod drift;
pub mod error;
pub(crate) mod executor;
pub mod gate;
pub(crate) mod instrument;
pub(crate) mod judge;
pub mod metrics;
pub mod policy;
pub(crate) mod receiving;
pub mod registry;
pub(crate) mod resolve;
pub mod rule;
pub mod schema;
pub mod text_copy;
pub mod verdict;

use crate::core::schema::compile::CompileLimits;

/// Request-controlled sizes and the work they may cause.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_body_bytes: usize,
    pub max_batch_items: usize,
    pub max_depth: usize,
    pub max_errors: usize,
    pub max_schema_bytes: usize,
    /// Most subschema evaluations a schema may imply at one instance position.
    pub max_schema_cost: u64,
    /// Most heap bytes a schema's compiled regular expressions may hold together.
    pub max_schema_regex_bytes: usize,
    /// Most subschema evaluations (schema cost times payload nodes, plus regular expressions
    /// times string bytes) one check may cost.
    pub max_check_work: u64,
    /// Most work for which every error is collected; past it, one summary error is reported.
    pub max_error_work: u64,
    /// How long a request body may take to arrive in full.
    pub body_read_timeout: std::time::Duration,
}

impl Limits {
    /// The limits a schema compile enforces.
    pub fn compile(&self) -> CompileLimits {
        CompileLimits {
            max_schema_bytes: self.max_schema_bytes,
            max_depth: self.max_depth,
            max_schema_cost: self.max_schema_cost,
            max_schema_regex_bytes: self.max_schema_regex_bytes,
        }
    }
}
