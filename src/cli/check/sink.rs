//! Where judged lines go: each judging thread turns its lines into a [`Batch`] (verdict lines,
//! rejections to list, input errors) and a [`Tally`]; the [`Sink`] thread writes the batches in
//! log order (or, for transcripts, as each session's come), keeps the first rejections of each
//! tool and the first input errors, and moves the progress bar. What it keeps is bounded, and
//! so is what is in flight: a check-line batch holds a slot from before its lines were cut until
//! it is written.

pub use super::tally::Subject;
use super::tally::{Seen, Tally, NONE};
use crate::core::check::PayloadKind;
use crate::core::error::CheckError;
use crate::core::verdict::{clip, Action, Outcome, Verdict};
use indicatif::ProgressBar;
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::sync::mpsc::Receiver;

/// Rejections listed per tool (in JUnit); the rest are counted.
const NOTES_PER_TOOL: usize = 20;
/// Tools whose rejections are listed; past it, only counted.
const NOTED_TOOLS: usize = 10_000;
/// The longest feedback a listed rejection keeps (feedback names instance paths, which come
/// from the payload).
const MAX_FEEDBACK_BYTES: usize = 1024;
/// The longest call id a listed rejection keeps.
const MAX_CALL_ID_BYTES: usize = 256;
/// Input errors listed; the rest are counted.
pub const LISTED_ERRORS: usize = 100;

/// Where a line is: its log (an index into the run's names) and its number, from 1.
#[derive(Debug, Clone, Copy, Default)]
pub struct Position {
    pub file: usize,
    pub line: u64,
}

/// The error code of a call to a tool no listing or tools file names.
const UNKNOWN_TOOL: &str = "unknown_tool";

/// A line (or a tools-file entry) that could not be checked.
#[derive(Debug, Clone, Serialize)]
pub struct InputError {
    pub file: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<&'static str>,
    pub message: String,
}

impl std::fmt::Display for InputError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.line {
            Some(line) => write!(f, "{}:{line}: {}", self.file, self.message),
            None => write!(f, "{}: {}", self.file, self.message),
        }
    }
}

/// A check the policy would reject, as JUnit lists it.
#[derive(Debug, Clone)]
pub struct Note {
    pub server: String,
    pub tool: String,
    pub place: String,
    pub payload: PayloadKind,
    pub attempt: u32,
    pub call_id: Option<String>,
    pub feedback: String,
}

/// What one judging step produced, for the sink.
#[derive(Debug, Default)]
pub struct Batch {
    /// Its place in the log's order (ordered sinks write batches in it); for a transcript, in
    /// the transcript's.
    pub seq: u64,
    /// The transcript it is of (the index of its file), and whether it is the transcript's last.
    pub file: usize,
    pub last: bool,
    /// Log bytes it covers (the progress bar's unit).
    pub bytes: u64,
    /// Checks made.
    pub checks: u64,
    /// Verdict lines (JSONL), when `--verdicts` asks for them.
    pub verdicts: Vec<u8>,
    pub notes: Vec<Note>,
    pub errors: Vec<InputError>,
}

/// What the rules did on the MCP wire with a payload they could not judge.
#[derive(Debug, Clone, Copy)]
pub struct Wire {
    /// The client got schemagate's answer in its place.
    pub withheld: bool,
    /// The proxy counts it as an `unchecked` check.
    pub counted: bool,
}

/// Turns judged lines into batch entries and counts: the same for every format.
#[derive(Debug, Clone)]
pub struct Recorder {
    /// The logs' names, as messages show them.
    pub files: std::sync::Arc<[String]>,
    /// Each log's verdict-line head: `{"file":NAME,"line":`.
    heads: std::sync::Arc<[String]>,
    /// Whether verdict lines are written.
    pub verdicts: bool,
    /// The tools file's name, for errors about tools it lacks.
    pub tools: Option<String>,
    /// The logs are transcripts, which list tools themselves.
    pub transcripts: bool,
}

#[derive(Serialize)]
struct ErrorDetail<'a> {
    code: &'a str,
    message: &'a str,
}

impl Recorder {
    pub fn new(
        files: std::sync::Arc<[String]>,
        verdicts: bool,
        tools: Option<String>,
        transcripts: bool,
    ) -> Self {
        let heads = files
            .iter()
            .map(|file| {
                let mut head = b"{\"file\":".to_vec();
                string(&mut head, file);
                head.extend_from_slice(b",\"line\":");
                String::from_utf8_lossy(&head).into_owned()
            })
            .collect();
        Recorder {
            files,
            heads,
            verdicts,
            tools,
            transcripts,
        }
    }

    fn place(&self, at: Position) -> String {
        format!("{}:{}", self.files[at.file], at.line)
    }

    /// A verdict on `subject` at `at`: counted, written, and listed if rejected. On the MCP
    /// wire (`withheld` known) what the rules did decides; elsewhere the verdict's action.
    pub fn verdict(
        &self,
        batch: &mut Batch,
        tally: &mut Tally,
        at: Position,
        subject: Subject<'_>,
        verdict: &Verdict,
        on_the_wire: Option<bool>,
    ) {
        let rejected = on_the_wire.unwrap_or(verdict.action == Action::Reject);
        batch.checks += 1;
        tally.count(Seen {
            subject,
            outcome: verdict.outcome,
            rejected,
            verdict: Some(verdict),
        });
        if self.verdicts {
            self.head(batch, at, Some(subject), on_the_wire);
            batch.verdicts.extend_from_slice(b",\"verdict\":");
            if verdict.write_json(&mut batch.verdicts).is_err() {
                batch.verdicts.extend_from_slice(b"null");
            }
            batch.verdicts.extend_from_slice(b"}\n");
        }
        if rejected {
            batch
                .notes
                .push(self.note(at, subject, verdict.feedback.clone()));
        }
    }

    /// A rejection at `at` for JUnit to list, with `feedback` (or why nothing was checked).
    fn note(&self, at: Position, subject: Subject<'_>, feedback: String) -> Note {
        Note {
            server: subject.server.unwrap_or(NONE).to_owned(),
            tool: subject.tool.unwrap_or(NONE).to_owned(),
            place: self.place(at),
            payload: subject.payload,
            attempt: subject.attempt,
            call_id: subject
                .call_id
                .map(|id| clip(id.to_owned(), MAX_CALL_ID_BYTES)),
            feedback: clip(feedback, MAX_FEEDBACK_BYTES),
        }
    }

    /// A check at `at` that could not be made: an input error. On the MCP wire (`withheld`
    /// known) it is also counted as the proxy counts it, `unchecked`.
    pub fn error(
        &self,
        batch: &mut Batch,
        tally: &mut Tally,
        at: Position,
        subject: Option<Subject<'_>>,
        error: &CheckError,
        on_the_wire: Option<bool>,
    ) {
        let wire = on_the_wire.map(|withheld| Wire {
            withheld,
            counted: true,
        });
        let why = (error.code(), self.message(error));
        self.failed(batch, tally, at, subject, why, wire);
    }

    /// A check at `at` that could not be made, `why` (a code and a message): an input error,
    /// listed and written; on the MCP wire also counted as `unchecked` where the proxy counts it.
    pub fn failed(
        &self,
        batch: &mut Batch,
        tally: &mut Tally,
        at: Position,
        subject: Option<Subject<'_>>,
        (code, message): (&'static str, String),
        wire: Option<Wire>,
    ) {
        // On the MCP wire, a payload that could not be checked is an outcome, as the relay
        // counted it (`unchecked`), not a fault of the transcript.
        let on_the_wire = wire.is_some();
        if !on_the_wire {
            tally.input_errors += 1;
        } else if code == UNKNOWN_TOOL {
            tally.unknown_tools += 1;
        }
        // Messages may quote the line (an unknown field's name, a tool's).
        let message = clip(message, MAX_FEEDBACK_BYTES);
        let withheld = wire.is_some_and(|w| w.withheld);
        if let (Some(subject), Some(wire)) = (subject, wire) {
            if wire.counted {
                batch.checks += 1;
                tally.count(Seen {
                    subject,
                    outcome: Outcome::Unchecked,
                    rejected: withheld,
                    verdict: None,
                });
            }
            if withheld {
                batch.notes.push(self.note(at, subject, message.clone()));
            }
        }
        if self.verdicts {
            self.head(batch, at, subject, wire.map(|w| w.withheld));
            batch.verdicts.extend_from_slice(b",\"error\":");
            let detail = ErrorDetail {
                code,
                message: &message,
            };
            if serde_json::to_writer(&mut batch.verdicts, &detail).is_err() {
                batch.verdicts.extend_from_slice(b"null");
            }
            batch.verdicts.extend_from_slice(b"}\n");
        }
        if !on_the_wire {
            batch.errors.push(InputError {
                file: self.files[at.file].clone(),
                line: Some(at.line),
                code: Some(code),
                message,
            });
        }
    }

    /// A line at `at` that is not a check at all (`message` says why).
    pub fn broken(&self, batch: &mut Batch, tally: &mut Tally, at: Position, message: String) {
        tally.input_errors += 1;
        batch.errors.push(InputError {
            file: self.files[at.file].clone(),
            line: Some(at.line),
            code: None,
            message,
        });
    }

    /// What a person reading the log's errors should be told: a tool the tools file lacks is
    /// said so, with the file's name.
    fn message(&self, error: &CheckError) -> String {
        let what = match error {
            CheckError::UnknownTool { server, tool } => {
                format!("tool {tool:?} of server {server:?}")
            }
            CheckError::UnknownServer(server) => format!("server {server:?}"),
            _ => return error.to_string(),
        };
        match (self.tools.as_deref(), self.transcripts) {
            (Some(file), false) => format!("{what} is not in {file}"),
            (Some(file), true) => {
                format!("{what} is in no tools/list answer of the transcript so far, nor in {file}")
            }
            (None, false) => {
                format!("{what} has no contract: give its tools/list with --tools")
            }
            (None, true) => format!(
                "{what} is in no tools/list answer of the transcript so far: give its tools/list with --tools"
            ),
        }
    }

    /// A verdict line's head, left open for the verdict or error to follow. Written by hand
    /// (each file's part once, in [`Recorder::new`]): it is most of what a verdict line adds.
    /// `withheld` is known (and written, true or false) for what was read on the MCP wire.
    fn head(
        &self,
        batch: &mut Batch,
        at: Position,
        subject: Option<Subject<'_>>,
        withheld: Option<bool>,
    ) {
        let out = &mut batch.verdicts;
        out.extend_from_slice(self.heads[at.file].as_bytes());
        let _ = write!(out, "{}", at.line);
        if let Some(subject) = subject {
            for (name, value) in [("server", subject.server), ("tool", subject.tool)] {
                if let Some(value) = value {
                    let _ = write!(out, ",\"{name}\":");
                    string(out, value);
                }
            }
            let _ = write!(
                out,
                ",\"payload\":\"{}\",\"attempt\":{}",
                subject.payload.as_str(),
                subject.attempt
            );
            if let Some(call_id) = subject.call_id {
                out.extend_from_slice(b",\"call_id\":");
                string(out, call_id);
            }
        }
        if let Some(withheld) = withheld {
            let _ = write!(out, ",\"withheld\":{withheld}");
        }
    }
}

/// `text` as a JSON string.
fn string(out: &mut Vec<u8>, text: &str) {
    if serde_json::to_writer(&mut *out, text).is_err() {
        out.extend_from_slice(b"null");
    }
}

/// What the sink kept, for the report.
#[derive(Debug, Default)]
pub struct Kept {
    /// The first rejections of each (server, tool).
    pub notes: HashMap<(String, String), Vec<Note>>,
    /// The first input errors, in log order.
    pub errors: Vec<InputError>,
    /// Every check made.
    pub checks: u64,
}

/// The thread that writes batches.
pub struct Sink {
    pub verdicts: Option<Box<dyn Write + Send>>,
    pub progress: ProgressBar,
    /// Where a written batch frees its slot, when the readers take one per batch.
    pub freed: Option<Receiver<()>>,
    /// Input errors found before the logs were read (the tools file's).
    pub kept: Kept,
}

impl Sink {
    /// Writes every batch `batches` brings, until it closes; answers what was kept, or the
    /// error that stopped the verdicts file being written.
    pub fn drain(mut self, batches: Receiver<Batch>) -> (Kept, Option<std::io::Error>) {
        // Keyed by (transcript, place in it); check lines are all of transcript 0.
        let mut waiting: BTreeMap<(usize, u64), Batch> = BTreeMap::new();
        let mut next = (0usize, 0u64);
        let mut failed: Option<std::io::Error> = None;
        // Written in order: check lines by `seq`; transcripts one by one in the order given
        // (a transcript's last batch says when the next begins), each in its own order. The
        // reports are the same whatever `--jobs`.
        for batch in batches {
            waiting.insert((batch.file, batch.seq), batch);
            while let Some(batch) = waiting.remove(&next) {
                next = match batch.last {
                    true => (next.0 + 1, 0),
                    false => (next.0, next.1 + 1),
                };
                self.write(batch, &mut failed);
            }
        }
        // Batches past a gap (none, unless a judging thread died) are still written.
        for (_, batch) in std::mem::take(&mut waiting) {
            self.write(batch, &mut failed);
        }
        if let Some(out) = &mut self.verdicts {
            if let Err(e) = out.flush() {
                failed.get_or_insert(e);
            }
        }
        self.progress.finish_and_clear();
        (self.kept, failed)
    }

    fn write(&mut self, batch: Batch, failed: &mut Option<std::io::Error>) {
        let Batch {
            bytes,
            checks,
            verdicts,
            notes,
            errors,
            ..
        } = batch;
        if let (Some(out), None) = (&mut self.verdicts, &failed) {
            if let Err(e) = out.write_all(&verdicts) {
                *failed = Some(e);
            }
        }
        // Written: a judging thread may cut another chunk.
        if let Some(freed) = &self.freed {
            let _ = freed.try_recv();
        }
        let kept = &mut self.kept;
        kept.checks += checks;
        for note in notes {
            let noted = kept.notes.len();
            let key = (note.server.clone(), note.tool.clone());
            match kept.notes.get_mut(&key) {
                Some(notes) if notes.len() < NOTES_PER_TOOL => notes.push(note),
                Some(_) => {}
                None if noted < NOTED_TOOLS => {
                    kept.notes.insert(key, vec![note]);
                }
                None => {}
            }
        }
        let room = LISTED_ERRORS.saturating_sub(kept.errors.len());
        kept.errors.extend(errors.into_iter().take(room));
        self.progress.inc(bytes);
        self.progress
            .set_message(format!("{} checks", self.kept.checks));
    }
}
