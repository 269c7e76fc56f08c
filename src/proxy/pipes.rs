//! The relay loop: newline-delimited JSON-RPC read from each side ([`crate::ops::lines`]) is handed to
//! the session's MCP rules ([`crate::mcp::Boundary`]), and what they send is written to the other
//! side (or back) through [`Pipes`], the stdio [`Link`].

use crate::mcp::{Boundary, Direction, Link, Outgoing};
use crate::ops::lines::{Line, Lines};
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, BufWriter};
use tokio::sync::Mutex;

/// A byte stream the proxy writes messages to: each flushed as it is written, except messages
/// relayed as received while more input is already waiting, which go out with the next flush.
pub(super) type Writer = Box<dyn AsyncWrite + Send + Unpin>;

pub(super) struct Out {
    writer: Mutex<Option<BufWriter<Writer>>>,
    /// The relay forwarding into this stream has more input already read (set per line).
    more_waiting: AtomicBool,
}

impl Out {
    pub(super) fn new(writer: Writer) -> Self {
        Self {
            writer: Mutex::new(Some(BufWriter::with_capacity(64 * 1024, writer))),
            more_waiting: AtomicBool::new(false),
        }
    }

    /// Writes one message (and a newline, if it has none), then flushes.
    async fn send(&self, message: &[u8]) -> io::Result<()> {
        self.write(message, true).await
    }

    /// Writes one message relayed as received, flushed unless more input is already waiting
    /// (then the relay flushes once it has none): under load, many messages go out in one write.
    async fn relay(&self, message: &[u8]) -> io::Result<()> {
        self.write(message, !self.more_waiting.load(Ordering::Relaxed))
            .await
    }

    async fn write(&self, message: &[u8], flush: bool) -> io::Result<()> {
        let mut guard = self.writer.lock().await;
        let writer = guard
            .as_mut()
            .ok_or_else(|| io::Error::new(io::ErrorKind::BrokenPipe, "closed"))?;
        writer.write_all(message).await?;
        if message.last() != Some(&b'\n') {
            writer.write_all(b"\n").await?;
        }
        if flush {
            writer.flush().await?;
        }
        Ok(())
    }

    /// Flushes what [`relay`](Self::relay) left buffered.
    async fn flush(&self) -> io::Result<()> {
        match self.writer.lock().await.as_mut() {
            Some(writer) if !writer.buffer().is_empty() => writer.flush().await,
            _ => Ok(()),
        }
    }

    /// Flushes and closes the stream (the server sees the end of its stdin).
    pub(super) async fn close(&self) {
        if let Some(mut writer) = self.writer.lock().await.take() {
            let _ = writer.shutdown().await;
        }
    }
}

/// The two streams of a stdio session: the client's stdout and the server's stdin.
pub(super) struct Pipes {
    pub(super) to_client: Out,
    pub(super) to_server: Out,
}

impl Pipes {
    /// Where messages sent in `direction` are written.
    fn out(&self, direction: Direction) -> &Out {
        match direction {
            Direction::ToServer => &self.to_server,
            Direction::ToClient => &self.to_client,
        }
    }
}

impl Link for Pipes {
    async fn send(&self, direction: Direction, message: Outgoing<'_>) -> io::Result<()> {
        let out = self.out(direction);
        match message {
            Outgoing::Forward(bytes) => out.relay(bytes).await,
            Outgoing::Own(bytes) => out.send(bytes).await,
        }
    }
}

/// Relays every line read from `input` in `direction` through `boundary`, until its end.
pub(super) async fn relay_lines(
    boundary: &Boundary,
    pipes: &Pipes,
    direction: Direction,
    input: impl AsyncRead + Unpin,
) -> io::Result<()> {
    let mut lines = Lines::new(input, boundary.config().max_message_bytes);
    let out = pipes.out(direction);
    while let Some(line) = lines.next().await? {
        let more = lines.has_line();
        out.more_waiting.store(more, Ordering::Relaxed);
        match line {
            Line::Message(bytes) => boundary.relay(pipes, direction, &bytes).await?,
            Line::Oversized { head, len } => {
                boundary.oversized(pipes, direction, &head, len).await?
            }
        }
        if !more {
            out.flush().await?;
        }
    }
    out.more_waiting.store(false, Ordering::Relaxed);
    out.flush().await
}
