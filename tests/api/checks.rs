//! The REST checks as an orchestrator sees them: tiers, MCP result rules, registration, batches.

use crate::helpers::{spawn_app, spawn_app_with, TestApp};
use serde_json::{json, Value};

fn delete_customer_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "deleted": {"type": "boolean", "const": true},
            "customer_id": {"type": "string", "pattern": "^cus_[0-9a-f]{8}$"},
            "deleted_at": {"type": "string", "format": "date-time"}
        },
        "required": ["deleted", "customer_id", "deleted_at"]
    })
}

fn good_result() -> Value {
    let sc = json!({"deleted": true, "customer_id": "cus_0123abcd", "deleted_at": "2026-11-22T10:00:00Z"});
    json!({"structuredContent": sc, "content": [{"type": "text", "text": sc.to_string()}]})
}

fn bad_result() -> Value {
    json!({"structuredContent": {"deleted": true, "deleted_at": "yesterday"}})
}

const TIERS_POLICY: &str = r#"
[[servers]]
match = "internal-*"
tier = "trusted"

[[servers]]
match = "partner"
tier = "semi-trusted"
"#;

#[tokio::test]
async fn each_tier_acts_on_valid_and_invalid_results() {
    let app = TestApp::with_policy(TIERS_POLICY, &[]).await;
    let cases = [
        (
            "internal-crm",
            "trusted",
            good_result(),
            Value::Null,
            "pass",
            "skipped",
        ),
        (
            "internal-crm",
            "trusted",
            bad_result(),
            Value::Null,
            "pass",
            "skipped",
        ),
        (
            "partner",
            "semi-trusted",
            good_result(),
            json!(true),
            "pass",
            "valid",
        ),
        (
            "partner",
            "semi-trusted",
            bad_result(),
            json!(false),
            "pass",
            "invalid",
        ),
        (
            "stranger",
            "untrusted",
            good_result(),
            json!(true),
            "pass",
            "valid",
        ),
        (
            "stranger",
            "untrusted",
            bad_result(),
            json!(false),
            "reject",
            "invalid",
        ),
    ];
    for (server, tier, result, valid, action, outcome) in cases {
        let (status, v) = app
            .validate(&json!({"server": server, "tool": "delete_customer",
                              "schema": delete_customer_schema(), "result": result}))
            .await;
        assert_eq!(status, 200, "{v}");
        assert_eq!(v["tier"], tier, "{server}: {v}");
        // Absent (null here) when nothing was validated: never `true` for a skipped result.
        assert_eq!(v["valid"], valid, "{server}: {v}");
        assert_eq!(v["action"], action, "{server}: {v}");
        assert_eq!(v["outcome"], outcome, "{server}: {v}");
    }
}

#[tokio::test]
async fn invalid_results_explain_themselves() {
    let app = spawn_app().await;
    let (status, v) = app
        .validate(
            &json!({"server": "crm", "tool": "delete_customer", "call_id": "c-1",
                          "schema": delete_customer_schema(), "result": bad_result()}),
        )
        .await;
    assert_eq!(status, 200);
    assert_eq!(v["call_id"], "c-1");
    assert_eq!(v["schema_hash"].as_str().map(str::len), Some(64), "{v}");
    let errors = v["errors"].as_array().expect("errors");
    let format_error = errors
        .iter()
        .find(|e| e["keyword"] == "format")
        .expect("a format error");
    assert_eq!(format_error["instance_path"], "/deleted_at");
    assert_eq!(format_error["schema_path"], "/properties/deleted_at/format");
    assert_eq!(
        format_error["message"],
        r#""yesterday" is not a "date-time""#
    );
    let required = errors
        .iter()
        .find(|e| e["keyword"] == "required")
        .expect("a required error");
    assert_eq!(required["instance_path"], "");
    assert_eq!(v["truncated"], false);
    let feedback = v["feedback"].as_str().expect("feedback");
    assert!(feedback.starts_with("Output failed schema: "), "{feedback}");
    assert!(
        feedback.contains(r#"/deleted_at: "yesterday" is not a "date-time""#),
        "{feedback}"
    );
    assert!(
        feedback.contains(r#"/: "customer_id" is a required property"#),
        "{feedback}"
    );
}

#[tokio::test]
async fn error_lists_are_capped_and_marked_truncated() {
    let app = spawn_app_with(&["--max-errors", "3"]).await;
    let schema = json!({"type": "array", "items": {"type": "integer"}});
    let (_, v) = app
        .validate(&json!({"schema": schema, "instance": ["a", "b", "c", "d", "e"]}))
        .await;
    assert_eq!(v["errors"].as_array().map(Vec::len), Some(3), "{v}");
    assert_eq!(v["truncated"], true);
    assert_eq!(v["errors"][0]["instance_path"], "/0");
}

#[tokio::test]
async fn mcp_result_edges() {
    let app = spawn_app().await;
    let schema = delete_customer_schema();

    let (_, v) = app
        .validate(&json!({"schema": schema, "result": {"isError": true,
            "content": [{"type": "text", "text": "customer not found"}]}}))
        .await;
    assert_eq!(
        (v["outcome"].clone(), v["action"].clone()),
        (json!("tool_error"), json!("pass")),
        "{v}"
    );

    let (_, v) = app
        .validate(
            &json!({"schema": schema, "result": {"content": [{"type": "text",
            "text": good_result()["structuredContent"].to_string()}]}}),
        )
        .await;
    assert_eq!(v["valid"], false, "absent structuredContent fails: {v}");
    assert_eq!(v["errors"][0]["keyword"], "structuredContent");
    assert_eq!(v["action"], "reject");

    let (_, v) = app
        .validate(&json!({"schema": schema, "result": {"structuredContent": null}}))
        .await;
    assert_eq!(v["valid"], false, "null is validated as a value: {v}");
    assert_eq!(v["errors"][0]["keyword"], "type", "{v}");
    let (_, v) = app
        .validate(
            &json!({"schema": {"type": "object", "properties": {"x": {"type": ["object", "null"]}}},
                          "instance": null}),
        )
        .await;
    assert_eq!(v["valid"], false, "{v}");
}

#[tokio::test]
async fn text_copy_drift_is_reported_and_fails_only_by_policy() {
    let schema = delete_customer_schema();
    let mut drifted = good_result();
    drifted["content"][0]["text"] = json!(r#"{"deleted": false}"#);
    let check =
        json!({"server": "crm", "tool": "delete_customer", "schema": schema, "result": drifted});

    let app = spawn_app().await;
    let (_, v) = app.validate(&check).await;
    assert_eq!(
        v["valid"], true,
        "drift alone does not fail by default: {v}"
    );
    assert_eq!(v["findings"][0]["kind"], "text_drift", "{v}");
    let (_, v) = app
        .validate(&json!({"schema": schema, "result": good_result()}))
        .await;
    assert!(
        v.get("findings").is_none(),
        "an agreeing copy is no finding: {v}"
    );
    // The same value written another way (key order, spacing) is no drift either...
    let mut rewritten = good_result();
    rewritten["content"][0]["text"] = json!(
        "{\n  \"deleted_at\": \"2026-11-22T10:00:00Z\",\n  \"customer_id\": \"cus_0123abcd\",  \"deleted\": true\n}"
    );
    let (_, v) = app
        .validate(&json!({"schema": schema, "result": rewritten}))
        .await;
    assert!(v.get("findings").is_none(), "{v}");
    // ...but a copy that differs inside a string is, white space or not.
    let mut spaced = good_result();
    spaced["content"][0]["text"] = json!(
        r#"{"customer_id":"cus_0123abcd ","deleted":true,"deleted_at":"2026-11-22T10:00:00Z"}"#
    );
    let (_, v) = app
        .validate(&json!({"schema": schema, "result": spaced}))
        .await;
    assert_eq!(v["findings"][0]["kind"], "text_drift", "{v}");
    assert!(
        app.metric(r#"schemagate_text_drift_total{server="crm",tool="delete_customer"}"#)
            .await
            >= 1.0
    );

    let strict = TestApp::with_policy("drift_fails = true\n", &[]).await;
    let (_, v) = strict.validate(&check).await;
    assert_eq!(v["valid"], false, "{v}");
    assert_eq!(v["errors"][0]["keyword"], "content");
    assert_eq!(v["action"], "reject");
}

#[tokio::test]
async fn output_schema_root_must_be_an_object_unless_relaxed() {
    // Under MCP 2025-06-18 (and 2025-11-25) the root must be an object schema.
    let check = json!({"schema": {"type": "array"}, "result": {"structuredContent": []},
                       "protocol_version": "2025-06-18"});
    let app = spawn_app().await;
    let (status, v) = app.validate(&check).await;
    assert_eq!(status, 422, "{v}");
    assert_eq!(v["error"]["code"], "schema_root_not_object");
    // A bare instance check takes any root.
    let (status, _) = app
        .validate(&json!({"schema": {"type": "array"}, "instance": []}))
        .await;
    assert_eq!(status, 200);

    let relaxed = TestApp::with_policy("require_object_root = false\n", &[]).await;
    let (status, v) = relaxed.validate(&check).await;
    assert_eq!((status, v["valid"].clone()), (200, json!(true)), "{v}");
}

#[tokio::test]
async fn format_can_be_annotation_only_by_policy() {
    let app = TestApp::with_policy(
        "[[servers]]\nmatch = \"lenient\"\ntier = \"untrusted\"\nassert_formats = false\n",
        &[],
    )
    .await;
    let schema =
        json!({"type": "object", "properties": {"at": {"type": "string", "format": "date-time"}}});
    let payload = json!({"at": "yesterday"});
    let (_, strict) = app
        .validate(&json!({"server": "strict", "schema": schema, "instance": payload}))
        .await;
    let (_, lenient) = app
        .validate(&json!({"server": "lenient", "schema": schema, "instance": payload}))
        .await;
    assert_eq!(strict["valid"], false);
    assert_eq!(lenient["valid"], true);
}

#[tokio::test]
async fn bare_checks_follow_each_draft() {
    let app = spawn_app().await;
    // exclusiveMaximum is a boolean modifier in draft 4 and a number from draft 6 on.
    let draft4 = json!({"$schema": "http://json-schema.org/draft-04/schema#",
                        "maximum": 10, "exclusiveMaximum": true});
    let (_, v) = app
        .validate(&json!({"schema": draft4, "instance": 10}))
        .await;
    assert_eq!(v["valid"], false, "draft 4: {v}");
    for uri in [
        "http://json-schema.org/draft-06/schema#",
        "http://json-schema.org/draft-07/schema#",
        "https://json-schema.org/draft/2019-09/schema",
        "https://json-schema.org/draft/2020-12/schema",
    ] {
        let schema = json!({"$schema": uri, "exclusiveMaximum": 10});
        let (_, v) = app
            .validate(&json!({"schema": schema, "instance": 10}))
            .await;
        assert_eq!(v["valid"], false, "{uri}: {v}");
        let (_, v) = app
            .validate(&json!({"schema": schema, "instance": 9}))
            .await;
        assert_eq!(v["valid"], true, "{uri}: {v}");
    }
    // prefixItems exists only in 2020-12; 2019-09 ignores it.
    let tuple = |uri: &str| json!({"$schema": uri, "prefixItems": [{"type": "integer"}]});
    let (_, v) = app
        .validate(&json!({"schema": tuple("https://json-schema.org/draft/2020-12/schema"), "instance": ["x"]}))
        .await;
    assert_eq!(v["valid"], false, "{v}");
    let (_, v) = app
        .validate(&json!({"schema": tuple("https://json-schema.org/draft/2019-09/schema"), "instance": ["x"]}))
        .await;
    assert_eq!(v["valid"], true, "{v}");
    // Boolean schemas and any JSON document.
    let (_, v) = app
        .validate(&json!({"schema": false, "instance": "anything"}))
        .await;
    assert_eq!(v["valid"], false);
    let (_, v) = app
        .validate(&json!({"schema": true, "instance": [1, {"a": null}]}))
        .await;
    assert_eq!(v["valid"], true);
}

#[tokio::test]
async fn registered_tools_are_checked_by_name() {
    let app = spawn_app().await;
    let tools = json!({"tools": [
        {"name": "delete_customer", "inputSchema": {"type": "object", "properties":
            {"customer_id": {"type": "string"}}, "required": ["customer_id"]},
         "outputSchema": delete_customer_schema()},
        {"name": "ping", "inputSchema": {"type": "object"}},
        {"name": "broken", "inputSchema": {"type": "object"}, "outputSchema": {"type": "strnig"}}
    ]});
    let (status, reg) = app.register("crm", &tools).await;
    assert_eq!(status, 200, "{reg}");
    assert_eq!(reg["tools"][0]["name"], "delete_customer");
    let output_hash = reg["tools"][0]["output_schema_hash"]
        .as_str()
        .expect("hash")
        .to_owned();
    assert!(reg["tools"][0].get("errors").is_none(), "{reg}");
    assert_eq!(
        reg["tools"][2]["errors"][0]["code"], "schema_invalid",
        "{reg}"
    );
    assert_eq!(
        reg["tools"][2]["errors"][0]["schema"], "outputSchema",
        "{reg}"
    );

    let (_, v) = app
        .validate(&json!({"server": "crm", "tool": "delete_customer", "result": good_result()}))
        .await;
    assert_eq!(
        (v["valid"].clone(), v["schema_hash"].clone()),
        (json!(true), json!(output_hash)),
        "{v}"
    );
    let (_, v) = app
        .validate(
            &json!({"server": "crm", "tool": "delete_customer", "arguments": {"customer_id": 7}}),
        )
        .await;
    assert_eq!(v["valid"], false, "{v}");
    assert!(
        v["feedback"]
            .as_str()
            .expect("feedback")
            .starts_with("Arguments failed schema"),
        "{v}"
    );

    // A broken tool degrades only itself.
    let (status, v) = app
        .validate(&json!({"server": "crm", "tool": "broken", "result": good_result()}))
        .await;
    assert_eq!(
        (status, v["error"]["code"].clone()),
        (422, json!("schema_invalid")),
        "{v}"
    );
    // A registered tool without an outputSchema has nothing to check: unchecked, passed.
    let (status, v) = app
        .validate(&json!({"server": "crm", "tool": "ping", "result": good_result()}))
        .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["outcome"], "unchecked", "{v}");
    assert_eq!(v["action"], "pass", "{v}");
    assert!(v.get("valid").is_none(), "{v}");
    let (status, _) = app
        .validate(&json!({"server": "crm", "tool": "nope", "result": good_result()}))
        .await;
    assert_eq!(status, 404);

    // The hash names the schema for any later check, bare or not.
    let (status, v) = app
        .validate(
            &json!({"schema_hash": output_hash, "instance": good_result()["structuredContent"]}),
        )
        .await;
    assert_eq!((status, v["valid"].clone()), (200, json!(true)), "{v}");
}

#[tokio::test]
async fn batches_keep_order_and_isolate_bad_items() {
    let app = spawn_app().await;
    let schema =
        json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]});
    let mut items = Vec::new();
    for i in 0..200 {
        items.push(match i % 4 {
            0 => json!({"schema": schema, "instance": {"n": i}, "call_id": i.to_string()}),
            1 => json!({"schema": schema, "instance": {"n": "x"}, "call_id": i.to_string()}),
            2 => json!({"schema": schema, "call_id": i.to_string()}),
            _ => json!({"schema": {"type": "strnig"}, "instance": 1, "call_id": i.to_string()}),
        });
    }
    let (status, answer) = app.validate_batch(&items).await;
    assert_eq!(status, 200);
    let results = answer["results"].as_array().expect("results");
    assert_eq!(results.len(), 200);
    for (i, r) in results.iter().enumerate() {
        match i % 4 {
            0 => assert_eq!(
                (r["valid"].clone(), r["call_id"].clone()),
                (json!(true), json!(i.to_string()))
            ),
            1 => assert_eq!(
                (r["valid"].clone(), r["call_id"].clone()),
                (json!(false), json!(i.to_string()))
            ),
            2 => assert_eq!(r["error"]["code"], "missing_payload", "{r}"),
            _ => assert_eq!(r["error"]["code"], "schema_invalid", "{r}"),
        }
    }
}

#[tokio::test]
async fn health_and_readiness_answer() {
    let app = spawn_app().await;
    assert_eq!(app.get("/healthz").await.0, 200);
    assert_eq!(app.get("/readyz").await.0, 200);
    let (status, body) = app.get("/v2/nothing").await;
    assert_eq!(status, 404);
    assert!(body.contains("not_found"));
    app.stop().await.expect("clean shutdown");
}
