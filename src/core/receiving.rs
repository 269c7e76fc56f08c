//! The bytes of requests still arriving, bounded across the process.
//!
//! A request body is held in memory while it arrives: a REST body until it is complete, a gRPC
//! message until its last byte is in (on a stream, one message at a time). HTTP/2 flow control
//! bounds what the client may send ahead of the server reading it, but not what the server has
//! read and holds, so that is what this budget counts. Every adapter takes a [`Held`] for each
//! request body it reads and grows it as bytes arrive; past `--max-receiving-bytes` over all
//! requests the request is refused at once as [`CheckError::Overloaded`], as shed work is.
//! Bytes are given back when the body (or the stream's message) is complete, where the executor's
//! own bound on queued bytes takes over, or when the request goes away.

use crate::core::error::{Capacity, CheckError};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// The bytes held by request bodies still arriving, over all connections.
#[derive(Debug)]
pub struct Receiving {
    held: AtomicUsize,
    limit: usize,
}

impl Receiving {
    pub fn new(limit: usize) -> Arc<Self> {
        Arc::new(Self {
            held: AtomicUsize::new(0),
            limit,
        })
    }

    /// Bytes held now.
    #[cfg(test)]
    pub fn held(&self) -> usize {
        self.held.load(Ordering::Relaxed)
    }

    /// A hold for one request body, empty to begin with.
    pub fn hold(self: &Arc<Self>) -> Held {
        Held {
            budget: Arc::clone(self),
            bytes: 0,
        }
    }

    fn take(&self, n: usize) -> Result<(), CheckError> {
        self.held
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |held| {
                held.checked_add(n).filter(|&after| after <= self.limit)
            })
            .map(drop)
            .map_err(|held| {
                CheckError::Overloaded(Capacity::Receiving {
                    held,
                    limit: self.limit,
                })
            })
    }

    fn give_back(&self, n: usize) {
        self.held.fetch_sub(n, Ordering::AcqRel);
    }
}

/// The bytes one request body holds of the budget; given back when dropped.
#[derive(Debug)]
pub struct Held {
    budget: Arc<Receiving>,
    bytes: usize,
}

impl Held {
    /// Bytes this body holds.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Holds `n` more bytes, or refuses them (holding what it held before).
    pub fn grow(&mut self, n: usize) -> Result<(), CheckError> {
        self.budget.take(n)?;
        self.bytes += n;
        Ok(())
    }

    /// Holds exactly `bytes`: more (which may be refused) or fewer (given back at once).
    pub fn set(&mut self, bytes: usize) -> Result<(), CheckError> {
        match bytes.cmp(&self.bytes) {
            std::cmp::Ordering::Greater => self.grow(bytes - self.bytes),
            std::cmp::Ordering::Less => {
                self.budget.give_back(self.bytes - bytes);
                self.bytes = bytes;
                Ok(())
            }
            std::cmp::Ordering::Equal => Ok(()),
        }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.budget.give_back(self.bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_share_the_budget_and_give_it_back() {
        let budget = Receiving::new(100);
        let mut a = budget.hold();
        let mut b = budget.hold();
        a.grow(60).expect("fits");
        let refused = b.grow(50);
        assert!(
            matches!(
                refused,
                Err(CheckError::Overloaded(Capacity::Receiving {
                    held: 60,
                    limit: 100
                }))
            ),
            "{refused:?}"
        );
        assert_eq!(b.bytes(), 0, "a refused grow holds nothing more");
        b.grow(40).expect("what is left fits");
        assert_eq!(budget.held(), 100);
        a.set(10).expect("shrinking never fails");
        assert_eq!(budget.held(), 50);
        drop(a);
        drop(b);
        assert_eq!(budget.held(), 0, "dropped holds give everything back");
    }
}
