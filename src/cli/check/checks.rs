//! Logs of one check per line (the REST body's shape), judged on every core: `jobs` threads
//! take turns cutting the next chunk of lines from the logs (with plain blocking reads, under a
//! lock), then read and judge its checks as the REST adapter would; the sink writes their
//! verdicts in log order. A thread takes a slot before it cuts a chunk and the sink frees it once
//! the chunk is written, so at most `4 × jobs` chunks are held at once: memory stays bounded
//! whatever the logs' length.

use super::sink::{Batch, Position, Sink, Subject};
use super::tally::Tally;
use super::{thread, InputError, Kept, Recorder, Run, STDIN};
use crate::core::check::Check;
use crate::core::gate::Gate;
use crate::core::metrics::Transport;
use crate::ops::lines::{Line, Lines};
use std::future::Future;
use std::path::PathBuf;
use std::sync::{mpsc, Arc, Mutex};
use std::task::{Context, Poll, Waker};
use tokio::io::AsyncRead;

/// Lines per chunk.
const CHUNK_LINES: usize = 256;
/// Bytes past which a chunk is cut with fewer lines.
const CHUNK_BYTES: u64 = 1 << 20;
/// About the bytes of one verdict line (the reference corpus's average is 360).
const VERDICT_BYTES: usize = 512;
/// The most one blocking read asks for.
const READ_BYTES: usize = 256 << 10;

/// A line as read.
enum Item {
    Text(bytes::Bytes),
    /// Past the line limit: its length.
    Oversized(usize),
}

/// Lines of one log, in order, for one judging thread.
struct Chunk {
    seq: u64,
    file: usize,
    lines: Vec<(u64, Item)>,
    bytes: u64,
}

/// Reads `logs` and judges every line; answers the counts, what the sink kept, and any error
/// writing the verdicts.
pub(super) async fn run(
    run: &Run,
    logs: &[PathBuf],
    mut sink: Sink,
) -> anyhow::Result<(Tally, Kept, Option<std::io::Error>)> {
    let jobs = run.jobs;
    let (done, batches) = mpsc::channel::<Batch>();
    let (slots, freed) = mpsc::sync_channel::<()>(jobs * 4);
    sink.freed = Some(freed);
    let writer = thread("check-sink", move || sink.drain(batches))?;
    let logs = Arc::new(Mutex::new(Logs {
        paths: logs.to_vec(),
        next: 0,
        open: None,
        max: run.max_line_bytes,
        seq: 0,
        unreadable: Vec::new(),
    }));
    let workers = (0..jobs)
        .map(|_| {
            let (logs, done, slots) = (Arc::clone(&logs), done.clone(), slots.clone());
            let (gate, recorder) = (Arc::clone(&run.gate), run.recorder.clone());
            let max_line = run.max_line_bytes;
            thread("check-judge", move || {
                let mut tally = Tally::default();
                // A slot first: wait here while the sink is `4 × jobs` chunks behind.
                while slots.send(()).is_ok() {
                    // A thread that failed while cutting leaves the logs as they were.
                    let chunk = logs
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .cut();
                    let Some(chunk) = chunk else { break };
                    let (seq, file, first) = (chunk.seq, chunk.file, chunk.lines.first());
                    let first = first.map_or(0, |(line, _)| *line);
                    // A chunk whose judging fails still reaches the sink (with an input error
                    // saying so): the lines after it are written, and nothing waits for it.
                    let judged = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        judge_chunk(&gate, &recorder, &mut tally, chunk, max_line)
                    }));
                    let batch = judged.unwrap_or_else(|_| {
                        let mut batch = Batch {
                            seq,
                            ..Batch::default()
                        };
                        let at = Position { file, line: first };
                        let message = "schemagate failed while checking the lines from here (an internal error; the details are on stderr): they are not counted".to_owned();
                        recorder.broken(&mut batch, &mut tally, at, message);
                        batch
                    });
                    if done.send(batch).is_err() {
                        break;
                    }
                }
                tally
            })
        })
        .collect::<std::io::Result<Vec<_>>>()?;
    drop((done, slots));
    let (tally, kept, failed) = tokio::task::spawn_blocking(move || {
        let mut tally = Tally::default();
        for worker in workers {
            match worker.join() {
                Ok(counted) => tally.add(counted),
                // Its counts are lost: say so, so the run cannot pass on them.
                Err(_) => tally.input_errors += 1,
            }
        }
        let (kept, failed) = writer.join().unwrap_or_default();
        (tally, kept, failed)
    })
    .await
    .unwrap_or_default();
    let (mut tally, mut kept) = (tally, kept);
    let unreadable = std::mem::take(
        &mut logs
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .unreadable,
    );
    tally.input_errors += unreadable.len() as u64;
    // Logs that could not be read come first: they are printed whatever the lines' errors.
    kept.errors.splice(0..0, unreadable);
    Ok((tally, kept, failed))
}

/// One chunk's checks, judged.
fn judge_chunk(
    gate: &Gate,
    recorder: &Recorder,
    tally: &mut Tally,
    chunk: Chunk,
    max_line: usize,
) -> Batch {
    let max_depth = gate.limits().max_depth;
    let mut batch = Batch {
        seq: chunk.seq,
        bytes: chunk.bytes,
        ..Batch::default()
    };
    if recorder.verdicts {
        // About what the verdict lines take: grown once, not doubled along the way.
        batch.verdicts.reserve(chunk.lines.len() * VERDICT_BYTES);
    }
    for (line, item) in chunk.lines {
        let at = Position {
            file: chunk.file,
            line,
        };
        match item {
            Item::Text(text) => judge(gate, recorder, &mut batch, tally, at, &text, max_depth),
            Item::Oversized(len) => recorder.broken(
                &mut batch,
                tally,
                at,
                format!(
                    "the line is {len} bytes, past the limit of {max_line} (--max-body-bytes): it was not checked"
                ),
            ),
        }
    }
    batch
}

/// One line: read as the REST adapter reads a body, judged as it judges one.
fn judge(
    gate: &Gate,
    recorder: &Recorder,
    batch: &mut Batch,
    tally: &mut Tally,
    at: Position,
    text: &bytes::Bytes,
    max_depth: usize,
) {
    if text.iter().all(u8::is_ascii_whitespace) {
        return;
    }
    let check = match Check::from_json(text, max_depth) {
        Ok(check) => check,
        Err(e) => return recorder.error(batch, tally, at, None, &e, None),
    };
    let subject = Subject {
        server: check.server.as_deref(),
        tool: check.tool.as_deref(),
        payload: check.payload.kind(),
        attempt: check.attempt,
        call_id: check.call_id.as_deref(),
    };
    // Counted under REST: a line is a REST body, and the run's metrics are never served.
    match gate.check(&check, Transport::Rest) {
        Ok(verdict) => recorder.verdict(batch, tally, at, subject, &verdict, None),
        Err(e) => recorder.error(batch, tally, at, Some(subject), &e, None),
    }
}

/// A log being read: its index, its lines, the last line's number.
struct Open {
    file: usize,
    lines: Lines<Blocking<Box<dyn std::io::Read + Send>>>,
    number: u64,
}

/// The logs, read in turn, a chunk at a time by whichever judging thread is free.
struct Logs {
    paths: Vec<PathBuf>,
    /// The next log to open.
    next: usize,
    /// The log being read.
    open: Option<Open>,
    max: usize,
    seq: u64,
    /// Logs that could not be read (or not to their end).
    unreadable: Vec<InputError>,
}

impl Logs {
    /// The next chunk of lines; `None` once every log is read.
    fn cut(&mut self) -> Option<Chunk> {
        loop {
            if self.open.is_none() {
                let index = self.next;
                let path = self.paths.get(index)?;
                self.next += 1;
                let input: std::io::Result<Box<dyn std::io::Read + Send>> = match path.to_str() {
                    Some(STDIN) => Ok(Box::new(std::io::stdin())),
                    _ => std::fs::File::open(path).map(|f| Box::new(f) as _),
                };
                match input {
                    Ok(input) => {
                        self.open = Some(Open {
                            file: index,
                            lines: Lines::new(Blocking(input), self.max),
                            number: 0,
                        })
                    }
                    Err(e) => {
                        self.unreadable.push(unreadable(path, &e));
                        continue;
                    }
                }
            }
            let Open {
                file,
                lines,
                number,
            } = self.open.as_mut()?;
            let mut chunk = Chunk {
                seq: self.seq,
                file: *file,
                lines: Vec::with_capacity(CHUNK_LINES),
                bytes: 0,
            };
            let mut ended = false;
            while chunk.lines.len() < CHUNK_LINES && chunk.bytes < CHUNK_BYTES {
                match ready(lines.next()) {
                    Ok(Some(line)) => {
                        *number += 1;
                        let item = match line {
                            Line::Message(text) => {
                                chunk.bytes += text.len() as u64;
                                Item::Text(text)
                            }
                            Line::Oversized { len, .. } => {
                                chunk.bytes += len as u64 + 1;
                                Item::Oversized(len)
                            }
                        };
                        chunk.lines.push((*number, item));
                    }
                    Ok(None) => {
                        ended = true;
                        break;
                    }
                    Err(e) => {
                        let path = &self.paths[*file];
                        self.unreadable.push(unreadable(path, &e));
                        ended = true;
                        break;
                    }
                }
            }
            if ended {
                self.open = None;
            }
            if !chunk.lines.is_empty() {
                self.seq += 1;
                return Some(chunk);
            }
        }
    }
}

fn unreadable(path: &std::path::Path, e: &std::io::Error) -> InputError {
    InputError {
        file: path.display().to_string(),
        line: None,
        code: None,
        message: format!("cannot read it: {e}"),
    }
}

/// The output of a future that never waits (one that reads through [`Blocking`]).
fn ready<F: Future>(future: F) -> F::Output {
    let mut future = std::pin::pin!(future);
    let mut context = Context::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(output) = future.as_mut().poll(&mut context) {
            return output;
        }
    }
}

/// A blocking reader as an `AsyncRead` that is always ready: for the judging threads, where
/// blocking on the disk is what a thread of their own is for.
struct Blocking<R>(R);

impl<R: std::io::Read + Unpin> AsyncRead for Blocking<R> {
    fn poll_read(
        self: std::pin::Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        // At most one read's worth is zeroed, however much room the line buffer has.
        let room = buf.remaining().min(READ_BYTES);
        let read = this
            .0
            .read(buf.initialize_unfilled_to(room))
            .map(|n| buf.advance(n));
        Poll::Ready(read)
    }
}
