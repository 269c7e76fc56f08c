//! What `schemagate gateway` refuses, against hostile clients and raw hostile upstreams written
//! here: requests from a host or origin it does not answer (DNS rebinding, a web page's
//! cross-site POST), upstream answers it cannot stand behind (redirects, bodies cut short),
//! headers sent twice, a connection that says nothing; and what a client reads of a route's URL.

use crate::helpers::gateway::InProcess;
use crate::helpers::mcp::{children_of, Gateway};
use crate::helpers::mcp::{free_port, mcp_request, stdio_route};
use crate::helpers::spawn_app;
use serde_json::Value;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#;
const CALL: &str =
    r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"t","arguments":{}}}"#;
const TOOLS: &str = r#"{"tools":[{"name":"t","inputSchema":{"type":"object"},"outputSchema":{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}}]}"#;

/// A POST of `body` to `url` with `headers` set as given (`Host` too): status and body.
async fn post_with(url: &str, headers: &[(&str, &str)], body: &str) -> (u16, String) {
    let mut request = crate::http_client::client()
        .post(url)
        .header("accept", "application/json, text/event-stream")
        .body(body.to_owned());
    if !headers
        .iter()
        .any(|(n, _)| n.eq_ignore_ascii_case("content-type"))
    {
        request = request.header("content-type", "application/json");
    }
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.expect("POST");
    let status = response.status().as_u16();
    (status, response.text().await.expect("body"))
}

fn error_message(body: &str) -> String {
    let answer: Value = serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body}"));
    answer["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test]
async fn the_gateway_answers_only_its_own_hosts_and_origins() {
    let stdio = stdio_route("files", "");
    let gateway = Gateway::start(&[stdio], &["--allowed-origins", "https://app.example.com"]).await;
    let pid = gateway.pid();
    let url = gateway.url("files");
    let port = gateway.port();

    // DNS rebinding: the attacker's name in Host (and Origin).
    let evil = format!("evil.example:{port}");
    let (status, body) = post_with(
        &url,
        &[("host", &evil), ("origin", &format!("http://{evil}"))],
        INITIALIZE,
    )
    .await;
    assert_eq!(status, 403, "{body}");
    assert!(error_message(&body).contains("Host"), "{body}");
    // A web page's cross-site "simple" POST: no preflight, a foreign Origin.
    let (status, body) = post_with(
        &url,
        &[
            ("origin", "https://evil.example"),
            ("content-type", "text/plain"),
        ],
        INITIALIZE,
    )
    .await;
    assert_eq!(status, 403, "{body}");
    assert!(error_message(&body).contains("origin"), "{body}");
    // A JSON content type is checked all the same, and so is `Origin: null`.
    let (status, _) = post_with(&url, &[("origin", "null")], INITIALIZE).await;
    assert_eq!(status, 403);
    assert_eq!(children_of(pid), 0, "no refused request started a process");

    // The gateway's own names, a loopback origin and a listed one are served.
    for headers in [
        vec![("host", format!("localhost:{port}"))],
        vec![("origin", format!("http://127.0.0.1:{port}"))],
        vec![("origin", "https://app.example.com".to_owned())],
    ] {
        let headers: Vec<(&str, &str)> = headers.iter().map(|(n, v)| (*n, v.as_str())).collect();
        let (status, body) = post_with(&url, &headers, INITIALIZE).await;
        assert_eq!(status, 200, "{headers:?}: {body}");
    }
    // The route's name written with a percent escape is read by the router, not below it:
    // guarded and served alike.
    let escaped = url.replace("/mcp/files", "/mcp/fil%65s");
    assert_ne!(escaped, url);
    let (status, body) = post_with(&escaped, &[("host", &evil)], INITIALIZE).await;
    assert_eq!(status, 403, "{body}");
    let (status, body) = post_with(&escaped, &[], INITIALIZE).await;
    assert_eq!(status, 200, "{body}");
    // A route that does not exist, and paths that name none, are 404 on either side of it.
    for (path, says) in [
        ("/mcp/nope", r#"no route named "nope""#),
        ("/mcp/", "nothing at /mcp/;"),
        ("/mcp/files/x", "nothing at /mcp/files/x;"),
    ] {
        let (status, body) = post_with(&url.replace("/mcp/files", path), &[], INITIALIZE).await;
        assert_eq!(status, 404, "{path}: {body}");
        assert!(error_message(&body).contains(says), "{path}: {body}");
    }
    // Probes are not a browser's business: a kubelet names the pod's address.
    let probe = crate::http_client::client()
        .get(format!("http://127.0.0.1:{port}/healthz"))
        .header("host", "10.1.2.3:8090")
        .send()
        .await
        .expect("GET /healthz");
    assert_eq!(probe.status(), 200);
}

#[tokio::test]
async fn the_rest_ports_v1_routes_answer_only_their_own_hosts_and_origins() {
    let app = spawn_app().await;
    let body = r#"{"schema":{"type":"integer"},"instance":3}"#;
    let url = app.url("/v1/validate");
    let (status, answer) = post_with(&url, &[("host", "evil.example")], body).await;
    assert_eq!(status, 403, "{answer}");
    let answer: Value = serde_json::from_str(&answer).expect("JSON");
    assert_eq!(answer["error"]["code"], "host_not_allowed");
    let (status, answer) = post_with(&url, &[("origin", "https://evil.example")], body).await;
    assert_eq!(status, 403);
    let answer: Value = serde_json::from_str(&answer).expect("JSON");
    assert_eq!(answer["error"]["code"], "origin_not_allowed");
    // Through the router too: a registration is refused the same way.
    let put = crate::http_client::client()
        .put(app.url("/v1/servers/crm/tools"))
        .header("host", "evil.example")
        .body(r#"{"tools":[]}"#)
        .send()
        .await
        .expect("PUT");
    assert_eq!(put.status(), 403);
    let (status, _) = post_with(&url, &[], body).await;
    assert_eq!(status, 200, "its own name is served");
}

/// What a raw upstream answers a request of a method with: the bytes it writes.
type Answer = fn(&str) -> Vec<u8>;

/// A raw upstream on a loopback port: each connection's one request is read whole and answered
/// with the bytes `answer` gives for its method (`tools/list` is answered properly), then the
/// connection is closed. Its URL (with `path`), and how many requests it has read.
async fn raw_upstream(path: &str, answer: fn(&str) -> Vec<u8>) -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}{path}", listener.local_addr().expect("address"));
    let seen = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&seen);
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let counted = Arc::clone(&counted);
            tokio::spawn(async move {
                let Some(body) = read_request(&mut socket).await else {
                    return;
                };
                counted.fetch_add(1, Ordering::SeqCst);
                let request: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
                let method = request["method"].as_str().unwrap_or("");
                let bytes = if method == "tools/list" {
                    let message = format!(
                        r#"{{"jsonrpc":"2.0","id":{},"result":{TOOLS}}}"#,
                        request["id"]
                    );
                    format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{message}",
                        message.len()
                    )
                    .into_bytes()
                } else {
                    answer(method)
                };
                let _ = socket.write_all(&bytes).await;
                let _ = socket.shutdown().await;
            });
        }
    });
    (url, seen)
}

/// Reads one HTTP/1.1 request: its body, by its Content-Length.
async fn read_request(socket: &mut TcpStream) -> Option<String> {
    let mut bytes = Vec::new();
    let mut buffer = [0u8; 4096];
    loop {
        let n = socket.read(&mut buffer).await.ok()?;
        if n == 0 {
            return None;
        }
        bytes.extend_from_slice(&buffer[..n]);
        let text = String::from_utf8_lossy(&bytes).into_owned();
        let Some(end) = text.find("\r\n\r\n") else {
            continue;
        };
        let length = text[..end]
            .lines()
            .find_map(|l| {
                let (name, value) = l.split_once(':')?;
                name.eq_ignore_ascii_case("content-length")
                    .then(|| value.trim().parse::<usize>().ok())
                    .flatten()
            })
            .unwrap_or(0);
        if bytes.len() >= end + 4 + length {
            return Some(String::from_utf8_lossy(&bytes[end + 4..end + 4 + length]).into_owned());
        }
    }
}

#[tokio::test]
async fn upstream_answers_the_gateway_cannot_stand_behind_are_502_with_an_error_for_the_id() {
    let answers: [(&str, Answer, &str); 4] = [
        (
            "a redirect",
            |_| {
                b"HTTP/1.1 307 Temporary Redirect\r\nlocation: http://elsewhere.example/mcp\r\ncontent-length: 0\r\nconnection: close\r\n\r\n".to_vec()
            },
            "redirect",
        ),
        (
            "a body shorter than its length",
            |_| {
                b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 500\r\nconnection: close\r\n\r\n{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"content\":[".to_vec()
            },
            "cut",
        ),
        (
            "a chunked body cut off",
            |_| {
                b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n20\r\n{\"jsonrpc\":\"2.0\",\"id\":7,\"result\"".to_vec()
            },
            "cut",
        ),
        (
            "an answer whose id no client can place",
            |_| {
                let message = r#"{"jsonrpc":"2.0","id":{"n":7},"result":{"content":[],"structuredContent":{"n":"x"}}}"#;
                format!("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{message}", message.len()).into_bytes()
            },
            "withheld",
        ),
    ];
    for (what, answer, says) in answers {
        let (url, _) = raw_upstream("/mcp", answer).await;
        let gateway = InProcess::start(&[format!("crm={url}")], &[]).await;
        let response = mcp_request(gateway.url("crm"))
            .body(CALL)
            .send()
            .await
            .expect("POST");
        assert_eq!(response.status(), 502, "{what}");
        assert!(
            response.headers().get("location").is_none(),
            "{what}: no redirect reaches the client"
        );
        let body = response.text().await.expect("body");
        let answer: Value =
            serde_json::from_str(&body).unwrap_or_else(|e| panic!("{what}: {e}: {body}"));
        assert_eq!(
            answer["id"], 7,
            "{what}: the error answers the call: {body}"
        );
        let message = answer["error"]["message"].as_str().unwrap_or("");
        assert!(message.contains(says), "{what}: {message}");
    }
}

#[tokio::test]
async fn an_event_stream_cut_before_its_answer_ends_with_an_error_for_the_request() {
    let (url, _) = raw_upstream("/mcp", |_| {
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n19\r\ndata: {\"jsonrpc\":\"2.0\",\"i\r\n".to_vec()
    })
    .await;
    let gateway = InProcess::start(&[format!("crm={url}")], &[]).await;
    let response = mcp_request(gateway.url("crm"))
        .body(CALL)
        .send()
        .await
        .expect("POST");
    assert_eq!(response.status(), 200, "the stream had begun");
    let body = response.text().await.unwrap_or_default();
    let messages = crate::helpers::mcp::messages(&body);
    let last: Value = serde_json::from_str(messages.last().expect("an event")).expect("JSON");
    assert_eq!(last["id"], 7, "{body}");
    assert!(
        last["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("cut"),
        "{body}"
    );
}

#[tokio::test]
async fn a_header_sent_twice_is_a_header_mismatch_and_never_forwarded() {
    let (url, seen) = raw_upstream("/mcp", |_| {
        b"HTTP/1.1 500 x\r\ncontent-length: 0\r\n\r\n".to_vec()
    })
    .await;
    let gateway = InProcess::start(&[format!("crm={url}")], &[]).await;
    for headers in [
        [("mcp-method", "tools/call"), ("mcp-method", "tools/list")],
        [("mcp-name", "t"), ("mcp-name", "delete_everything")],
    ] {
        let (status, body) = post_with(&gateway.url("crm"), &headers, CALL).await;
        assert_eq!(status, 400, "{body}");
        let answer: Value = serde_json::from_str(&body).expect("JSON");
        assert_eq!(answer["error"]["code"], -32020, "{body}");
        assert!(error_message(&body).contains("more than once"), "{body}");
    }
    assert_eq!(
        seen.load(Ordering::SeqCst),
        0,
        "nothing reached the upstream"
    );
}

#[tokio::test]
async fn a_route_url_s_path_and_query_never_reach_a_client() {
    let port = free_port();
    let secret = format!("down=http://127.0.0.1:{port}/private/mcp?token=s3cret");
    let gateway = InProcess::start(&[secret], &[]).await;
    let (status, body) = post_with(&gateway.url("down"), &[], CALL).await;
    assert_eq!(status, 502);
    let message = error_message(&body);
    assert!(
        message.contains(&format!("http://127.0.0.1:{port}")),
        "{message}"
    );
    for secret in ["s3cret", "token", "/private"] {
        assert!(!body.contains(secret), "{secret} in {body}");
    }
    let metadata = reqwest::get(format!(
        "http://127.0.0.1:{}/.well-known/oauth-protected-resource/mcp/down",
        gateway.port()
    ))
    .await
    .expect("GET the metadata");
    assert_eq!(metadata.status(), 502);
    let body = metadata.text().await.expect("body");
    for secret in ["s3cret", "token", "/private"] {
        assert!(!body.contains(secret), "{secret} in {body}");
    }
}

#[tokio::test]
async fn a_connection_that_sends_nothing_is_closed_at_the_header_read_timeout() {
    let gateway = InProcess::start(
        &[format!("crm=http://127.0.0.1:{}/mcp", free_port())],
        &[
            "--header-read-timeout-secs",
            "1",
            "--idle-timeout-secs",
            "120",
        ],
    )
    .await;
    let mut silent = TcpStream::connect(("127.0.0.1", gateway.port()))
        .await
        .expect("connect");
    let mut byte = [0u8; 1];
    // Closed long before the idle timeout (120 s): the read ends with the connection.
    let read = tokio::time::timeout(Duration::from_secs(20), silent.read(&mut byte))
        .await
        .expect("closed well before the idle timeout");
    assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
    // The beginning of HTTP/2's preface, then nothing: the same.
    let mut halting = TcpStream::connect(("127.0.0.1", gateway.port()))
        .await
        .expect("connect");
    halting.write_all(b"PRI * HT").await.expect("write");
    let read = tokio::time::timeout(Duration::from_secs(20), halting.read(&mut byte))
        .await
        .expect("closed well before the idle timeout");
    assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
}

#[tokio::test]
async fn the_public_urls_host_is_one_the_gateway_answers() {
    let (_server, upstream) = crate::helpers::mcp::upstream(true).await;
    let gateway = InProcess::start(
        &[format!("crm={upstream}")],
        &["--public-url", "https://mcp.example.com"],
    )
    .await;
    let (status, body) = post_with(
        &gateway.url("crm"),
        &[
            ("host", "mcp.example.com"),
            ("origin", "https://mcp.example.com"),
        ],
        INITIALIZE,
    )
    .await;
    assert_eq!(status, 200, "{body}");
}

/// The official MCP conformance suite (`@modelcontextprotocol/conformance`), if it is on PATH:
/// its `dns-rebinding-protection` scenario against the gateway, on an HTTP and a stdio route.
#[tokio::test]
async fn the_conformance_suites_dns_rebinding_scenario_passes_through_the_gateway() {
    if std::process::Command::new("conformance")
        .arg("--help")
        .output()
        .is_err()
    {
        if std::env::var("SCHEMAGATE_REQUIRE_CONFORMANCE").as_deref() == Ok("1") {
            panic!("SCHEMAGATE_REQUIRE_CONFORMANCE=1 but no conformance on PATH (npm install -g @modelcontextprotocol/conformance)");
        }
        eprintln!(
            "skipped: no conformance on PATH (npm install -g @modelcontextprotocol/conformance)"
        );
        return;
    }
    let (_server, upstream) = crate::helpers::mcp::upstream(true).await;
    let stdio = stdio_route("files", "");
    let gateway = InProcess::start(&[format!("crm={upstream}"), stdio], &[]).await;
    for route in ["crm", "files"] {
        let results = tempfile::tempdir().expect("a directory");
        let output = tokio::process::Command::new("conformance")
            .args(["server", "--url", &gateway.url(route)])
            .args(["--scenario", "dns-rebinding-protection"])
            .current_dir(results.path())
            .output()
            .await
            .expect("run conformance");
        let printed = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(output.status.success(), "route {route}: {printed}");
        assert!(!printed.contains("FAILURE"), "route {route}: {printed}");
    }
}
