//! What gets counted for each request that asks for a verdict: its duration, and why it was
//! refused when it was. One place, called once per check by the gate (and by the adapters for a
//! request refused before it reaches the gate), so no check is counted twice or not at all.

use crate::core::error::{CheckError, ErrorClass};
use crate::core::metrics::{Metrics, Transport};
use crate::core::verdict::Verdict;
use std::sync::Arc;
use std::time::Instant;

/// Records request outcomes into the metrics.
#[derive(Clone)]
pub struct Instrument {
    metrics: Arc<Metrics>,
}

impl Instrument {
    pub fn new(metrics: Arc<Metrics>) -> Self {
        Self { metrics }
    }

    /// A check answered (with a verdict or a refusal) that started at `start`.
    pub fn checked(
        &self,
        transport: Transport,
        start: Instant,
        result: &Result<Verdict, CheckError>,
    ) {
        self.metrics
            .duration(transport)
            .record(start.elapsed().as_secs_f64());
        if let Err(e) = result {
            self.refused(transport, e);
        }
    }

    /// A request refused before any check was made (a body too large, a batch too long, no
    /// token). A refusal for the caller's credentials is also logged (with the token's name when
    /// known, never the token).
    pub fn refused(&self, transport: Transport, e: &CheckError) {
        self.metrics.request_error(transport, e);
        match e.class() {
            ErrorClass::Overloaded => self.metrics.shed(transport),
            ErrorClass::Unauthenticated | ErrorClass::Forbidden => {
                self.metrics.auth_failure(transport, e);
                tracing::warn!(transport = transport.as_str(), code = e.code(), reason = %e, "request refused");
            }
            _ => {}
        }
    }

    /// Checks never started because their request went away first.
    pub fn cancelled(&self, transport: Transport, checks: usize) {
        self.metrics.cancelled(transport, checks);
    }
}
