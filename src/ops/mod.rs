//! Process plumbing that knows nothing of checks: memory given back to the operating system
//! ([`memory`]), the shutdown signal ([`shutdown`]), and the one file-watch helper that reloads
//! configuration files ([`reload`]). Every layer may use it; it uses none.

pub mod memory;
pub(crate) mod reload;
pub mod shutdown;
