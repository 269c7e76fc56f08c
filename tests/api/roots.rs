//! Rules on paths before a real server: `schemagate proxy` in front of the official
//! `@modelcontextprotocol/server-filesystem` (npm), driven by an rmcp client that declares
//! roots. The server honours roots itself, so each refusal here must be schemagate's: the
//! rule's message, in a result schemagate wrote, before the server saw the call. The roots are
//! learned from the client's answer to the server's `roots/list`, and followed when they change.

// rmcp marks roots deprecated (SEP-2577, a revision to come); every revision a client or a
// server speaks today has them, and so does this test.
#![allow(deprecated)]

use crate::helpers::mcp::*;
use crate::helpers::metric;
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, ErrorData,
    ListRootsResult, Root,
};
use rmcp::service::{RequestContext, RunningService};
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::process::Command;

const MESSAGE: &str =
    "that path is outside the folders the user shared; ask the user to share it first";

/// The filesystem server's command, when installed; else `None` (the test skips), or a panic
/// under `SCHEMAGATE_REQUIRE_FILESYSTEM=1`.
fn filesystem_server() -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join("mcp-server-filesystem"))
            .find(|path| path.is_file())
    });
    if found.is_none() {
        let missing = "mcp-server-filesystem (npm install -g @modelcontextprotocol/server-filesystem@2026.8.31)";
        if std::env::var("SCHEMAGATE_REQUIRE_FILESYSTEM").as_deref() == Ok("1") {
            panic!("SCHEMAGATE_REQUIRE_FILESYSTEM=1 but {missing} is not installed");
        }
        eprintln!("skipped: needs {missing}");
    }
    found
}

/// A client whose roots are whatever the test sets.
#[derive(Clone)]
struct RootsHost {
    roots: Arc<Mutex<Vec<String>>>,
}

impl ClientHandler for RootsHost {
    fn get_info(&self) -> ClientConfig {
        let mut info = ClientConfig::default();
        info.capabilities = ClientCapabilities::builder()
            .enable_roots()
            .enable_roots_list_changed()
            .build();
        info
    }

    async fn list_roots(
        &self,
        _context: RequestContext<RoleClient>,
    ) -> Result<ListRootsResult, ErrorData> {
        let roots = self.roots.lock().map(|r| r.clone()).unwrap_or_default();
        Ok(ListRootsResult::new(
            roots.into_iter().map(Root::new).collect(),
        ))
    }
}

async fn read(client: &RunningService<RoleClient, RootsHost>, path: &str) -> CallToolResult {
    let Value::Object(arguments) = json!({"path": path}) else {
        unreachable!()
    };
    client
        .call_tool(CallToolRequestParams::new("read_text_file").with_arguments(arguments))
        .await
        .expect("tools/call through the proxy")
}

fn text(result: &CallToolResult) -> String {
    serde_json::to_value(&result.content)
        .map(|v| v.to_string())
        .unwrap_or_default()
}

/// Whether schemagate refused the call with the rule's message.
fn refused_by_the_rule(result: &CallToolResult) -> bool {
    let text = text(result);
    result.is_error == Some(true)
        && text.contains("schemagate did not send this call")
        && text.contains(MESSAGE)
}

/// Reads `path` until `done` holds of the result (the roots reach the server and the proxy
/// when the server asks for them, after the session begins or changes).
async fn read_until(
    client: &RunningService<RoleClient, RootsHost>,
    path: &str,
    done: impl Fn(&CallToolResult) -> bool,
) -> CallToolResult {
    let mut last = read(client, path).await;
    for _ in 0..50 {
        if done(&last) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        last = read(client, path).await;
    }
    last
}

fn uri(path: &Path) -> String {
    format!("file://{}", path.display())
}

/// The folders of a test: `shared` holds a.txt ("inside"), `secret` b.txt ("outside"); and
/// the policy holding the filesystem server's paths within the client's roots.
struct Folders {
    _dir: tempfile::TempDir,
    base: PathBuf,
    shared: PathBuf,
    secret: PathBuf,
    policy: PathBuf,
}

fn folders() -> Folders {
    let dir = tempfile::tempdir().expect("a directory");
    let base = dir.path().canonicalize().expect("canonical");
    let (shared, secret) = (base.join("shared"), base.join("secret"));
    for (folder, file, content) in [(&shared, "a.txt", "inside"), (&secret, "b.txt", "outside")] {
        std::fs::create_dir_all(folder).expect("mkdir");
        std::fs::write(folder.join(file), content).expect("write");
    }
    let policy = base.join("policy.toml");
    std::fs::write(
        &policy,
        format!(
            "[[rules]]\nname = \"files_in_roots\"\nserver = \"files\"\npayload = \"arguments\"\npaths = [\"/path\", \"/paths/*\", \"/source\", \"/destination\"]\nmessage = \"{MESSAGE}\"\n"
        ),
    )
    .expect("write the policy");
    Folders {
        _dir: dir,
        base,
        shared,
        secret,
        policy,
    }
}

/// A client whose roots are the shared folder.
fn host(folders: &Folders) -> (RootsHost, Arc<Mutex<Vec<String>>>) {
    let roots = Arc::new(Mutex::new(vec![uri(&folders.shared)]));
    let host = RootsHost {
        roots: Arc::clone(&roots),
    };
    (host, roots)
}

/// The session: a read inside the roots passes, reads outside them (plainly, climbing with `..`,
/// as a `file://` URI, relative) are refused by the rule before the server sees them, and the
/// roots followed when they change; then the rule's failures as counted.
async fn hold_within_roots(
    client: RunningService<RoleClient, RootsHost>,
    folders: &Folders,
    roots: &Mutex<Vec<String>>,
    metrics_port: u16,
) {
    let inside = folders.shared.join("a.txt");
    let first = read_until(&client, inside.to_str().expect("UTF-8"), |r| {
        r.is_error != Some(true)
    })
    .await;
    assert!(text(&first).contains("inside"), "{first:?}");

    let outside = folders.secret.join("b.txt");
    let climbing = format!("{}/../secret/b.txt", folders.shared.display());
    for path in [
        outside.display().to_string(),
        climbing,
        uri(&outside),
        "secret/b.txt".to_owned(),
    ] {
        let result = read(&client, &path).await;
        assert!(refused_by_the_rule(&result), "{path}: {result:?}");
        let blocks = serde_json::to_value(&result.content).unwrap_or_default();
        assert!(
            !blocks
                .as_array()
                .into_iter()
                .flatten()
                .any(|b| b["text"] == "outside"),
            "{path}: the file's content leaked: {blocks}"
        );
    }

    // The roots change mid-session: the secret folder is shared, the other is not.
    *roots.lock().expect("lock") = vec![uri(&folders.secret)];
    client
        .notify_roots_list_changed()
        .await
        .expect("notifications/roots/list_changed");
    let now = read_until(&client, outside.to_str().expect("UTF-8"), |r| {
        r.is_error != Some(true)
    })
    .await;
    assert!(text(&now).contains("outside"), "{now:?}");
    let before = read(&client, inside.to_str().expect("UTF-8")).await;
    assert!(refused_by_the_rule(&before), "{before:?}");

    let metrics = metrics_text(metrics_port).await;
    client.cancel().await.expect("close the session");
    let failures = metric(
        &metrics,
        r#"schemagate_field_failures_total{server="files",tool="read_text_file",payload="arguments",path="files_in_roots",keyword="rule"}"#,
    );
    assert!(failures >= 5.0, "{failures}");
}

#[tokio::test]
async fn the_proxy_holds_a_real_filesystem_servers_paths_within_the_clients_roots() {
    let Some(server) = filesystem_server() else {
        return;
    };
    let folders = folders();
    let port = free_port();
    let mut command = Command::new(schemagate());
    command
        .args([
            "proxy",
            "--server-name",
            "files",
            "--contract-wait-ms",
            "3000",
        ])
        .arg("--policy")
        .arg(&folders.policy)
        .args(["--metrics-listen", &format!("127.0.0.1:{port}")])
        .arg("--")
        .arg(&server)
        .arg(&folders.base)
        .env("SCHEMAGATE_LOG_LEVEL", "warn")
        .env_remove("SCHEMAGATE_POLICY")
        .kill_on_drop(true);
    let transport = TokioChildProcess::builder(command)
        .stderr(Stdio::inherit())
        .spawn()
        .map(|(transport, _)| transport)
        .expect("spawn schemagate proxy");
    let (host, roots) = host(&folders);
    let client = host
        .serve(transport)
        .await
        .expect("initialize through the proxy");
    hold_within_roots(client, &folders, &roots, port).await;
}

#[tokio::test]
async fn the_gateway_holds_a_stdio_routes_paths_within_the_clients_roots() {
    let Some(server) = filesystem_server() else {
        return;
    };
    let folders = folders();
    let command = shlex::try_join([
        server.to_str().expect("UTF-8"),
        folders.base.to_str().expect("UTF-8"),
    ])
    .expect("a command a shell can quote");
    let policy = folders.policy.to_str().expect("UTF-8").to_owned();
    let gateway = Gateway::start(&[format!("files=stdio:{command}")], &["--policy", &policy]).await;
    let _ = rustls::crypto::ring::default_provider().install_default();
    let transport = StreamableHttpClientTransport::from_uri(gateway.url("files"));
    let (host, roots) = host(&folders);
    let client = host
        .serve(transport)
        .await
        .expect("initialize through the gateway");
    hold_within_roots(client, &folders, &roots, gateway.metrics_port).await;
}
