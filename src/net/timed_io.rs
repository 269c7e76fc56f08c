//! A TCP stream with a write timeout: the part of the connection limits that sits under hyper.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::time::Sleep;

/// A TCP stream whose writes fail once the socket has taken nothing for the write timeout (the
/// client stopped reading), so hyper closes the connection and frees what it was sending.
pub struct TimedIo {
    tcp: TcpStream,
    timeout: Duration,
    stalled: Option<Pin<Box<Sleep>>>,
    /// Set when a write timed out.
    timed_out: Arc<AtomicBool>,
}

impl TimedIo {
    pub fn new(tcp: TcpStream, timeout: Duration, timed_out: Arc<AtomicBool>) -> Self {
        Self {
            tcp,
            timeout,
            stalled: None,
            timed_out,
        }
    }

    /// After a write that could not proceed: an error once it has not for the timeout.
    fn pending_write<T>(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<T>> {
        let timeout = self.timeout;
        let stalled = self
            .stalled
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
        match stalled.as_mut().poll(cx) {
            Poll::Ready(()) => {
                self.timed_out.store(true, Ordering::Relaxed);
                Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "the client did not read its answer within the write timeout",
                )))
            }
            Poll::Pending => Poll::Pending,
        }
    }

    fn wrote<T>(&mut self, result: io::Result<T>) -> Poll<io::Result<T>> {
        self.stalled = None;
        Poll::Ready(result)
    }
}

impl AsyncRead for TimedIo {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.tcp).poll_read(cx, buf)
    }
}

impl AsyncWrite for TimedIo {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match Pin::new(&mut self.tcp).poll_write(cx, buf) {
            Poll::Ready(result) => self.wrote(result),
            Poll::Pending => self.pending_write(cx),
        }
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match Pin::new(&mut self.tcp).poll_write_vectored(cx, bufs) {
            Poll::Ready(result) => self.wrote(result),
            Poll::Pending => self.pending_write(cx),
        }
    }

    fn is_write_vectored(&self) -> bool {
        self.tcp.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.tcp).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.tcp).poll_shutdown(cx)
    }
}
