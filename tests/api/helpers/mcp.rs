//! What the MCP tests share, the proxy's and the gateway's: the test MCP server and the built
//! binary, an SDK client that answers sampling, a raw line-by-line peer, the gateway run as a
//! process (its stdio routes' processes counted as its children), and the by-hand Streamable
//! HTTP requests and event streams.

// Sampling is deprecated by SEP-2577 (2026-07-28), yet it is how a 2025-11-25 server asks its
// client for something, which the proxy and the gateway must relay.
#![allow(deprecated)]

use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig,
    CreateMessageRequestParams, CreateMessageResult, ProtocolVersion, SamplingMessage,
};
use rmcp::service::{RequestContext, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{
    ClientHandler, ClientLifecycleMode, ClientServiceExt, ErrorData, RoleClient, ServiceExt,
};
use serde_json::Value;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::OnceLock;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

pub(crate) const VERDICT: &str = "dev.schemagate/verdict";

/// The test MCP server, brought up to date once per run.
pub(crate) fn test_server() -> PathBuf {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| crate::mcp_test_server::build().expect("build the test MCP server"))
        .clone()
}

/// A `--route` running the test server on stdio as route `name`, with `args` after it.
pub(crate) fn stdio_route(name: &str, args: &str) -> String {
    let server = test_server().to_string_lossy().into_owned();
    let server = shlex::try_quote(&server).expect("a path a shell can quote");
    format!("{name}=stdio:{server}{args}")
}

pub(crate) fn schemagate() -> &'static str {
    env!("CARGO_BIN_EXE_schemagate")
}

/// A loopback port free now (for --metrics-listen).
pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("bind a port")
        .port()
}

/// Whether process `pid` holds the socket listening on 127.0.0.1:`port`: its inode, found in
/// the kernel's table of TCP sockets, among the process's open files.
pub(crate) fn listens_on(pid: u32, port: u16) -> bool {
    const LISTEN: &str = "0A";
    let local = format!("0100007F:{port:04X}");
    let Ok(table) = std::fs::read_to_string("/proc/net/tcp") else {
        return false;
    };
    // Each row: sl, local address, remote address, state, ..., the socket's inode tenth.
    let Some(inode) = table.lines().skip(1).find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        match fields[..] {
            [_, at, _, state, _, _, _, _, _, inode, ..] if at == local && state == LISTEN => {
                Some(format!("socket:[{inode}]"))
            }
            _ => None,
        }
    }) else {
        return false;
    };
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .any(|fd| {
            std::fs::read_link(fd.path()).is_ok_and(|link| link.as_os_str() == inode.as_str())
        })
}

/// `schemagate proxy` with `flags`, in front of the test server (`server_args` after it).
pub(crate) fn proxy_command(flags: &[&str], server_args: &[&str]) -> Command {
    let mut command = Command::new(schemagate());
    command
        .arg("proxy")
        .args(["--server-name", "crm", "--contract-wait-ms", "3000"])
        .args(flags)
        .arg("--")
        .arg(test_server())
        .args(server_args)
        .env("SCHEMAGATE_LOG_LEVEL", "warn")
        .env_remove("SCHEMAGATE_POLICY")
        .kill_on_drop(true);
    command
}

/// An SDK client that answers sampling requests.
#[derive(Clone)]
pub(crate) struct Host {
    info: ClientConfig,
}

impl Host {
    pub(crate) fn new() -> Self {
        let mut info = ClientConfig::default();
        info.capabilities = ClientCapabilities::builder()
            .enable_sampling()
            .enable_tasks()
            .build();
        Self { info }
    }

    /// A client that declares no sampling (nor tasks): servers that list by the client's
    /// capabilities offer it fewer tools.
    pub(crate) fn without_sampling() -> Self {
        Self {
            info: ClientConfig::default(),
        }
    }
}

impl ClientHandler for Host {
    fn get_info(&self) -> ClientConfig {
        self.info.clone()
    }

    #[allow(deprecated)]
    async fn create_message(
        &self,
        _params: CreateMessageRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        Ok(CreateMessageResult::new(
            SamplingMessage::assistant_text("the proxy relayed a sampling request"),
            "host-model".to_owned(),
        ))
    }
}

pub(crate) async fn call(
    client: &RunningService<RoleClient, Host>,
    tool: &str,
    args: Value,
) -> CallToolResult {
    let Value::Object(args) = args else {
        panic!("arguments must be an object")
    };
    client
        .call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(args))
        .await
        .unwrap_or_else(|e| panic!("calling {tool} through the proxy: {e}"))
}

pub(crate) fn text_of(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}

pub(crate) fn verdict_of(result: &CallToolResult) -> Value {
    result
        .meta
        .as_ref()
        .and_then(|m| m.get(VERDICT))
        .cloned()
        .unwrap_or(Value::Null)
}

pub(crate) async fn metrics_text(port: u16) -> String {
    crate::http_client::get(format!("http://127.0.0.1:{port}/metrics"))
        .await
        .expect("GET /metrics from the proxy")
        .text()
        .await
        .expect("metrics text")
}

/// The proxy in front of the raw server, driven line by line.
/// A process driven line by line on its stdin and stdout: the proxy in front of the raw test
/// server, or any other.
pub(crate) struct Raw {
    pub(crate) child: Child,
    pub(crate) stdin: ChildStdin,
    lines: Lines<BufReader<ChildStdout>>,
}

impl Raw {
    /// The proxy in front of the raw test server, with `flags`.
    pub(crate) fn start(flags: &[&str]) -> Self {
        Self::spawn(&mut proxy_command(flags, &["--raw"]))
    }

    pub(crate) fn spawn(command: &mut Command) -> Self {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn");
        let stdin = child.stdin.take().expect("stdin");
        let lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
        Self {
            child,
            stdin,
            lines,
        }
    }

    pub(crate) async fn send(&mut self, line: &str) {
        self.stdin.write_all(line.as_bytes()).await.expect("write");
        self.stdin.write_all(b"\n").await.expect("write");
    }

    pub(crate) async fn next(&mut self) -> String {
        tokio::time::timeout(Duration::from_secs(10), self.lines.next_line())
            .await
            .expect("an answer within 10 s")
            .expect("read")
            .expect("a line")
    }

    pub(crate) async fn ask(&mut self, line: &str) -> String {
        self.send(line).await;
        self.next().await
    }
}

/// The test MCP server on Streamable HTTP (`json`: answers as JSON where it can), and its URL.
pub(crate) async fn upstream(json: bool) -> (Child, String) {
    let mut command = Command::new(test_server());
    command
        .args(["--http", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .kill_on_drop(true);
    if json {
        command.arg("--json");
    }
    let mut child = command.spawn().expect("spawn the test MCP server");
    let stdout = child.stdout.take().expect("stdout");
    let mut lines = BufReader::new(stdout).lines();
    let url = tokio::time::timeout(Duration::from_secs(10), lines.next_line())
        .await
        .expect("the server's address within 10 s")
        .expect("read")
        .expect("a line");
    (child, url)
}

/// A running `schemagate gateway` and its ports.
pub(crate) struct Gateway {
    pub(crate) _child: Child,
    pub(crate) port: u16,
    pub(crate) metrics_port: u16,
}

impl Gateway {
    /// The gateway with `routes` (NAME=URL) and `flags`, once it answers /readyz.
    pub(crate) async fn start(routes: &[String], flags: &[&str]) -> Self {
        Self::launch(routes, flags, || Ok(Stdio::inherit())).await
    }

    /// As [`Gateway::start`], its log (warnings and errors) written to `log`.
    pub(crate) async fn start_logging(
        routes: &[String],
        flags: &[&str],
        log: &std::path::Path,
    ) -> Self {
        let file = std::fs::File::create(log).expect("create the gateway's log file");
        Self::launch(routes, flags, || file.try_clone().map(Stdio::from)).await
    }

    /// The gateway on two ports free a moment ago. Another test's process may take one of them
    /// first: the gateway is then started again on others, and a /readyz answered by a process
    /// not its own is not taken for it (that test's requests would reach this gateway).
    async fn launch(
        routes: &[String],
        flags: &[&str],
        stderr: impl Fn() -> std::io::Result<Stdio>,
    ) -> Self {
        for _ in 0..5 {
            let (port, metrics_port) = (free_port(), free_port());
            let mut command = Command::new(schemagate());
            command
                .arg("gateway")
                .args(["--listen", &format!("127.0.0.1:{port}")])
                .args(["--metrics-listen", &format!("127.0.0.1:{metrics_port}")])
                .args(["--contract-wait-ms", "3000"])
                .args(flags)
                .env("SCHEMAGATE_LOG_LEVEL", "warn")
                .env_remove("SCHEMAGATE_POLICY")
                .env_remove("SCHEMAGATE_RELAY_THREADS")
                .stderr(stderr().expect("the gateway's log"))
                .kill_on_drop(true);
            for route in routes {
                command.args(["--route", route]);
            }
            let mut child = command.spawn().expect("spawn schemagate gateway");
            let pid = child.id().expect("a gateway just started");
            let health = format!("http://127.0.0.1:{port}/readyz");
            for _ in 0..800 {
                if child.try_wait().expect("the gateway's status").is_some() {
                    break; // a port was taken: again, on others
                }
                let ready = crate::http_client::get(&health)
                    .await
                    .is_ok_and(|response| response.status() == 200);
                if ready && listens_on(pid, port) && listens_on(pid, metrics_port) {
                    return Self {
                        _child: child,
                        port,
                        metrics_port,
                    };
                }
                tokio::time::sleep(Duration::from_millis(25)).await;
            }
        }
        panic!("schemagate gateway was not ready on ports of its own within 5 tries");
    }

    /// The gateway's process.
    pub(crate) fn child(&mut self) -> &mut Child {
        &mut self._child
    }

    /// The gateway's process id.
    pub(crate) fn pid(&self) -> u32 {
        self._child.id().expect("the gateway runs")
    }

    /// The port clients connect to.
    pub(crate) fn port(&self) -> u16 {
        self.port
    }

    pub(crate) fn url(&self, route: &str) -> String {
        format!("http://127.0.0.1:{}/mcp/{route}", self.port)
    }
}

/// An SDK client connected to `url`; `lifecycle` as the proxy's tests (None: initialize).
pub(crate) async fn client(
    url: &str,
    lifecycle: Option<ClientLifecycleMode>,
) -> RunningService<RoleClient, Host> {
    client_as(Host::new(), url, lifecycle).await
}

/// `host` connected to `url`; `lifecycle` as [`client`]'s.
pub(crate) async fn client_as(
    host: Host,
    url: &str,
    lifecycle: Option<ClientLifecycleMode>,
) -> RunningService<RoleClient, Host> {
    // rmcp's HTTP client (reqwest 0.13, built with rustls but no crypto provider, as schemagate
    // builds it) takes the process's default provider.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let transport = StreamableHttpClientTransport::from_uri(url.to_owned());
    match lifecycle {
        None => host
            .serve(transport)
            .await
            .expect("initialize through the gateway"),
        Some(mode) => host
            .serve_with_lifecycle(transport, mode)
            .await
            .expect("discover through the gateway"),
    }
}

pub(crate) fn discover() -> Option<ClientLifecycleMode> {
    Some(ClientLifecycleMode::Discover {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
    })
}

/// A POST to `url` with the headers an MCP client sends with a message (its body still to add).
pub(crate) fn mcp_request(url: impl reqwest::IntoUrl) -> reqwest::RequestBuilder {
    crate::http_client::client()
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
}

/// A POST of `body` to `url` as an MCP client sends it; the status, content type and body.
pub(crate) async fn post(url: &str, body: &str) -> (u16, String, String) {
    let response = mcp_request(url)
        .body(body.to_owned())
        .send()
        .await
        .expect("POST to the gateway");
    let status = response.status().as_u16();
    let content_type = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    (status, content_type, response.text().await.expect("body"))
}

/// A POST in session `session` (2025-11-25) of `body` to `url`: status, session header, body.
pub(crate) async fn post_in(
    url: &str,
    session: Option<&str>,
    body: &str,
) -> (u16, Option<String>, String) {
    let mut request = mcp_request(url).body(body.to_owned());
    if let Some(session) = session {
        request = request
            .header("mcp-session-id", session)
            .header("mcp-protocol-version", "2025-11-25");
    }
    let response = request.send().await.expect("POST");
    let status = response.status().as_u16();
    let issued = response
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    (status, issued, response.text().await.expect("body"))
}

/// The messages of an event stream: each event's data, in order.
pub(crate) fn messages(stream: &str) -> Vec<String> {
    stream
        .split("\n\n")
        .filter_map(|event| {
            let data: Vec<&str> = event
                .lines()
                .filter_map(|line| line.strip_prefix("data:"))
                .map(|d| d.strip_prefix(' ').unwrap_or(d))
                .collect();
            (!data.is_empty() && data.iter().any(|d| !d.trim().is_empty())).then(|| data.join("\n"))
        })
        .collect()
}

/// A 2025-11-25 session begun at `url`: its id.
pub(crate) async fn initialize(url: &str) -> String {
    let (status, session, _) = post_in(
        url,
        None,
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#,
    )
    .await;
    assert_eq!(status, 200);
    let session = session.expect("the upstream issues a session");
    let (status, _, _) = post_in(
        url,
        Some(&session),
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    )
    .await;
    assert_eq!(status, 202, "a notification is accepted");
    session
}

/// The file `name` of each of `pid`'s threads (`/proc/PID/task/TID/NAME`), as text; none once
/// the process is gone.
pub(crate) fn per_thread(pid: u32, name: &str) -> Vec<String> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .filter_map(Result::ok)
        .filter_map(|task| std::fs::read_to_string(task.path().join(name)).ok())
        .collect()
}

/// How many processes `pid` has started and not yet reaped.
pub(crate) fn children_of(pid: u32) -> usize {
    per_thread(pid, "children")
        .iter()
        .map(|children| children.split_whitespace().count())
        .sum()
}

/// Waits (up to 10 s) until `pid` has `count` child processes.
pub(crate) async fn until_children(pid: u32, count: usize) {
    for _ in 0..400 {
        if children_of(pid) == count {
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!(
        "the gateway has {} server processes, not {count}",
        children_of(pid)
    );
}

/// The raw upstream (`--raw --http`), and its URL.
pub(crate) async fn raw_upstream() -> (Child, String) {
    raw_upstream_with(&[]).await
}

/// The raw upstream with `flags`, and its URL.
pub(crate) async fn raw_upstream_with(flags: &[&str]) -> (Child, String) {
    let mut command = Command::new(test_server());
    command
        .args(["--raw", "--http", "127.0.0.1:0"])
        .args(flags)
        .stdout(Stdio::piped())
        .kill_on_drop(true);
    let mut child = command.spawn().expect("spawn the raw MCP server");
    let stdout = child.stdout.take().expect("stdout");
    let url = BufReader::new(stdout)
        .lines()
        .next_line()
        .await
        .expect("read")
        .expect("a line");
    (child, url)
}
