//! Giving freed memory back to the operating system after a burst.
//!
//! The allocator (mimalloc, the binary's global allocator) keeps the pages a thread has freed for
//! that thread to reuse, and returns them only when that thread allocates again. A thread that
//! goes quiet after a burst (a worker after a large batch, a runtime thread after the answers it
//! wrote) would keep them for as long as it stays quiet. So each thread calls [`return_freed`]
//! when it runs out of work, and at most once per [`EVERY`] gives back what it holds free.

use std::cell::Cell;
use std::time::{Duration, Instant};

/// How often one thread may give memory back.
pub const EVERY: Duration = Duration::from_secs(1);

thread_local! {
    static LAST: Cell<Option<Instant>> = const { Cell::new(None) };
}

/// Called by a thread about to wait for work: returns the memory it has freed to the operating
/// system, unless it did so less than [`EVERY`] ago.
pub fn return_freed() {
    LAST.with(|last| {
        let now = Instant::now();
        if last.get().is_some_and(|at| now.duration_since(at) < EVERY) {
            return;
        }
        last.set(Some(now));
        // SAFETY: mi_collect takes no pointers and may be called from any thread at any time; it
        // only walks and trims the calling thread's heap (and abandoned segments).
        unsafe { libmimalloc_sys::mi_collect(true) };
    });
}
