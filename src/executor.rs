//! Where CPU work runs: a rayon pool beside the async runtime, so compiles, large payloads and
//! batches never block the threads that serve connections.
//!
//! Work handed to the pool comes back as one flat `Result`: the work's own error, or `internal`
//! when the job was lost (it panicked). A batch is split across the workers only while some are
//! idle; when every worker already has a job, splitting only moves documents between cores.

use crate::error::CheckError;
use rayon::prelude::*;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// The worker pool and how many jobs it holds.
pub struct Executor {
    pool: rayon::ThreadPool,
    /// Jobs on the pool, queued or running.
    pending: Arc<AtomicUsize>,
}

/// Counts a job from its hand-off to the pool until it ends (or is dropped unrun).
struct PendingJob(Arc<AtomicUsize>);

impl PendingJob {
    fn new(count: Arc<AtomicUsize>) -> Self {
        count.fetch_add(1, Ordering::Relaxed);
        Self(count)
    }
}

impl Drop for PendingJob {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Executor {
    /// A pool of `threads` workers (0: one per core).
    pub fn new(threads: usize) -> anyhow::Result<Self> {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("schemagate-worker-{i}"))
            .panic_handler(|_| tracing::error!("a job on the worker pool panicked"))
            .build()?;
        Ok(Self {
            pool,
            pending: Arc::new(AtomicUsize::new(0)),
        })
    }

    /// Runs `work` on the pool and waits for it without blocking the async runtime.
    pub async fn run<R, F>(&self, work: F) -> Result<R, CheckError>
    where
        R: Send + 'static,
        F: FnOnce() -> Result<R, CheckError> + Send + 'static,
    {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let pending = PendingJob::new(Arc::clone(&self.pending));
        self.pool.spawn(move || {
            let _pending = pending;
            let _ = tx.send(work());
        });
        rx.await.unwrap_or(Err(CheckError::Internal))
    }

    /// `one` over every item, in order: across the idle workers when there are some, else here.
    /// Call from the pool (inside [`Executor::run`]).
    pub fn map<T: Send, R: Send>(&self, items: Vec<T>, one: impl Fn(T) -> R + Sync) -> Vec<R> {
        if !self.spare_workers() {
            return items.into_iter().map(one).collect();
        }
        self.pool
            .install(|| items.into_par_iter().with_min_len(8).map(&one).collect())
    }

    /// Whether a worker is free to take part of a batch. When every worker has a job of its own,
    /// splitting a batch only moves its documents between cores (measured: at 32 batches in
    /// flight, splitting cost a third of the throughput), so the batch runs where it was read.
    fn spare_workers(&self) -> bool {
        self.pending.load(Ordering::Relaxed) < self.pool.current_num_threads()
    }
}
