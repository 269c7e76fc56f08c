//! Where CPU work runs: worker threads beside the async runtime, so compiles, large payloads and
//! batches never block the threads that serve connections.
//!
//! Three promises, all kept here:
//!
//! - **Fair.** Work is shared between requests, not served in arrival order: a worker takes the
//!   request at the front of the ready queue, works on it for one [`SLICE`], and puts it back at
//!   the end if it has more to do. A 10,000-item batch takes its turns; a batch with items left is
//!   put back at once when it is taken, so an idle worker can share it. Work of one check (a
//!   compile, a large check, a registration) has a queue of its own that workers serve first
//!   (and every fourth turn second, so batches are never starved): it waits for the slices the
//!   workers are in, not for a turn of every batch queued.
//! - **Owned by its request.** Each submission returns a future; dropping it (the client went away,
//!   the deadline passed) cancels the work: no item is started after that, and the items never
//!   started are reported to `on_cancel`.
//! - **Bounded.** Work admitted and not yet finished is bounded in checks and in bytes
//!   ([`QueueLimits`]); past either bound a new request is refused at once with
//!   [`CheckError::Overloaded`] rather than queued. A request is always admitted when nothing else
//!   is, so no single request within the body and batch limits is refused for its size alone.
//!
//! Work handed to a worker comes back as one flat `Result`: the work's own error, `overloaded`, or
//! `internal` when the job was lost (it panicked).

use crate::core::error::{Capacity, CheckError};
use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// How long a worker stays with one request before it takes the next one's turn.
pub const SLICE: Duration = Duration::from_millis(2);
/// The most items of a batch a worker claims at once: fewer when the items are slow, so that a
/// block ends within about a [`SLICE`] (see [`Map::claim`]).
const BLOCK: usize = 8;

/// The most work admitted at once (queued or running).
#[derive(Debug, Clone, Copy)]
pub struct QueueLimits {
    pub max_checks: usize,
    pub max_bytes: usize,
}

/// What a request asks of the workers, counted against [`QueueLimits`].
#[derive(Debug, Clone, Copy, Default)]
pub struct Cost {
    pub checks: usize,
    pub bytes: usize,
}

/// Whether a request past the bounds is refused or admitted anyway.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admit {
    /// Refuse with `overloaded` past the bounds.
    Shed,
    /// Admit regardless (a stream's chunk: the stream has bounds of its own, and waits instead).
    Always,
}

/// The worker threads and their ready queue.
pub struct Executor {
    shared: Arc<Shared>,
}

struct Shared {
    state: Mutex<State>,
    work_ready: Condvar,
    limits: QueueLimits,
}

#[derive(Default)]
struct State {
    ready: VecDeque<Arc<Entry>>,
    /// Work of one check (a compile, a large check, a registration): taken before batches, so
    /// it waits for a worker's current slice, not for a turn of every batch in the queue.
    single: VecDeque<Arc<Entry>>,
    admitted: Cost,
    /// Workers waiting for work (so a push wakes one only when one sleeps).
    idle: usize,
    stop: bool,
}

/// A request's place in the ready queue.
struct Entry {
    task: Box<dyn Task>,
    /// In the ready queue now (so it is never there twice).
    queued: AtomicBool,
    /// One check's work: queued with [`State::single`].
    single: bool,
}

/// Work a worker can do a slice of.
trait Task: Send + Sync {
    /// Works until `until` or the end; says whether anything is left to start.
    fn run(&self, until: Instant) -> bool;
    /// Whether more than one worker may work on it at once.
    fn shareable(&self) -> bool;
}

/// Work admitted against the queue bounds, released when dropped.
struct Ticket {
    shared: Arc<Shared>,
    cost: Cost,
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut state = lock(&self.shared.state);
        state.admitted.checks -= self.cost.checks;
        state.admitted.bytes -= self.cost.bytes;
    }
}

/// Sets its flag when dropped: the waiting side of a submission, gone before the answer came.
struct CancelOnDrop(Arc<AtomicBool>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    // A worker never panics while holding the lock (tasks run outside it), so a poisoned lock
    // still guards consistent state.
    state
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Executor {
    /// `threads` workers (0: one per core).
    pub fn new(threads: usize, limits: QueueLimits) -> anyhow::Result<Self> {
        let threads = if threads == 0 {
            std::thread::available_parallelism().map_or(1, usize::from)
        } else {
            threads
        };
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            work_ready: Condvar::new(),
            limits,
        });
        for i in 0..threads {
            let shared = Arc::clone(&shared);
            std::thread::Builder::new()
                .name(format!("schemagate-worker-{i}"))
                .spawn(move || work(&shared))?;
        }
        Ok(Self { shared })
    }

    /// Runs `work` on a worker and waits for it without blocking the async runtime: refused at
    /// once with `overloaded` when admitting its `cost` would pass the bounds. Dropping the
    /// returned future before it ends means `work` is never started if it has not been.
    pub async fn run<R, F>(&self, cost: Cost, work: F) -> Result<R, CheckError>
    where
        R: Send + 'static,
        F: FnOnce() -> Result<R, CheckError> + Send + 'static,
    {
        let _admitted = admit(&self.shared, cost, Admit::Shed)?;
        self.submit_and_wait(true, |tx, cancelled| {
            Box::new(Once {
                work: Mutex::new(Some((work, tx))),
                cancelled,
            })
        })
        .await
    }

    /// `read` (which splits a request of `cost` into items), then `one` over every item, answers
    /// in order, in slices shared fairly with other requests (and across idle workers). The
    /// request and then its items are admitted as `how` says; the items on the worker that read
    /// them, whose slice goes straight on to them. Dropping the returned future stops the items
    /// not yet started; `on_cancel` is then told how many there were.
    pub async fn batch<T, R, I, F, C>(
        &self,
        cost: Cost,
        how: Admit,
        read: I,
        one: F,
        on_cancel: C,
    ) -> Result<Vec<R>, CheckError>
    where
        T: Send + 'static,
        R: Send + 'static,
        I: FnOnce() -> Result<Vec<T>, CheckError> + Send + 'static,
        F: Fn(T) -> R + Send + Sync + 'static,
        C: FnOnce(usize) + Send + 'static,
    {
        let _admitted = admit(&self.shared, cost, how)?;
        let shared = Arc::clone(&self.shared);
        self.submit_and_wait(false, |tx, cancelled| {
            Box::new(Read {
                work: Mutex::new(Some((read, one, on_cancel, tx))),
                cancelled,
                shared,
                how,
            })
        })
        .await
    }

    /// Queues the task `make` builds around a reply channel and a cancel flag, and waits for its
    /// answer; dropping the future sets the flag.
    async fn submit_and_wait<R>(
        &self,
        single: bool,
        make: impl FnOnce(Reply<R>, Arc<AtomicBool>) -> Box<dyn Task>,
    ) -> Result<R, CheckError> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let cancelled = Arc::new(AtomicBool::new(false));
        let _cancel = CancelOnDrop(Arc::clone(&cancelled));
        self.submit(single, make(tx, cancelled));
        rx.await.unwrap_or(Err(CheckError::Internal))
    }

    fn submit(&self, single: bool, task: Box<dyn Task>) {
        let entry = Arc::new(Entry {
            task,
            queued: AtomicBool::new(true),
            single,
        });
        push(&self.shared, entry);
    }
}

impl Drop for Executor {
    fn drop(&mut self) {
        lock(&self.shared.state).stop = true;
        self.shared.work_ready.notify_all();
    }
}

/// Admits work of `cost`, or refuses it with `overloaded` when the bounds are full (see
/// [`Admit`]).
fn admit(shared: &Arc<Shared>, cost: Cost, how: Admit) -> Result<Ticket, CheckError> {
    let mut state = lock(&shared.state);
    let limits = shared.limits;
    let admitted = state.admitted;
    let fits = admitted.checks + cost.checks <= limits.max_checks
        && admitted.bytes + cost.bytes <= limits.max_bytes;
    if how == Admit::Shed && !fits && (admitted.checks > 0 || admitted.bytes > 0) {
        return Err(CheckError::Overloaded(Capacity::Queued {
            checks: admitted.checks,
            bytes: admitted.bytes,
        }));
    }
    state.admitted.checks += cost.checks;
    state.admitted.bytes += cost.bytes;
    Ok(Ticket {
        shared: Arc::clone(shared),
        cost,
    })
}

/// A worker's life: take the request at the front, work a slice of it, put it back if unfinished.
fn work(shared: &Shared) {
    // Every fourth turn goes to a batch first, so a flood of single checks cannot starve them.
    let mut turn = 0u32;
    loop {
        turn = turn.wrapping_add(1);
        let entry = {
            let mut state = lock(&shared.state);
            loop {
                let next = if turn % 4 == 0 {
                    state.ready.pop_front().or_else(|| state.single.pop_front())
                } else {
                    state.single.pop_front().or_else(|| state.ready.pop_front())
                };
                if let Some(entry) = next {
                    break entry;
                }
                if state.stop {
                    return;
                }
                // Out of work: give back what this thread freed, and again every
                // `memory::EVERY` while it waits (what it allocated may be freed later, by the
                // thread that writes the answer).
                drop(state);
                crate::ops::memory::return_freed();
                state = lock(&shared.state);
                if state.stop || !state.ready.is_empty() || !state.single.is_empty() {
                    continue;
                }
                state.idle += 1;
                state = shared
                    .work_ready
                    .wait_timeout(state, crate::ops::memory::EVERY)
                    .unwrap_or_else(|poisoned| poisoned.into_inner())
                    .0;
                state.idle -= 1;
            }
        };
        entry.queued.store(false, Ordering::Relaxed);
        let more = catch_unwind(AssertUnwindSafe(|| {
            work_on(shared, &entry, Instant::now() + SLICE)
        }))
        .unwrap_or_else(|_| {
            tracing::error!("a job on the worker pool panicked");
            false
        });
        if more {
            requeue(shared, &entry);
        }
    }
}

/// Works one slice of `entry` (taken off the queue); says whether it has more to do.
fn work_on(shared: &Shared, entry: &Arc<Entry>, until: Instant) -> bool {
    // A batch with more to do goes back at once, for an idle worker to share.
    if entry.task.shareable() {
        requeue(shared, entry);
    }
    entry.task.run(until)
}

fn requeue(shared: &Shared, entry: &Arc<Entry>) {
    if entry.queued.swap(true, Ordering::Relaxed) {
        return;
    }
    push(shared, Arc::clone(entry));
}

/// Puts `entry` at the back of the ready queue, waking a worker if one sleeps.
fn push(shared: &Shared, entry: Arc<Entry>) {
    let mut state = lock(&shared.state);
    if entry.single {
        state.single.push_back(entry);
    } else {
        state.ready.push_back(entry);
    }
    let wake = state.idle > 0;
    drop(state);
    if wake {
        shared.work_ready.notify_one();
    }
}

type Reply<R> = tokio::sync::oneshot::Sender<Result<R, CheckError>>;
/// Told how many items of a batch never started because it was cancelled.
type OnCancel = Box<dyn FnOnce(usize) + Send>;

/// One piece of work that cannot be split (a compile, a large check, a batch's read).
struct Once<F, R> {
    work: Mutex<Option<(F, Reply<R>)>>,
    cancelled: Arc<AtomicBool>,
}

impl<F, R> Task for Once<F, R>
where
    F: FnOnce() -> Result<R, CheckError> + Send,
    R: Send,
{
    fn run(&self, _until: Instant) -> bool {
        let taken = self
            .work
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .take();
        if let Some((work, tx)) = taken {
            if !self.cancelled.load(Ordering::Relaxed) {
                let _ = tx.send(work());
            }
        }
        false
    }

    fn shareable(&self) -> bool {
        false
    }
}

/// What a [`Read`] holds until it runs: the reader, the work per item, the cancel report, the
/// reply.
type ReadWork<I, F, C, R> = (I, F, C, Reply<Vec<R>>);

/// A batch still to be read: reads it, admits its items, then works on them as a [`Map`].
struct Read<I, F, C, R> {
    work: Mutex<Option<ReadWork<I, F, C, R>>>,
    cancelled: Arc<AtomicBool>,
    shared: Arc<Shared>,
    how: Admit,
}

impl<T, R, I, F, C> Task for Read<I, F, C, R>
where
    T: Send + 'static,
    R: Send + 'static,
    I: FnOnce() -> Result<Vec<T>, CheckError> + Send,
    F: Fn(T) -> R + Send + Sync + 'static,
    C: FnOnce(usize) + Send + 'static,
{
    fn run(&self, until: Instant) -> bool {
        let taken = self
            .work
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .take();
        let Some((read, one, on_cancel, tx)) = taken else {
            return false;
        };
        if self.cancelled.load(Ordering::Relaxed) {
            return false;
        }
        let items = match read() {
            Ok(items) if items.is_empty() => {
                let _ = tx.send(Ok(Vec::new()));
                return false;
            }
            Ok(items) => items,
            Err(e) => {
                let _ = tx.send(Err(e));
                return false;
            }
        };
        let cost = Cost {
            checks: items.len(),
            bytes: 0,
        };
        let ticket = match admit(&self.shared, cost, self.how) {
            Ok(ticket) => ticket,
            Err(e) => {
                let _ = tx.send(Err(e));
                return false;
            }
        };
        let map = Map::new(
            items,
            one,
            Arc::clone(&self.cancelled),
            on_cancel,
            tx,
            ticket,
        );
        let entry = Arc::new(Entry {
            task: Box::new(map),
            queued: AtomicBool::new(false),
            single: false,
        });
        if work_on(&self.shared, &entry, until) {
            requeue(&self.shared, &entry);
        }
        false
    }

    fn shareable(&self) -> bool {
        false
    }
}

/// A batch: items claimed a block at a time by whichever worker has the request's turn.
struct Map<T, R, F> {
    items: Box<[Mutex<Option<T>>]>,
    answers: Box<[Mutex<Option<R>>]>,
    /// The next item to claim.
    next: AtomicUsize,
    /// Items claimed at once: as many as the last block's pace fits in a [`SLICE`], from 1 to
    /// [`BLOCK`]. It starts at 1, so a batch of slow items (a heavy schema's checks, each many
    /// milliseconds) never holds a worker for a block of them while a compile waits.
    claim: AtomicUsize,
    /// Items answered.
    done: AtomicUsize,
    /// Items claimed but not started because the batch was cancelled.
    unstarted: AtomicUsize,
    one: F,
    cancelled: Arc<AtomicBool>,
    on_cancel: Mutex<Option<OnCancel>>,
    tx: Mutex<Option<Reply<Vec<R>>>>,
    /// The items' admission (see [`Executor::batch`]), released when the batch is done.
    _ticket: Ticket,
}

impl<T, R, F> Map<T, R, F> {
    fn new(
        items: Vec<T>,
        one: F,
        cancelled: Arc<AtomicBool>,
        on_cancel: impl FnOnce(usize) + Send + 'static,
        tx: Reply<Vec<R>>,
        ticket: Ticket,
    ) -> Self {
        let len = items.len();
        Map {
            items: items.into_iter().map(|t| Mutex::new(Some(t))).collect(),
            answers: (0..len).map(|_| Mutex::new(None)).collect(),
            next: AtomicUsize::new(0),
            claim: AtomicUsize::new(1),
            done: AtomicUsize::new(0),
            unstarted: AtomicUsize::new(0),
            one,
            cancelled,
            on_cancel: Mutex::new(Some(Box::new(on_cancel))),
            tx: Mutex::new(Some(tx)),
            _ticket: ticket,
        }
    }

    fn left(&self) -> bool {
        self.next.load(Ordering::Relaxed) < self.items.len()
    }
}

impl<T, R, F> Task for Map<T, R, F>
where
    T: Send,
    R: Send,
    F: Fn(T) -> R + Send + Sync,
{
    fn run(&self, until: Instant) -> bool {
        let len = self.items.len();
        // One clock reading per block: where a block ends, the next starts.
        let mut started = Instant::now();
        loop {
            // Items are claimed a block at a time: two workers on one batch then touch each
            // other's cache lines once a block, not once an item.
            let claim = self.claim.load(Ordering::Relaxed);
            let first = self.next.fetch_add(claim, Ordering::Relaxed);
            if first >= len {
                return false;
            }
            let block = first..(first + claim).min(len);
            let mut answered = 0;
            for i in block.clone() {
                // Cancelled: the block's items not started are given back as never started.
                if self.cancelled.load(Ordering::Relaxed) {
                    self.unstarted.fetch_add(block.end - i, Ordering::Relaxed);
                    return false;
                }
                let item = self.items[i]
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner())
                    .take();
                if let Some(item) = item {
                    let answer = (self.one)(item);
                    *self.answers[i]
                        .lock()
                        .unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(answer);
                }
                answered += 1;
            }
            let now = Instant::now();
            // A block holds at least one item.
            let per_item = (now - started).as_nanos() / answered as u128;
            started = now;
            let fits = SLICE.as_nanos() / per_item.max(1);
            self.claim
                .store(fits.clamp(1, BLOCK as u128) as usize, Ordering::Relaxed);
            if self.done.fetch_add(answered, Ordering::AcqRel) + answered == len {
                self.reply();
                return false;
            }
            if now >= until {
                return self.left();
            }
        }
    }

    fn shareable(&self) -> bool {
        // More than one block (as claimed now) left: worth a second worker.
        !self.cancelled.load(Ordering::Relaxed)
            && self.next.load(Ordering::Relaxed) + self.claim.load(Ordering::Relaxed)
                < self.items.len()
    }
}

impl<T, R, F> Map<T, R, F> {
    /// Sends every answer, in order (called once, by the worker that answered the last item).
    fn reply(&self) {
        let answers: Option<Vec<R>> = self
            .answers
            .iter()
            .map(|a| a.lock().unwrap_or_else(|p| p.into_inner()).take())
            .collect();
        if let Some(tx) = self.tx.lock().unwrap_or_else(|p| p.into_inner()).take() {
            let _ = tx.send(answers.ok_or(CheckError::Internal));
        }
    }
}

impl<T, R, F> Drop for Map<T, R, F> {
    fn drop(&mut self) {
        let claimed = self.next.load(Ordering::Relaxed).min(self.items.len());
        let never_started = self.items.len() - claimed + self.unstarted.load(Ordering::Relaxed);
        if never_started > 0 {
            if let Some(on_cancel) = self
                .on_cancel
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .take()
            {
                on_cancel(never_started);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;

    fn executor(threads: usize, max_checks: usize) -> Executor {
        Executor::new(
            threads,
            QueueLimits {
                max_checks,
                max_bytes: usize::MAX,
            },
        )
        .expect("workers start")
    }

    #[tokio::test]
    async fn a_batch_answers_in_order() {
        let ex = executor(2, 1000);
        let out = ex
            .batch(
                Cost::default(),
                Admit::Always,
                || Ok((0..500u64).collect()),
                |i| i * 2,
                |_| {},
            )
            .await
            .expect("answered");
        assert_eq!(out, (0..500u64).map(|i| i * 2).collect::<Vec<_>>());
    }

    #[tokio::test]
    async fn past_the_bound_new_work_is_refused_and_admitted_again_once_released() {
        let ex = executor(1, 10);
        let first = admit(
            &ex.shared,
            Cost {
                checks: 8,
                bytes: 0,
            },
            Admit::Shed,
        )
        .expect("admitted");
        let refused = admit(
            &ex.shared,
            Cost {
                checks: 3,
                bytes: 0,
            },
            Admit::Shed,
        );
        assert!(
            matches!(
                refused,
                Err(CheckError::Overloaded(Capacity::Queued { checks: 8, .. }))
            ),
            "{:?}",
            refused.err()
        );
        // A stream's chunk waits within its own bounds instead.
        let streamed = admit(
            &ex.shared,
            Cost {
                checks: 3,
                bytes: 0,
            },
            Admit::Always,
        )
        .expect("admitted");
        drop((first, streamed));
        // Alone, even a request over the bound is admitted: the bound never refuses a valid batch.
        admit(
            &ex.shared,
            Cost {
                checks: 50,
                bytes: 0,
            },
            Admit::Shed,
        )
        .expect("admitted when idle");
    }

    #[tokio::test]
    async fn a_dropped_batch_stops_and_reports_what_never_started() {
        let ex = executor(1, usize::MAX);
        let ran = Arc::new(AtomicU64::new(0));
        let never = Arc::new(AtomicU64::new(0));
        let (r, n) = (Arc::clone(&ran), Arc::clone(&never));
        let batch = ex.batch(
            Cost::default(),
            Admit::Always,
            || Ok((0..10_000).collect::<Vec<u32>>()),
            move |_| {
                r.fetch_add(1, Ordering::Relaxed);
                std::thread::sleep(Duration::from_micros(200));
            },
            move |count| {
                n.store(count as u64, Ordering::Relaxed);
            },
        );
        // Give up on it after a little while, as a client that disconnects does.
        let _ = tokio::time::timeout(Duration::from_millis(50), batch).await;
        tokio::time::sleep(Duration::from_millis(100)).await;
        let ran = ran.load(Ordering::Relaxed);
        assert!(ran < 10_000, "the batch ran to the end: {ran}");
        assert_eq!(
            never.load(Ordering::Relaxed),
            10_000 - ran,
            "every item is either run or reported"
        );
    }

    #[tokio::test]
    async fn a_small_request_is_not_queued_behind_a_big_batch() {
        let ex = Arc::new(executor(1, usize::MAX));
        let big_done = Arc::new(AtomicBool::new(false));
        let done = Arc::clone(&big_done);
        let big = {
            let ex = Arc::clone(&ex);
            tokio::spawn(async move {
                let out = ex
                    .batch(
                        Cost::default(),
                        Admit::Always,
                        || Ok((0..2_000).collect::<Vec<u32>>()),
                        |_| std::thread::sleep(Duration::from_micros(500)),
                        |_| {},
                    )
                    .await;
                done.store(true, Ordering::Relaxed);
                out.map(|v| v.len())
            })
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        // One second of batch is queued ahead; the small request takes the next turn.
        let small = ex.run(Cost::default(), || Ok(7)).await.expect("answered");
        assert_eq!(small, 7);
        assert!(
            !big_done.load(Ordering::Relaxed),
            "the small request waited for the whole batch"
        );
        assert_eq!(big.await.expect("joined").expect("answered"), 2_000);
    }

    #[tokio::test]
    async fn a_check_beside_a_batch_of_slow_items_waits_for_an_item_not_a_block() {
        let ex = Arc::new(executor(1, usize::MAX));
        let started = Arc::new(AtomicU64::new(0));
        let big = {
            let (ex, started) = (Arc::clone(&ex), Arc::clone(&started));
            tokio::spawn(async move {
                ex.batch(
                    Cost::default(),
                    Admit::Always,
                    || Ok((0..40).collect::<Vec<u32>>()),
                    move |_| {
                        started.fetch_add(1, Ordering::Relaxed);
                        // An item of a heavy schema: far longer than a slice.
                        std::thread::sleep(Duration::from_millis(10));
                    },
                    |_| {},
                )
                .await
                .map(|v| v.len())
            })
        };
        tokio::time::sleep(Duration::from_millis(25)).await;
        let before = started.load(Ordering::Relaxed);
        let seen = Arc::clone(&started);
        let during = ex
            .run(Cost::default(), move || Ok(seen.load(Ordering::Relaxed)))
            .await
            .expect("answered");
        // The item in progress, and at most one more (a batch's turn), not a block of eight.
        assert!(
            during <= before + 2,
            "the check waited for {} items of the batch",
            during - before
        );
        assert_eq!(big.await.expect("joined").expect("answered"), 40);
    }
}
