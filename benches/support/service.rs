//! The service as the benches set it up: its default configuration, with a corpus's tools
//! registered, and the compile settings a check gets under it.

use bytes::Bytes;
use schemagate::config::ServeArgs;
use schemagate::core::gate::Gate;
use schemagate::core::policy::{CompileOptions, Policy};
use schemagate::core::registry::RegisterOptions;
use schemagate::core::schema::compile::CompileLimits;
use serde_json::Value;
use std::sync::Arc;

/// A core with the default flags, `threads` workers, and every server of `tools` registered.
pub fn gate(threads: usize, tools: &Value) -> Arc<Gate> {
    registered(bare_gate(threads), tools)
}

/// `gate` with every server of `tools` registered.
fn registered(gate: Arc<Gate>, tools: &Value) -> Arc<Gate> {
    for (server, list) in tools["servers"].as_object().expect("servers") {
        gate.register_now(
            server,
            &Bytes::from(list.to_string()),
            RegisterOptions::default(),
        )
        .expect("register");
    }
    gate
}

/// Registers every server's tools of `tools` again as their own shadow schemas: each check is
/// then judged twice, by the contract and by the candidate.
#[allow(dead_code)]
pub fn shadow_everything(gate: &Gate, tools: &Value) {
    for (server, list) in tools["servers"].as_object().expect("servers") {
        gate.register_shadow_now(server, &Bytes::from(list.to_string()))
            .expect("register shadow schemas");
    }
}

/// A core with the default flags, `threads` workers, the policy `policy` (TOML) and every
/// server of `tools` registered.
#[allow(dead_code)]
pub fn gate_with_policy(threads: usize, tools: &Value, policy: &str) -> Arc<Gate> {
    let file = tempfile::NamedTempFile::new().expect("a policy file");
    std::fs::write(file.path(), policy).expect("write the policy");
    // Kept for the run: the core watches its policy file.
    let (_, path) = file.keep().expect("keep the policy file");
    let threads = threads.to_string();
    let path = path.to_string_lossy().into_owned();
    let args = <ServeArgs as clap::Parser>::parse_from([
        "serve",
        "--worker-threads",
        &threads,
        "--policy",
        &path,
    ]);
    registered(
        Gate::new(args.gate_config().expect("config")).expect("gate"),
        tools,
    )
}

/// A policy of one rule per tool of `tools`, each on its results, of expression `expr`.
#[allow(dead_code)]
pub fn one_rule_per_tool(tools: &Value, expr: &str) -> String {
    let mut policy = String::new();
    for (server, list) in tools["servers"].as_object().expect("servers") {
        for tool in list["tools"].as_array().into_iter().flatten() {
            let name = tool["name"].as_str().unwrap_or("");
            policy += &format!(
                "[[rules]]\nname = \"{server}.{name}\"\nserver = \"{server}\"\ntool = \"{name}\"\npayload = \"result\"\nexpr = \"{expr}\"\n\n"
            );
        }
    }
    policy
}

/// A core with the default flags and `threads` workers, nothing registered.
pub fn bare_gate(threads: usize) -> Arc<Gate> {
    let threads = threads.to_string();
    let args = <ServeArgs as clap::Parser>::parse_from(["serve", "--worker-threads", &threads]);
    Gate::new(args.gate_config().expect("config")).expect("gate")
}

/// The compile options and limits of a check on a registered tool under the default flags and
/// policy.
pub fn compile_settings() -> (CompileOptions, CompileLimits) {
    let config = ServeArgs::default().gate_config().expect("config");
    let rules = Policy::default().rules_for(Some("server"), Some("tool"));
    (rules.compile, config.limits.compile())
}
