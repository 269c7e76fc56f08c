//! Process plumbing that knows nothing of checks: memory given back to the operating system
//! ([`memory`]), the shutdown signal ([`shutdown`]), the one file-watch helper that reloads
//! configuration files ([`reload`]), an MCP server run as a child process ([`child`]) and the
//! newline-delimited framing of its stdio ([`lines`]), a future that wakes itself polled again
//! at once ([`quiet`]), the count of a flood between log lines ([`tally`]), sessions written to
//! files line by line ([`record`]), and UTC time stamps as text ([`stamp`]). Every layer may use
//! it; it uses none.

pub mod child;
pub mod lines;
pub mod memory;
pub mod quiet;
pub mod record;
pub(crate) mod reload;
pub mod shutdown;
pub mod stamp;
pub mod tally;
