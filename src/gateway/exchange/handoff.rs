//! The client's answer handed from the exchange's work to the handler that answers the client:
//! its head once decided, then its body (a JSON answer's one message, or a stream's chunks as
//! they are written, a few at a time). It lives in the exchange: nothing is allocated for it, and
//! a JSON answer goes from the work to the handler without a channel.
//!
//! Each side learns of the other's end: the handler, that the answer ended (no head decided, or
//! its body complete: [`Handoff::end`]); the work, that the handler has gone ([`Handoff::leave`]:
//! the client went, or its answer is complete), which stops the reading of the upstream's answer.

use super::answer::AnswerHead;
use bytes::Bytes;
use std::collections::VecDeque;
use std::future::poll_fn;
use std::io;
use std::sync::{Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use tokio::sync::Notify;

/// Chunks held for a client that has not read them: past them a writer waits, so a client that
/// does not read holds the upstream back.
const SLACK: usize = 16;

#[derive(Default)]
pub(super) struct Handoff {
    state: Mutex<State>,
    /// Writers waiting for room, and pumps watching for the handler to go.
    writers: Notify,
}

#[derive(Default)]
struct State {
    head: Head,
    /// The chunks not yet read, in order: the first on its own (most answers have one), so that
    /// a JSON answer needs no list.
    first: Option<Bytes>,
    more: VecDeque<Bytes>,
    /// Nothing more will be written.
    ended: bool,
    /// The handler has gone: nothing written now will be read.
    gone: bool,
    /// Writers waiting for room: their chunks were written before the end, and the end is read
    /// only after them.
    waiting: usize,
    /// The handler, waiting for the head or a chunk.
    reader: Option<Waker>,
}

#[derive(Default)]
enum Head {
    #[default]
    Undecided,
    Decided(AnswerHead),
    Taken,
}

impl State {
    fn queued(&self) -> usize {
        usize::from(self.first.is_some()) + self.more.len()
    }

    fn push(&mut self, chunk: Bytes) {
        if self.first.is_none() && self.more.is_empty() {
            self.first = Some(chunk);
        } else {
            self.more.push_back(chunk);
        }
    }

    fn pop(&mut self) -> Option<Bytes> {
        self.first.take().or_else(|| self.more.pop_front())
    }

    /// Registers the handler's waker for the next change.
    fn wait(&mut self, cx: &Context<'_>) {
        match &self.reader {
            Some(waker) if waker.will_wake(cx.waker()) => {}
            _ => self.reader = Some(cx.waker().clone()),
        }
    }
}

/// The error a write gets once nothing written will be read.
fn gone() -> io::Error {
    io::Error::new(io::ErrorKind::BrokenPipe, "the client has gone")
}

impl Handoff {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Lets `state`'s lock go, then wakes the handler if it waits.
    fn wake_reader(mut state: MutexGuard<'_, State>) {
        let reader = state.reader.take();
        drop(state);
        if let Some(reader) = reader {
            reader.wake();
        }
    }

    /// The head of the client's answer (once: the exchange decides it once).
    pub(super) fn decide(&self, head: AnswerHead) {
        let mut state = self.state();
        if matches!(state.head, Head::Undecided) {
            state.head = Head::Decided(head);
        }
        Self::wake_reader(state);
    }

    /// Nothing more will be written: the handler reads what is left, with what writers waiting
    /// for room then write, then the end (or, with no head decided, learns that none will be).
    pub(super) fn end(&self) {
        let mut state = self.state();
        state.ended = true;
        Self::wake_reader(state);
    }

    /// Writes `chunk` whether or not there is room (the one message of a JSON answer); `false`
    /// when it will not be read.
    pub(super) fn write_now(&self, chunk: Bytes) -> bool {
        let mut state = self.state();
        if state.ended || state.gone {
            return false;
        }
        state.push(chunk);
        Self::wake_reader(state);
        true
    }

    /// Writes `chunk` once there is room for it; fails once it will not be read. A write that
    /// waits for room when the answer ends is still read: the handler reads the end after it.
    pub(super) async fn write(&self, chunk: Bytes) -> io::Result<()> {
        let mut waiting: Option<Waiting<'_>> = None;
        loop {
            let room = self.writers.notified();
            tokio::pin!(room);
            // Registered before the state is read: a reader that makes room after this wakes it.
            room.as_mut().enable();
            {
                let mut state = self.state();
                if state.gone || (state.ended && waiting.is_none()) {
                    return Err(gone());
                }
                if state.queued() < SLACK {
                    state.push(chunk);
                    if let Some(waiting) = waiting.take() {
                        waiting.done(&mut state);
                    }
                    Self::wake_reader(state);
                    return Ok(());
                }
                if waiting.is_none() {
                    state.waiting += 1;
                    waiting = Some(Waiting(Some(self)));
                }
            }
            room.await;
        }
    }

    /// Resolves once the handler has gone.
    pub(super) async fn left(&self) {
        loop {
            let changed = self.writers.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if self.state().gone {
                return;
            }
            changed.await;
        }
    }

    /// The handler has gone: what is queued is dropped, writers and watchers are told.
    pub(super) fn leave(&self) {
        let mut state = self.state();
        state.gone = true;
        state.first = None;
        state.more.clear();
        state.reader = None;
        drop(state);
        self.writers.notify_waiters();
    }

    /// The head, once decided; `None` once the answer ended with none.
    pub(super) fn poll_head(&self, cx: &Context<'_>) -> Poll<Option<AnswerHead>> {
        let mut state = self.state();
        match std::mem::take(&mut state.head) {
            Head::Decided(head) => {
                state.head = Head::Taken;
                Poll::Ready(Some(head))
            }
            Head::Taken => {
                state.head = Head::Taken;
                Poll::Ready(None)
            }
            Head::Undecided if state.ended => Poll::Ready(None),
            Head::Undecided => {
                state.wait(cx);
                Poll::Pending
            }
        }
    }

    /// The next chunk of the body, once written; `None` at its end.
    pub(super) fn poll_chunk(&self, cx: &Context<'_>) -> Poll<Option<Bytes>> {
        let mut state = self.state();
        if let Some(chunk) = state.pop() {
            let was_full = state.queued() + 1 >= SLACK;
            drop(state);
            if was_full {
                self.writers.notify_waiters();
            }
            return Poll::Ready(Some(chunk));
        }
        if state.ended && state.waiting == 0 {
            return Poll::Ready(None);
        }
        state.wait(cx);
        Poll::Pending
    }

    /// [`Handoff::poll_head`] as a future.
    pub(super) async fn head(&self) -> Option<AnswerHead> {
        poll_fn(|cx| self.poll_head(cx)).await
    }

    /// [`Handoff::poll_chunk`] as a future.
    pub(super) async fn chunk(&self) -> Option<Bytes> {
        poll_fn(|cx| self.poll_chunk(cx)).await
    }
}

/// A writer counted as waiting for room; uncounted when it writes or is dropped (the handler,
/// which may be waiting for it before it reads the end, is woken then).
struct Waiting<'a>(Option<&'a Handoff>);

impl Waiting<'_> {
    /// The writer wrote: uncounted under the lock the write holds.
    fn done(mut self, state: &mut State) {
        self.0 = None;
        state.waiting -= 1;
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        if let Some(handoff) = self.0.take() {
            let mut state = handoff.state();
            state.waiting -= 1;
            Handoff::wake_reader(state);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::exchange::Mode;
    use http::StatusCode;
    use std::sync::Arc;
    use std::time::Duration;

    fn chunk(n: usize) -> Bytes {
        Bytes::from(n.to_string())
    }

    #[tokio::test]
    async fn the_head_then_the_chunks_in_order_then_the_end() {
        let handoff = Handoff::default();
        handoff.decide(AnswerHead::json(StatusCode::OK));
        // Decided once: a second head is not the one read.
        handoff.decide(AnswerHead::accepted());
        for n in 0..5 {
            handoff.write(chunk(n)).await.expect("room");
        }
        handoff.end();
        assert!(
            handoff.write(chunk(9)).await.is_err(),
            "written after the end"
        );
        assert!(!handoff.write_now(chunk(9)));
        let head = handoff.head().await.expect("a head");
        assert_eq!((head.status, head.mode), (StatusCode::OK, Mode::Json));
        let mut read = Vec::new();
        while let Some(chunk) = handoff.chunk().await {
            read.push(chunk);
        }
        assert_eq!(read, (0..5).map(chunk).collect::<Vec<_>>());
    }

    #[tokio::test]
    async fn an_answer_that_ends_with_no_head_says_so() {
        let handoff = Arc::new(Handoff::default());
        let waiting = tokio::spawn({
            let handoff = Arc::clone(&handoff);
            async move { handoff.head().await.map(|h| h.status) }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiting.is_finished(), "a head before one was decided");
        handoff.end();
        assert_eq!(waiting.await.expect("joins"), None);
    }

    /// The handler's reads until the end, within a bound (a read that never ends fails the test).
    async fn read_to_the_end(handoff: &Handoff) -> Vec<Bytes> {
        tokio::time::timeout(Duration::from_secs(5), async {
            let mut read = Vec::new();
            while let Some(chunk) = handoff.chunk().await {
                read.push(chunk);
            }
            read
        })
        .await
        .expect("the end is read")
    }

    /// Fills the handoff to its slack, then starts a writer of its own task, which waits for
    /// room; `true` from it once its write went.
    async fn full_with_a_waiting_writer(handoff: &Arc<Handoff>) -> tokio::task::JoinHandle<bool> {
        fill(handoff).await;
        let writer = tokio::spawn({
            let handoff = Arc::clone(handoff);
            async move { handoff.write(chunk(SLACK)).await.is_ok() }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!writer.is_finished(), "written past the slack");
        writer
    }

    /// Writes chunks 0 to `SLACK - 1`: the handoff is full.
    async fn fill(handoff: &Handoff) {
        for n in 0..SLACK {
            handoff.write(chunk(n)).await.expect("room");
        }
    }

    #[tokio::test]
    async fn a_write_waiting_for_room_when_the_answer_ends_is_read_before_the_end() {
        // A writer of its own task, waiting for room when the answer ends.
        let handoff = Arc::new(Handoff::default());
        let writer = full_with_a_waiting_writer(&handoff).await;
        handoff.end();
        assert_eq!(
            read_to_the_end(&handoff).await,
            (0..=SLACK).map(chunk).collect::<Vec<_>>()
        );
        assert!(writer.await.expect("joins"), "the waiting write was read");

        // The same with the writer driven in the handler's own task, polled only while the
        // handler waits (as the exchange's work is while its answer is read).
        let handoff = Handoff::default();
        fill(&handoff).await;
        let (written, read) = tokio::join!(handoff.write(chunk(SLACK)), async {
            handoff.end();
            read_to_the_end(&handoff).await
        });
        assert!(written.is_ok(), "the waiting write was read");
        assert_eq!(read, (0..=SLACK).map(chunk).collect::<Vec<_>>());
    }

    #[tokio::test]
    async fn a_write_given_up_while_it_waits_does_not_hold_the_end_back() {
        let handoff = Handoff::default();
        fill(&handoff).await;
        let given_up =
            tokio::time::timeout(Duration::from_millis(20), handoff.write(chunk(SLACK))).await;
        assert!(given_up.is_err(), "written past the slack");
        handoff.end();
        assert_eq!(
            read_to_the_end(&handoff).await,
            (0..SLACK).map(chunk).collect::<Vec<_>>()
        );
    }

    #[tokio::test]
    async fn a_writer_waits_past_the_slack_until_the_client_reads_or_goes() {
        let handoff = Arc::new(Handoff::default());
        let writer = full_with_a_waiting_writer(&handoff).await;
        assert_eq!(handoff.chunk().await, Some(chunk(0)));
        assert!(writer.await.expect("joins"), "room made, the write goes");
        // Full again: a client that goes fails the writer, and wakes whoever watches for it.
        let writer = tokio::spawn({
            let handoff = Arc::clone(&handoff);
            async move { handoff.write(chunk(0)).await.is_ok() }
        });
        let watcher = tokio::spawn({
            let handoff = Arc::clone(&handoff);
            async move { handoff.left().await }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!writer.is_finished() && !watcher.is_finished());
        handoff.leave();
        assert!(!writer.await.expect("joins"), "written for a client gone");
        watcher.await.expect("the watcher is told");
        assert!(!handoff.write_now(chunk(1)));
    }
}
