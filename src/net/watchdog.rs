//! What a connection's watchdog reads: the requests in flight and since when it has been idle,
//! and the answers waiting for hyper to ask for their next piece (an answer handed over in
//! pieces of at most [`ANSWER_CHUNK`], so that a client that stops reading is seen).

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

/// The largest piece of an answer handed to hyper at once.
pub const ANSWER_CHUNK: usize = 64 * 1024;

/// What a connection is doing, for its watchdog.
pub(super) struct ConnectionState {
    start: Instant,
    /// Requests whose answer has not been fully handed to hyper.
    in_flight: AtomicUsize,
    /// When the last request ended (milliseconds since `start`).
    idle_since: AtomicU64,
    /// Answers that have handed hyper a piece and wait for it to ask for the next.
    awaiting_pull: AtomicUsize,
    /// When hyper last asked an answer for a piece (milliseconds since `start`).
    last_pull: AtomicU64,
    /// A write to the socket timed out (the connection then ends with an error).
    pub(super) write_timed_out: Arc<AtomicBool>,
}

impl ConnectionState {
    pub(super) fn new() -> Self {
        Self {
            start: Instant::now(),
            in_flight: AtomicUsize::new(0),
            idle_since: AtomicU64::new(0),
            awaiting_pull: AtomicUsize::new(0),
            last_pull: AtomicU64::new(0),
            write_timed_out: Arc::new(AtomicBool::new(false)),
        }
    }

    fn now(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// A request starts; the guard ends it when dropped.
    pub(super) fn begin(self: &Arc<Self>) -> InFlight {
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        InFlight(Arc::clone(self))
    }
}

/// One request in flight on a connection.
pub(super) struct InFlight(Arc<ConnectionState>);

impl Drop for InFlight {
    fn drop(&mut self) {
        let state = &self.0;
        state.idle_since.store(state.now(), Ordering::Relaxed);
        state.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

/// What the watchdog decides for a connection.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Condition {
    Fine,
    Idle,
    WriteStalled,
}

impl ConnectionState {
    /// What the watchdog decides, with the connection's idle and write timeouts.
    pub(super) fn condition(&self, idle_timeout: Duration, write_timeout: Duration) -> Condition {
        let now = self.now();
        let millis = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        if self.awaiting_pull.load(Ordering::Relaxed) > 0
            && now.saturating_sub(self.last_pull.load(Ordering::Relaxed)) >= millis(write_timeout)
        {
            return Condition::WriteStalled;
        }
        if self.in_flight.load(Ordering::Relaxed) == 0
            && now.saturating_sub(self.idle_since.load(Ordering::Relaxed)) >= millis(idle_timeout)
        {
            return Condition::Idle;
        }
        Condition::Fine
    }
}

/// A response body that hands hyper its answer in pieces of at most [`ANSWER_CHUNK`], records
/// when hyper asks for the next (so a stalled answer is seen), and ends its request when dropped.
pub(super) struct Answer<B> {
    inner: Pin<Box<B>>,
    rest: Option<Bytes>,
    waiting_for_pull: bool,
    in_flight: InFlight,
}

impl<B> Answer<B> {
    pub(super) fn new(inner: B, in_flight: InFlight) -> Self {
        Self {
            inner: Box::pin(inner),
            rest: None,
            waiting_for_pull: false,
            in_flight,
        }
    }

    fn piece(&mut self, mut data: Bytes) -> Frame<Bytes> {
        if data.len() > ANSWER_CHUNK {
            self.rest = Some(data.split_off(ANSWER_CHUNK));
        }
        let state = &self.in_flight.0;
        if !self.waiting_for_pull {
            self.waiting_for_pull = true;
            state.awaiting_pull.fetch_add(1, Ordering::Relaxed);
        }
        Frame::data(data)
    }
}

impl<B> Body for Answer<B>
where
    B: Body<Data = Bytes>,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        let this = &mut *self;
        let state = &this.in_flight.0;
        state.last_pull.store(state.now(), Ordering::Relaxed);
        if this.waiting_for_pull {
            this.waiting_for_pull = false;
            state.awaiting_pull.fetch_sub(1, Ordering::Relaxed);
        }
        if let Some(rest) = this.rest.take() {
            return Poll::Ready(Some(Ok(this.piece(rest))));
        }
        match this.inner.as_mut().poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                Ok(data) => Poll::Ready(Some(Ok(this.piece(data)))),
                Err(frame) => Poll::Ready(Some(Ok(frame))),
            },
            other => other,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.rest.is_none() && self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        let mut hint = self.inner.size_hint();
        if let Some(rest) = &self.rest {
            let extra = rest.len() as u64;
            hint.set_lower(hint.lower() + extra);
            if let Some(upper) = hint.upper() {
                hint.set_upper(upper + extra);
            }
        }
        hint
    }
}

impl<B> Drop for Answer<B> {
    fn drop(&mut self) {
        if self.waiting_for_pull {
            self.in_flight
                .0
                .awaiting_pull
                .fetch_sub(1, Ordering::Relaxed);
        }
    }
}
