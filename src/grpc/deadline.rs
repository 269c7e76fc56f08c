//! Time limits on a gRPC call: the client's own deadline (`grpc-timeout`) and the body-read
//! timeout for calls that send one message.
//!
//! When the deadline passes, the call answers DEADLINE_EXCEEDED and its handler is dropped, which
//! stops its work on the workers (the gate counts what never started as cancelled). A unary call
//! whose request message has not fully arrived within the body-read timeout gets
//! DEADLINE_EXCEEDED with the `body_timeout` code; streaming calls are exempt from that one (their
//! request body is the stream).

use super::status;
use crate::error::CheckError;
use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::time::Sleep;
use tonic::Status;

/// Calls whose request body is a stream of messages.
const STREAMING: [&str; 4] = [
    "/schemagate.v1.Validator/ValidateStream",
    "/grpc.health.v1.Health/Watch",
    "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
    "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
];

/// The longest `grpc-timeout` honoured (the header allows eight digits of hours).
const MAX_DEADLINE: Duration = Duration::from_secs(24 * 3600);

/// Applies the time limits to every call of `inner`.
#[derive(Clone)]
pub struct Deadlines<S> {
    pub inner: S,
    pub body_read_timeout: Duration,
}

impl<S, B, RB> tower::Service<http::Request<B>> for Deadlines<S>
where
    S: tower::Service<
            http::Request<TimedBody<B>>,
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

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let deadline = request
            .headers()
            .get("grpc-timeout")
            .and_then(|v| v.to_str().ok())
            .and_then(parse_timeout);
        let streaming = STREAMING.contains(&request.uri().path());
        let body_timeout = (!streaming).then_some(self.body_read_timeout);
        let request = request.map(|body| TimedBody::new(body, body_timeout));
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

/// A request body that fails with DEADLINE_EXCEEDED (`body_timeout`) when it has not ended within
/// its time limit.
pub struct TimedBody<B> {
    inner: Pin<Box<B>>,
    timeout: Option<(Duration, Pin<Box<Sleep>>)>,
}

impl<B> TimedBody<B> {
    fn new(inner: B, timeout: Option<Duration>) -> Self {
        Self {
            inner: Box::pin(inner),
            timeout: timeout.map(|t| (t, Box::pin(tokio::time::sleep(t)))),
        }
    }
}

impl<B> Body for TimedBody<B>
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
        if let Poll::Ready(frame) = this.inner.as_mut().poll_frame(cx) {
            return Poll::Ready(frame.map(|f| f.map_err(|_| body_error())));
        }
        if let Some((limit, sleep)) = &mut this.timeout {
            if sleep.as_mut().poll(cx).is_ready() {
                let e = CheckError::BodyTimeout {
                    secs: limit.as_secs(),
                };
                return Poll::Ready(Some(Err(Box::new(status(&e)))));
            }
        }
        Poll::Pending
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
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
}
