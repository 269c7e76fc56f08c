//! The command line's own doors onto the core, with no service running: [`check`] judges
//! recorded traffic offline; [`diff`] compares two `tools/list` snapshots as a registration
//! would.

pub mod check;
pub mod diff;
mod snapshot;

/// How a command's report is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    Text,
    Json,
}
