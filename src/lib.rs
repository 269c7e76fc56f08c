//! schemagate checks AI tool results against the schemas their tools declare, before an
//! orchestrator acts on them.
//!
//! The module map, from the inside out. Each layer imports only the layers listed before it.
//!
//! - [`ops`]: process plumbing that knows nothing of checks: memory given back to the operating
//!   system, the shutdown signal, the one file-watch helper every reload goes through, and an
//!   MCP server run as a child process with its stdio's line framing (the proxy's and the
//!   gateway's stdio routes').
//! - [`core`]: a check end to end, with no transport.
//!   - [`core::domain`] the names a check carries (`ServerId`, `ToolName`, `SchemaHash`, `Tier`,
//!     `ProtocolVersion`); [`core::error`] why a check cannot be made at all.
//!   - [`core::check`] a check as the core receives it, and how one is read from JSON;
//!     [`core::document`] a payload in the core's own representation (numbers kept exactly),
//!     which the validator judges in place;
//!     [`core::verdict`] the answer, its errors and its feedback line; [`core::drift`] a
//!     result's text copy against its structured content.
//!   - [`core::policy`] the trust policy (tiers per server and tool, the rule switches);
//!     [`core::auth`] who may do what (tokens, scopes, the servers a token may name).
//!   - [`core::schema`] a schema's cost bound, its compilation (refusing hostile schemas), the
//!     cache of compiled schemas and the schema texts by hash.
//!   - [`core::registry`] contracts and their registration, in process or shared through Redis.
//!   - `core::resolve` which schema a check is judged against; `core::judge` the judge, which
//!     turns a check into a verdict; `core::executor` the worker pool; `core::receiving` the
//!     bytes of bodies still arriving; [`core::gate`] the gate, the entry points every adapter
//!     calls; [`core::metrics`] the series and `core::instrument` what each request counts.
//! - [`mcp`]: the MCP rules with no transport: the JSON-RPC envelope, a session's state, the
//!   messages schemagate writes, contract learning from `tools/list`, and the call and result
//!   rules, behind a [`mcp::Boundary`] that any transport feeds.
//! - [`net`]: what socket adapters share: connection limits and timeouts, the `Host` and
//!   `Origin` checks, TLS, the admin server.
//! - The adapters, which depend on the layers above and never on each other: [`rest`] and
//!   [`grpc`] (the service's two ports), [`proxy`] (`schemagate proxy`, the MCP wire on stdio) and
//!   [`gateway`] (`schemagate gateway`, the MCP wire on Streamable HTTP, in front of remote
//!   servers).
//! - [`cli`]: the command line's own doors onto the core, with no service (`schemagate check`
//!   over recorded traffic, `schemagate diff` over two `tools/list` snapshots). `check` replays
//!   transcripts through [`mcp`] as the proxy does, without depending on the proxy.
//! - [`serve`]: `schemagate serve`, start-up and drain.
//! - [`config`]: the command line, turned into each layer's own configuration.
//!
//! The words: the **core** is the layer; the **gate** its entry point; the **judge** the part
//! that judges; a **contract** is a server's tools with their schemas, as registered or learned
//! from `tools/list`; a **registration** is the act that puts a contract in force, and its
//! record. "Validator" alone names only the gRPC service `schemagate.v1.Validator`.

// The reference is built with `--document-private-items` (CI checks it): links from a public
// item's docs to the private rooms it describes resolve there.
#![allow(rustdoc::private_intra_doc_links)]

pub mod cli;
pub mod config;
pub mod core;
pub mod gateway;
pub mod grpc;
pub mod mcp;
pub mod net;
pub mod ops;
pub mod proxy;
pub mod rest;
pub mod serve;

pub use serve::Listeners;

use crate::config::ServeArgs;
use std::future::Future;

/// Runs `schemagate serve` with `args` on `listeners` until `shutdown`, then drains (see
/// [`serve::run`]).
pub async fn run(
    args: ServeArgs,
    listeners: Listeners,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    serve::run(args.serve_config()?, listeners, shutdown).await
}
