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
    // Cargo gives a test the package's variables and OUT_DIR; a build script that watches one (ring's
    // watches CARGO_MANIFEST_DIR and OUT_DIR) would see it change and rebuild the crate graph twice per run.
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy();
        let package_var = name.starts_with("CARGO_PKG_")
            || name.starts_with("CARGO_BIN_EXE_")
            || matches!(
                name.as_ref(),
                "CARGO_MANIFEST_DIR"
                    | "CARGO_MANIFEST_PATH"
                    | "CARGO_PRIMARY_PACKAGE"
                    | "CARGO_CRATE_NAME"
                    | "CARGO_TARGET_TMPDIR"
                    | "OUT_DIR"
            );
        if package_var {
            cargo.env_remove(name.as_ref());
        }
    }
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

/// The `sized` tool's result of about `bytes` bytes, as the test server answers it and as the
/// load harness's relay legs and `examples/relay_passes.rs` measure it: records in
/// `structuredContent`, and their JSON copy in a text block (one long string dense with escaped
/// quotes), as tools send them.
pub fn sized_result(bytes: usize) -> String {
    use serde_json::json;
    let mut rows = Vec::new();
    let mut structured = json!({"id": 7, "email": "ada@example.com", "rows": []});
    while serde_json::to_string(&structured).map_or(0, |s| s.len()) * 2 < bytes {
        let n = rows.len();
        rows.push(
            json!({"n": n, "label": format!("row {n}"), "ok": n % 3 != 0, "score": n as f64 / 8.0}),
        );
        structured["rows"] = json!(rows);
    }
    let copy = serde_json::to_string(&structured).unwrap_or_default();
    json!({"content": [{"type": "text", "text": copy}], "structuredContent": structured})
        .to_string()
}
