//! `schemagate check --tools TOOLS.json LOG...`: recorded traffic judged offline, by the same
//! core, policy and limits as the service, on every core.
//!
//! A log is either one check per line in the REST body's shape (`--format checks`, read by
//! [`checks`]) or an MCP session's JSON-RPC messages, one per line (`--format jsonrpc`, replayed
//! through the MCP rules the proxy runs by [`transcript`]). Either way the verdicts are counted
//! ([`tally`]), written as they come ([`sink`]), and summed up at the end ([`report`]): a table
//! or JSON on stdout, JUnit and every verdict as JSON lines on request. The exit code says
//! whether CI should stop: 1 when the policy would reject a check, 2 when a line or a file
//! could not be read (every other line is still checked).

mod checks;
mod report;
mod sink;
mod tally;
mod transcript;

use super::snapshot;
use super::Output;
use crate::core::gate::{Gate, GateConfig};
use crate::core::registry::RegisterOptions;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use sink::{InputError, Kept, Recorder, Sink};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tally::Tally;

/// Exit code: every check passes under the policy.
pub const PASSED: i32 = 0;
/// Exit code: the policy would reject some check.
pub const REJECTED: i32 = 1;
/// Exit code: the flags are wrong, or some file or line could not be read.
pub const BAD_INPUT: i32 = 2;

/// Input errors printed on stderr (the JSON summary and JUnit list more).
const PRINTED_ERRORS: usize = 20;

/// The name `-` stands for: standard input.
const STDIN: &str = "-";

/// How the logs are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// One check per line, in the REST body's shape (`server`, `tool`, `result` | `arguments`
    /// | `instance`, `attempt`, `call_id`, ...).
    Checks,
    /// An MCP session's JSON-RPC messages, one per line, both directions as relayed: a
    /// `tools/list` answer registers, each `tools/call` and its answer are checked.
    Jsonrpc,
}

/// A server's `tools/list` result, by the server's name.
type Contracts = Vec<(String, bytes::Bytes)>;

/// What `schemagate check` needs, built from its flags.
pub struct CheckConfig {
    /// The core's configuration: policy and limits, as the service's. Each transcript is
    /// replayed on a session of the core ([`Gate::session`]), so the contracts one lists stay
    /// its own.
    pub gate: GateConfig,
    pub logs: Vec<PathBuf>,
    /// `tools/list` results: one server's (named by `server`), or `{"servers": {...}}`.
    pub tools: Option<PathBuf>,
    /// The server of a lone `tools/list` result, and of the transcripts.
    pub server: Option<String>,
    pub format: Format,
    pub output: Output,
    pub junit: Option<PathBuf>,
    pub verdicts: Option<PathBuf>,
    /// Threads that judge.
    pub jobs: usize,
    /// Failing fields listed in the summary.
    pub top_fields: usize,
    /// Longest line read: a check (`--max-body-bytes`) or a message (`--max-message-bytes`).
    pub max_line_bytes: usize,
    /// Requests in flight one transcript's session follows.
    pub max_in_flight: usize,
    /// Draw a progress bar on stderr.
    pub progress: bool,
}

/// What every part of one run shares.
#[derive(Clone)]
struct Run {
    /// The core, with the tools file's contracts; each transcript gets a session of it.
    gate: Arc<Gate>,
    recorder: Recorder,
    jobs: usize,
    max_line_bytes: usize,
}

/// Runs the check; answers the exit code, having written the summary to `out` and the input
/// errors to `err`. With `--verdicts -`, the verdicts go to standard output and the summary to
/// `err`.
pub async fn run(config: CheckConfig, out: &mut dyn Write, err: &mut dyn Write) -> i32 {
    let verdicts_out = config.verdicts.as_deref() == Some(Path::new(STDIN));
    match check(config, err).await {
        Ok(finished) => {
            let written = match verdicts_out {
                true => finished.write(err),
                false => finished.write(out),
            };
            if let Err(e) = written {
                let _ = writeln!(err, "schemagate check: {e:#}");
                return BAD_INPUT;
            }
            finished.exit_code()
        }
        Err(e) => {
            let _ = writeln!(err, "schemagate check: {e:#}");
            BAD_INPUT
        }
    }
}

/// A run's end: what it counted and kept, and how to report it.
struct Finished {
    report: report::Report,
    output: Output,
}

impl Finished {
    fn write(&self, out: &mut dyn Write) -> anyhow::Result<()> {
        match self.output {
            Output::Json => {
                serde_json::to_writer_pretty(&mut *out, &self.report)?;
                writeln!(out)?;
            }
            Output::Text => self.report.write_text(out)?,
        }
        Ok(())
    }

    fn exit_code(&self) -> i32 {
        if self.report.input_errors > 0 {
            BAD_INPUT
        } else if self.report.total.rejected > 0 {
            REJECTED
        } else {
            PASSED
        }
    }
}

async fn check(config: CheckConfig, err: &mut dyn Write) -> anyhow::Result<Finished> {
    let names = refuse_clashing_files(&config)?;
    let gate = Gate::new(config.gate)?;
    let mut kept = Kept::default();
    let mut tally = Tally::default();
    let (contracts, server) = contracts(
        config.tools.as_deref(),
        config.server.as_deref(),
        config.format,
    )?;
    let file = config
        .tools
        .as_ref()
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    register(&gate, &contracts, (&file, &mut kept.errors));
    tally.input_errors += kept.errors.len() as u64;
    let verdicts: Option<Box<dyn Write + Send>> = match &config.verdicts {
        Some(path) if path == Path::new(STDIN) => Some(Box::new(
            std::io::BufWriter::with_capacity(64 << 10, std::io::stdout()),
        )),
        // Small: a check-line batch (about 100 KB of verdicts) is written as it is, not copied.
        Some(path) => Some(Box::new(std::io::BufWriter::with_capacity(
            64 << 10,
            std::fs::File::create(path).map_err(|e| {
                anyhow::anyhow!("{}: cannot write the verdicts there: {e}", path.display())
            })?,
        ))),
        None => None,
    };
    let recorder = Recorder::new(
        Arc::clone(&names),
        config.verdicts.is_some(),
        config.tools.as_ref().map(|p| p.display().to_string()),
        config.format == Format::Jsonrpc,
    );
    let sink = Sink {
        verdicts,
        progress: progress_bar(&config.logs, config.progress),
        freed: None,
        kept,
    };
    let run = Run {
        gate,

        recorder,
        jobs: config.jobs.max(1),
        max_line_bytes: config.max_line_bytes,
    };
    let started = std::time::Instant::now();
    let (counted, kept, failed) = match config.format {
        Format::Checks => checks::run(&run, &config.logs, sink).await?,
        Format::Jsonrpc => {
            let run = run.clone();
            transcript::run(run, &config.logs, sink, server, config.max_in_flight).await?
        }
    };
    tally.add(counted);
    if let Some(e) = failed {
        let path = config.verdicts.as_deref().unwrap_or(Path::new(""));
        anyhow::bail!("{}: cannot write the verdicts: {e}", path.display());
    }
    print_input_errors(&kept, &tally, err);
    let report = report::Report::new(&tally, kept, &names, started.elapsed(), config.top_fields);
    if let Some(path) = &config.junit {
        write_junit(&report, path)?;
    }
    Ok(Finished {
        report,
        output: config.output,
    })
}

/// The logs' names, as reports give them; refused when standard input is named twice, or an
/// output would overwrite an input.
fn refuse_clashing_files(config: &CheckConfig) -> anyhow::Result<Arc<[String]>> {
    let names: Arc<[String]> = config
        .logs
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    anyhow::ensure!(
        names.iter().filter(|n| n.as_str() == STDIN).count() <= 1,
        "`-` (standard input) can be read only once"
    );
    for output in [&config.verdicts, &config.junit].into_iter().flatten() {
        let inputs = config.logs.iter().chain(&config.tools);
        if let Some(input) = inputs.into_iter().find(|input| same_file(input, output)) {
            anyhow::bail!(
                "{}: is also an input ({}): writing there would overwrite it; choose another file",
                output.display(),
                input.display()
            );
        }
    }
    Ok(names)
}

/// The lines that could not be checked, on `err`: the first [`PRINTED_ERRORS`], then how many
/// more.
fn print_input_errors(kept: &Kept, tally: &Tally, err: &mut dyn Write) {
    for error in kept.errors.iter().take(PRINTED_ERRORS) {
        let _ = writeln!(err, "{error}");
    }
    let printed = kept.errors.len().min(PRINTED_ERRORS) as u64;
    let unlisted = tally.input_errors.saturating_sub(printed);
    if unlisted > 0 {
        let _ = writeln!(
            err,
            "... and {unlisted} more lines that could not be checked"
        );
    }
}

/// Writes `report` as JUnit XML to `path`.
fn write_junit(report: &report::Report, path: &Path) -> anyhow::Result<()> {
    let mut file = std::io::BufWriter::new(std::fs::File::create(path).map_err(|e| {
        anyhow::anyhow!(
            "{}: cannot write the JUnit report there: {e}",
            path.display()
        )
    })?);
    report
        .write_junit(&mut file)
        .and_then(|()| file.flush())
        .map_err(|e| anyhow::anyhow!("{}: cannot write the JUnit report: {e}", path.display()))
}

/// The tools file's contracts by server name, and the server a transcript speaks to.
fn contracts(
    tools: Option<&Path>,
    server: Option<&str>,
    format: Format,
) -> anyhow::Result<(Contracts, String)> {
    let snapshot = match tools {
        Some(path) => snapshot::read(path)?,
        None => Default::default(),
    };
    let lone = snapshot.len() == 1 && snapshot.contains_key(snapshot::LONE_SERVER);
    if lone && server.is_none() {
        anyhow::bail!(
            "{}: holds one server's tools/list result: name that server with --server NAME (the `server` the checks carry)",
            tools.map(|p| p.display().to_string()).unwrap_or_default()
        );
    }
    let server = match (server, format) {
        (Some(server), _) => server.to_owned(),
        (None, Format::Checks) => String::new(),
        (None, Format::Jsonrpc) if snapshot.len() == 1 => {
            snapshot.keys().next().cloned().unwrap_or_default()
        }
        // Each transcript names its own: its recording's file name, or its initialize answer.
        (None, Format::Jsonrpc) => String::new(),
    };
    let contracts = snapshot
        .into_iter()
        .map(|(name, list)| match lone {
            true => (server.clone(), list),
            false => (name, list),
        })
        .collect();
    Ok((contracts, server))
}

/// Registers `contracts` on `gate`. A tool whose schema cannot be used is an input error of
/// `file` (the tools file), put in `errors` (checks on it say so too); the other tools are
/// registered.
fn register(gate: &Gate, contracts: &Contracts, (file, errors): (&str, &mut Vec<InputError>)) {
    for (name, list) in contracts {
        let problems: Vec<(Option<&'static str>, String)> =
            match gate.register_now(name, list, RegisterOptions::default()) {
                Ok(registration) => registration
                    .tools
                    .iter()
                    .flat_map(|tool| {
                        tool.errors.iter().map(|problem| {
                            (
                                Some(problem.code),
                                format!(
                                    "server {name:?}, tool {:?}: its {} cannot be used: {}",
                                    tool.name, problem.schema, problem.message
                                ),
                            )
                        })
                    })
                    .collect(),
                Err(e) => vec![(
                    Some(e.code()),
                    format!("server {name:?}: its tools cannot be registered: {e}"),
                )],
            };
        errors.extend(problems.into_iter().map(|(code, message)| InputError {
            file: file.to_owned(),
            line: None,
            code,
            message,
        }));
    }
}

/// Whether `a` and `b` name the same existing file.
fn same_file(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

/// A thread named `name` (as `top -H` and profilers show it) running `f`.
fn thread<T: Send + 'static>(
    name: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> std::io::Result<std::thread::JoinHandle<T>> {
    std::thread::Builder::new().name(name.to_owned()).spawn(f)
}

/// A bar of the logs' bytes, with rate and ETA, on stderr when it is a terminal (and asked
/// for); hidden otherwise. Standard input has no known length: a spinner then.
fn progress_bar(logs: &[PathBuf], shown: bool) -> ProgressBar {
    if !shown {
        return ProgressBar::hidden();
    }
    let total: Option<u64> = logs
        .iter()
        .map(|p| match p.to_str() {
            Some(STDIN) => None,
            _ => std::fs::metadata(p).ok().map(|m| m.len()),
        })
        .sum();
    let bar = ProgressBar::with_draw_target(total, ProgressDrawTarget::stderr());
    let template = match total {
        Some(_) => "{bar:30} {bytes}/{total_bytes} {binary_bytes_per_sec} ETA {eta} {msg}",
        None => "{spinner} {bytes} {binary_bytes_per_sec} {msg}",
    };
    if let Ok(style) = ProgressStyle::with_template(template) {
        bar.set_style(style);
    }
    bar
}
