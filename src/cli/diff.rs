//! `schemagate diff OLD.json NEW.json`: two `tools/list` snapshots (a result, or a map
//! `{"servers": {name: result}}`) compared tool by tool, with the classification a registration
//! gets (see [`crate::core::change`]): each tool added, removed or changed, its class and
//! reasons. The exit code says whether CI should stop: 1 when a change reaches `--fail-on`, 2
//! for a file that cannot be read (the answer names the file, and the line of broken JSON); with
//! `--output json`, stdout holds a JSON document on every exit.

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

/// Which changes fail the run: `--fail-on` takes a list of these (`breaking,unknown`, the
/// default), or `any` or `never` alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FailOn {
    /// A change classed `breaking`.
    Breaking,
    /// A change the analysis could not decide (never guessed safe).
    Unknown,
    /// A change to a text the model reads (a description, a title), for a person to read.
    Review,
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
    pub fail_on: Vec<FailOn>,
    pub output: Output,
}

/// One tool's change, with its server (`null` for a snapshot that is one `tools/list` result).
#[derive(Debug, Serialize)]
struct Entry {
    server: Option<String>,
    #[serde(flatten)]
    change: ToolChange,
}

/// How many tools were added, removed and changed (a new text with the same meaning, class
/// `identical`, is not counted as changed), how many changes fell in each class, and which of
/// `--fail-on` the changes reached (the run fails when any did).
#[derive(Debug, Default, Serialize)]
struct Summary {
    added: usize,
    removed: usize,
    changed: usize,
    identical: usize,
    compatible: usize,
    breaking: usize,
    unknown: usize,
    review: usize,
    failed_on: Vec<String>,
}

#[derive(Debug, Serialize)]
struct Report {
    changes: Vec<Entry>,
    summary: Summary,
}

/// What `--output json` writes when the snapshots cannot be compared (exit code 2).
#[derive(Debug, Serialize)]
struct Refusal {
    error: String,
    exit_code: i32,
}

/// Runs the diff; answers the exit code, having written the report to `out` (and any error to
/// `err`).
pub fn run(config: DiffConfig, out: &mut dyn Write, err: &mut dyn Write) -> i32 {
    let output = config.output;
    let fail_on = config.fail_on.clone();
    let (written, code) = match diff(config) {
        Ok(mut report) => {
            report.summary.failed_on = reached(&report, &fail_on);
            let code = match report.summary.failed_on.is_empty() {
                true => PASSED,
                false => FAILED,
            };
            let written = match output {
                Output::Json => write_json(&report, out),
                Output::Text => write_text(&report, out),
            };
            (written, code)
        }
        Err(e) => return refused(output, &e, out, err),
    };
    if let Err(e) = written {
        let _ = writeln!(err, "schemagate diff: cannot write the report: {e}");
        return BAD_INPUT;
    }
    code
}

/// The snapshots could not be compared (or the flags are wrong): says why on `err` and, with
/// `--output json`, as a JSON document on `out`, so that a CI step reading stdout as JSON gets one
/// on every exit. Answers the exit code, [`BAD_INPUT`].
pub fn refused(
    output: Output,
    error: &anyhow::Error,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> i32 {
    let _ = writeln!(err, "schemagate diff: {error:#}");
    if output == Output::Json {
        let refusal = Refusal {
            error: format!("{error:#}"),
            exit_code: BAD_INPUT,
        };
        if let Err(e) = write_json(&refusal, out) {
            let _ = writeln!(err, "schemagate diff: cannot write the report: {e}");
        }
    }
    BAD_INPUT
}

fn write_json(value: &impl Serialize, out: &mut dyn Write) -> std::io::Result<()> {
    serde_json::to_writer_pretty(&mut *out, value).map_err(std::io::Error::other)?;
    writeln!(out)
}

/// Which of `fail_on` the report's changes reach.
fn reached(report: &Report, fail_on: &[FailOn]) -> Vec<String> {
    let s = &report.summary;
    fail_on
        .iter()
        .filter(|f| match f {
            FailOn::Breaking => s.breaking > 0,
            FailOn::Unknown => s.unknown > 0,
            FailOn::Review => s.review > 0,
            FailOn::Any => report.changes.len() > s.identical,
            FailOn::Never => false,
        })
        // The name `--fail-on` takes.
        .filter_map(clap::ValueEnum::to_possible_value)
        .map(|v| v.get_name().to_owned())
        .collect()
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
            server: (server != LONE_SERVER).then(|| server.clone()),
            change,
        }));
    }
    let mut summary = Summary::default();
    for entry in &changes {
        match entry.change.change {
            ChangeKind::Added => summary.added += 1,
            ChangeKind::Removed => summary.removed += 1,
            // A new text that means the same (key order, a title): not a change to act on.
            ChangeKind::Changed if entry.change.class == Class::Identical => {}
            ChangeKind::Changed => summary.changed += 1,
        }
        match entry.change.class {
            Class::Breaking => summary.breaking += 1,
            Class::Unknown => summary.unknown += 1,
            Class::Identical => summary.identical += 1,
            Class::Compatible => summary.compatible += 1,
            Class::Review => summary.review += 1,
        }
    }
    Ok(Report { changes, summary })
}

fn write_text(report: &Report, out: &mut dyn Write) -> std::io::Result<()> {
    // Identical ones (a new text that means the same) are counted, not listed.
    for entry in report
        .changes
        .iter()
        .filter(|e| e.change.class != Class::Identical)
    {
        let change = &entry.change;
        let kind = match change.change {
            ChangeKind::Added => "added",
            ChangeKind::Removed => "removed",
            ChangeKind::Changed => "changed",
        };
        let tool = match &entry.server {
            None => change.tool.clone(),
            Some(server) => format!("{server}/{}", change.tool),
        };
        let rename = change
            .likely_rename
            .as_deref()
            .map(|other| match change.change {
                ChangeKind::Removed => format!(" (likely renamed to {other:?})"),
                _ => format!(" (likely renamed from {other:?})"),
            })
            .unwrap_or_default();
        writeln!(out, "{tool}: {kind}, {}{rename}", change.class.as_str())?;
        // Each part under its own class; a part rewritten with the same meaning is left out.
        for part in change
            .schemas
            .iter()
            .filter(|p| p.class != Class::Identical)
        {
            writeln!(out, "    {}: {}", part.schema.as_str(), part.class.as_str())?;
            // Each reason under its own class.
            for (i, reason) in part.reasons.iter().enumerate() {
                let own = part.reason_classes.get(i).copied().unwrap_or(part.class);
                writeln!(out, "        [{}] {reason}", own.as_str())?;
            }
        }
    }
    let s = &report.summary;
    writeln!(
        out,
        "{} tools changed ({} added, {} removed, {} changed): {} compatible, {} breaking, {} unknown, {} to review; {} rewritten with the same meaning (identical)",
        report.changes.len() - s.identical,
        s.added,
        s.removed,
        s.changed,
        s.compatible,
        s.breaking,
        s.unknown,
        s.review,
        s.identical
    )?;
    match s.failed_on.is_empty() {
        true => writeln!(out, "passed"),
        false => writeln!(out, "failed on: {}", s.failed_on.join(", ")),
    }
}
