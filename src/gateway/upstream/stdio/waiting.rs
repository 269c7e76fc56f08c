//! Where a session's server messages go: the streams awaiting them, and those held (bounded)
//! while the client has no stream open.

use super::Requester;
use crate::mcp;
use crate::ops::lines::Line;
use crate::ops::tally::Tally;
use std::collections::VecDeque;
use std::time::Duration;
use tokio::sync::mpsc;

/// Messages a stream holds before the server's stdout waits for the client to read.
pub(super) const STREAM_SLACK: usize = 16;
/// Most messages a session holds for a stream the client has not opened yet, and their bytes.
pub(super) const MAX_QUEUED: usize = 256;
pub(super) const MAX_QUEUED_BYTES: usize = 4 << 20;

/// A request awaiting its answer.
pub(super) struct Awaiting {
    /// Its id's key, as the MCP rules (and clients) match answers to it.
    pub(super) id: mcp::ids::Key,
    /// Whose request: the client's, or the MCP rules' own (a listing).
    pub(super) requester: Requester,
    pub(super) stream: mpsc::Sender<Line>,
}

/// Where the server's next messages go.
#[derive(Default)]
pub(super) struct Waiting {
    /// Requests awaiting their answer, oldest first.
    pub(super) requests: Vec<Awaiting>,
    /// The stream a GET opened, if any.
    pub(super) listener: Option<mpsc::Sender<Line>>,
    /// Messages the server wrote while the client had no stream open (a `roots/list` right
    /// after `initialized`), for the next stream it opens; oldest first, bounded.
    pub(super) queued: VecDeque<Queued>,
    pub(super) queued_bytes: usize,
    /// Held messages dropped past the bounds, between log lines.
    pub(super) dropped: Tally,
    /// The process closed its stdout: nothing more will come.
    pub(super) ended: bool,
}

/// A message waiting for a stream.
pub(super) struct Queued {
    pub(super) line: Line,
    pub(super) at: std::time::Instant,
    /// Its id (JSON text), when it is a request of the server's (which waits for an answer).
    pub(super) request: Option<String>,
}

impl Waiting {
    /// Holds `line` for the next stream; past the bounds, the oldest held goes (logged).
    pub(super) fn queue(&mut self, line: Line, request: Option<String>, route: &str) {
        self.queued_bytes += line_bytes(&line);
        self.queued.push_back(Queued {
            line,
            at: std::time::Instant::now(),
            request,
        });
        while self.queued.len() > MAX_QUEUED || self.queued_bytes > MAX_QUEUED_BYTES {
            let Some(oldest) = self.queued.pop_front() else {
                break;
            };
            self.queued_bytes -= line_bytes(&oldest.line);
            if let Some(dropped) = self.dropped.count() {
                tracing::warn!(
                    route,
                    dropped,
                    "a stdio server's messages waiting for a client stream were dropped (too many held)"
                );
            }
        }
    }

    /// A stream for the client, with what was held for it first.
    pub(super) fn stream(&mut self) -> (mpsc::Sender<Line>, mpsc::Receiver<Line>) {
        let (sender, lines) = mpsc::channel(STREAM_SLACK + self.queued.len());
        for held in self.queued.drain(..) {
            let _ = sender.try_send(held.line);
        }
        self.queued_bytes = 0;
        (sender, lines)
    }

    /// Holds a message no stream took (`head`, its envelope's head) for the next stream: an
    /// answer is dropped instead, its client gone (it is not followed, so it is not relayed).
    pub(super) fn hold(&mut self, line: Line, head: &mcp::MessageHead, route: &str) {
        if head.is_answer(mcp::Direction::ToClient) {
            return;
        }
        let request = head
            .id
            .clone()
            .filter(|_| head.is_request(mcp::Direction::ToClient));
        self.queue(line, request, route);
    }

    /// The ids of the server's requests held longer than `timeout`, taken out of the queue.
    pub(super) fn expired(&mut self, timeout: Duration) -> Vec<String> {
        let mut ids = Vec::new();
        let mut bytes = 0;
        self.queued.retain(|held| match &held.request {
            Some(id) if held.at.elapsed() >= timeout => {
                bytes += line_bytes(&held.line);
                ids.push(id.clone());
                false
            }
            _ => true,
        });
        self.queued_bytes -= bytes;
        ids
    }
}

/// A line's bytes, as the queue's bound counts them.
pub(super) fn line_bytes(line: &Line) -> usize {
    match line {
        Line::Message(bytes) => bytes.len(),
        Line::Oversized { head, .. } => head.len(),
    }
}
