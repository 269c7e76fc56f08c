//! A session recorded as `schemagate check --format jsonrpc` replays it: each message the rules
//! read, one JSON line each, as the peer sent it (the server's own bytes, even for a result that
//! was replaced), written once the rules have acted on it; and each message schemagate wrote
//! itself (a reply in the server's place, a replaced result, a request of its own), marked so a
//! replay tells it apart: `{"schemagate_wrote": "to_client", "message": {...}}`. A replay passes
//! over what schemagate wrote to the client (it writes the same again), and takes what it asked
//! the server as its own request, so the answer is read as the live session read it.
//!
//! Values may be redacted by JSON pointer (`--record-redact /arguments/password`), applied to each
//! message's `params` and `result`; a pointer under `/structuredContent` applies to the result's
//! text copies that are JSON too. A redacted value becomes the string `"[redacted]"`, so a replay
//! of a redacted recording judges what was recorded, not what was sent.

use super::envelope::trim;
use super::Direction;
use crate::core::gate::Gate;
use crate::core::metrics::{Transport, RECORD_LINES_TOTAL};
use crate::ops::record::{Outcome, RecordConfig, Recorder, Tape};
use anyhow::Context;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;
use std::borrow::Cow;
use std::sync::Arc;

/// The member that marks a line schemagate wrote.
pub const WROTE: &str = "schemagate_wrote";
/// What a redacted value becomes.
const REDACTED: &str = "[redacted]";

/// What `--record` asks for: where and how much, and the values left out.
#[derive(Debug, Clone)]
pub struct RecordSettings {
    pub config: RecordConfig,
    /// JSON pointers (into `params` and `result`) whose values are not recorded.
    pub redact: Arc<[String]>,
}

/// A gateway route's own recording settings (its entry in the routes file), over the flags'
/// for its sessions. The default changes nothing.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RecordOverride {
    /// The route's sessions are not recorded.
    pub off: bool,
    /// The share of its sessions recorded, over `--record-sample`.
    pub sample: Option<f64>,
    /// Most bytes one of its sessions' files holds, over `--record-max-bytes`.
    pub max_bytes: Option<u64>,
    /// Values not recorded besides `--record-redact`'s.
    pub redact: Vec<String>,
}

impl RecordOverride {
    /// Whether it changes nothing.
    pub fn is_default(&self) -> bool {
        *self == Self::default()
    }
}

/// The recorder of a proxy or a gateway: each session's [`Recording`] comes from it, and its
/// lines are counted in `schemagate_record_lines_total`.
#[derive(Debug, Clone)]
pub struct SessionRecorder {
    recorder: Arc<Recorder>,
    redact: Arc<[String]>,
}

impl SessionRecorder {
    /// Starts recording as `settings` say (none: nothing is recorded), counted under
    /// `transport`; a directory it cannot record in is refused, named.
    pub fn start(
        settings: Option<RecordSettings>,
        gate: &Gate,
        transport: Transport,
    ) -> anyhow::Result<Option<Self>> {
        let Some(settings) = settings else {
            return Ok(None);
        };
        let counters = Outcome::ALL.map(|outcome| {
            gate.metrics().counter(
                RECORD_LINES_TOTAL,
                &[
                    ("transport", transport.as_str()),
                    ("outcome", outcome.as_str()),
                ],
            )
        });
        let on_outcome = Arc::new(move |outcome: Outcome| counters[outcome as usize].increment(1));
        let dir = settings.config.dir.display().to_string();
        let recorder = Recorder::start(settings.config, on_outcome)
            .with_context(|| format!("--record {dir}: cannot record there"))?;
        Ok(Some(Self {
            recorder,
            redact: settings.redact,
        }))
    }

    /// Waits, off the async threads, until every line handed over so far is written: what the
    /// last sessions left queued reaches their files before the process exits.
    pub async fn finish(self) {
        let _ = tokio::task::spawn_blocking(move || self.flush()).await;
    }

    /// A recording of a new session of `server`, named `session` in its file's name, under its
    /// route's own settings (`own`; the default changes nothing); `None` when the session is
    /// not sampled.
    pub fn session(
        &self,
        server: &str,
        session: &str,
        own: &RecordOverride,
    ) -> Option<Arc<Recording>> {
        if own.off {
            return None;
        }
        let tape = self
            .recorder
            .tape(server, session, own.sample, own.max_bytes)?;
        let redact = match own.redact.is_empty() {
            true => Arc::clone(&self.redact),
            false => self.redact.iter().chain(&own.redact).cloned().collect(),
        };
        Some(Arc::new(Recording::new(tape, redact)))
    }

    /// Waits until every line handed over so far is written.
    pub fn flush(&self) {
        self.recorder.flush();
    }
}

/// The names the recording's settings go by where they are written (`--record-sample`, or a
/// route's `record.sample`), for what [`check_settings`] says.
pub struct SettingNames {
    pub sample: &'static str,
    pub max_bytes: &'static str,
    pub redact: &'static str,
}

/// Refuses a share of sessions outside 0 to 1, a file bound under 1 KiB, and a redaction that
/// is not a JSON pointer, saying which setting to fix.
pub fn check_settings(
    names: &SettingNames,
    sample: Option<f64>,
    max_bytes: Option<u64>,
    redact: &[String],
) -> anyhow::Result<()> {
    if let Some(sample) = sample {
        anyhow::ensure!(
            (0.0..=1.0).contains(&sample),
            "{} must be from 0 to 1 (the share of sessions recorded), not {sample}",
            names.sample
        );
    }
    if let Some(max) = max_bytes {
        anyhow::ensure!(max >= 1024, "{} must be at least 1024", names.max_bytes);
    }
    for pointer in redact {
        anyhow::ensure!(
            pointer.starts_with('/'),
            "{} {pointer:?}: a JSON pointer starts with `/` (as /arguments/password)",
            names.redact
        );
    }
    Ok(())
}

/// A fresh session name for a file: 64 random bits, in hex.
pub fn session_name() -> String {
    format!("{:016x}", getrandom::u64().unwrap_or(0))
}

/// One session's recording.
#[derive(Debug)]
pub struct Recording {
    tape: Tape,
    /// JSON pointers whose values are not recorded.
    redact: Arc<[String]>,
}

impl Recording {
    pub fn new(tape: Tape, redact: Arc<[String]>) -> Self {
        Self { tape, redact }
    }

    /// A message read from a peer, as it came (redacted where asked): without redaction, the
    /// line itself is handed over, not a copy.
    pub(super) fn received(&self, line: &bytes::Bytes) {
        let trimmed = trim(line);
        if trimmed.is_empty() {
            return;
        }
        match self.redacted(trimmed) {
            Cow::Borrowed(_) => self.tape.write(line.slice_ref(trimmed)),
            Cow::Owned(redacted) => self.tape.write(redacted.into()),
        }
    }

    /// A message schemagate wrote itself, sent `direction`.
    pub(super) fn wrote(&self, direction: Direction, message: &[u8]) {
        let message = self.redacted(trim(message));
        let mut line = Vec::with_capacity(message.len() + 48);
        line.extend_from_slice(b"{\"");
        line.extend_from_slice(WROTE.as_bytes());
        line.extend_from_slice(b"\":\"");
        line.extend_from_slice(direction.as_str().as_bytes());
        line.extend_from_slice(b"\",\"message\":");
        line.extend_from_slice(&message);
        line.push(b'}');
        self.tape.write(line.into());
    }

    /// `line` with the redacted values replaced; the line itself when nothing is redacted.
    fn redacted<'l>(&self, line: &'l [u8]) -> Cow<'l, [u8]> {
        if self.redact.is_empty() {
            return Cow::Borrowed(line);
        }
        let Ok(mut message) = serde_json::from_slice::<Value>(line) else {
            return Cow::Borrowed(line);
        };
        match redact(&mut message, &self.redact) {
            true => serde_json::to_vec(&message).map_or(Cow::Borrowed(line), Cow::Owned),
            false => Cow::Borrowed(line),
        }
    }
}

/// Redacts `pointers` in a message (a JSON-RPC batch: in each of its items); whether any was.
fn redact(message: &mut Value, pointers: &[String]) -> bool {
    if let Value::Array(items) = message {
        let mut any = false;
        for item in items {
            any |= redact(item, pointers);
        }
        return any;
    }
    let mut any = false;
    for member in ["params", "result"] {
        let Some(part) = message.get_mut(member) else {
            continue;
        };
        for pointer in pointers {
            if let Some(value) = part.pointer_mut(pointer) {
                *value = Value::String(REDACTED.to_owned());
                any = true;
            }
            // The text copies of structuredContent, where they are JSON.
            let Some(inner) = pointer.strip_prefix("/structuredContent") else {
                continue;
            };
            let Some(Value::Array(content)) = part.get_mut("content") else {
                continue;
            };
            for block in content {
                let Some(Value::String(text)) = block.get_mut("text") else {
                    continue;
                };
                let Ok(mut copy) = serde_json::from_str::<Value>(text) else {
                    continue;
                };
                if let Some(value) = copy.pointer_mut(inner) {
                    *value = Value::String(REDACTED.to_owned());
                    *text = copy.to_string();
                    any = true;
                }
            }
        }
    }
    any
}

/// A recorded line schemagate wrote: which way it went, and the message.
#[derive(Debug)]
pub struct Wrote<'a> {
    pub direction: Direction,
    pub message: &'a RawValue,
}

/// Reads `line` as one schemagate wrote (see the module's notes); `None` for any other line.
pub fn wrote(line: &[u8]) -> Option<Wrote<'_>> {
    // Cheap first: most lines are messages.
    memchr::memmem::find(line, WROTE.as_bytes())?;
    #[derive(Deserialize)]
    struct Marked<'a> {
        schemagate_wrote: &'a str,
        #[serde(borrow)]
        message: &'a RawValue,
    }
    let marked: Marked<'_> = serde_json::from_slice(line).ok()?;
    let direction = match marked.schemagate_wrote {
        "to_client" => Direction::ToClient,
        "to_server" => Direction::ToServer,
        _ => return None,
    };
    Some(Wrote {
        direction,
        message: marked.message,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn pointers_redact_params_results_and_their_text_copies() {
        let mut call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "login", "arguments": {"user": "ann", "password": "hunter2"}}});
        assert!(redact(&mut call, &["/arguments/password".to_owned()]));
        assert_eq!(call["params"]["arguments"]["password"], REDACTED);
        assert_eq!(call["params"]["arguments"]["user"], "ann");
        let mut answer = json!({"jsonrpc": "2.0", "id": 1, "result": {
            "content": [{"type": "text", "text": "{\"token\":\"abc\",\"n\":1}"}],
            "structuredContent": {"token": "abc", "n": 1}}});
        assert!(redact(
            &mut answer,
            &["/structuredContent/token".to_owned()]
        ));
        assert_eq!(answer["result"]["structuredContent"]["token"], REDACTED);
        let copy: Value = serde_json::from_str(
            answer["result"]["content"][0]["text"]
                .as_str()
                .unwrap_or(""),
        )
        .expect("JSON");
        assert_eq!(copy, json!({"token": REDACTED, "n": 1}));
        let mut other = json!({"jsonrpc": "2.0", "id": 2, "result": {}});
        assert!(!redact(&mut other, &["/arguments/password".to_owned()]));
    }

    #[test]
    fn a_marked_line_is_read_back() {
        let line = br#"{"schemagate_wrote":"to_server","message":{"jsonrpc":"2.0","id":"x","method":"tools/list"}}"#;
        let wrote = wrote(line).expect("marked");
        assert_eq!(wrote.direction, Direction::ToServer);
        assert!(wrote.message.get().contains("tools/list"));
        assert!(
            super::wrote(br#"{"jsonrpc":"2.0","id":1,"result":{"schemagate_wrote":1}}"#).is_none()
        );
    }
}
