//! MCP result semantics under 2025-06-18, 2025-11-25 and 2026-07-28: what a verdict claims, tools
//! without a contract, text copies compared as values, JSON Schema keywords, the root rule per
//! revision, and paginated tools/list. Every check is asked over REST and gRPC, with one answer.

use crate::helpers::{as_rest, client, grpc_check, registration_as_rest, TestApp};
use schemagate::grpc::proto::{self, validator_client::ValidatorClient};
use serde_json::{json, Value};
use tonic::transport::Channel;

/// Asks `check` over REST and gRPC; both must answer the same verdict, which is returned.
async fn both(app: &TestApp, grpc: &mut ValidatorClient<Channel>, check: &Value) -> Value {
    let (status, rest) = app.validate(check).await;
    assert_eq!(status, 200, "{check}: {rest}");
    let verdict = grpc
        .validate(grpc_check(check))
        .await
        .unwrap_or_else(|e| panic!("{check}: {e:?}"))
        .into_inner();
    assert_eq!(as_rest(&verdict), rest, "REST and gRPC differ on {check}");
    rest
}

/// Asks `check` over both transports; both must refuse it with `code`.
async fn both_refuse(
    app: &TestApp,
    grpc: &mut ValidatorClient<Channel>,
    check: &Value,
    code: &str,
) -> (String, String) {
    let (status, rest) = app.validate(check).await;
    assert_eq!(rest["error"]["code"], code, "{check}: {status} {rest}");
    let status = grpc.validate(grpc_check(check)).await.unwrap_err();
    let carried = status
        .metadata()
        .get(schemagate::grpc::ERROR_CODE_KEY)
        .and_then(|v| v.to_str().ok());
    assert_eq!(carried, Some(code), "{check}: {status:?}");
    let rest_message = rest["error"]["message"].as_str().unwrap_or("").to_owned();
    (rest_message, status.message().to_owned())
}

fn object_schema() -> Value {
    json!({"type": "object", "required": ["deleted"],
           "properties": {"deleted": {"type": "boolean"}, "account_id": {"type": "integer"}}})
}

#[tokio::test]
async fn valid_is_claimed_only_for_what_was_validated() {
    let app = TestApp::with_policy(
        "[[servers]]\nmatch = \"internal-*\"\ntier = \"trusted\"\n",
        &[],
    )
    .await;
    let mut grpc = client(&app).await;
    let rows = [
        // (server, result, outcome, valid, action)
        (
            "crm",
            json!({"isError": true, "content": []}),
            "tool_error",
            None,
            "pass",
        ),
        (
            "internal-db",
            json!({"structuredContent": {"deleted": "no"}}),
            "skipped",
            None,
            "pass",
        ),
        (
            "crm",
            json!({"structuredContent": {"deleted": true}}),
            "valid",
            Some(true),
            "pass",
        ),
        (
            "crm",
            json!({"structuredContent": {"deleted": "no"}}),
            "invalid",
            Some(false),
            "reject",
        ),
    ];
    for (server, result, outcome, valid, action) in rows {
        let check = json!({"server": server, "schema": object_schema(), "result": result});
        let v = both(&app, &mut grpc, &check).await;
        assert_eq!(v["outcome"], outcome, "{v}");
        assert_eq!(v.get("valid").and_then(Value::as_bool), valid, "{v}");
        assert_eq!(v["action"], action, "{v}");
    }
}

#[tokio::test]
async fn tools_without_a_contract_are_unchecked_not_unknown() {
    let app = TestApp::with_policy("", &[]).await;
    let mut grpc = client(&app).await;
    let tools = json!({"tools": [{"name": "ping", "inputSchema": {"type": "object"}},
                                 {"name": "note"}]});
    let (status, _) = app.register("crm", &tools).await;
    assert_eq!(status, 200);
    for check in [
        json!({"server": "crm", "tool": "ping", "result": {"structuredContent": {"x": 1}}}),
        json!({"server": "crm", "tool": "note", "arguments": {"text": "hi"}}),
    ] {
        let v = both(&app, &mut grpc, &check).await;
        assert_eq!(v["outcome"], "unchecked", "{v}");
        assert_eq!(v["action"], "pass", "{v}");
        assert!(v.get("valid").is_none(), "{v}");
    }
    let counted = app
        .metric(r#"schemagate_validations_total{server="crm",tool="ping",tier="untrusted",payload="result",attempt="first",outcome="unchecked"}"#)
        .await;
    assert_eq!(counted, 2.0, "once per transport");
    // A tool nobody registered is still unknown; each transport names its own way to register.
    let (rest, grpc_message) = both_refuse(
        &app,
        &mut grpc,
        &json!({"server": "crm", "tool": "nope", "result": {"structuredContent": {}}}),
        "unknown_tool",
    )
    .await;
    assert!(rest.contains("PUT /v1/servers/crm/tools"), "{rest}");
    assert!(grpc_message.contains("RegisterTools"), "{grpc_message}");
    assert!(!grpc_message.contains("PUT"), "{grpc_message}");
}

#[tokio::test]
async fn text_copies_are_compared_as_values() {
    let app = TestApp::with_policy("drift_fails = true\n", &[]).await;
    let mut grpc = client(&app).await;
    let text = |t: &str| json!([{"type": "text", "text": t}]);
    // The same value spelled otherwise: never drift, so a conforming result passes.
    for copy in [
        r#"{"account_id": 42.0, "deleted": true}"#,
        r#"{"deleted": true, "account_id": 4.2e1}"#,
        r#"{"deleted":true,"account_id":420E-1}"#,
    ] {
        let check = json!({"schema": object_schema(), "result":
            {"structuredContent": {"deleted": true, "account_id": 42}, "content": text(copy)}});
        let v = both(&app, &mut grpc, &check).await;
        assert_eq!(v["outcome"], "valid", "{copy}: {v}");
        assert!(v.get("findings").is_none(), "{copy}: {v}");
    }
    // A changed value is drift, reported where the copies first differ.
    let check = json!({"schema": object_schema(), "result": {
        "structuredContent": {"deleted": true, "account_id": 42},
        "content": text(r#"{"deleted": false, "account_id": 42}"#)}});
    let v = both(&app, &mut grpc, &check).await;
    assert_eq!(v["findings"][0]["kind"], "text_drift", "{v}");
    assert_eq!(v["findings"][0]["instance_path"], "/deleted", "{v}");
    assert_eq!(v["errors"][0]["instance_path"], "/deleted", "{v}");
    assert_eq!(v["action"], "reject", "drift_fails = true: {v}");
    // Integers beyond a float's precision are compared exactly.
    let body = r#"{"schema": {"type": "object"}, "result": {"structuredContent": {"id": 9007199254740993},
        "content": [{"type": "text", "text": "{\"id\": 9007199254740992}"}]}}"#;
    let (_, v) = app.post_raw("/v1/validate", body).await;
    assert_eq!(v["findings"][0]["instance_path"], "/id", "{v}");
}

#[tokio::test]
async fn errors_name_json_schema_keywords() {
    let app = TestApp::with_policy("", &[]).await;
    let mut grpc = client(&app).await;
    let check = json!({"server": "crm", "tool": "t",
        "schema": {"type": "object", "properties": {
            "tags": {"type": "array", "items": false},
            "email": {"type": "string", "format": "email"}},
            "additionalProperties": false},
        "instance": {"tags": [1], "email": "nope", "extra": 1}});
    let v = both(&app, &mut grpc, &check).await;
    let keywords: Vec<&str> = v["errors"]
        .as_array()
        .expect("errors")
        .iter()
        .filter_map(|e| e["keyword"].as_str())
        .collect();
    assert!(keywords.contains(&"items"), "{v}");
    assert!(keywords.contains(&"additionalProperties"), "{v}");
    assert!(!keywords.contains(&"falseSchema"), "{v}");
    assert!(
        v["feedback"]
            .as_str()
            .unwrap_or("")
            .contains(r#"is not an "email""#),
        "{v}"
    );
    let (_, metrics) = app.get("/metrics").await;
    assert!(metrics.contains(r#"keyword="items""#), "{metrics}");
    assert!(!metrics.contains("falseSchema"), "{metrics}");
}

#[tokio::test]
async fn the_root_rule_follows_the_protocol_revision() {
    let app = TestApp::with_policy("", &[]).await;
    let mut grpc = client(&app).await;
    let array_schema = json!({"type": "array", "items": {"type": "integer"}});
    let text = json!([{"type": "text", "text": "[1, 2]"}]);
    // 2026-07-28 (the default): any root; a non-object result comes with a text block.
    let v = both(
        &app,
        &mut grpc,
        &json!({"schema": array_schema, "result":
            {"structuredContent": [1, 2], "content": text, "resultType": "complete"}}),
    )
    .await;
    assert_eq!(v["outcome"], "valid", "{v}");
    assert!(v.get("findings").is_none(), "{v}");
    let v = both(
        &app,
        &mut grpc,
        &json!({"schema": array_schema, "result": {"structuredContent": [1, 2]}}),
    )
    .await;
    assert_eq!(v["findings"][0]["kind"], "missing_text_copy", "{v}");
    // 2025-06-18 and 2025-11-25: the root must be an object schema.
    for version in ["2025-06-18", "2025-11-25"] {
        both_refuse(
            &app,
            &mut grpc,
            &json!({"schema": array_schema, "protocol_version": version,
                    "result": {"structuredContent": [1, 2], "content": text}}),
            "schema_root_not_object",
        )
        .await;
    }
    both_refuse(
        &app,
        &mut grpc,
        &json!({"schema": array_schema, "protocol_version": "2024-11-05",
                "result": {"structuredContent": [1]}}),
        "invalid_field",
    )
    .await;

    // A registration names its revision; checks follow it unless they name their own.
    let tools = json!({"tools": [{"name": "list", "outputSchema": array_schema}],
                       "ttlMs": 60000, "cacheScope": "session"});
    let (status, reg) = app
        .register_with("old", "?protocol_version=2025-11-25", &tools)
        .await;
    assert_eq!(status, 200, "{reg}");
    assert_eq!(reg["protocol_version"], "2025-11-25", "{reg}");
    assert_eq!(
        reg["tools"][0]["errors"][0]["code"], "schema_root_not_object",
        "{reg}"
    );
    let by_name = json!({"server": "old", "tool": "list",
                         "result": {"structuredContent": [1], "content": text}});
    both_refuse(&app, &mut grpc, &by_name, "schema_root_not_object").await;
    let mut newer = by_name.clone();
    newer["protocol_version"] = json!("2026-07-28");
    assert_eq!(both(&app, &mut grpc, &newer).await["outcome"], "valid");

    // The policy's switch overrides the revision.
    let strict = TestApp::with_policy("require_object_root = true\n", &[]).await;
    let mut strict_grpc = client(&strict).await;
    both_refuse(
        &strict,
        &mut strict_grpc,
        &json!({"schema": array_schema, "result": {"structuredContent": [1], "content": text}}),
        "schema_root_not_object",
    )
    .await;
}

#[tokio::test]
async fn paginated_tools_lists_register_page_by_page() {
    let app = TestApp::with_policy("", &[]).await;
    let mut grpc = client(&app).await;
    let tool = |name: &str| json!({"name": name, "outputSchema": {"type": "object"}});
    let put = |query: &'static str, body: Value| {
        let app = &app;
        async move { app.register_with("crm", query, &body).await }
    };
    let (status, first) = put(
        "",
        json!({"tools": [tool("a"), tool("b")], "nextCursor": "page-2"}),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(first["next_cursor"], "page-2", "{first}");
    let (status, second) = put("?merge=true", json!({"tools": [tool("c")]})).await;
    assert_eq!(status, 200);
    assert!(second.get("next_cursor").is_none(), "{second}");
    for name in ["a", "b", "c"] {
        let check = json!({"server": "crm", "tool": name, "result": {"structuredContent": {}}});
        assert_eq!(both(&app, &mut grpc, &check).await["outcome"], "valid");
    }
    // Without merge, a list replaces the registration.
    put("", json!({"tools": [tool("c")]})).await;
    let gone = json!({"server": "crm", "tool": "a", "result": {"structuredContent": {}}});
    both_refuse(&app, &mut grpc, &gone, "unknown_tool").await;
    let (status, v) = put("?merge=maybe", json!({"tools": []})).await;
    assert_eq!(
        (status, v["error"]["code"].as_str()),
        (400, Some("invalid_field")),
        "{v}"
    );

    // The same over gRPC: a page with a cursor, then a merged page.
    let register = |tools_list: Value, merge: bool| proto::RegisterToolsRequest {
        server: "shop".into(),
        tools_list: tools_list.to_string().into(),
        merge,
        ..Default::default()
    };
    let page = grpc
        .register_tools(register(
            json!({"tools": [tool("x")], "nextCursor": "2"}),
            false,
        ))
        .await
        .expect("registered")
        .into_inner();
    assert_eq!(page.next_cursor, "2");
    let rest_shape = registration_as_rest(&page);
    assert_eq!(rest_shape["next_cursor"], "2");
    grpc.register_tools(register(json!({"tools": [tool("y")]}), true))
        .await
        .expect("registered");
    for name in ["x", "y"] {
        let check = json!({"server": "shop", "tool": name, "result": {"structuredContent": {}}});
        assert_eq!(both(&app, &mut grpc, &check).await["outcome"], "valid");
    }
}
