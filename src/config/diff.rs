//! `schemagate diff`'s flags.

use super::ServeArgs;
use crate::cli::diff::{DiffConfig, FailOn};
use crate::cli::Output;
use clap::Parser;
use std::path::PathBuf;

/// Compare two tools/list snapshots as a registration would: each tool added, removed or
/// changed, with its class (identical, compatible, breaking, unknown) and reasons. Exit code 1
/// when a change reaches --fail-on, 2 when a file cannot be read.
#[derive(Debug, clap::Args)]
pub struct DiffArgs {
    /// The snapshot in force: a tools/list result, or {"servers": {NAME: tools/list result}}.
    pub old: PathBuf,
    /// The new snapshot, in the same shape.
    pub new: PathBuf,
    /// Which changes fail the run (exit code 1): a list of classes (breaking, unknown), or any,
    /// or never.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "breaking,unknown"
    )]
    pub fail_on: Vec<FailOn>,
    /// The report: text, or JSON.
    #[arg(long, value_enum, default_value = "text")]
    pub output: Output,
    /// Trust policy file (TOML), as for `serve`: whether formats assert and which regex
    /// engine patterns compile with, per server and tool.
    #[arg(long)]
    pub policy: Option<PathBuf>,
}

impl DiffArgs {
    /// The core's configuration: `serve`'s defaults, one worker, and the policy if given.
    pub fn diff_config(self) -> anyhow::Result<DiffConfig> {
        let mut argv = vec![
            "serve".to_owned(),
            "--worker-threads".to_owned(),
            "1".to_owned(),
        ];
        if let Some(policy) = &self.policy {
            argv.push("--policy".to_owned());
            argv.push(policy.display().to_string());
        }
        let alone = |f: &FailOn| matches!(f, FailOn::Any | FailOn::Never);
        anyhow::ensure!(
            self.fail_on.len() == 1 || !self.fail_on.iter().any(alone),
            "--fail-on takes a list of classes (breaking,unknown), or `any` or `never` alone"
        );
        let serve = ServeArgs::try_parse_from(argv)?;
        Ok(DiffConfig {
            gate: serve.gate_config()?,
            old: self.old,
            new: self.new,
            fail_on: self.fail_on,
            output: self.output,
        })
    }
}
