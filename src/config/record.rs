//! The recording flags `schemagate proxy` and `schemagate gateway` share (`--record DIR`), and
//! the recording settings they make.

use crate::mcp::record::{check_settings, RecordSettings, SettingNames};
use crate::ops::record::RecordConfig;
use std::path::PathBuf;

/// The default of `--record-max-bytes`: 64 MiB per session.
pub const DEFAULT_RECORD_MAX_BYTES: u64 = 64 << 20;
/// The default of `--record-max-total-bytes`: 1 GiB for the directory.
pub const DEFAULT_RECORD_MAX_TOTAL_BYTES: u64 = 1 << 30;

/// Recording each session as the JSONL transcript `schemagate check --format jsonrpc` replays.
#[derive(Debug, Clone, clap::Args)]
pub struct RecordArgs {
    /// Record each session into this directory: one file per session
    /// (`SERVER-START-SESSION.jsonl`, mode 0600), one JSON-RPC message per line as it was read,
    /// and what schemagate wrote itself, marked. Replay with `schemagate check --format jsonrpc`.
    #[arg(long, env = "SCHEMAGATE_RECORD", value_name = "DIR")]
    pub record: Option<PathBuf>,
    /// Most bytes one session's recording holds; past it the rest of the session is not
    /// recorded (and counted).
    #[arg(long, env = "SCHEMAGATE_RECORD_MAX_BYTES", default_value_t = DEFAULT_RECORD_MAX_BYTES)]
    pub record_max_bytes: u64,
    /// Most bytes the recordings in the directory hold together; past it the oldest closed
    /// recordings are removed first.
    #[arg(long, env = "SCHEMAGATE_RECORD_MAX_TOTAL_BYTES", default_value_t = DEFAULT_RECORD_MAX_TOTAL_BYTES)]
    pub record_max_total_bytes: u64,
    /// The share of sessions recorded, from 0 to 1.
    #[arg(long, env = "SCHEMAGATE_RECORD_SAMPLE", default_value_t = 1.0)]
    pub record_sample: f64,
    /// A value not to record, as a JSON pointer into each message's `params` and `result`
    /// (`/arguments/password`, `/structuredContent/token`); repeat for more. It is recorded as
    /// the string `[redacted]`.
    #[arg(
        long,
        env = "SCHEMAGATE_RECORD_REDACT",
        value_name = "POINTER",
        value_delimiter = ','
    )]
    pub record_redact: Vec<String>,
}

impl RecordArgs {
    /// The recording asked for, if any; refused when a flag is out of range.
    pub fn settings(&self) -> anyhow::Result<Option<RecordSettings>> {
        let Some(dir) = &self.record else {
            anyhow::ensure!(
                self.record_redact.is_empty(),
                "--record-redact applies to a recording: give --record DIR"
            );
            return Ok(None);
        };
        let names = SettingNames {
            sample: "--record-sample",
            max_bytes: "--record-max-bytes",
            redact: "--record-redact",
        };
        check_settings(
            &names,
            Some(self.record_sample),
            Some(self.record_max_bytes),
            &self.record_redact,
        )?;
        anyhow::ensure!(
            self.record_max_total_bytes >= self.record_max_bytes,
            "--record-max-total-bytes ({}) must be at least --record-max-bytes ({})",
            self.record_max_total_bytes,
            self.record_max_bytes
        );
        Ok(Some(RecordSettings {
            config: RecordConfig {
                dir: dir.clone(),
                max_file_bytes: self.record_max_bytes,
                max_total_bytes: self.record_max_total_bytes,
                sample: self.record_sample,
            },
            redact: self.record_redact.clone().into(),
        }))
    }
}
