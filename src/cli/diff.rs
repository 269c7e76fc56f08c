//! `schemagate diff OLD.json NEW.json`: two `tools/list` snapshots (a result, or a map
//! `{"servers": {name: result}}`) compared tool by tool, with the classification a registration
//! gets (see [`crate::core::change`]): each tool added, removed or changed, its class and
//! reasons. The exit code says whether CI should stop: 1 when a change reaches `--fail-on`, 2
//! for a file that cannot be read (the answer names the file, and the line of broken JSON).

use super::snapshot::{self, LONE_SERVER};
use super::Output;
use crate::core::change::Class;
use crate::core::gate::{Gate, GateConfig};
use crate::core::registry::history::{ChangeKind, ToolChange};
use crate::core::registry::RegisterOptions;
use bytes::Bytes;
use serde::Serialize;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Exit code: nothing reached `--fail-on`.
pub const PASSED: i32 = 0;
/// Exit code: a change reached `--fail-on`.
pub const FAILED: i32 = 1;
/// Exit code: a file could not be read, or the flags are wrong.
pub const BAD_INPUT: i32 = 2;

/// Which changes fail the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FailOn {
    /// A breaking change, or one the analysis could not decide (never guessed safe).
    Breaking,
    /// Any change (a tool added counts).
    Any,
    /// None: report only.
    Never,
}

/// What `schemagate diff` needs, built from its flags.
#[derive(Debug)]
pub struct DiffConfig {
    /// The core: policy (formats, patterns) and limits.
    pub gate: GateConfig,
    pub old: PathBuf,
    pub new: PathBuf,
    pub fail_on: FailOn,
    pub output: Output,
}

/// One tool's change, with its server.
#[derive(Debug, Serialize)]
struct Entry {
    server: String,
    #[serde(flatten)]
    change: ToolChange,
}

#[derive(Debug, Default, Serialize)]
struct Summary {
    added: usize,
    removed: usize,
    changed: usize,
    breaking: usize,
    unknown: usize,
}

#[derive(Debug, Serialize)]
struct Report {
    changes: Vec<Entry>,
    summary: Summary,
}

/// Runs the diff; answers the exit code, having written the report to `out` (and any error to
/// `err`).
pub fn run(config: DiffConfig, out: &mut dyn Write, err: &mut dyn Write) -> i32 {
    let (fail_on, output) = (config.fail_on, config.output);
    match diff(config) {
        Ok(report) => {
            let failed = match fail_on {
                FailOn::Never => false,
                FailOn::Any => !report.changes.is_empty(),
                FailOn::Breaking => report.summary.breaking + report.summary.unknown > 0,
            };
            let written = match output {
                Output::Json => serde_json::to_writer_pretty(&mut *out, &report)
                    .map_err(std::io::Error::other)
                    .and_then(|()| writeln!(out)),
                Output::Text => write_text(&report, out),
            };
            if let Err(e) = written {
                let _ = writeln!(err, "schemagate diff: cannot write the report: {e}");
                return BAD_INPUT;
            }
            if failed {
                FAILED
            } else {
                PASSED
            }
        }
        Err(e) => {
            let _ = writeln!(err, "schemagate diff: {e:#}");
            BAD_INPUT
        }
    }
}

fn diff(config: DiffConfig) -> anyhow::Result<Report> {
    let old = snapshot::read(&config.old)?;
    let new = snapshot::read(&config.new)?;
    let gate = Gate::new(config.gate)?;
    let mut servers: Vec<&String> = old.keys().chain(new.keys()).collect();
    servers.sort_unstable();
    servers.dedup();
    let empty = Bytes::from_static(b"{\"tools\":[]}");
    let mut changes = Vec::new();
    for server in servers {
        // The old snapshot registered, the new one judged against it as a registration is.
        let name = |path: &Path| format!("{} (server {server})", path.display());
        if let Some(list) = old.get(server) {
            gate.register_now(server, list, RegisterOptions::default())
                .map_err(|e| anyhow::anyhow!("{}: {e}", name(&config.old)))?;
        }
        let list = new.get(server).unwrap_or(&empty);
        let found = gate
            .changes_now(server, list)
            .map_err(|e| anyhow::anyhow!("{}: {e}", name(&config.new)))?;
        changes.extend(found.into_iter().map(|change| Entry {
            server: server.clone(),
            change,
        }));
    }
    let mut summary = Summary::default();
    for entry in &changes {
        match entry.change.change {
            ChangeKind::Added => summary.added += 1,
            ChangeKind::Removed => summary.removed += 1,
            ChangeKind::Changed => summary.changed += 1,
        }
        match entry.change.class {
            Class::Breaking => summary.breaking += 1,
            Class::Unknown => summary.unknown += 1,
            Class::Identical | Class::Compatible => {}
        }
    }
    Ok(Report { changes, summary })
}

fn write_text(report: &Report, out: &mut dyn Write) -> std::io::Result<()> {
    for entry in &report.changes {
        let change = &entry.change;
        let kind = match change.change {
            ChangeKind::Added => "added",
            ChangeKind::Removed => "removed",
            ChangeKind::Changed => "changed",
        };
        let tool = if entry.server == LONE_SERVER {
            change.tool.clone()
        } else {
            format!("{}/{}", entry.server, change.tool)
        };
        writeln!(out, "{tool}: {kind}, {}", change.class.as_str())?;
        for part in &change.schemas {
            for reason in &part.reasons {
                writeln!(
                    out,
                    "    {} {}: {reason}",
                    part.schema.as_str(),
                    part.class.as_str()
                )?;
            }
            if part.reasons.is_empty() {
                writeln!(out, "    {} {}", part.schema.as_str(), part.class.as_str())?;
            }
        }
    }
    let s = &report.summary;
    writeln!(
        out,
        "{} tools changed ({} added, {} removed, {} changed): {} breaking, {} unknown",
        report.changes.len(),
        s.added,
        s.removed,
        s.changed,
        s.breaking,
        s.unknown
    )
}
