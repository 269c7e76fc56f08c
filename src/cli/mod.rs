//! The command line's own doors onto the core, with no service running: [`diff`] compares two
//! `tools/list` snapshots as a registration would.

pub mod diff;
