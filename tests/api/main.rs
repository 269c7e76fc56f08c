//! The integration tests: one binary (one link), a module per area, each starting real servers on
//! loopback ports through [`helpers`].

mod helpers;
use schemagate_testkit::http_client;
use schemagate_testkit::mcp_test_server;
use schemagate_testkit::redis_server;

mod auth;
mod bad_input;
mod checks;
mod cli_check;
mod cli_diff;
mod conformance;
mod contracts;
mod deploy_manifests;
mod envelopes;
mod gateway;
mod gateway_refusals;
mod gateway_sessions;
mod grpc;
mod hostile_load;
mod hostile_schemas;
mod mcp_semantics;
mod observability;
mod openapi;
mod prometheus_e2e;
mod proxy;
mod recording;
mod registry;
mod releases;
mod roots;
mod rules;
mod shutdown;
mod tls;
