//! Gateway sessions that hold. On stdio routes: a session id nobody was issued costs nothing, the
//! process cap holds under concurrent initializes, and a shutdown stops each session's whole
//! process group (a launcher's children too) while the client in flight gets an error. On HTTP
//! routes: a session's GET reaches the upstream before the POSTs sent after it. On both: sessions
//! offered different tools are each judged by their own listing.

use crate::helpers::mcp::{
    call, children_of, client_as, initialize, messages, metrics_text, post_in, stdio_route,
    test_server, text_of, until_children, upstream, verdict_of, Gateway, Host,
};
use crate::helpers::metric;
use serde_json::json;
use serde_json::Value;
use std::time::Duration;

/// A stdio route running the test server (`args` after it) through `sh -c`, as `npx` or a
/// launcher script would: `prefix` runs in the shell first.
fn launched(name: &str, prefix: &str, args: &str) -> String {
    let server = test_server().to_string_lossy().into_owned();
    let script = format!(
        "{prefix}exec {} {args}",
        shlex::try_quote(&server).expect("a path a shell can quote")
    );
    format!(
        "{name}=stdio:sh -c {}",
        shlex::try_quote(&script).expect("a script a shell can quote")
    )
}

/// The gateway with route `files` running the raw test server (`args` after `--raw`) through a
/// launcher shell, and `flags`; with the route's URL.
async fn files_gateway(args: &str, flags: &[&str]) -> (Gateway, String) {
    let gateway = Gateway::start(&[launched("files", "", &format!("--raw{args}"))], flags).await;
    let url = gateway.url("files");
    (gateway, url)
}

#[tokio::test]
async fn a_session_nobody_was_issued_costs_nothing() {
    let (gateway, url) = files_gateway("", &[]).await;
    let before = metrics_text(gateway.metrics_port).await;
    let call = r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"made_up_tool","arguments":{}}}"#;
    let (status, _, body) = post_in(&url, Some("made-up-session"), call).await;
    assert_eq!(status, 404, "{body}");
    let after = metrics_text(gateway.metrics_port).await;
    assert!(
        !after.contains("made_up_tool"),
        "no series for what it names"
    );
    let checks = |text: &str| {
        text.lines()
            .filter(|l| l.starts_with("schemagate_validations_total"))
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    assert_eq!(checks(&before), checks(&after), "nothing was judged");
    assert_eq!(children_of(gateway.pid()), 0, "no process was started");
}

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#;

#[tokio::test]
async fn the_process_cap_holds_under_concurrent_initializes() {
    let (gateway, url) = files_gateway("", &["--stdio-max-processes", "3"]).await;
    let attempts = (0..6).map(|_| post_in(&url, None, INITIALIZE));
    let statuses: Vec<u16> = futures_util::future::join_all(attempts)
        .await
        .into_iter()
        .map(|(status, _, _)| status)
        .collect();
    assert!(
        statuses.iter().all(|s| *s == 200 || *s == 503),
        "{statuses:?}"
    );
    assert!(
        statuses.iter().filter(|s| **s == 200).count() >= 3,
        "{statuses:?}"
    );
    // Idle sessions made room for later ones; never more processes than the cap.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(children_of(gateway.pid()) <= 3, "{statuses:?}");
}

#[tokio::test]
async fn clients_that_left_without_delete_make_room_and_those_still_there_keep_theirs() {
    let (gateway, url) = files_gateway("", &["--stdio-max-processes", "2"]).await;
    // Three clients come and go without DELETE (as the TypeScript SDK's close() does): each
    // initialize past the cap ends the session idle longest.
    let mut sessions = Vec::new();
    for _ in 0..3 {
        let (status, session, body) = post_in(&url, None, INITIALIZE).await;
        assert_eq!(status, 200, "{body}");
        sessions.push(session.expect("a session"));
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(children_of(gateway.pid()), 2);
    // The two sessions left hold a stream open: they are in use, and the next client is refused.
    let mut held = Vec::new();
    for session in &sessions[1..] {
        held.push(listen(&url, session).await);
    }
    let before = metrics_text(gateway.metrics_port).await;
    let (status, _, body) = post_in(&url, None, INITIALIZE).await;
    assert_eq!(status, 503, "{body}");
    // The refusal is counted as shed work, and as an overloaded request.
    let after = metrics_text(gateway.metrics_port).await;
    for series in [
        r#"schemagate_shed_total{transport="gateway"}"#,
        r#"schemagate_request_errors_total{transport="gateway",code="overloaded"}"#,
    ] {
        assert_eq!(
            metric(&after, series) - metric(&before, series),
            1.0,
            "{series}"
        );
    }
    drop(held);
}

#[tokio::test]
async fn a_session_with_no_stream_is_ended_when_idle() {
    let (gateway, url) = files_gateway("", &["--stdio-idle-secs", "1"]).await;
    let _session = initialize(&url).await;
    until_children(gateway.pid(), 1).await;
    // Past the idle time and the 5 s sweep.
    tokio::time::sleep(Duration::from_millis(6500)).await;
    until_children(gateway.pid(), 0).await;
}

/// The processes `pid` has started.
fn child_pids(pid: u32) -> Vec<u32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .filter_map(Result::ok)
        .filter_map(|task| std::fs::read_to_string(task.path().join("children")).ok())
        .flat_map(|c| {
            c.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect::<Vec<u32>>()
        })
        .collect()
}

/// Whether process `pid` runs (an exited process nobody reaped yet does not).
fn runs(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            stat.rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().next().map(str::to_owned))
        })
        .is_some_and(|state| state != "Z" && state != "X")
}

#[tokio::test]
async fn a_shutdown_stops_each_sessions_whole_group_and_answers_the_client_in_flight() {
    // The shell starts a child of its own (as npx starts node), then becomes the server.
    let mut gateway = Gateway::start(
        &[launched("files", "sleep 600 & ", "--raw")],
        &["--drain-delay-secs", "0", "--shutdown-grace-secs", "10"],
    )
    .await;
    let url = gateway.url("files");
    let session = initialize(&url).await;
    let server = child_pids(gateway.pid());
    assert_eq!(server.len(), 1, "one session, one server");
    let launched_child = child_pids(server[0]);
    assert_eq!(launched_child.len(), 1, "the launcher's own child");
    // A call the server answers only once cancelled: in flight at the shutdown.
    let call =
        r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"late","arguments":{}}}"#;
    let (url_in_flight, session_in_flight) = (url.clone(), session.clone());
    let in_flight =
        tokio::spawn(async move { post_in(&url_in_flight, Some(&session_in_flight), call).await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    // SAFETY: kill(2) on the gateway this test started.
    unsafe {
        libc::kill(gateway.pid() as i32, libc::SIGTERM);
    }
    let (status, _, body) = tokio::time::timeout(Duration::from_secs(15), in_flight)
        .await
        .expect("the call in flight is answered during the drain")
        .expect("the task");
    assert_eq!(status, 200, "its stream had begun");
    let last: Value =
        serde_json::from_str(messages(&body).last().expect("an event")).expect("JSON");
    assert_eq!(last["id"], 7, "{body}");
    assert!(last["error"]["message"].is_string(), "{body}");
    let exited = tokio::time::timeout(Duration::from_secs(15), gateway.child().wait())
        .await
        .expect("the gateway exits");
    assert!(exited.is_ok());
    for pid in server.iter().chain(&launched_child) {
        assert!(!runs(*pid), "process {pid} outlived the gateway");
    }
}

/// A GET stream of session `session` at `url`, read until an event holds `needle` (or 10 s):
/// the messages read.
async fn listen_until(url: &str, session: &str, needle: &str) -> Vec<String> {
    read_until(listen(url, session).await, needle).await
}

/// The GET stream of session `session` at `url`, once its head has come.
async fn listen(url: &str, session: &str) -> reqwest::Response {
    let response = crate::http_client::client()
        .get(url)
        .header("accept", "text/event-stream")
        .header("mcp-session-id", session)
        .header("mcp-protocol-version", "2025-11-25")
        .send()
        .await
        .expect("GET the session's stream");
    assert_eq!(response.status(), 200);
    response
}

/// `response`'s events, read until one holds `needle` (or 10 s): the messages read.
async fn read_until(mut response: reqwest::Response, needle: &str) -> Vec<String> {
    let mut text = String::new();
    let read = tokio::time::timeout(Duration::from_secs(10), async {
        while let Ok(Some(chunk)) = response.chunk().await {
            text.push_str(&String::from_utf8_lossy(&chunk));
            if text.contains(needle) {
                return;
            }
        }
    })
    .await;
    assert!(
        read.is_ok(),
        "no {needle:?} on the stream within 10 s: {text}"
    );
    messages(&text)
}

#[tokio::test]
async fn a_server_request_sent_before_any_stream_waits_for_the_first_one() {
    let (_gateway, url) = files_gateway(" --asks-roots", &[]).await;
    // initialize, then notifications/initialized: the server asks for roots at once, while the
    // client has no stream open.
    let session = initialize(&url).await;
    let asked = listen_until(&url, &session, "roots/list").await;
    let request: Value = serde_json::from_str(&asked[0]).expect("JSON");
    assert_eq!(request["method"], "roots/list", "{asked:?}");
    // The client opens its stream again before it answers: a stream it left may look open to
    // the gateway until a write to it fails, and what was written to it is lost, as it would be
    // by a server the client reached directly.
    let again = listen(&url, &session).await;
    let (status, _, _) = post_in(
        &url,
        Some(&session),
        r#"{"jsonrpc":"2.0","id":"roots-1","result":{"roots":[]}}"#,
    )
    .await;
    assert_eq!(status, 202);
    let told = read_until(again, "roots answered").await;
    assert!(
        told.iter().any(|m| m.contains("roots answered: result")),
        "{told:?}"
    );
}

#[tokio::test]
async fn a_server_request_no_stream_takes_is_answered_to_the_server() {
    let (_gateway, url) =
        files_gateway(" --asks-roots", &["--server-request-timeout-secs", "1"]).await;
    let session = initialize(&url).await;
    // No stream for longer than the timeout (and the 5 s sweep): the server got an error for its
    // request, and says so on the first stream the client opens.
    tokio::time::sleep(Duration::from_millis(6500)).await;
    let told = listen_until(&url, &session, "roots answered").await;
    assert!(
        told.iter().any(|m| m.contains("roots answered: error")),
        "{told:?}"
    );
    assert!(
        !told.iter().any(|m| m.contains("roots/list")),
        "the expired request is not delivered: {told:?}"
    );
}

/// An HTTP upstream that opens a session's GET stream only `delay` after the GET arrives, as a
/// busy server may, and notes in `seen` when that stream is open and when each other request
/// arrives. Its URL.
async fn slow_stream_upstream(
    delay: Duration,
    seen: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
) -> String {
    use axum::http::header;
    use axum::response::IntoResponse;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}/mcp", listener.local_addr().expect("address"));
    let post_seen = seen.clone();
    let post = move |body: axum::body::Bytes| {
        let seen = post_seen.clone();
        async move {
            let request: Value = serde_json::from_slice(&body).unwrap_or_default();
            let method = request["method"].as_str().unwrap_or("").to_owned();
            seen.lock().expect("log").push(format!("POST {method}"));
            let id = request["id"].to_string();
            let result = match method.as_str() {
                "initialize" => {
                    r#"{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"slow","version":"1"}}"#
                }
                "ping" => "{}",
                _ => return axum::http::StatusCode::ACCEPTED.into_response(),
            };
            (
                [
                    (header::CONTENT_TYPE, "application/json"),
                    (header::HeaderName::from_static("mcp-session-id"), "s1"),
                ],
                format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{result}}}"#),
            )
                .into_response()
        }
    };
    let get = move || {
        let seen = seen.clone();
        async move {
            tokio::time::sleep(delay).await;
            seen.lock().expect("log").push("GET stream open".to_owned());
            let events =
                futures_util::stream::pending::<Result<axum::body::Bytes, std::io::Error>>();
            (
                [(header::CONTENT_TYPE, "text/event-stream")],
                axum::body::Body::from_stream(events),
            )
                .into_response()
        }
    };
    let router = axum::Router::new().route("/mcp", axum::routing::post(post).get(get));
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    url
}

#[tokio::test]
async fn a_post_sent_after_the_sessions_get_reaches_the_upstream_after_the_stream_is_open() {
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let upstream = slow_stream_upstream(Duration::from_millis(300), seen.clone()).await;
    let gateway =
        crate::helpers::gateway::InProcess::start(&[format!("slow={upstream}")], &[]).await;
    let url = gateway.url("slow");
    let client = crate::http_client::client();
    let post = |body: &'static str| {
        client
            .post(&url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-session-id", "s1")
            .body(body)
    };
    let initialized = client
        .post(&url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#)
        .send()
        .await
        .expect("initialize");
    assert_eq!(initialized.headers()["mcp-session-id"], "s1");
    // The client opens the session's stream, and sends a request without waiting for its head.
    let stream = tokio::spawn(
        client
            .get(&url)
            .header("accept", "text/event-stream")
            .header("mcp-session-id", "s1")
            .send(),
    );
    tokio::time::sleep(Duration::from_millis(50)).await;
    let pong = post(r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#)
        .send()
        .await
        .expect("ping");
    assert_eq!(pong.status(), 200);
    let opened = stream.await.expect("the GET's task").expect("the GET");
    assert_eq!(opened.status(), 200);
    let seen = seen.lock().expect("log").clone();
    assert_eq!(seen, ["POST initialize", "GET stream open", "POST ping"]);
}

#[tokio::test]
async fn a_stream_the_upstream_never_opens_does_not_hold_the_sessions_requests() {
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let upstream = slow_stream_upstream(Duration::from_secs(600), seen.clone()).await;
    let gateway =
        crate::helpers::gateway::InProcess::start(&[format!("slow={upstream}")], &[]).await;
    let url = gateway.url("slow");
    let client = crate::http_client::client();
    let session = |request: reqwest::RequestBuilder| {
        request
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
    };
    session(client.post(&url))
        .body(r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#)
        .send()
        .await
        .expect("initialize");
    let stream = tokio::spawn(
        client
            .get(&url)
            .header("accept", "text/event-stream")
            .header("mcp-session-id", "s1")
            .send(),
    );
    tokio::time::sleep(Duration::from_millis(50)).await;
    let pong = tokio::time::timeout(
        Duration::from_secs(20),
        session(client.post(&url))
            .header("mcp-session-id", "s1")
            .body(r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#)
            .send(),
    )
    .await
    .expect("the ping is sent once the wait for the stream ends")
    .expect("ping");
    assert_eq!(pong.status(), 200);
    assert_eq!(*seen.lock().expect("log"), ["POST initialize", "POST ping"]);
    stream.abort();
}

/// Two SDK sessions on one route, one declaring sampling and one not: the server offers
/// `summarize` to the first alone. Whatever order they list in, each session's calls are judged
/// by its own listing: the first's bad arguments to `summarize` never reach the server, and the
/// second's call to a tool it was not offered is withheld (untrusted).
async fn each_session_is_judged_by_its_own_listing(url: &str) {
    let with = client_as(Host::new(), url, None).await;
    let without = client_as(Host::without_sampling(), url, None).await;
    let names = |tools: Vec<rmcp::model::Tool>| -> Vec<String> {
        tools.into_iter().map(|t| t.name.into_owned()).collect()
    };
    let offered = names(with.list_all_tools().await.expect("tools/list"));
    assert!(offered.iter().any(|n| n == "summarize"), "{offered:?}");
    // The second listing is registered last: the route's contract has no `summarize`.
    let offered = names(without.list_all_tools().await.expect("tools/list"));
    assert!(!offered.iter().any(|n| n == "summarize"), "{offered:?}");

    let refused = call(&with, "summarize", json!({"words": "many"})).await;
    assert_eq!(refused.is_error, Some(true), "{}", text_of(&refused));
    assert_eq!(
        verdict_of(&refused)["outcome"],
        "invalid",
        "{}",
        text_of(&refused)
    );
    let summary = call(&with, "summarize", json!({"words": 5})).await;
    assert_eq!(
        summary.structured_content,
        Some(json!({"summary": "the proxy relayed a sampling request", "model": "host-model"})),
        "{}",
        text_of(&summary)
    );
    let withheld = call(&without, "summarize", json!({"words": 5})).await;
    assert_eq!(withheld.is_error, Some(true), "{}", text_of(&withheld));
    assert_eq!(verdict_of(&withheld)["outcome"], "unchecked");
    assert_eq!(verdict_of(&withheld)["error"]["code"], "unknown_tool");
    with.cancel().await.expect("end the first session");
    without.cancel().await.expect("end the second session");
}

#[tokio::test]
async fn sessions_offered_different_tools_keep_their_own_contracts_on_a_stdio_route() {
    let route = stdio_route("crm", "");
    let gateway = Gateway::start(&[route], &[]).await;
    each_session_is_judged_by_its_own_listing(&gateway.url("crm")).await;
}

#[tokio::test]
async fn sessions_offered_different_tools_keep_their_own_contracts_on_an_http_route() {
    let (_server, upstream_url) = upstream(false).await;
    let gateway = Gateway::start(&[format!("crm={upstream_url}")], &[]).await;
    each_session_is_judged_by_its_own_listing(&gateway.url("crm")).await;
}

#[tokio::test]
async fn a_server_flooding_its_stdout_with_lines_not_json_costs_a_log_line_a_second() {
    let log = tempfile::NamedTempFile::new().expect("a log file");
    let banner = "i=0; while [ $i -lt 3000 ]; do echo \"starting up, step $i\"; i=$((i+1)); done; ";
    let gateway =
        Gateway::start_logging(&[launched("files", banner, "--raw")], &[], log.path()).await;
    let url = gateway.url("files");
    let (status, _, body) = post_in(&url, None, INITIALIZE).await;
    assert_eq!(status, 200, "{body}");
    assert!(
        messages(&body)
            .iter()
            .any(|m| m.contains("protocolVersion")),
        "the answer comes after the banner: {body}"
    );
    let text = metrics_text(gateway.metrics_port).await;
    let relayed = metric(
        &text,
        r#"schemagate_proxy_messages_total{transport="gateway",direction="to_client",kind="not_json_rpc"}"#,
    );
    assert!(relayed >= 1.0, "the banner's lines are counted: {relayed}");
    let logged = std::fs::read_to_string(log.path()).expect("read the log");
    let warnings = logged
        .lines()
        .filter(|l| l.contains("not JSON on its stdout"))
        .count();
    assert!(
        (1..=2).contains(&warnings),
        "3,000 lines within a second: one warning (at most two), not one each; got {warnings}:\n{logged}"
    );
}
