//! `schemagate proxy` between real MCP peers: the official Rust SDK (`rmcp`) as client and as
//! server (examples/mcp_test_server.rs), and a raw JSON-RPC server where exact bytes matter. The
//! proxy is the built `schemagate` binary, run as an MCP host would run it.

// Sampling is deprecated by SEP-2577 (2026-07-28), yet it is how a 2025-11-25 server asks its
// client for something, which the proxy must relay.
#![allow(deprecated)]

use crate::helpers::mcp::*;
use crate::helpers::metric;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, GetTaskParams, ProtocolVersion, TaskPayload,
};
use rmcp::service::RunningService;
use rmcp::transport::{ConfigureCommandExt, TokioChildProcess};
use rmcp::{ClientLifecycleMode, ClientServiceExt, RoleClient, ServiceExt};
use serde_json::{json, Value};
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

pub(crate) async fn sdk_client(
    flags: &[&str],
    lifecycle: Option<ClientLifecycleMode>,
) -> RunningService<RoleClient, Host> {
    let transport = TokioChildProcess::builder(proxy_command(flags, &[]).configure(|_| {}))
        .stderr(Stdio::inherit())
        .spawn()
        .map(|(transport, _stderr)| transport)
        .expect("spawn schemagate proxy");
    match lifecycle {
        None => Host::new()
            .serve(transport)
            .await
            .expect("initialize through the proxy"),
        Some(mode) => Host::new()
            .serve_with_lifecycle(transport, mode)
            .await
            .expect("discover through the proxy"),
    }
}

/// A validations series of server `crm` under untrusted: `payload` is `result` or `arguments`.
fn validations(tool: &str, payload: &str, attempt: &str, outcome: &str) -> String {
    format!(
        r#"schemagate_validations_total{{server="crm",tool="{tool}",tier="untrusted",payload="{payload}",attempt="{attempt}",outcome="{outcome}"}}"#
    )
}

#[tokio::test]
async fn an_sdk_client_gets_conforming_results_unchanged_and_the_rest_as_tool_errors() {
    let port = free_port();
    let metrics_listen = format!("127.0.0.1:{port}");
    let client = sdk_client(&["--metrics-listen", &metrics_listen], None).await;

    // Pagination: the SDK follows nextCursor over three pages (of two); the proxy registers each.
    let tools = client
        .list_all_tools()
        .await
        .expect("tools/list through the proxy");
    assert_eq!(tools.len(), 7, "every page reaches the client");

    let valid = call(&client, "get_customer", json!({"id": 7})).await;
    assert_eq!(valid.is_error, Some(false));
    assert_eq!(
        valid.structured_content,
        Some(json!({"id": 7, "email": "ada@example.com", "name": "Ada"}))
    );
    assert!(
        valid.meta.is_none(),
        "a passed result is the server's, untouched"
    );

    let invalid = call(
        &client,
        "get_customer",
        json!({"id": 7, "variant": "invalid"}),
    )
    .await;
    assert_eq!(invalid.is_error, Some(true));
    assert!(
        invalid.structured_content.is_none(),
        "the unchecked payload is withheld"
    );
    let text = text_of(&invalid);
    assert!(
        text.contains("withheld the result of tool \"get_customer\""),
        "{text}"
    );
    assert!(text.contains("/email") && text.contains("/id"), "{text}");
    let verdict = verdict_of(&invalid);
    assert_eq!(verdict["outcome"], "invalid");
    assert_eq!(verdict["action"], "reject");
    assert_eq!(verdict["errors"][0]["keyword"], "format");

    // After a rejection the next call of the tool is a retry; isError results pass as sent.
    let tool_error = call(
        &client,
        "get_customer",
        json!({"id": 7, "variant": "is_error"}),
    )
    .await;
    assert_eq!(tool_error.is_error, Some(true));
    assert_eq!(text_of(&tool_error), "no such customer");
    assert!(tool_error.meta.is_none());

    // structuredContent absent while the tool declares an outputSchema: a failure, whatever the
    // text copy says.
    let no_structured = call(
        &client,
        "get_customer",
        json!({"id": 7, "variant": "no_structured"}),
    )
    .await;
    assert_eq!(no_structured.is_error, Some(true));
    assert_eq!(
        verdict_of(&no_structured)["errors"][0]["keyword"],
        "structuredContent"
    );

    // Arguments that break the inputSchema never reach the server.
    let bad_args = call(&client, "get_customer", json!({"id": "seven"})).await;
    assert_eq!(bad_args.is_error, Some(true));
    assert!(text_of(&bad_args).contains("did not send this call to the server"));
    assert_eq!(verdict_of(&bad_args)["errors"][0]["instance_path"], "/id");

    // A tool without an outputSchema passes unchecked; one whose schema was refused is withheld.
    let echo = call(&client, "echo", json!({"text": "hi"})).await;
    assert_eq!(
        (echo.is_error, text_of(&echo)),
        (Some(false), "hi".to_owned())
    );
    let remote = call(&client, "fetch_remote", json!({})).await;
    assert_eq!(remote.is_error, Some(true));
    assert_eq!(verdict_of(&remote)["outcome"], "unchecked");
    assert_eq!(
        verdict_of(&remote)["error"]["code"],
        "schema_ref_not_allowed"
    );

    let text = metrics_text(port).await;
    // Calls of get_customer, arguments and result each counted, apart: valid (first), invalid
    // result (first, rejected), isError (retry: the run ends), no structuredContent (first,
    // rejected), arguments rejected (retry).
    for (payload, attempt, outcome, count) in [
        ("result", "first", "valid", 1.0),
        ("result", "first", "invalid", 2.0),
        ("result", "retry", "tool_error", 1.0),
        ("result", "retry", "invalid", 0.0),
        ("arguments", "first", "valid", 3.0),
        ("arguments", "retry", "valid", 1.0),
        ("arguments", "retry", "invalid", 1.0),
        ("arguments", "first", "invalid", 0.0),
    ] {
        let series = validations("get_customer", payload, attempt, outcome);
        assert_eq!(metric(&text, &series), count, "{series}");
    }
    assert_eq!(
        metric(&text, &validations("echo", "result", "first", "unchecked")),
        1.0
    );
    assert_eq!(
        metric(
            &text,
            &validations("fetch_remote", "result", "first", "unchecked")
        ),
        1.0
    );
    assert_eq!(
        metric(
            &text,
            r#"schemagate_proxy_messages_total{transport="proxy",direction="to_client",kind="replaced"}"#
        ),
        3.0
    );
    assert_eq!(
        metric(
            &text,
            r#"schemagate_proxy_messages_total{transport="proxy",direction="to_server",kind="answered"}"#
        ),
        1.0
    );
    assert!(
        metric(
            &text,
            r#"schemagate_field_failures_total{server="crm",tool="get_customer",payload="result",path="/email",keyword="format"}"#
        ) >= 1.0
    );
    client.cancel().await.expect("close the session");
}

#[tokio::test]
async fn sampling_is_answered_through_the_proxy_and_a_changed_contract_is_listed_again() {
    let client = sdk_client(&[], None).await;
    // No tools/list from the client: the proxy asks the server itself before the first check.
    let summary = call(&client, "summarize", json!({})).await;
    assert_eq!(summary.is_error, Some(false), "{}", text_of(&summary));
    assert_eq!(
        summary.structured_content,
        Some(json!({"summary": "the proxy relayed a sampling request", "model": "host-model"}))
    );

    // {id, email} conforms to get_customer's schema until the server changes it to require a
    // name and says so; the client does not list again, the proxy does.
    let before = call(
        &client,
        "get_customer",
        json!({"id": 1, "variant": "no_name"}),
    )
    .await;
    assert_eq!(before.is_error, Some(false), "{}", text_of(&before));
    let changed = call(&client, "change_tools", json!({})).await;
    assert_eq!(changed.is_error, Some(false));
    let after = call(
        &client,
        "get_customer",
        json!({"id": 1, "variant": "no_name"}),
    )
    .await;
    assert_eq!(
        after.is_error,
        Some(true),
        "checked against the new contract"
    );
    assert_eq!(verdict_of(&after)["errors"][0]["keyword"], "required");
    let listed = client.list_all_tools().await.expect("tools/list");
    let customer = listed
        .iter()
        .find(|t| t.name == "get_customer")
        .and_then(|t| t.output_schema.clone())
        .expect("get_customer has an outputSchema");
    assert_eq!(customer["required"], json!(["id", "email", "name"]));
    client.cancel().await.expect("close the session");
}

#[tokio::test]
async fn a_2026_07_28_client_without_initialize_is_checked_the_same_way() {
    let mode = ClientLifecycleMode::Discover {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
    };
    let client = sdk_client(&[], Some(mode)).await;
    let valid = call(&client, "get_customer", json!({"id": 3})).await;
    assert_eq!(valid.is_error, Some(false), "{}", text_of(&valid));
    let invalid = call(
        &client,
        "get_customer",
        json!({"id": 3, "variant": "invalid"}),
    )
    .await;
    assert_eq!(invalid.is_error, Some(true));
    assert_eq!(verdict_of(&invalid)["outcome"], "invalid");
    client.cancel().await.expect("close the session");
}

#[tokio::test]
async fn passed_bytes_are_forwarded_exactly_and_what_cannot_be_relayed_is_answered() {
    let port = free_port();
    let metrics_listen = format!("127.0.0.1:{port}");
    let mut raw = Raw::start(&[
        "--max-message-bytes",
        "4096",
        "--metrics-listen",
        &metrics_listen,
    ]);
    let init = raw
        .ask(r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#)
        .await;
    assert!(init.contains(r#""protocolVersion":"2025-11-25""#), "{init}");

    // An integer past 2^53 (which a JavaScript client would already have rounded) arrives as
    // the server wrote it, byte for byte.
    let big = raw
        .ask(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"big","arguments":{}}}"#)
        .await;
    assert_eq!(
        big,
        r#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"{\"n\": 9007199254740993}"}],"structuredContent":{"n":9007199254740993}}}"#
    );

    let wrong = raw
        .ask(r#"{"jsonrpc":"2.0","id":"w","method":"tools/call","params":{"name":"wrong","arguments":{}}}"#)
        .await;
    let wrong: Value = serde_json::from_str(&wrong).expect("JSON");
    assert_eq!(wrong["id"], "w");
    assert_eq!(wrong["result"]["isError"], true);
    assert_eq!(
        wrong["result"]["_meta"][VERDICT]["errors"][0]["keyword"],
        "type"
    );

    // A non-object root is refused under 2025-11-25 (withheld: it cannot be checked) and allowed
    // under 2026-07-28, named in the request's _meta.
    let old = raw
        .ask(r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"listing","arguments":{}}}"#)
        .await;
    let old: Value = serde_json::from_str(&old).expect("JSON");
    assert_eq!(
        old["result"]["_meta"][VERDICT]["error"]["code"],
        "schema_root_not_object"
    );
    let newest = r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"listing","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#;
    assert_eq!(
        raw.ask(newest).await,
        r#"{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"[\"a\",\"b\"]"}],"structuredContent":["a","b"]}}"#
    );

    // A result that is not final (input_required) is relayed, not judged.
    let asks = raw
        .ask(r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"asks","arguments":{}}}"#)
        .await;
    assert_eq!(
        asks,
        r#"{"jsonrpc":"2.0","id":4,"result":{"resultType":"input_required","inputRequests":{"r1":{"method":"roots/list"}},"requestState":"s1"}}"#
    );

    // A line that is not JSON is relayed unchanged, in both directions.
    raw.send("hello, this is not JSON-RPC").await;
    let noise = raw
        .ask(r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"noisy","arguments":{}}}"#)
        .await;
    assert_eq!(noise, "this line is not JSON");
    assert!(raw.next().await.contains("after the noise"));

    // Past --max-message-bytes: the request is answered with a JSON-RPC error, not relayed, and
    // the next one is served.
    let long = format!(
        r#"{{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{{"name":"big","arguments":{{"blob":"{}"}}}}}}"#,
        "x".repeat(6000)
    );
    let refused: Value = serde_json::from_str(&raw.ask(&long).await).expect("JSON");
    assert_eq!(refused["id"], 6);
    assert_eq!(refused["error"]["code"], -32600);
    assert!(refused["error"]["message"]
        .as_str()
        .is_some_and(|m| m.contains("--max-message-bytes (4096)")));
    let after = raw
        .ask(r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"big","arguments":{}}}"#)
        .await;
    assert!(
        after.starts_with(r#"{"jsonrpc":"2.0","id":7,"result""#),
        "{after}"
    );

    let text = metrics_text(port).await;
    for (series, expected) in [
        (
            r#"schemagate_proxy_messages_total{transport="proxy",direction="to_server",kind="not_json_rpc"}"#,
            1.0,
        ),
        (
            r#"schemagate_proxy_messages_total{transport="proxy",direction="to_client",kind="not_json_rpc"}"#,
            1.0,
        ),
        (
            r#"schemagate_proxy_messages_total{transport="proxy",direction="to_server",kind="oversized"}"#,
            1.0,
        ),
        (
            r#"schemagate_proxy_messages_total{transport="proxy",direction="to_client",kind="replaced"}"#,
            2.0,
        ),
    ] {
        assert_eq!(metric(&text, series), expected, "{series}");
    }

    // The client closing stdin ends the session: the server's stdin closes, it exits, and so
    // does the proxy, with the server's status.
    drop(raw.stdin);
    let status = tokio::time::timeout(Duration::from_secs(10), raw.child.wait())
        .await
        .expect("the proxy exits")
        .expect("status");
    assert!(status.success(), "{status}");
}

#[tokio::test]
async fn the_proxy_exits_with_the_servers_status() {
    let status = Command::new(schemagate())
        .args(["proxy", "--server-name", "crm", "--", "sh", "-c", "exit 3"])
        .env("SCHEMAGATE_LOG_LEVEL", "warn")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .status()
        .await
        .expect("run the proxy");
    assert_eq!(status.code(), Some(3));

    let missing = Command::new(schemagate())
        .args([
            "proxy",
            "--server-name",
            "crm",
            "--",
            "/nonexistent/mcp-server",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .await
        .expect("run the proxy");
    assert!(!missing.status.success());
    let stderr = String::from_utf8_lossy(&missing.stderr);
    assert!(stderr.contains("cannot start the MCP server"), "{stderr}");
}

/// Whether process `pid` is gone (or a zombie, which runs nothing).
fn gone(pid: &str) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('Z')),
    }
}

#[tokio::test]
async fn a_signalled_proxy_stops_its_server_before_it_exits() {
    // A server that ignores SIGTERM, SIGHUP and SIGINT and never reads its stdin: only SIGKILL
    // stops it. It prints its pid first (forwarded as received: it is not JSON-RPC).
    let stubborn = r#"trap "" TERM HUP INT; echo $$; exec sleep 600"#;
    for signal in ["TERM", "HUP", "INT"] {
        let mut proxy = Command::new(schemagate())
            .args(["proxy", "--server-name", "crm", "--", "sh", "-c", stubborn])
            .env("SCHEMAGATE_LOG_LEVEL", "info")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("start the proxy");
        let mut lines = BufReader::new(proxy.stdout.take().expect("stdout")).lines();
        let server = tokio::time::timeout(Duration::from_secs(10), lines.next_line())
            .await
            .expect("the server starts")
            .expect("read")
            .expect("the server's pid");
        assert!(!gone(&server), "the server runs");
        let killed = Command::new("kill")
            .args([format!("-{signal}"), proxy.id().expect("pid").to_string()])
            .status()
            .await
            .expect("kill");
        assert!(killed.success());
        let status = tokio::time::timeout(Duration::from_secs(10), proxy.wait())
            .await
            .unwrap_or_else(|_| panic!("SIG{signal}: the proxy exits"))
            .expect("status");
        assert_eq!(
            status.code(),
            Some(128 + 9),
            "SIG{signal}: the proxy exits with its server's status (killed)"
        );
        assert!(
            gone(&server),
            "SIG{signal}: the server {server} outlived its proxy"
        );
        let mut stderr = String::new();
        tokio::io::AsyncReadExt::read_to_string(
            &mut proxy.stderr.take().expect("stderr"),
            &mut stderr,
        )
        .await
        .expect("stderr");
        assert!(stderr.contains("stopping the MCP server"), "{stderr}");
        assert!(
            !stderr.contains('\u{1b}'),
            "no colour codes when stderr is not a terminal: {stderr:?}"
        );
    }
}

#[tokio::test]
async fn an_answer_after_a_cancel_is_checked_like_any_other() {
    let mut raw = Raw::start(&[]);
    let init = raw
        .ask(r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#)
        .await;
    assert!(init.contains("protocolVersion"), "{init}");
    // The server holds `late` until the client cancels it, then answers anyway with a result
    // that breaks the tool's outputSchema.
    raw.send(r#"{"jsonrpc":"2.0","id":"c1","method":"tools/call","params":{"name":"late","arguments":{}}}"#)
        .await;
    raw.send(r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"c1","reason":"the user gave up"}}"#)
        .await;
    let late: Value = serde_json::from_str(&raw.next().await).expect("JSON");
    assert_eq!(late["id"], "c1");
    assert_eq!(late["result"]["isError"], true, "{late}");
    assert!(
        late["result"].get("structuredContent").is_none(),
        "the broken result never reaches the client: {late}"
    );
    assert_eq!(
        late["result"]["_meta"][VERDICT]["errors"][0]["keyword"],
        "type"
    );
    drop(raw.stdin);
    let _ = raw.child.wait().await;
}

#[tokio::test]
async fn a_request_id_already_followed_is_refused_not_relayed_unchecked() {
    let mut raw = Raw::start(&[]);
    raw.ask(r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#)
        .await;
    // Ids shaped like the proxy's own are the client's to use.
    let id = r#""schemagate-0000000000000000-1""#;
    raw.send(&format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"late","arguments":{{}}}}}}"#
    ))
    .await;
    // The same id again while the first is in flight: two answers with one id could not be told
    // apart, so the second is answered here and never reaches the server.
    let again: Value = serde_json::from_str(
        &raw.ask(&format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"wrong","arguments":{{}}}}}}"#
        ))
        .await,
    )
    .expect("JSON");
    assert_eq!(again["id"], "schemagate-0000000000000000-1");
    assert_eq!(again["error"]["code"], -32600, "{again}");
    assert!(
        again["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("already in flight")),
        "{again}"
    );
    // The first call is still followed under its id: its (broken) answer is checked.
    raw.send(&format!(
        r#"{{"jsonrpc":"2.0","method":"notifications/cancelled","params":{{"requestId":{id}}}}}"#
    ))
    .await;
    let late: Value = serde_json::from_str(&raw.next().await).expect("JSON");
    assert_eq!(late["id"], "schemagate-0000000000000000-1");
    assert_eq!(late["result"]["isError"], true, "{late}");
    drop(raw.stdin);
    let _ = raw.child.wait().await;
}

/// The result inside a completed task's `tasks/get` answer, asked through the proxy by an SDK
/// client of the tasks extension.
async fn task_result(client: &RunningService<RoleClient, Host>, variant: &str) -> Value {
    let mut args = serde_json::Map::new();
    args.insert("variant".into(), json!(variant));
    let created = client
        .call_tool_once(CallToolRequestParams::new("report").with_arguments(args))
        .await
        .expect("call report through the proxy");
    let CallToolResponse::Task(created) = created else {
        panic!("a task-capable client gets a task created, as the server sent it: {created:?}")
    };
    let task = client
        .get_task(GetTaskParams::new(created.task.task_id.clone()))
        .await
        .expect("tasks/get through the proxy");
    match task.task.payload {
        TaskPayload::Completed { result } => Value::Object(result),
        other => panic!("the task is completed: {other:?}"),
    }
}

#[tokio::test]
async fn an_sdk_client_gets_a_tasks_result_checked_like_a_direct_answer() {
    let port = free_port();
    let metrics_listen = format!("127.0.0.1:{port}");
    let client = sdk_client(&["--metrics-listen", &metrics_listen], None).await;
    let valid = task_result(&client, "valid").await;
    assert_eq!(valid["structuredContent"], json!({"rows": 3}), "{valid}");
    assert!(valid.get("isError").is_none_or(|e| e == false), "{valid}");

    let invalid = task_result(&client, "invalid").await;
    assert_eq!(invalid["isError"], true, "{invalid}");
    assert!(invalid.get("structuredContent").is_none(), "{invalid}");
    assert_eq!(invalid["_meta"][VERDICT]["outcome"], "invalid");
    assert_eq!(
        invalid["_meta"][VERDICT]["errors"][0]["instance_path"],
        "/rows"
    );

    let metrics = metrics_text(port).await;
    // Counted as the direct answers would be: results and arguments apart.
    for (payload, outcome, count) in [
        ("result", "valid", 1.0),
        ("result", "invalid", 1.0),
        ("arguments", "valid", 2.0),
        ("arguments", "invalid", 0.0),
    ] {
        let series = validations("report", payload, "first", outcome);
        assert_eq!(metric(&metrics, &series), count, "{series}");
    }
    client.cancel().await.expect("close the session");
}

/// Whether `value` holds, anywhere, a `structuredContent` whose `n` is not an integer: the raw
/// server's broken results.
fn holds_broken_result(value: &Value) -> bool {
    match value {
        Value::Object(map) => map.iter().any(|(k, v)| {
            (k == "structuredContent" && v.get("n").is_some_and(|n| n.as_i64().is_none()))
                || holds_broken_result(v)
        }),
        Value::Array(items) => items.iter().any(holds_broken_result),
        _ => false,
    }
}

#[tokio::test]
async fn a_hostile_server_gets_no_broken_result_past_an_untrusted_proxy_by_any_route() {
    let mut raw = Raw::start(&[]);
    raw.ask(r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#)
        .await;
    // Each route: the client's messages, each with how many lines come back for it. Every
    // route ends in a result that breaks the tool's outputSchema.
    let routes: &[(&str, &[(&str, usize)])] = &[
        (
            "a direct answer",
            &[(
                r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"wrong","arguments":{}}}"#,
                1,
            )],
        ),
        (
            "an answer after a cancel",
            &[
                (
                    r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"late","arguments":{}}}"#,
                    0,
                ),
                (
                    r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2}}"#,
                    1,
                ),
            ],
        ),
        (
            "an id shaped like the proxy's own",
            &[
                (
                    r#"{"jsonrpc":"2.0","id":"schemagate-0000000000000000-1","method":"tools/call","params":{"name":"late","arguments":{}}}"#,
                    0,
                ),
                (
                    r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"schemagate-0000000000000000-1"}}"#,
                    1,
                ),
            ],
        ),
        (
            "an answer inside a JSON-RPC batch",
            &[(
                r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"batched","arguments":{}}}"#,
                1,
            )],
        ),
        (
            "a result typed input_required",
            &[(
                r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"sneaky","arguments":{}}}"#,
                1,
            )],
        ),
        (
            "tasks/result of a 2025-11-25 task",
            &[
                (
                    r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"deferred","arguments":{"variant":"bad"},"task":{"ttl":60000}}}"#,
                    1,
                ),
                (
                    r#"{"jsonrpc":"2.0","id":6,"method":"tasks/result","params":{"taskId":"t-bad"}}"#,
                    1,
                ),
            ],
        ),
        (
            "tasks/result of a task never created",
            &[(
                r#"{"jsonrpc":"2.0","id":7,"method":"tasks/result","params":{"taskId":"t-stranger"}}"#,
                1,
            )],
        ),
        (
            "a task the client did not ask for",
            &[(
                r#"{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"deferred","arguments":{"variant":"bad"}}}"#,
                1,
            )],
        ),
        (
            "a completed tasks/get (2026-07-28)",
            &[
                (
                    r#"{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"deferred26","arguments":{"variant":"bad"}}}"#,
                    1,
                ),
                (
                    r#"{"jsonrpc":"2.0","id":10,"method":"tasks/get","params":{"taskId":"t26-bad"}}"#,
                    1,
                ),
            ],
        ),
        (
            "a completed tasks/get of a task never created",
            &[(
                r#"{"jsonrpc":"2.0","id":11,"method":"tasks/get","params":{"taskId":"t26-stranger"}}"#,
                1,
            )],
        ),
        (
            "notifications/tasks",
            &[(
                r#"{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"name":"announced","arguments":{}}}"#,
                2,
            )],
        ),
        (
            "a repeated result member",
            &[(
                r#"{"jsonrpc":"2.0","id":13,"method":"tools/call","params":{"name":"twice","arguments":{}}}"#,
                1,
            )],
        ),
        (
            "a result that is not JSON (NaN), which a lenient client reads",
            &[(
                r#"{"jsonrpc":"2.0","id":15,"method":"tools/call","params":{"name":"lenient","arguments":{}}}"#,
                1,
            )],
        ),
        (
            "an answer sent twice",
            &[(
                r#"{"jsonrpc":"2.0","id":14,"method":"tools/call","params":{"name":"doubled","arguments":{}}}"#,
                2,
            )],
        ),
    ];
    for (route, steps) in routes {
        let mut seen = Vec::new();
        for (line, answers) in steps.iter() {
            raw.send(line).await;
            for _ in 0..*answers {
                seen.push(raw.next().await);
            }
        }
        for line in &seen {
            let value: Value = serde_json::from_str(line).expect("JSON");
            assert!(
                !holds_broken_result(&value),
                "{route}: a broken result reached the client: {line}"
            );
        }
        let last: Value = serde_json::from_str(seen.last().expect("an answer")).expect("JSON");
        if last["error"]["code"] == -32001 {
            // An answer no followed call awaits: withheld as a JSON-RPC error for its id.
            assert!(
                last["error"]["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("withheld")),
                "{route}: {last}"
            );
            continue;
        }
        let result = match last["result"].get("result") {
            Some(inner) => inner.clone(),
            None if last.get("params").is_some() => last["params"]["result"].clone(),
            None => last["result"].clone(),
        };
        let result = match &last {
            Value::Array(items) => items[0]["result"].clone(),
            _ => result,
        };
        assert_eq!(
            result["isError"], true,
            "{route}: the client gets a tool error instead: {last}"
        );
        assert!(
            result["_meta"][VERDICT]["outcome"].is_string(),
            "{route}: with the verdict: {last}"
        );
    }
    drop(raw.stdin);
    let _ = raw.child.wait().await;
}

#[tokio::test]
async fn a_tasks_conforming_result_passes_byte_for_byte_and_an_unknown_tasks_is_withheld() {
    let mut raw = Raw::start(&[]);
    raw.ask(r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#)
        .await;
    let created = raw
        .ask(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"deferred","arguments":{"variant":"good"},"task":{"ttl":60000}}}"#)
        .await;
    assert_eq!(
        created,
        r#"{"jsonrpc":"2.0","id":1,"result":{"task":{"taskId":"t-good","status":"working","createdAt":"2026-07-28T00:00:00Z","lastUpdatedAt":"2026-07-28T00:00:00Z","ttl":60000,"pollInterval":100}}}"#,
        "the task created is relayed as sent, never judged as the tool's result"
    );
    let status = raw
        .ask(r#"{"jsonrpc":"2.0","id":2,"method":"tasks/get","params":{"taskId":"t-good"}}"#)
        .await;
    assert_eq!(
        status,
        r#"{"jsonrpc":"2.0","id":2,"result":{"taskId":"t-good","status":"completed","createdAt":"2026-07-28T00:00:00Z","lastUpdatedAt":"2026-07-28T00:00:00Z","ttl":60000}}"#
    );
    let result = raw
        .ask(r#"{"jsonrpc":"2.0","id":3,"method":"tasks/result","params":{"taskId":"t-good"}}"#)
        .await;
    assert_eq!(
        result,
        r#"{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"n"}],"structuredContent":{"n":1},"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"t-good"}}}}"#
    );

    let stranger: Value = serde_json::from_str(
        &raw.ask(
            r#"{"jsonrpc":"2.0","id":4,"method":"tasks/result","params":{"taskId":"t-stranger"}}"#,
        )
        .await,
    )
    .expect("JSON");
    let verdict = &stranger["result"]["_meta"][VERDICT];
    assert_eq!(verdict["outcome"], "unchecked", "{stranger}");
    assert_eq!(verdict["error"]["code"], "unknown_task");
    assert!(
        stranger["result"]["content"][0]["text"]
            .as_str()
            .is_some_and(|t| t.contains("t-stranger")),
        "{stranger}"
    );
    drop(raw.stdin);
    let _ = raw.child.wait().await;
}
