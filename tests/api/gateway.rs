//! `schemagate gateway` between real MCP peers on Streamable HTTP: the official Rust SDK
//! (`rmcp`) as client and as server (examples/mcp_test_server.rs `--http`), answering with
//! server-sent events or JSON; and plain HTTP where exact statuses and bytes matter. The gateway
//! is the built `schemagate` binary.

#![allow(deprecated)]

use crate::helpers::mcp::*;
use crate::helpers::mcp::{call, free_port, metrics_text, test_server, text_of, verdict_of, Host};
use crate::helpers::metric;
use rmcp::service::RunningService;
use rmcp::RoleClient;
use serde_json::{json, Value};
use std::time::Duration;

/// A gateway series of server `crm` under untrusted.
fn validations(tool: &str, payload: &str, attempt: &str, outcome: &str) -> String {
    format!(
        r#"schemagate_validations_total{{server="crm",tool="{tool}",tier="untrusted",payload="{payload}",attempt="{attempt}",outcome="{outcome}"}}"#
    )
}

/// What every gateway test checks of a client: conforming results unchanged, the rest replaced
/// with the verdict, arguments stopped before the server.
async fn results_are_checked(client: &RunningService<RoleClient, Host>) {
    // No tools/list from the client: the gateway asks the upstream itself.
    let valid = call(client, "get_customer", json!({"id": 7})).await;
    assert_eq!(valid.is_error, Some(false), "{}", text_of(&valid));
    assert_eq!(
        valid.structured_content,
        Some(json!({"id": 7, "email": "ada@example.com", "name": "Ada"}))
    );
    assert!(valid.meta.is_none(), "a passed result is the server's");

    let invalid = call(
        client,
        "get_customer",
        json!({"id": 7, "variant": "invalid"}),
    )
    .await;
    assert_eq!(invalid.is_error, Some(true));
    assert!(
        invalid.structured_content.is_none(),
        "the payload is withheld"
    );
    let verdict = verdict_of(&invalid);
    assert_eq!(verdict["outcome"], "invalid");
    assert_eq!(verdict["action"], "reject");
    assert!(text_of(&invalid).contains("withheld the result of tool \"get_customer\""));

    let bad_args = call(client, "get_customer", json!({"id": "seven"})).await;
    assert_eq!(bad_args.is_error, Some(true));
    assert!(text_of(&bad_args).contains("did not send this call to the server"));
    assert_eq!(verdict_of(&bad_args)["errors"][0]["instance_path"], "/id");
}

#[tokio::test]
async fn a_session_over_server_sent_events_gets_results_checked_and_sampling_relayed() {
    let (_server, url) = upstream(false).await;
    let gateway = Gateway::start(&[format!("crm={url}")], &[]).await;
    let client = client(&gateway.url("crm"), None).await;
    results_are_checked(&client).await;

    // The upstream asks the client's model during the call (on the call's event stream); the
    // client's answer is a POST of its own, relayed to the upstream.
    let summary = call(&client, "summarize", json!({})).await;
    assert_eq!(summary.is_error, Some(false), "{}", text_of(&summary));
    assert_eq!(
        summary.structured_content,
        Some(json!({"summary": "the proxy relayed a sampling request", "model": "host-model"}))
    );
    client.cancel().await.expect("end the session");

    let text = metrics_text(gateway.metrics_port).await;
    for (payload, attempt, outcome, count) in [
        ("result", "first", "valid", 1.0),
        ("result", "first", "invalid", 1.0),
        ("arguments", "retry", "invalid", 1.0),
    ] {
        let series = validations("get_customer", payload, attempt, outcome);
        assert_eq!(metric(&text, &series), count, "{series}");
    }
    assert_eq!(
        metric(
            &text,
            r#"schemagate_proxy_messages_total{transport="gateway",direction="to_client",kind="replaced"}"#
        ),
        1.0
    );
    assert_eq!(
        metric(
            &text,
            r#"schemagate_validation_duration_seconds_count{transport="gateway"}"#
        ),
        7.0,
        "the arguments and results of two get_customer calls and of summarize, and the arguments of the call stopped"
    );
}

#[tokio::test]
async fn a_client_without_sessions_gets_json_answers_checked() {
    let (_server, url) = upstream(true).await;
    let gateway = Gateway::start(&[format!("crm={url}")], &[]).await;
    let client = client(&gateway.url("crm"), discover()).await;
    results_are_checked(&client).await;
    client.cancel().await.expect("close");
}

/// The gateway's threads that relay: tokio's runtime threads, by the name the kernel keeps for
/// them (`tokio-rt-worker`; in older tokio `tokio-runtime-worker`, cut to 15 bytes), counted
/// before any call is relayed: a gateway with no policy, routes file or recording to read has
/// started no blocking thread (which tokio names alike).
fn relay_threads(pid: u32) -> usize {
    per_thread(pid, "comm")
        .iter()
        .filter(|name| matches!(name.trim_end(), "tokio-rt-worker" | "tokio-runtime-w"))
        .count()
}

#[tokio::test]
async fn one_thread_relays_unless_told_otherwise_and_results_are_checked_either_way() {
    let (_server, url) = upstream(true).await;
    for (flags, threads) in [(&[][..], 1), (&["--relay-threads", "3"][..], 3)] {
        let gateway = Gateway::start(&[format!("crm={url}")], flags).await;
        assert_eq!(relay_threads(gateway.pid()), threads, "{flags:?}");
        let session = client(&gateway.url("crm"), discover()).await;
        results_are_checked(&session).await;
        session.cancel().await.expect("close");
    }
}

fn error_of(body: &str) -> Value {
    let answer: Value = serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body}"));
    answer["error"].clone()
}

#[tokio::test]
async fn what_cannot_be_relayed_gets_a_status_and_a_json_rpc_error_that_says_why() {
    let (_server, url) = upstream(true).await;
    // A route whose upstream is down: a port nothing listens on.
    let down = format!("down=http://127.0.0.1:{}/mcp", free_port());
    let gateway = Gateway::start(
        &[format!("crm={url}"), down],
        &["--max-message-bytes", "4096"],
    )
    .await;
    let call = r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"get_customer","arguments":{"id":1}}}"#;

    let (status, _, body) = post(&gateway.url("nope"), call).await;
    assert_eq!(status, 404);
    let error = error_of(&body);
    assert!(
        error["message"]
            .as_str()
            .unwrap_or("")
            .contains("crm, down"),
        "the 404 names the routes: {error}"
    );

    let (status, _, body) = post(&gateway.url("down"), call).await;
    assert_eq!(status, 502);
    let answer: Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!(answer["id"], 5, "the error answers the request");
    let message = answer["error"]["message"].as_str().unwrap_or("");
    assert!(message.contains("route down"), "{message}");

    let (status, _, body) = post(&gateway.url("crm"), "{not json").await;
    assert_eq!(status, 400);
    assert_eq!(error_of(&body)["code"], -32700);

    let (status, _, body) = post(&gateway.url("crm"), &format!("[{call}]")).await;
    assert_eq!(status, 400);
    assert!(error_of(&body)["message"]
        .as_str()
        .unwrap_or("")
        .contains("batch"));

    let big = format!(
        r#"{{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{{"name":"echo","arguments":{{"text":"{}"}}}}}}"#,
        "x".repeat(5000)
    );
    let (status, _, body) = post(&gateway.url("crm"), &big).await;
    assert_eq!(status, 413);
    assert!(error_of(&body)["message"]
        .as_str()
        .unwrap_or("")
        .contains("--max-message-bytes"));

    let put = crate::http_client::client()
        .put(gateway.url("crm"))
        .body(call)
        .send()
        .await
        .expect("PUT");
    assert_eq!(put.status(), 405);

    // After all that, the route still serves.
    let client = client(&gateway.url("crm"), discover()).await;
    let valid = crate::helpers::mcp::call(&client, "get_customer", json!({"id": 2})).await;
    assert_eq!(valid.is_error, Some(false), "{}", text_of(&valid));
    client.cancel().await.expect("close");
}

#[tokio::test]
async fn events_pass_in_order_as_sent_and_delete_ends_the_session() {
    let (_server, url) = upstream(false).await;
    let gateway = Gateway::start(&[format!("crm={url}")], &[]).await;
    let call = r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"count","arguments":{},"_meta":{"progressToken":"p"}}}"#;

    // The same session and call, straight to the upstream and through the gateway.
    let mut streams = Vec::new();
    for target in [url.clone(), gateway.url("crm")] {
        let session = initialize(&target).await;
        let (status, _, body) = post_in(&target, Some(&session), call).await;
        assert_eq!(status, 200, "{body}");
        streams.push((session, messages(&body)));
    }
    let (_, direct) = &streams[0];
    let (session, through) = &streams[1];
    assert_eq!(
        through.len(),
        4,
        "three progress notifications and the result: {through:?}"
    );
    for (i, message) in through[..3].iter().enumerate() {
        let progress: Value = serde_json::from_str(message).expect("JSON");
        assert_eq!(progress["method"], "notifications/progress");
        assert_eq!(progress["params"]["progress"], json!(i as f64 + 1.0));
    }
    let answer: Value = serde_json::from_str(&through[3]).expect("JSON");
    assert_eq!(answer["result"]["structuredContent"], json!({"counted": 3}));
    assert_eq!(
        through, direct,
        "every message through the gateway is the upstream's, byte for byte"
    );

    // DELETE ends the session at the upstream; the session is gone for the client after it.
    let deleted = crate::http_client::client()
        .delete(gateway.url("crm"))
        .header("mcp-session-id", session.as_str())
        .header("mcp-protocol-version", "2025-11-25")
        .send()
        .await
        .expect("DELETE");
    assert!(deleted.status().is_success(), "{}", deleted.status());
    let (status, _, _) = post_in(&gateway.url("crm"), Some(session), call).await;
    assert_eq!(status, 404, "the upstream no longer knows the session");

    // A session id never issued is forwarded, and the upstream's answer is the client's.
    let (status, _, _) = post_in(&gateway.url("crm"), Some("never-issued"), call).await;
    assert_eq!(status, 404);
}

/// A 2026-07-28 request (no session; revision and capabilities in `_meta`).
pub(crate) fn request_26(id: u32, method: &str, params: Value) -> String {
    let mut params = params;
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {}
    });
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string()
}

#[tokio::test]
async fn a_listen_stream_and_an_input_required_retry_are_followed() {
    let (_server, url) = raw_upstream().await;
    let gateway = Gateway::start(&[format!("crm={url}")], &[]).await;
    let route = gateway.url("crm");
    let call = |id: u32, tool: &str, extra: Value| {
        let mut params = json!({"name": tool, "arguments": {}});
        if let Value::Object(extra) = extra {
            params.as_object_mut().expect("params").extend(extra);
        }
        request_26(id, "tools/call", params)
    };

    // input_required is not final: relayed as the upstream wrote it, unjudged. The retry with
    // the request state is final, and judged (it lacks `n`).
    let (status, _, body) = post(&route, &call(1, "asks", json!({}))).await;
    assert_eq!(status, 200, "{body}");
    let answer: Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!(answer["result"]["resultType"], "input_required", "{body}");
    assert!(answer["result"]["_meta"].is_null(), "not judged: {body}");
    let retry = call(
        2,
        "asks",
        json!({"inputResponses": {"r1": {"roots": []}}, "requestState": "s1"}),
    );
    let (_, _, body) = post(&route, &retry).await;
    let answer: Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!(answer["result"]["isError"], true, "{body}");
    assert_eq!(
        answer["result"]["_meta"]["dev.schemagate/verdict"]["outcome"],
        "invalid"
    );

    // Judged by the contract listed first; then the listen stream says the tools changed (the
    // client gets that notification), and the next call is judged by the contract listed again.
    let (_, _, body) = post(&route, &call(3, "shifty", json!({}))).await;
    let answer: Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!(
        answer["result"]["structuredContent"],
        json!({"m": 1}),
        "{body}"
    );
    let (status, content_type, body) =
        post(&route, &request_26(4, "subscriptions/listen", json!({}))).await;
    assert_eq!((status, content_type.as_str()), (200, "text/event-stream"));
    assert_eq!(
        messages(&body),
        [r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#]
    );
    let (_, _, body) = post(&route, &call(5, "shifty", json!({}))).await;
    let answer: Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!(answer["result"]["isError"], true, "{body}");
    assert_eq!(
        answer["result"]["_meta"]["dev.schemagate/verdict"]["errors"][0]["keyword"],
        "required"
    );
}

#[tokio::test]
async fn the_table_of_changes_is_classed_the_same_when_learned_through_the_gateway() {
    use crate::contracts::{changes_anything, table, tools_lists};
    let table = table();
    let (old, new) = tools_lists(&table);
    let dir = tempfile::tempdir().expect("a directory");
    let file = dir.path().join("lists.json");
    std::fs::write(&file, json!([old, new]).to_string()).expect("write");
    let path = file.to_str().expect("a UTF-8 path");
    let (_server, url) = raw_upstream_with(&["--tools-sequence", path]).await;
    let gateway = Gateway::start(&[format!("table={url}")], &[]).await;
    // The client lists twice: the gateway learns the old contract, then the new one.
    for id in [1, 2] {
        let (status, _, body) = post(
            &gateway.url("table"),
            &request_26(id, "tools/list", json!({})),
        )
        .await;
        assert_eq!(status, 200, "{body}");
    }
    let text = metrics_text(gateway.metrics_port).await;
    let mut wrong = Vec::new();
    for (i, case) in table.iter().enumerate() {
        let series = format!(
            r#"schemagate_contract_changes_total{{server="table",tool="t{i}",schema="{}",class="{}"}}"#,
            case.part, case.class
        );
        let expected = if changes_anything(case) { 1.0 } else { 0.0 };
        if metric(&text, &series) != expected {
            wrong.push(format!("{}: {series} is not {expected}", case.name));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[tokio::test]
async fn a_pinned_contract_learned_through_the_gateway_stays_in_force() {
    let tools = |required: &str| json!({"tools": [{"name": "shifty", "inputSchema": {"type": "object"}, "outputSchema": {"type": "object", "required": [required]}}]});
    let dir = tempfile::tempdir().expect("a directory");
    let lists = dir.path().join("lists.json");
    std::fs::write(&lists, json!([tools("m"), tools("n")]).to_string()).expect("write");
    let policy = dir.path().join("policy.toml");
    std::fs::write(
        &policy,
        "[[servers]]\nmatch = \"crm\"\ntier = \"untrusted\"\npin = true\n",
    )
    .expect("write");
    let (_server, url) =
        raw_upstream_with(&["--tools-sequence", lists.to_str().expect("UTF-8")]).await;
    let gateway = Gateway::start(
        &[format!("crm={url}")],
        &["--policy", policy.to_str().expect("UTF-8")],
    )
    .await;
    let route = gateway.url("crm");
    // The first listing is learned; the second changes the pinned contract and is refused.
    for id in [1, 2] {
        let (status, _, body) = post(&route, &request_26(id, "tools/list", json!({}))).await;
        assert_eq!(status, 200, "{body}");
    }
    let call = request_26(3, "tools/call", json!({"name": "shifty", "arguments": {}}));
    let (_, _, body) = post(&route, &call).await;
    let answer: Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!(
        answer["result"]["structuredContent"],
        json!({"m": 1}),
        "judged by the pinned contract, which requires m: {body}"
    );
    let text = metrics_text(gateway.metrics_port).await;
    assert_eq!(
        metric(
            &text,
            r#"schemagate_contract_changes_total{server="crm",tool="shifty",schema="output",class="breaking"}"#
        ),
        1.0,
        "the refused change is counted"
    );
}

#[tokio::test]
async fn a_stdio_route_runs_one_server_per_session_behind_the_same_checks() {
    let route = stdio_route("crm", "");
    let gateway = Gateway::start(&[route], &["--stdio-max-processes", "2"]).await;
    let pid = gateway._child.id().expect("the gateway runs");
    let url = gateway.url("crm");
    assert_eq!(children_of(pid), 0, "no process before a session begins");

    // An SDK client: the gateway lists on its own, checks results and arguments; a sampling
    // request the server writes during a call reaches the client, and its answer the server.
    let sdk = client(&url, None).await;
    results_are_checked(&sdk).await;
    let summary = call(&sdk, "summarize", json!({})).await;
    assert_eq!(
        summary.structured_content,
        Some(json!({"summary": "the proxy relayed a sampling request", "model": "host-model"})),
        "{}",
        text_of(&summary)
    );

    // A second session has a process of its own; progress comes in order before the answer.
    let session = initialize(&url).await;
    until_children(pid, 2).await;
    // Both sessions in use (a stream open): a third is refused, no session in use is stopped for
    // it (an idle one would be: see gateway_sessions).
    let listening = crate::http_client::client()
        .get(&url)
        .header("accept", "text/event-stream")
        .header("mcp-session-id", &session)
        .header("mcp-protocol-version", "2025-11-25")
        .send()
        .await
        .expect("GET the second session's stream");
    assert_eq!(listening.status(), 200);
    let (status, _, body) = post_in(
        &url,
        None,
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#,
    )
    .await;
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("--stdio-max-processes"), "{body}");
    assert_eq!(children_of(pid), 2);
    let count = r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"count","arguments":{},"_meta":{"progressToken":"p"}}}"#;
    let (status, _, body) = post_in(&url, Some(&session), count).await;
    assert_eq!(status, 200, "{body}");
    let through = messages(&body);
    assert_eq!(
        through.len(),
        4,
        "three progress notifications and the result: {through:?}"
    );
    for (i, message) in through[..3].iter().enumerate() {
        let progress: Value = serde_json::from_str(message).expect("JSON");
        assert_eq!(progress["params"]["progress"], json!(i as f64 + 1.0));
    }
    let answer: Value = serde_json::from_str(&through[3]).expect("JSON");
    assert_eq!(answer["id"], 2);
    assert_eq!(answer["result"]["structuredContent"], json!({"counted": 3}));

    // DELETE ends the session and its process; the session is then unknown.
    let deleted = crate::http_client::client()
        .delete(&url)
        .header("mcp-session-id", session.as_str())
        .send()
        .await
        .expect("DELETE");
    assert_eq!(deleted.status(), 200);
    until_children(pid, 1).await;
    let (status, _, body) = post_in(&url, Some(&session), count).await;
    assert_eq!(status, 404);
    assert!(
        error_of(&body)["message"]
            .as_str()
            .unwrap_or("")
            .contains("initialize again"),
        "{body}"
    );

    // Without a session, only initialize starts a process.
    let (status, _, body) = post(&url, count).await;
    assert_eq!(status, 400);
    assert_eq!(error_of(&body)["code"], -32600);
    assert!(
        error_of(&body)["message"]
            .as_str()
            .unwrap_or("")
            .contains("runs its server on stdio"),
        "{body}"
    );
    assert_eq!(children_of(pid), 1);

    sdk.cancel().await.expect("end the session");
    let text = metrics_text(gateway.metrics_port).await;
    for (payload, attempt, outcome, count) in [
        ("result", "first", "valid", 1.0),
        ("result", "first", "invalid", 1.0),
        ("arguments", "retry", "invalid", 1.0),
    ] {
        let series = validations("get_customer", payload, attempt, outcome);
        assert_eq!(metric(&text, &series), count, "{series}");
    }
}

fn sha(token: &str) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(token.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[tokio::test]
async fn the_gateways_token_is_its_own_and_the_upstreams_credentials_pass_through() {
    let (_server, url) = raw_upstream().await;
    let tokens = format!(
        "agent:{}:check:crm other:{}:check:billing",
        sha("agent-secret"),
        sha("other-secret")
    );
    let gateway = Gateway::start(
        &[format!("crm={url}"), format!("billing={url}")],
        &["--auth-token", &tokens],
    )
    .await;
    let call = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"headers","arguments":{}}}"#;
    let send = |proxy_token: Option<&'static str>| {
        let mut request = mcp_request(gateway.url("crm"))
            .header("authorization", "Bearer upstream-credential")
            .body(call);
        if let Some(token) = proxy_token {
            request = request.header("proxy-authorization", format!("Bearer {token}"));
        }
        request.send()
    };

    let missing = send(None).await.expect("POST");
    assert_eq!(missing.status(), 407);
    assert_eq!(
        missing
            .headers()
            .get("proxy-authenticate")
            .and_then(|v| v.to_str().ok()),
        Some("Bearer realm=\"schemagate\"")
    );
    assert!(missing
        .text()
        .await
        .expect("body")
        .contains("Proxy-Authorization"));
    assert_eq!(send(Some("wrong")).await.expect("POST").status(), 407);
    let other = send(Some("other-secret")).await.expect("POST");
    assert_eq!(other.status(), 403, "a token for another route");

    let allowed = send(Some("agent-secret")).await.expect("POST");
    assert_eq!(allowed.status(), 200);
    let answer: Value = allowed.json().await.expect("JSON");
    let seen = &answer["result"]["structuredContent"];
    assert_eq!(
        seen["authorization"], "Bearer upstream-credential",
        "Authorization reaches the upstream unchanged: {answer}"
    );
    assert_eq!(
        seen["proxy_authorization"],
        Value::Null,
        "the gateway's own token stops at the gateway"
    );
    let upstream = url::Url::parse(&url).expect("the upstream's URL");
    assert_eq!(
        seen["host"],
        format!(
            "{}:{}",
            upstream.host_str().expect("a host"),
            upstream.port().expect("a port")
        ),
        "the upstream is named as its own host, not the gateway's: {answer}"
    );

    let text = metrics_text(gateway.metrics_port).await;
    assert_eq!(
        metric(
            &text,
            r#"schemagate_auth_failures_total{transport="gateway",reason="missing"}"#
        ),
        1.0
    );
}

#[tokio::test]
async fn a_broken_or_hostile_upstream_gets_no_result_past_the_gateway_unchecked() {
    let (_server, url) = raw_upstream().await;
    let gateway = Gateway::start(&[format!("crm={url}")], &[]).await;
    let call = |tool: &str, id: u32| {
        format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{tool}","arguments":{{}}}}}}"#
        )
    };
    // Answers the client could not be given as an answer: 502, with an error for the call.
    for (id, tool, why) in [
        (1, "plain", "neither application/json nor text/event-stream"),
        (2, "compressed", "compressed"),
        (3, "garbage", "not a JSON-RPC message"),
    ] {
        let (status, _, body) = post(&gateway.url("crm"), &call(tool, id)).await;
        assert_eq!(status, 502, "{tool}: {body}");
        let answer: Value = serde_json::from_str(&body).expect("JSON");
        assert_eq!(answer["id"], id, "{tool}");
        let message = answer["error"]["message"].as_str().unwrap_or("");
        assert!(message.contains(why), "{tool}: {message}");
    }
    // A byte order mark before the answer: read as a client reads it, and judged.
    let (status, _, body) = post(&gateway.url("crm"), &call("bom", 4)).await;
    assert_eq!(status, 200);
    let answer: Value = serde_json::from_str(&body).expect("JSON without the mark");
    assert_eq!(answer["result"]["isError"], true, "{answer}");
    assert!(answer["result"].get("structuredContent").is_none());
}

#[tokio::test]
async fn replicas_on_one_redis_judge_calls_by_the_contract_one_of_them_learned() {
    let Some(redis) = crate::registry::start_redis() else {
        return;
    };
    // The upstream answers tools/list once: a replica that had to list again could not.
    let (_server, url) = raw_upstream_with(&["--list-once"]).await;
    let route = format!("crm={url}");
    let registry = redis.url();
    let flags = ["--registry", registry.as_str()];
    let call = |id: u32| {
        format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"bom","arguments":{{}}}}}}"#
        )
    };
    let outcome = |body: &str| -> Value {
        let answer: Value = serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body}"));
        answer["result"]["_meta"]["dev.schemagate/verdict"]["outcome"].clone()
    };

    let a = Gateway::start(std::slice::from_ref(&route), &flags).await;
    let (status, _, body) = post(&a.url("crm"), &call(1)).await;
    assert_eq!(status, 200);
    assert_eq!(outcome(&body), "invalid", "A listed and judged: {body}");

    // B starts after A registered the contract in Redis, and is ready once it has read it.
    let b = Gateway::start(&[route], &flags).await;
    let (status, _, body) = post(&b.url("crm"), &call(2)).await;
    assert_eq!(status, 200);
    assert_eq!(
        outcome(&body),
        "invalid",
        "B judged by the contract A learned, without listing: {body}"
    );
}

#[tokio::test]
async fn a_header_that_disagrees_with_the_body_is_a_header_mismatch() {
    let (_server, url) = raw_upstream().await;
    let gateway = Gateway::start(&[format!("crm={url}")], &[]).await;
    let call = r#"{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"sized","arguments":{"id":7}}}"#;
    let send = |method: &'static str, name: &'static str| {
        mcp_request(gateway.url("crm"))
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", method)
            .header("mcp-name", name)
            .body(call)
            .send()
    };
    for (method, name, said) in [
        ("tools/call", "delete_everything", "Mcp-Name"),
        ("tools/list", "sized", "Mcp-Method"),
    ] {
        let response = send(method, name).await.expect("POST");
        assert_eq!(response.status(), 400, "{said}");
        let answer: Value = response.json().await.expect("JSON");
        assert_eq!(answer["id"], 9);
        assert_eq!(answer["error"]["code"], -32020);
        let message = answer["error"]["message"].as_str().unwrap_or("");
        assert!(message.contains(said), "{message}");
    }
    let agreed = send("tools/call", "sized").await.expect("POST");
    assert_eq!(agreed.status(), 200, "headers that agree pass");
}

#[tokio::test]
async fn a_json_answer_comes_whole_with_its_content_length() {
    let (_server, url) = raw_upstream().await;
    let gateway = Gateway::start(&[format!("crm={url}")], &[]).await;
    let response = mcp_request(gateway.url("crm"))
        .body(r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"sized","arguments":{"id":7}}}"#)
        .send()
        .await
        .expect("POST");
    assert_eq!(response.status(), 200);
    let headers = response.headers().clone();
    assert!(
        headers.get("transfer-encoding").is_none(),
        "a JSON answer is not chunked: {headers:?}"
    );
    let length: usize = headers
        .get("content-length")
        .and_then(|v| v.to_str().ok()?.parse().ok())
        .unwrap_or_else(|| panic!("no Content-Length: {headers:?}"));
    let body = response.bytes().await.expect("body");
    assert_eq!(body.len(), length);
    let answer: Value = serde_json::from_slice(&body).expect("JSON");
    assert_eq!(answer["id"], 3);
    assert!(
        answer["result"]["structuredContent"].is_object(),
        "{answer}"
    );
}

#[tokio::test]
async fn a_clients_oauth_flow_finds_the_routes_metadata_through_the_gateway() {
    let (_server, url) = raw_upstream_with(&["--require-auth"]).await;
    let gateway = Gateway::start(&[format!("crm={url}")], &[]).await;
    let base = format!("http://127.0.0.1:{}", gateway.port);
    let call = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"sized","arguments":{"id":7}}}"#;
    let challenged = mcp_request(gateway.url("crm"))
        .body(call)
        .send()
        .await
        .expect("POST");
    assert_eq!(
        challenged.status(),
        401,
        "the upstream's challenge reaches the client"
    );
    let challenge = challenged
        .headers()
        .get("www-authenticate")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    let metadata_url = format!("{base}/.well-known/oauth-protected-resource/mcp/crm");
    assert_eq!(
        challenge,
        format!(r#"Bearer realm="raw", resource_metadata="{metadata_url}""#)
    );
    let metadata: Value = crate::http_client::get(&metadata_url)
        .await
        .expect("GET the metadata")
        .json()
        .await
        .expect("JSON");
    assert_eq!(
        metadata["resource"],
        gateway.url("crm"),
        "the resource is the URL the client connected to"
    );
    assert_eq!(
        metadata["authorization_servers"],
        json!(["https://auth.example"])
    );
    assert_eq!(metadata["scopes_supported"], json!(["crm.read"]));

    // With the upstream's token, the call goes through and is checked.
    let (status, _, body) = {
        let response = mcp_request(gateway.url("crm"))
            .header("authorization", "Bearer from-the-authorization-server")
            .body(call)
            .send()
            .await
            .expect("POST");
        (
            response.status().as_u16(),
            (),
            response.text().await.expect("body"),
        )
    };
    assert_eq!(status, 200, "{body}");
    let answer: Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!(answer["result"]["structuredContent"]["id"], 7);
}

#[tokio::test]
async fn routes_from_a_file_change_while_the_gateway_runs() {
    let (_server, url) = raw_upstream().await;
    let dir = tempfile::tempdir().expect("a directory");
    let file = dir.path().join("routes.toml");
    std::fs::write(&file, format!("[routes]\ncrm = \"{url}\"\n")).expect("write");
    let path = file.to_str().expect("a UTF-8 path");
    let gateway = Gateway::start(&[], &["--routes", path, "--policy-poll-interval", "1"]).await;
    let call = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"sized","arguments":{"id":7}}}"#;
    assert_eq!(post(&gateway.url("crm"), call).await.0, 200);
    assert_eq!(post(&gateway.url("billing"), call).await.0, 404);

    // billing added, crm removed: in force within a poll or two.
    std::fs::write(&file, format!("[routes]\nbilling = \"{url}\"\n")).expect("write");
    let mut statuses = (0, 0);
    for _ in 0..40 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        statuses = (
            post(&gateway.url("billing"), call).await.0,
            post(&gateway.url("crm"), call).await.0,
        );
        if statuses == (200, 404) {
            break;
        }
    }
    assert_eq!(statuses, (200, 404), "billing serves, crm is gone");

    // A file that cannot be read keeps the routes in force.
    std::fs::write(&file, "[routes]\nbilling = \"not a url\"\n").expect("write");
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(post(&gateway.url("billing"), call).await.0, 200);
}

#[tokio::test]
async fn a_stdio_route_removed_from_the_routes_file_stops_its_processes() {
    let dir = tempfile::tempdir().expect("a directory");
    let file = dir.path().join("routes.toml");
    let command = test_server().to_string_lossy().into_owned();
    let quoted = shlex::try_quote(&command).expect("a path a shell can quote");
    std::fs::write(&file, format!("[routes]\ncrm = \"stdio:{quoted}\"\n")).expect("write");
    let path = file.to_str().expect("a UTF-8 path");
    let gateway = Gateway::start(&[], &["--routes", path, "--policy-poll-interval", "1"]).await;
    let pid = gateway._child.id().expect("the gateway runs");
    initialize(&gateway.url("crm")).await;
    initialize(&gateway.url("crm")).await;
    until_children(pid, 2).await;
    std::fs::write(&file, "[routes]\nother = \"http://127.0.0.1:1/mcp\"\n").expect("write");
    until_children(pid, 0).await;
}

/// The events read so far in `stream` (whole ones): each one's `id` and data.
fn events(stream: &str) -> Vec<(Option<String>, String)> {
    let mut whole = stream.split("\n\n").collect::<Vec<_>>();
    whole.pop(); // what follows the last blank line is not whole yet
    whole
        .into_iter()
        .map(|event| {
            let id = event
                .lines()
                .find_map(|l| l.strip_prefix("id:"))
                .map(|id| id.trim().to_owned());
            let data: Vec<&str> = event
                .lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .map(|d| d.strip_prefix(' ').unwrap_or(d))
                .collect();
            (id, data.join("\n"))
        })
        .collect()
}

/// Reads `response` until `done` holds of the events read; fails after 10 s.
async fn read_until(
    response: &mut reqwest::Response,
    done: impl Fn(&[(Option<String>, String)]) -> bool,
) -> Vec<(Option<String>, String)> {
    let mut text = String::new();
    tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let chunk = response
                .chunk()
                .await
                .expect("read the stream")
                .unwrap_or_else(|| panic!("the stream ended; read: {text}"));
            text.push_str(std::str::from_utf8(&chunk).expect("UTF-8"));
            let read = events(&text);
            if done(&read) {
                return read;
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("not within 10 s; read: {text}"))
}

#[tokio::test]
async fn a_stream_resumed_with_last_event_id_brings_the_answer_through_the_same_check() {
    let (_server, url) = raw_upstream().await;
    let gateway = Gateway::start(&[format!("crm={url}")], &[]).await;
    let target = gateway.url("crm");
    let session = initialize(&target).await;
    let with_session = |request: reqwest::RequestBuilder| {
        request
            .header("mcp-session-id", session.as_str())
            .header("mcp-protocol-version", "2025-11-25")
            .header("accept", "application/json, text/event-stream")
    };
    // The upstream primes the call's stream and holds it: the answer is not on it.
    let call = r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"resumable","arguments":{}}}"#;
    let mut stream = with_session(crate::http_client::client().post(&target))
        .header("content-type", "application/json")
        .body(call)
        .send()
        .await
        .expect("POST the call");
    assert_eq!(stream.status(), 200);
    let read = read_until(&mut stream, |read| !read.is_empty()).await;
    assert_eq!(
        read[0].0.as_deref(),
        Some("r1"),
        "the priming event, as sent"
    );
    // The client loses the stream and resumes it after the last event it read.
    drop(stream);
    let mut resumed = with_session(crate::http_client::client().get(&target))
        .header("last-event-id", "r1")
        .send()
        .await
        .expect("GET with Last-Event-ID");
    assert_eq!(resumed.status(), 200);
    let read = read_until(&mut resumed, |read| {
        read.iter().any(|(_, data)| data.contains(r#""id":5"#))
    })
    .await;
    let (id, answer) = read
        .iter()
        .find(|(_, data)| data.contains(r#""id":5"#))
        .expect("the call's answer");
    assert_eq!(
        id.as_deref(),
        Some("r2"),
        "the replaced answer keeps its event id"
    );
    let answer: Value = serde_json::from_str(answer).expect("JSON");
    assert_eq!(answer["result"]["isError"], true, "{answer}");
    assert!(answer["result"].get("structuredContent").is_none());
    assert_eq!(
        answer["result"]["_meta"]["dev.schemagate/verdict"]["outcome"], "invalid",
        "judged as the call's answer, against the tool's outputSchema: {answer}"
    );
}

#[tokio::test]
async fn a_message_that_does_not_arrive_in_time_gets_408_and_the_route_serves_on() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (_server, url) = raw_upstream().await;
    let gateway = Gateway::start(&[format!("crm={url}")], &["--body-read-timeout-secs", "1"]).await;
    let mut slow = tokio::net::TcpStream::connect(("127.0.0.1", gateway.port))
        .await
        .expect("connect");
    slow.write_all(
        b"POST /mcp/crm HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{\"jsonrpc\":",
    )
    .await
    .expect("write");
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), slow.read_to_end(&mut answer))
        .await
        .expect("answered within 10 s")
        .expect("read");
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("did not arrive within 1 s"), "{answer}");
    let call = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"sized","arguments":{"id":7}}}"#;
    assert_eq!(post(&gateway.url("crm"), call).await.0, 200);
}

#[tokio::test]
async fn a_route_urls_user_and_password_go_as_basic_credentials_unless_the_client_sends_its_own() {
    let (_server, url) = raw_upstream().await;
    let with_user = url.replacen("http://", "http://agent:p%40ss@", 1);
    let gateway = Gateway::start(&[format!("crm={with_user}")], &[]).await;
    let call = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"headers","arguments":{}}}"#;
    let seen = |authorization: Option<&'static str>| {
        let mut request = mcp_request(gateway.url("crm")).body(call);
        if let Some(value) = authorization {
            request = request.header("authorization", value);
        }
        async move {
            let answer = request.send().await.expect("POST");
            assert_eq!(answer.status(), 200);
            let answer: Value = answer.json().await.expect("JSON");
            answer["result"]["structuredContent"]["authorization"].clone()
        }
    };
    // "agent:p@ss", the password percent-decoded, in base64.
    assert_eq!(seen(None).await, "Basic YWdlbnQ6cEBzcw==");
    assert_eq!(seen(Some("Bearer own")).await, "Bearer own");
}

#[tokio::test]
async fn a_tls_handshake_that_never_ends_is_cut_at_the_connect_timeout() {
    // Accepts connections and says nothing: TCP connects, TLS never does.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let port = silent.local_addr().expect("addr").port();
    let held = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = silent.accept().await {
            held.push(socket);
        }
    });
    let gateway = Gateway::start(
        &[format!("crm=https://127.0.0.1:{port}/mcp")],
        &["--upstream-connect-timeout-secs", "1"],
    )
    .await;
    let started = std::time::Instant::now();
    let answer = mcp_request(gateway.url("crm"))
        .body(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"sized","arguments":{}}}"#)
        .send()
        .await
        .expect("POST");
    assert_eq!(answer.status(), 502);
    let text = answer.text().await.expect("text");
    assert!(text.contains("--upstream-connect-timeout-secs"), "{text}");
    // Well before --upstream-timeout-secs (300 s by default).
    assert!(started.elapsed() < std::time::Duration::from_secs(60));
    held.abort();
}
