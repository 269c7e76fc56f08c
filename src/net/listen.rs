//! How sockets are accepted and served, the same way on both ports: hyper directly, under limits
//! that hold against slow, silent or greedy clients.
//!
//! - **Open connections** are capped ([`ConnectionLimits::max_connections`], shared by both
//!   ports, derived from the open-file limit). A connection past the cap is closed as soon as it is
//!   accepted, counted and logged, so new clients get a prompt refusal rather than a timeout, and
//!   the process never runs out of file descriptors.
//! - **Headers** must arrive within the header-read timeout (HTTP/1; hyper closes the connection).
//! - **Idle connections** (no request in flight for the idle timeout) are closed gracefully (an
//!   HTTP/2 GOAWAY, or the end of an HTTP/1 keep-alive).
//! - **Answers the client does not read** are dropped at the write timeout: a write the socket has
//!   not taken for that long, or an answer HTTP/2 flow control has kept from being sent for that
//!   long, closes the connection and frees the answer. Answers are handed to hyper in
//!   [`ANSWER_CHUNK`] pieces, so that a stalled answer is seen as one.
//! - **HTTP/2** advertises `MAX_CONCURRENT_STREAMS`, uses bounded stream and connection windows,
//!   and pings idle peers to find dead ones.
//!
//! This module knows hyper, not axum or tonic: both adapters hand it a tower service.

use crate::core::auth::PeerNames;
use crate::core::metrics::{ConnectionMetrics, Metrics, Transport};
use crate::net::timed_io::TimedIo;
use crate::net::tls::{self, Tls};
use crate::net::Protocols;
use bytes::Bytes;
use http_body::Body;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use std::convert::Infallible;
use std::io;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower::ServiceExt;

pub use super::watchdog::ANSWER_CHUNK;
use super::watchdog::{Answer, Condition, ConnectionState};
/// File descriptors kept back from `--max-connections` for everything else (the policy file,
/// listeners, logs).
const RESERVED_FDS: u64 = 64;

/// What a port serves: a tower service answering hyper's requests (both adapters hand one over).
pub trait PortService<B>:
    tower::Service<
        http::Request<Incoming>,
        Response = http::Response<B>,
        Error = Infallible,
        Future: Send + 'static,
    > + Clone
    + Send
    + 'static
{
}

impl<S, B> PortService<B> for S where
    S: tower::Service<
            http::Request<Incoming>,
            Response = http::Response<B>,
            Error = Infallible,
            Future: Send + 'static,
        > + Clone
        + Send
        + 'static
{
}

/// The body of an answer a port sends.
pub trait AnswerBody:
    Body<Data = Bytes, Error: Into<Box<dyn std::error::Error + Send + Sync>>> + Send + 'static
{
}

impl<B> AnswerBody for B where
    B: Body<Data = Bytes, Error: Into<Box<dyn std::error::Error + Send + Sync>>> + Send + 'static
{
}

/// The limits every connection is served under.
#[derive(Debug, Clone)]
pub struct ConnectionLimits {
    /// Most open connections over both ports.
    pub max_connections: usize,
    pub header_read_timeout: Duration,
    pub idle_timeout: Duration,
    pub write_timeout: Duration,
    pub http2: Http2Limits,
}

/// HTTP/2 settings (h2c on the REST port, and gRPC).
#[derive(Debug, Clone, Copy)]
pub struct Http2Limits {
    pub max_concurrent_streams: u32,
    pub stream_window: u32,
    pub connection_window: u32,
    pub keepalive_interval: Duration,
    pub keepalive_timeout: Duration,
}

/// Raises the open-file soft limit to the hard limit and says how many connections fit in it.
pub fn connections_from_fd_limit() -> usize {
    let soft = match rlimit::increase_nofile_limit(u64::MAX) {
        Ok(soft) => soft,
        Err(e) => {
            tracing::warn!(error = %e, "cannot read or raise the open-file limit; assuming 1024");
            1024
        }
    };
    usize::try_from(soft.saturating_sub(RESERVED_FDS).max(16)).unwrap_or(usize::MAX)
}

/// Everything both ports are served under: the limits, the shared cap, and where connections are
/// counted.
#[derive(Clone)]
pub struct Connections {
    limits: Arc<ConnectionLimits>,
    /// One permit per open connection, shared by both ports.
    cap: Arc<Semaphore>,
    metrics: Arc<Metrics>,
}

impl Connections {
    pub fn new(limits: ConnectionLimits, metrics: Arc<Metrics>) -> Self {
        Self {
            cap: Arc::new(Semaphore::new(
                limits.max_connections.min(Semaphore::MAX_PERMITS),
            )),
            limits: Arc::new(limits),
            metrics,
        }
    }

    /// Serves `service` on `listener` until `shutdown`; then stops accepting, lets every
    /// connection finish its requests in flight (HTTP/2 GOAWAY, HTTP/1 close after the answer),
    /// and returns once all have closed.
    pub async fn serve<S, B>(
        &self,
        listener: TcpListener,
        service: S,
        protocols: Protocols,
        transport: Transport,
        tls: Option<Arc<Tls>>,
        shutdown: CancellationToken,
    ) -> io::Result<()>
    where
        S: PortService<B>,
        B: AnswerBody,
    {
        let Connections {
            limits,
            cap,
            metrics,
        } = self;
        let builder = Arc::new(builder(protocols, limits));
        let connections = TaskTracker::new();
        let mut refusals = crate::ops::tally::Tally::default();
        loop {
            let accepted = tokio::select! {
                () = shutdown.cancelled() => break,
                accepted = listener.accept() => accepted,
            };
            let (tcp, peer) = match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of descriptors or memory: back off rather than spin.
                    tracing::error!(error = %e, transport = transport.as_str(), "cannot accept a connection");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            let Ok(permit) = Arc::clone(cap).try_acquire_owned() else {
                // At the cap: close at once, so the client learns now rather than at its timeout.
                drop(tcp);
                connection_metrics(metrics, transport).refused.increment(1);
                if let Some(refused) = refusals.count() {
                    tracing::warn!(
                        transport = transport.as_str(),
                        max_connections = limits.max_connections,
                        refused,
                        "connection limit reached (--max-connections): refusing new connections"
                    );
                }
                continue;
            };
            if let Err(e) = tcp.set_nodelay(true) {
                tracing::debug!(error = %e, "cannot set TCP_NODELAY");
            }
            let port = Port {
                builder: Arc::clone(&builder),
                limits: Arc::clone(limits),
                metrics: Arc::clone(metrics),
                transport,
                shutdown: shutdown.clone(),
            };
            let acceptor = tls.as_ref().map(|tls| tls.acceptor(protocols));
            let service = service.clone();
            // Quietly: an HTTP/1 connection's requests are answered by futures of its task
            // that hand each other their parts (hyper's dispatcher and the handler), waking the
            // task while it is polled. (HTTP/2 streams run in tasks of their own.)
            connections.spawn(crate::ops::quiet::quietly(async move {
                let _permit = permit;
                port.serve_connection(tcp, peer, acceptor, service).await;
            }));
        }
        connections.close();
        connections.wait().await;
        Ok(())
    }
}

/// What every connection of one port is served with.
struct Port {
    builder: Arc<auto::Builder<TokioExecutor>>,
    limits: Arc<ConnectionLimits>,
    metrics: Arc<Metrics>,
    transport: Transport,
    shutdown: CancellationToken,
}

impl Port {
    /// Serves one accepted connection: its first bytes awaited within the header-read timeout,
    /// then its TLS handshake (with `acceptor`) and its requests under the watchdog.
    async fn serve_connection<S, B>(
        self,
        tcp: tokio::net::TcpStream,
        peer: std::net::SocketAddr,
        acceptor: Option<Arc<tokio_rustls::TlsAcceptor>>,
        service: S,
    ) where
        S: PortService<B>,
        B: AnswerBody,
    {
        let Port {
            builder,
            limits,
            metrics,
            transport,
            shutdown,
        } = self;
        let m = connection_metrics(&metrics, transport);
        m.open.increment(1.0);
        // A client that sends nothing is closed at the header-read timeout: the protocol
        // detection below waits for its first bytes with no timer of its own.
        let spoke = tokio::select! {
            spoke = spoke_within(&tcp, limits.header_read_timeout) => spoke,
            () = shutdown.cancelled() => false,
        };
        if !spoke {
            m.closed_idle.increment(1);
            m.open.decrement(1.0);
            tracing::debug!(%peer, transport = transport.as_str(), "closed a connection that did not say which protocol it speaks within the header-read timeout");
            return;
        }
        let state = Arc::new(ConnectionState::new());
        let io = TimedIo::new(
            tcp,
            limits.write_timeout,
            Arc::clone(&state.write_timed_out),
        );
        let c = Conn {
            builder: &builder,
            limits: &limits,
            metrics: &metrics,
            transport,
            shutdown: &shutdown,
            state,
        };
        match acceptor {
            None => c.serve(io, service, None).await,
            Some(acceptor) => match tls::handshake(&acceptor, io, limits.header_read_timeout).await
            {
                Ok((stream, names)) => c.serve(stream, service, names).await,
                Err(e) => {
                    tracing::debug!(%peer, error = %e, transport = transport.as_str(), "TLS handshake failed")
                }
            },
        }
        m.open.decrement(1.0);
        tracing::trace!(%peer, "connection closed");
    }
}

/// The bytes an HTTP/2 connection with prior knowledge begins with.
const HTTP2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Whether the client on `tcp` says, within `timeout`, which protocol it speaks: bytes that are
/// no beginning of the HTTP/2 preface (HTTP/1, or a TLS hello), or the whole preface. Until
/// then hyper's protocol detection would wait with no timer of its own. Nothing is consumed.
async fn spoke_within(tcp: &tokio::net::TcpStream, timeout: Duration) -> bool {
    let deadline = tokio::time::Instant::now() + timeout;
    let mut seen = [0u8; HTTP2_PREFACE.len()];
    loop {
        let n = match tokio::time::timeout_at(deadline, tcp.peek(&mut seen)).await {
            Ok(Ok(n)) if n > 0 => n,
            _ => return false,
        };
        if n == seen.len() || !HTTP2_PREFACE.starts_with(&seen[..n]) {
            return true;
        }
        // Part of the preface: the rest is awaited (peek returns at once while data waits).
        if tokio::time::timeout_at(deadline, tokio::time::sleep(Duration::from_millis(10)))
            .await
            .is_err()
        {
            return false;
        }
    }
}

fn connection_metrics(metrics: &Metrics, transport: Transport) -> &ConnectionMetrics {
    &metrics.connections[transport.index()]
}

fn builder(protocols: Protocols, limits: &ConnectionLimits) -> auto::Builder<TokioExecutor> {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .keep_alive(true);
    let h2 = limits.http2;
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_concurrent_streams(h2.max_concurrent_streams)
        .initial_stream_window_size(h2.stream_window)
        .initial_connection_window_size(h2.connection_window)
        .keep_alive_interval(h2.keepalive_interval)
        .keep_alive_timeout(h2.keepalive_timeout);
    match protocols {
        Protocols::Http1AndHttp2 => builder,
        Protocols::Http2 => builder.http2_only(),
    }
}

/// What serving one connection needs.
struct Conn<'a> {
    builder: &'a auto::Builder<TokioExecutor>,
    limits: &'a ConnectionLimits,
    metrics: &'a Metrics,
    transport: Transport,
    shutdown: &'a CancellationToken,
    state: Arc<ConnectionState>,
}

impl Conn<'_> {
    /// Serves one connection (plain or TLS) under its watchdog; every request carries the
    /// client certificate's names, when there are some.
    async fn serve<I, S, B>(self, io: I, service: S, peer: Option<PeerNames>)
    where
        I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
        S: PortService<B>,
        B: AnswerBody,
    {
        let Conn {
            builder,
            limits,
            metrics,
            transport,
            shutdown,
            state,
        } = self;
        let io = TokioIo::new(io);
        let requests = Arc::clone(&state);
        let hyper_service =
            hyper::service::service_fn(move |mut request: http::Request<Incoming>| {
                if let Some(peer) = &peer {
                    request.extensions_mut().insert(peer.clone());
                }
                let in_flight = requests.begin();
                let answer = service.clone().oneshot(request);
                async move {
                    let response = answer.await?;
                    Ok::<_, Infallible>(response.map(|body| Answer::new(body, in_flight)))
                }
            });
        let connection = builder.serve_connection(io, hyper_service);
        tokio::pin!(connection);
        let tick = (limits.idle_timeout.min(limits.write_timeout) / 4)
            .clamp(Duration::from_millis(50), Duration::from_secs(1));
        let mut watchdog = tokio::time::interval(tick);
        watchdog.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut closing = false;
        let m = connection_metrics(metrics, transport);
        loop {
            tokio::select! {
                result = connection.as_mut() => {
                    if state.write_timed_out.load(Ordering::Relaxed) {
                        write_timed_out(m, limits, transport);
                    } else if let Err(e) = result {
                        tracing::debug!(error = %e, transport = transport.as_str(), "connection ended with an error");
                    }
                    return;
                }
                () = shutdown.cancelled(), if !closing => {
                    closing = true;
                    connection.as_mut().graceful_shutdown();
                }
                _ = watchdog.tick() => match state.condition(limits.idle_timeout, limits.write_timeout) {
                    Condition::Fine => {}
                    Condition::Idle => {
                        if !closing {
                            closing = true;
                            m.closed_idle.increment(1);
                            connection.as_mut().graceful_shutdown();
                        }
                    }
                    Condition::WriteStalled => {
                        write_timed_out(m, limits, transport);
                        return;
                    }
                },
            }
        }
    }
}

fn write_timed_out(m: &ConnectionMetrics, limits: &ConnectionLimits, transport: Transport) {
    m.closed_write_timeout.increment(1);
    tracing::info!(
        transport = transport.as_str(),
        timeout_secs = limits.write_timeout.as_secs_f64(),
        "closed a connection whose answer was not read within the write timeout"
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::pin::Pin;
    use std::task::{Context, Poll};

    fn limits(idle: u64, write: u64) -> ConnectionLimits {
        ConnectionLimits {
            max_connections: 10,
            header_read_timeout: Duration::from_secs(1),
            idle_timeout: Duration::from_millis(idle),
            write_timeout: Duration::from_millis(write),
            http2: Http2Limits {
                max_concurrent_streams: 4,
                stream_window: 65_535,
                connection_window: 65_535,
                keepalive_interval: Duration::from_secs(1),
                keepalive_timeout: Duration::from_secs(1),
            },
        }
    }

    #[test]
    fn a_connection_with_a_request_in_flight_is_not_idle() {
        let state = Arc::new(ConnectionState::new());
        let limits = limits(0, 1_000);
        let request = state.begin();
        assert_eq!(
            state.condition(limits.idle_timeout, limits.write_timeout),
            Condition::Fine
        );
        drop(request);
        assert_eq!(
            state.condition(limits.idle_timeout, limits.write_timeout),
            Condition::Idle
        );
    }

    #[test]
    fn an_answer_hyper_does_not_pull_is_a_stalled_write() {
        let state = Arc::new(ConnectionState::new());
        let limits = limits(60_000, 0);
        let mut answer = Answer::new(
            http_body_util::Full::new(Bytes::from(vec![0u8; 3 * ANSWER_CHUNK])),
            state.begin(),
        );
        let mut cx = Context::from_waker(std::task::Waker::noop());
        assert_eq!(
            state.condition(limits.idle_timeout, limits.write_timeout),
            Condition::Fine,
            "nothing handed over yet"
        );
        let Poll::Ready(Some(Ok(frame))) = Pin::new(&mut answer).poll_frame(&mut cx) else {
            panic!("a first piece");
        };
        assert_eq!(frame.into_data().map(|d| d.len()).ok(), Some(ANSWER_CHUNK));
        assert_eq!(
            state.condition(limits.idle_timeout, limits.write_timeout),
            Condition::WriteStalled
        );
        drop(answer);
        assert_eq!(
            state.condition(limits.idle_timeout, limits.write_timeout),
            Condition::Fine,
            "the answer is gone"
        );
    }
}
