//! What schemagate's integration tests, benchmarks and examples share, as a crate of its own (a
//! dev-dependency) rather than files pulled in by `#[path]`: the benchmark corpus, reqwest
//! clients with the crypto provider installed, the test MCP server brought up to date, and a
//! real `redis-server` on a loopback port. None of it depends on schemagate (what does, the
//! in-process service of the benchmarks, stays in `benches/support/service.rs`).

pub mod corpus;
pub mod http_client;
pub mod mcp_test_server;
pub mod redis_server;
