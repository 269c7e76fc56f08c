//! The stdio transport's framing: one JSON-RPC message per line. Lines are read into one buffer
//! and handed out as slices of it, so a forwarded message is the bytes received; a line past the
//! limit is skipped as it arrives (only its head is kept, to find its `id`), never buffered whole.

use bytes::{Bytes, BytesMut};
use std::io;
use tokio::io::{AsyncRead, AsyncReadExt};

/// Bytes of an oversized line kept to find its `id` and `method`.
const HEAD_BYTES: usize = 4096;
/// How much the buffer grows by when it needs room.
const READ_CHUNK: usize = 64 * 1024;

/// One line read.
#[derive(Debug, PartialEq)]
pub enum Line {
    /// A line up to the limit, with its newline (none on a last line that has none).
    Message(Bytes),
    /// A line past the limit, skipped: its first bytes and its length (newline excluded).
    Oversized { head: Bytes, len: usize },
}

/// Reads lines of at most `max` bytes (newline excluded) from `inner`.
pub struct Lines<R> {
    inner: R,
    buf: BytesMut,
    max: usize,
    /// Bytes at the start of `buf` already searched for a newline.
    scanned: usize,
}

impl<R: AsyncRead + Unpin> Lines<R> {
    pub fn new(inner: R, max: usize) -> Self {
        Self {
            inner,
            buf: BytesMut::with_capacity(READ_CHUNK),
            max,
            scanned: 0,
        }
    }

    /// Whether a whole line is already read, so [`next`](Self::next) answers without waiting
    /// for input.
    pub fn has_line(&self) -> bool {
        memchr::memchr(b'\n', &self.buf).is_some()
    }

    /// The next line; `None` at the end of the input.
    pub async fn next(&mut self) -> io::Result<Option<Line>> {
        loop {
            if let Some(i) = memchr::memchr(b'\n', &self.buf[self.scanned..]) {
                let end = self.scanned + i;
                self.scanned = 0;
                if end > self.max {
                    let head = self.buf.split_to(end + 1);
                    return Ok(Some(oversized(&head, end)));
                }
                return Ok(Some(Line::Message(self.buf.split_to(end + 1).freeze())));
            }
            self.scanned = self.buf.len();
            if self.buf.len() > self.max {
                return self.skip_rest().await.map(Some);
            }
            if self.fill().await? == 0 {
                if self.buf.is_empty() {
                    return Ok(None);
                }
                self.scanned = 0;
                let len = self.buf.len();
                let rest = self.buf.split();
                return Ok(Some(if len > self.max {
                    oversized(&rest, len)
                } else {
                    Line::Message(rest.freeze())
                }));
            }
        }
    }

    /// Reads more input; 0 at its end.
    async fn fill(&mut self) -> io::Result<usize> {
        if self.buf.capacity() - self.buf.len() < READ_CHUNK / 4 {
            self.buf.reserve(READ_CHUNK);
        }
        self.inner.read_buf(&mut self.buf).await
    }

    /// Discards the rest of a line already past the limit, up to its newline (or the end).
    async fn skip_rest(&mut self) -> io::Result<Line> {
        let head = Bytes::copy_from_slice(&self.buf[..HEAD_BYTES.min(self.buf.len())]);
        let mut len = self.buf.len();
        self.buf.clear();
        self.scanned = 0;
        loop {
            if self.fill().await? == 0 {
                return Ok(Line::Oversized { head, len });
            }
            if let Some(i) = memchr::memchr(b'\n', &self.buf) {
                len += i;
                let _ = self.buf.split_to(i + 1);
                return Ok(Line::Oversized { head, len });
            }
            len += self.buf.len();
            self.buf.clear();
        }
    }
}

fn oversized(line: &[u8], len: usize) -> Line {
    Line::Oversized {
        head: Bytes::copy_from_slice(&line[..HEAD_BYTES.min(line.len())]),
        len,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn read_all(input: &[u8], max: usize) -> Vec<Line> {
        let mut lines = Lines::new(input, max);
        let mut out = Vec::new();
        while let Some(line) = lines.next().await.expect("reading from memory") {
            out.push(line);
        }
        out
    }

    #[tokio::test]
    async fn lines_keep_their_bytes_and_a_last_line_without_newline() {
        let lines = read_all(b"{\"a\":1}\r\n\n{\"b\":2}", 100).await;
        assert_eq!(
            lines,
            vec![
                Line::Message(Bytes::from_static(b"{\"a\":1}\r\n")),
                Line::Message(Bytes::from_static(b"\n")),
                Line::Message(Bytes::from_static(b"{\"b\":2}")),
            ]
        );
    }

    #[tokio::test]
    async fn a_line_past_the_limit_is_skipped_and_the_next_one_read() {
        let long = format!("{{\"id\":7,\"x\":\"{}\"}}\n", "y".repeat(300_000));
        let input = format!("{long}{{\"ok\":true}}\n");
        let lines = read_all(input.as_bytes(), 1000).await;
        assert_eq!(lines.len(), 2);
        match &lines[0] {
            Line::Oversized { head, len } => {
                assert_eq!(*len, long.len() - 1);
                assert!(head.starts_with(b"{\"id\":7"));
                assert!(head.len() <= HEAD_BYTES);
            }
            other => panic!("expected an oversized line, got {other:?}"),
        }
        assert_eq!(
            lines[1],
            Line::Message(Bytes::from_static(b"{\"ok\":true}\n"))
        );
    }

    #[tokio::test]
    async fn a_line_of_exactly_the_limit_is_a_message() {
        let lines = read_all(b"12345\n123456\n", 5).await;
        assert_eq!(lines[0], Line::Message(Bytes::from_static(b"12345\n")));
        assert!(matches!(lines[1], Line::Oversized { len: 6, .. }));
    }
}
