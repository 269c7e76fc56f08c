//! Limits on a gRPC call: who may make it (the bearer token in `authorization` metadata, checked
//! before the request is read), the client's own deadline (`grpc-timeout`), the body-read timeout, and
//! the receiving budget.
//!
//! When the deadline passes, the call answers DEADLINE_EXCEEDED and its handler is dropped, which
//! stops its work on the workers (the gate counts what never started as cancelled). A unary call
//! whose request message has not fully arrived within the body-read timeout gets
//! DEADLINE_EXCEEDED with the `body_timeout` code; on a streaming call the same holds for each
//! message, from its first byte to its last (a stream may wait as long as it likes between
//! messages). The bytes of a message still arriving are held against the receiving budget
//! ([`crate::core::receiving`]) and given back when the message is complete; a message that would take
//! the budget past its limit ends the call with RESOURCE_EXHAUSTED (`overloaded`).

use super::status;
use crate::core::auth::{PeerNames, Scope};
use crate::core::error::CheckError;
use crate::core::gate::Gate;
use crate::core::metrics::Transport;
use crate::core::receiving::Held;
use bytes::{Buf, Bytes};
use http_body::{Body, Frame, SizeHint};
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::time::{Instant, Sleep};
use tonic::Status;

/// Calls whose request body is a stream of messages.
const STREAMING: [&str; 4] = [
    "/schemagate.v1.Validator/ValidateStream",
    "/grpc.health.v1.Health/Watch",
    "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
    "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
];

/// The scope a call needs: the Validator's methods need one; health and reflection are open.
fn scope_of(path: &str) -> Option<Scope> {
    match path.strip_prefix("/schemagate.v1.Validator/")? {
        "RegisterTools" | "ListServers" | "ListTools" | "RemoveTools" | "ToolHistory"
        | "PromoteShadow" => Some(Scope::Register),
        "AcceptContract" => Some(Scope::Admin),
        _ => Some(Scope::Check),
    }
}

/// The longest `grpc-timeout` honoured (the header allows eight digits of hours).
const MAX_DEADLINE: Duration = Duration::from_secs(24 * 3600);

/// Applies the limits to every call of `inner`.
#[derive(Clone)]
pub struct CallLimits<S> {
    pub inner: S,
    pub gate: Arc<Gate>,
}

impl<S, B, RB> tower::Service<http::Request<B>> for CallLimits<S>
where
    S: tower::Service<
            http::Request<RequestBody<B>>,
            Response = http::Response<RB>,
            Error = Infallible,
        > + Send
        + 'static,
    S::Future: Send + 'static,
    B: Body<Data = Bytes> + Send + 'static,
    RB: Default + Send + 'static,
{
    type Response = http::Response<RB>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: http::Request<B>) -> Self::Future {
        if let Some(scope) = scope_of(request.uri().path()) {
            let authorization = request
                .headers()
                .get(http::header::AUTHORIZATION)
                .map(|v| v.as_bytes());
            let peer = request.extensions().get::<PeerNames>();
            match self.gate.auth().authenticate(authorization, peer, scope) {
                Ok(caller) => {
                    request.extensions_mut().insert(caller);
                }
                Err(e) => {
                    self.gate.instrument().refused(Transport::Grpc, &e);
                    return Box::pin(std::future::ready(Ok(status(&e).into_http())));
                }
            }
        }
        let deadline = request
            .headers()
            .get("grpc-timeout")
            .and_then(|v| v.to_str().ok())
            .and_then(parse_timeout);
        let streaming = STREAMING.contains(&request.uri().path());
        let gate = Arc::clone(&self.gate);
        let request = request.map(|body| RequestBody::new(body, gate, streaming));
        let call = self.inner.call(request);
        Box::pin(async move {
            let Some(deadline) = deadline else {
                return call.await;
            };
            match tokio::time::timeout(deadline, call).await {
                Ok(response) => response,
                Err(_) => Ok(Status::deadline_exceeded(format!(
                    "the call's deadline (grpc-timeout, {} ms) passed before it was answered; its work was stopped",
                    deadline.as_millis()
                ))
                .into_http()),
            }
        })
    }
}

/// `grpc-timeout`: at most eight digits and a unit (H, M, S, m, u, n).
fn parse_timeout(value: &str) -> Option<Duration> {
    if value.len() < 2 || value.len() > 9 {
        return None;
    }
    let (digits, unit) = value.split_at(value.len() - 1);
    let n: u64 = digits.parse().ok()?;
    let d = match unit {
        "H" => Duration::from_secs(n.saturating_mul(3600)),
        "M" => Duration::from_secs(n.saturating_mul(60)),
        "S" => Duration::from_secs(n),
        "m" => Duration::from_millis(n),
        "u" => Duration::from_micros(n),
        "n" => Duration::from_nanos(n),
        _ => return None,
    };
    Some(d.min(MAX_DEADLINE))
}

/// A call's request body under the body-read timeout and the receiving budget.
pub struct RequestBody<B> {
    inner: Pin<Box<B>>,
    gate: Arc<Gate>,
    held: Held,
    framing: Frames,
    /// Whether each message (rather than the whole body) has the body-read timeout.
    streaming: bool,
    /// When the body (or, on a stream, the message arriving) must be complete.
    timer: Option<Pin<Box<Sleep>>>,
    failed: bool,
}

impl<B> RequestBody<B> {
    fn new(inner: B, gate: Arc<Gate>, streaming: bool) -> Self {
        let held = gate.hold_receiving();
        let timer =
            (!streaming).then(|| Box::pin(tokio::time::sleep(gate.limits().body_read_timeout)));
        Self {
            inner: Box::pin(inner),
            gate,
            held,
            framing: Frames::default(),
            streaming,
            timer,
            failed: false,
        }
    }

    /// Ends the call with `e`, counted as refused.
    fn fail(&mut self, e: &CheckError) -> Box<dyn std::error::Error + Send + Sync> {
        self.failed = true;
        self.gate.instrument().refused(Transport::Grpc, e);
        Box::new(status(e))
    }

    /// Holds the bytes of the message now arriving; on a stream, starts its timer when a message
    /// begins and stops it when the message is complete.
    fn arrived(&mut self, data: &Bytes) -> Result<(), CheckError> {
        let was_partial = self.framing.partial > 0;
        let partial = self.framing.pass(data.chunk());
        self.held.set(partial)?;
        if self.streaming {
            match (was_partial, partial > 0) {
                (false, true) => {
                    let at = Instant::now() + self.gate.limits().body_read_timeout;
                    self.timer = Some(Box::pin(tokio::time::sleep_until(at)));
                }
                (true, false) => self.timer = None,
                _ => {}
            }
        }
        Ok(())
    }
}

impl<B> Body for RequestBody<B>
where
    B: Body<Data = Bytes>,
{
    type Data = Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = &mut *self;
        if this.failed {
            return Poll::Ready(None);
        }
        match this.inner.as_mut().poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    if let Err(e) = this.arrived(data) {
                        return Poll::Ready(Some(Err(this.fail(&e))));
                    }
                }
                return Poll::Ready(Some(Ok(frame)));
            }
            Poll::Ready(Some(Err(_))) => return Poll::Ready(Some(Err(body_error()))),
            Poll::Ready(None) => {
                this.timer = None;
                return Poll::Ready(None);
            }
            Poll::Pending => {}
        }
        if let Some(timer) = &mut this.timer {
            if timer.as_mut().poll(cx).is_ready() {
                let e = CheckError::BodyTimeout {
                    secs: this.gate.limits().body_read_timeout.as_secs(),
                };
                return Poll::Ready(Some(Err(this.fail(&e))));
            }
        }
        Poll::Pending
    }

    fn is_end_stream(&self) -> bool {
        self.failed || self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

fn body_error() -> Box<dyn std::error::Error + Send + Sync> {
    Box::new(Status::cancelled(
        "the request stream broke before its message arrived",
    ))
}

/// Where a body of gRPC messages (each a compression flag, a four-byte length, and that many
/// bytes) stands: how much of the message now arriving has been seen.
#[derive(Debug, Default)]
struct Frames {
    /// Prefix bytes of the current message seen (0 to 5).
    prefix: usize,
    /// Its length, once the prefix is complete.
    length: [u8; 4],
    /// Message bytes still to come, once the prefix is complete.
    left: usize,
    /// Bytes of the current message seen (prefix included); 0 between messages.
    partial: usize,
}

impl Frames {
    /// Follows `data` through the messages; the bytes of an unfinished message after it.
    fn pass(&mut self, mut data: &[u8]) -> usize {
        while !data.is_empty() {
            if self.prefix < 5 {
                let take = (5 - self.prefix).min(data.len());
                for &b in &data[..take] {
                    if self.prefix > 0 {
                        self.length[self.prefix - 1] = b;
                    }
                    self.prefix += 1;
                }
                self.partial += take;
                data = &data[take..];
                if self.prefix < 5 {
                    break;
                }
                self.left = u32::from_be_bytes(self.length) as usize;
            } else {
                let take = self.left.min(data.len());
                self.left -= take;
                self.partial += take;
                data = &data[take..];
            }
            if self.prefix == 5 && self.left == 0 {
                *self = Frames::default();
            }
        }
        self.partial
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grpc_timeout_is_read_in_each_unit() {
        assert_eq!(parse_timeout("100m"), Some(Duration::from_millis(100)));
        assert_eq!(parse_timeout("2S"), Some(Duration::from_secs(2)));
        assert_eq!(parse_timeout("1H"), Some(Duration::from_secs(3600)));
        assert_eq!(parse_timeout("99999999H"), Some(MAX_DEADLINE));
        assert_eq!(parse_timeout("5"), None);
        assert_eq!(parse_timeout("5x"), None);
        assert_eq!(parse_timeout("123456789S"), None, "nine digits");
    }

    fn message(len: u32) -> Vec<u8> {
        let mut m = vec![0u8];
        m.extend_from_slice(&len.to_be_bytes());
        m.resize(5 + len as usize, 7);
        m
    }

    #[test]
    fn framing_follows_messages_split_anywhere() {
        let mut body = message(3);
        body.extend(message(0));
        body.extend(message(10));
        // Whole messages leave nothing partial.
        assert_eq!(Frames::default().pass(&body), 0);
        // Cut at every point: what is left partial is what was seen of the message cut.
        for cut in 0..=body.len() {
            let mut f = Frames::default();
            let partial = f.pass(&body[..cut]);
            // Messages end at 8, 13 and 28 bytes.
            let expected = match cut {
                0..=7 => cut,
                8..=12 => cut - 8,
                13..=27 => cut - 13,
                _ => 0,
            };
            assert_eq!(partial, expected, "cut at {cut}");
            assert_eq!(f.pass(&body[cut..]), 0, "cut at {cut}, rest");
        }
    }
}
