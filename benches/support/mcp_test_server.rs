//! The MCP server examples/mcp_test_server.rs, which the proxy's tests and its load-harness leg
//! run behind `schemagate proxy`: brought up to date (`cargo test` builds examples, a run of one
//! test or bench target does not; cargo does nothing when it is fresh) in the profile of the
//! binary asking, and its path.

use std::path::PathBuf;

pub fn build() -> std::io::Result<PathBuf> {
    let exe = std::env::current_exe()?;
    // target/<profile>/deps/<binary> -> target/<profile>/examples/mcp_test_server
    let profile_dir = exe.parent().and_then(|deps| deps.parent()).ok_or_else(|| {
        std::io::Error::other(format!("no target directory above {}", exe.display()))
    })?;
    let mut cargo = std::process::Command::new(env!("CARGO"));
    cargo.args(["build", "--quiet", "--example", "mcp_test_server"]);
    if profile_dir.ends_with("release") {
        cargo.arg("--release");
    }
    let status = cargo.status()?;
    if !status.success() {
        return Err(std::io::Error::other(format!(
            "cargo build --example mcp_test_server: {status}"
        )));
    }
    Ok(profile_dir.join("examples").join("mcp_test_server"))
}
