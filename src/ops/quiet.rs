//! A future that wakes itself while it is being polled is polled again at once, instead of
//! telling its task. On tokio's multi-thread runtime a task woken during its own poll is put at
//! the back of the queue after it, and another worker thread is woken to steal it: a futex wake
//! and, on a busy machine, tens of microseconds before it runs again. Work that hands its result
//! to its own task through a channel (the gateway's exchange, driven by the handler that answers
//! the client) wakes itself that way on every request.

use futures_util::task::AtomicWaker;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

/// Polls of one poll past which a future still waking itself goes back to its task's queue, as
/// it would have. This bounds how long it holds its worker thread, not more: hyper's HTTP/1
/// dispatcher yields so (a wake of itself) after 16 pipelined requests, so a pipelining client
/// gets up to 4 × 16 served in one poll of its connection's task. (tokio's own yields, out of
/// budget or `yield_now`, wake the task after its poll and never reach the signal.)
const MAX_POLLS: usize = 4;

/// `future`'s output; wakes of it during its own poll are taken as "poll again now".
pub async fn quietly<F: Future>(future: F) -> F::Output {
    let mut future = std::pin::pin!(future);
    let signal = Arc::new(Signal::default());
    let waker = Waker::from(Arc::clone(&signal));
    std::future::poll_fn(move |cx| {
        signal.task.register(cx.waker());
        let mut inner = Context::from_waker(&waker);
        for _ in 0..MAX_POLLS {
            signal.polling.store(true, SeqCst);
            let polled = future.as_mut().poll(&mut inner);
            signal.polling.store(false, SeqCst);
            if polled.is_ready() || !signal.woken.swap(false, SeqCst) {
                return polled;
            }
        }
        cx.waker().wake_by_ref();
        Poll::Pending
    })
    .await
}

/// The waker the future is polled with: during its poll a wake only marks it; at any other time
/// it wakes the task.
#[derive(Default)]
struct Signal {
    task: AtomicWaker,
    polling: AtomicBool,
    woken: AtomicBool,
}

impl Wake for Signal {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        if self.polling.load(SeqCst) {
            self.woken.store(true, SeqCst);
            // Still polling: the poll sees the mark when it ends. Else it may have looked
            // already, and the task is told.
            if self.polling.load(SeqCst) {
                return;
            }
        }
        self.task.wake();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use tokio::sync::oneshot;

    /// Counts the wakes its task is told of.
    #[derive(Default)]
    struct Told(AtomicUsize);

    impl Wake for Told {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, SeqCst);
        }
    }

    /// A value sent and received in the same poll arrives in that poll without telling the task;
    /// a wake after the poll is told.
    #[test]
    fn a_wake_during_the_poll_is_a_poll_again_and_a_later_one_reaches_the_task() {
        let told = Arc::new(Told::default());
        let waker = Waker::from(Arc::clone(&told));
        let mut cx = Context::from_waker(&waker);
        let (tx, rx) = oneshot::channel();
        let (later_tx, later_rx) = oneshot::channel();
        let mut future = std::pin::pin!(quietly(async move {
            let mut tx = Some(tx);
            let mut rx = std::pin::pin!(rx);
            // The receiver is polled first (it keeps the waker), then the sender sends.
            let first = std::future::poll_fn(|cx| {
                if let Poll::Ready(v) = rx.as_mut().poll(cx) {
                    return Poll::Ready(v);
                }
                if let Some(tx) = tx.take() {
                    let _ = tx.send(7u32);
                }
                Poll::Pending
            })
            .await;
            (first, later_rx.await)
        }));
        assert!(future.as_mut().poll(&mut cx).is_pending());
        assert_eq!(
            told.0.load(SeqCst),
            0,
            "the wake in the poll went to the task"
        );
        std::thread::spawn(move || later_tx.send(9u32)).join().ok();
        assert_eq!(told.0.load(SeqCst), 1, "the wake after the poll was lost");
        assert_eq!(future.as_mut().poll(&mut cx), Poll::Ready((Ok(7), Ok(9))));
    }

    /// A future that always wakes itself still lets its task's other work run.
    #[tokio::test(flavor = "current_thread")]
    async fn a_future_that_always_wakes_itself_yields_to_its_task() {
        let spinning = quietly(std::future::poll_fn(|cx: &mut Context<'_>| {
            cx.waker().wake_by_ref();
            Poll::<()>::Pending
        }));
        let other = tokio::spawn(async { 5 });
        tokio::select! {
            () = spinning => panic!("a future that never ends ended"),
            done = other => assert_eq!(done.ok(), Some(5)),
        }
    }
}
