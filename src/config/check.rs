//! `schemagate check`'s flags.

use super::*;
use crate::cli::check::{CheckConfig, Format};
use crate::cli::Output;
use crate::core::auth::Auth;
use std::path::PathBuf;

/// The most threads `--jobs` may ask for.
const MAX_JOBS: usize = 1024;

/// Judge recorded traffic offline with the service's core, policy and limits: each log line a
/// check in the REST body's shape (`--format checks`), or an MCP session's JSON-RPC messages
/// (`--format jsonrpc`). Prints a summary; exit code 1 when the policy would reject a check, 2
/// when a line or file could not be read.
#[derive(Debug, clap::Args)]
pub struct CheckArgs {
    /// The logs, read in turn; `-` reads standard input.
    #[arg(required = true, value_name = "LOG")]
    pub logs: Vec<PathBuf>,
    /// The contracts: one server's tools/list result (name the server with --server), or
    /// {"servers": {NAME: tools/list result}}.
    #[arg(long, value_name = "TOOLS.json")]
    pub tools: Option<PathBuf>,
    /// The server of a lone tools/list result, and the server the transcripts speak to.
    #[arg(long)]
    pub server: Option<String>,
    /// How the logs are written.
    #[arg(long, value_enum, default_value = "checks")]
    pub format: Format,
    /// The summary on stdout: a table, or JSON.
    #[arg(long, value_enum, default_value = "text")]
    pub output: Output,
    /// Also write JUnit XML here: a test case per server and tool.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// Also write every verdict here, one JSON line each, with its log and line.
    #[arg(long, value_name = "FILE")]
    pub verdicts: Option<PathBuf>,
    /// Trust policy file (TOML), as for `serve`: the tier of each server and tool.
    #[arg(long)]
    pub policy: Option<PathBuf>,
    /// Threads that judge (transcripts replayed at once, for --format jsonrpc); 0 means one
    /// per core.
    #[arg(long, default_value_t = 0)]
    pub jobs: usize,
    /// Failing fields listed in the summary.
    #[arg(long, default_value_t = 10)]
    pub top_fields: usize,
    /// Longest check line (`--format checks`), in bytes, as the service's longest body.
    #[arg(long, default_value_t = DEFAULT_MAX_BODY_BYTES)]
    pub max_body_bytes: usize,
    /// Longest message (`--format jsonrpc`), in bytes, as the proxy's.
    #[arg(long, default_value_t = DEFAULT_MAX_MESSAGE_BYTES)]
    pub max_message_bytes: usize,
    /// The limits a check and its schema are held to, as for `serve`.
    #[command(flatten)]
    pub limits: CheckLimitArgs,
}

impl CheckArgs {
    /// What `schemagate check` runs with; `progress`: stderr is a terminal.
    pub fn check_config(self, progress: bool) -> anyhow::Result<CheckConfig> {
        let jobs = match self.jobs {
            0 => std::thread::available_parallelism().map_or(1, usize::from),
            n => n,
        };
        anyhow::ensure!(
            jobs <= MAX_JOBS,
            "--jobs must be at most {MAX_JOBS} (0: one per core)"
        );
        let max_line_bytes = match self.format {
            Format::Checks => self.max_body_bytes,
            Format::Jsonrpc => self.max_message_bytes,
        };
        anyhow::ensure!(
            max_line_bytes >= 1024,
            "--max-body-bytes and --max-message-bytes must be at least 1024"
        );
        if let Some(server) = &self.server {
            anyhow::ensure!(!server.is_empty(), "--server must not be empty");
        }
        let limits = self.limits.limits(
            max_line_bytes,
            DEFAULT_MAX_BATCH_ITEMS,
            Duration::from_secs(DEFAULT_BODY_READ_TIMEOUT_SECS),
        )?;
        // A policy that cannot be read is said now.
        let gate = mcp_gate_config(McpGate {
            limits,
            max_message_bytes: max_line_bytes,
            policy: self.policy,
            // Check lines are judged on the command's own threads; the transcripts, a session
            // of the core each, share its workers (one per core) for their large payloads.
            worker_threads: 0,
            registry: None,
            auth: Auth::new(None, Vec::new())?,
        })?;
        Ok(CheckConfig {
            gate,
            logs: self.logs,
            tools: self.tools,
            server: self.server,
            format: self.format,
            output: self.output,
            junit: self.junit,
            verdicts: self.verdicts,
            jobs,
            top_fields: self.top_fields,
            max_line_bytes,
            max_in_flight: DEFAULT_MAX_CALLS_IN_FLIGHT,
            progress,
        })
    }
}
