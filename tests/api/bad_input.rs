//! Requests that cannot be checked get a specific 4xx with a message that says what to fix, and
//! nothing else happens: other requests keep their answers.

use crate::helpers::{doubling_chain, spawn_app, spawn_app_with};
use serde_json::json;
use std::time::{Duration, Instant};

async fn refused(
    app: &crate::helpers::TestApp,
    body: impl Into<reqwest::Body>,
) -> (u16, String, String) {
    let (status, v) = app.post_raw("/v1/validate", body).await;
    let code = v["error"]["code"].as_str().unwrap_or_default().to_owned();
    let message = v["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    (status, code, message)
}

#[tokio::test]
async fn malformed_and_incomplete_requests() {
    let app = spawn_app().await;
    let (status, code, message) =
        refused(&app, r#"{"schema": {"type": "object"}, "instance": "#).await;
    assert_eq!(
        (status, code.as_str()),
        (400, "malformed_json"),
        "{message}"
    );
    assert!(message.contains("line 1"), "says where: {message}");

    let (status, code, _) = refused(&app, r#"{"schema": {}}"#).await;
    assert_eq!((status, code.as_str()), (400, "missing_payload"));
    let (status, code, _) = refused(&app, r#"{"instance": 1}"#).await;
    assert_eq!((status, code.as_str()), (400, "missing_schema"));
    let (status, code, message) = refused(&app, r#"{"schema": {}, "instanse": 1}"#).await;
    assert_eq!((status, code.as_str()), (400, "invalid_field"));
    assert!(message.contains("instanse"), "{message}");
    let (status, code, _) = refused(
        &app,
        r#"{"server": "has space", "schema": {}, "instance": 1}"#,
    )
    .await;
    assert_eq!((status, code.as_str()), (400, "invalid_field"));
}

#[tokio::test]
async fn unknown_schema_hash() {
    let app = spawn_app().await;
    let body = json!({"schema_hash": "ab".repeat(32), "instance": {}}).to_string();
    let (status, code, message) = refused(&app, body).await;
    assert_eq!((status, code.as_str()), (404, "unknown_schema_hash"));
    assert!(message.contains("send the schema inline"), "{message}");
    let (status, code, _) = refused(&app, r#"{"schema_hash": "nothex", "instance": {}}"#).await;
    assert_eq!((status, code.as_str()), (400, "invalid_field"));
}

#[tokio::test]
async fn bodies_and_batches_over_their_limits() {
    let app = spawn_app_with(&["--max-body-bytes", "4096", "--max-batch-items", "3"]).await;
    let big = json!({"schema": {}, "instance": "x".repeat(10_000)}).to_string();
    let (status, code, message) = refused(&app, big).await;
    assert_eq!(
        (status, code.as_str()),
        (413, "body_too_large"),
        "{message}"
    );
    assert!(message.contains("4096"), "{message}");

    let items = vec![json!({"schema": {}, "instance": 1}); 4];
    let (status, v) = app.validate_batch(&items).await;
    assert_eq!(status, 413, "{v}");
    assert_eq!(v["error"]["code"], "batch_too_large");
    let (status, v) = app.validate_batch(&items[..3]).await;
    assert_eq!(status, 200, "{v}");
}

#[tokio::test]
async fn schemas_that_do_not_compile_or_need_a_fetch() {
    let app = spawn_app().await;
    for (schema, expected) in [
        (json!({"type": "strnig"}), "schema_invalid"),
        (
            json!({"$ref": "https://example.com/customer.json"}),
            "schema_ref_not_allowed",
        ),
        (
            json!({"$ref": "file:///etc/passwd"}),
            "schema_ref_not_allowed",
        ),
        (
            json!({"properties": {"a": {"$ref": "other.json#/x"}}}),
            "schema_ref_not_allowed",
        ),
    ] {
        let (status, code, message) =
            refused(&app, json!({"schema": schema, "instance": {}}).to_string()).await;
        assert_eq!(
            (status, code.as_str()),
            (422, expected),
            "{schema}: {message}"
        );
    }
    let (_, _, message) = refused(
        &app,
        json!({"schema": {"$ref": "https://example.com/customer.json"}, "instance": {}})
            .to_string(),
    )
    .await;
    assert!(
        message.contains("https://example.com/customer.json") && message.contains("$defs"),
        "{message}"
    );
}

fn nested(depth: usize) -> String {
    format!("{}1{}", "[".repeat(depth), "]".repeat(depth))
}

#[tokio::test]
async fn nesting_deeper_than_the_limit() {
    let app = spawn_app_with(&["--max-depth", "16"]).await;
    let body = format!(r#"{{"schema": {{}}, "instance": {}}}"#, nested(20));
    let (status, code, message) = refused(&app, body).await;
    assert_eq!(
        (status, code.as_str()),
        (422, "nesting_too_deep"),
        "{message}"
    );
    assert!(message.contains("16"), "{message}");
    // Deeper than JSON parsing itself allows: still a clear error, not a crash.
    let body = format!(r#"{{"schema": {{}}, "instance": {}}}"#, nested(5000));
    let (status, code, _) = refused(&app, body).await;
    assert_eq!((status, code.as_str()), (422, "nesting_too_deep"));
    let deep_schema = format!(
        r#"{{"schema": {}, "instance": 1}}"#,
        "{\"not\":".repeat(30) + "{}" + &"}".repeat(30)
    );
    let (status, code, _) = refused(&app, deep_schema).await;
    assert_eq!((status, code.as_str()), (422, "nesting_too_deep"));
    let (status, _, _) = refused(
        &app,
        format!(r#"{{"schema": {{}}, "instance": {}}}"#, nested(10)),
    )
    .await;
    assert_eq!(status, 200);
}

#[tokio::test]
async fn hostile_schemas_are_refused_before_they_run() {
    let app = spawn_app().await;
    let schema = doubling_chain(30);
    assert!(schema.to_string().len() < 4096);
    let started = Instant::now();
    let (status, code, message) =
        refused(&app, json!({"schema": schema, "instance": "x"}).to_string()).await;
    assert_eq!(
        (status, code.as_str()),
        (422, "schema_too_complex"),
        "{message}"
    );
    assert!(message.contains("simplify"), "{message}");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "refused without running it"
    );

    let cycle = json!({"$defs": {"a": {"allOf": [{"$ref": "#/$defs/a"}]}}, "$ref": "#/$defs/a"});
    let (status, code, _) =
        refused(&app, json!({"schema": cycle, "instance": 1}).to_string()).await;
    assert_eq!((status, code.as_str()), (422, "schema_too_complex"));
}

#[tokio::test]
async fn checks_too_costly_for_their_payload_are_refused() {
    let app = spawn_app_with(&["--max-check-work", "1000"]).await;
    let schema = json!({"type": "array", "items": {"type": "integer"}});
    let (status, code, message) = refused(
        &app,
        json!({"schema": schema, "instance": vec![1; 5000]}).to_string(),
    )
    .await;
    assert_eq!(
        (status, code.as_str()),
        (422, "work_limit_exceeded"),
        "{message}"
    );
    let (status, _, _) = refused(
        &app,
        json!({"schema": schema, "instance": vec![1; 50]}).to_string(),
    )
    .await;
    assert_eq!(status, 200);
}

#[tokio::test]
async fn error_collection_is_bounded_past_its_work_limit() {
    let app = spawn_app_with(&["--max-error-work", "100"]).await;
    let schema = json!({"type": "array", "items": {"type": "string"}});
    let (status, v) = app
        .validate(&json!({"schema": schema, "instance": vec![1; 1000]}))
        .await;
    assert_eq!(status, 200);
    assert_eq!(v["valid"], false);
    assert_eq!(v["truncated"], true);
    assert_eq!(
        v["errors"].as_array().map(Vec::len),
        Some(1),
        "one summary error: {v}"
    );
    assert!(v["errors"][0]["message"]
        .as_str()
        .expect("message")
        .contains("--max-error-work"));
}

#[tokio::test]
async fn catastrophic_patterns_do_not_stall_other_requests() {
    let app = spawn_app().await;
    let schema = json!({"type": "array", "items": {"type": "string", "pattern": "^(a|a)*$"}});
    let hostile: Vec<String> = (0..200).map(|_| format!("{}b", "a".repeat(40))).collect();
    let hostile_check = json!({"schema": schema, "instance": hostile});
    let ordinary = json!({"schema": {"type": "integer"}, "instance": 3});
    let started = Instant::now();
    let (slow, quick) = tokio::join!(app.validate(&hostile_check), async {
        tokio::time::sleep(Duration::from_millis(5)).await;
        let t = Instant::now();
        let answer = app.validate(&ordinary).await;
        (answer, t.elapsed())
    });
    assert_eq!(slow.0, 200, "{}", slow.1);
    assert_eq!(
        slow.1["valid"], false,
        "a pattern past its bound fails: {}",
        slow.1
    );
    let ((status, v), _quick_elapsed) = quick;
    assert_eq!((status, v["valid"].clone()), (200, json!(true)));
    assert!(started.elapsed() < Duration::from_secs(20));
}

#[tokio::test]
async fn a_bad_request_has_no_effect_on_later_ones() {
    let app = spawn_app().await;
    let good = json!({"schema": {"type": "object", "required": ["a"]}, "instance": {"a": 1}});
    let (_, before) = app.validate(&good).await;
    for body in [
        "not json".to_owned(),
        json!({"schema": doubling_chain(40), "instance": 1}).to_string(),
        json!({"schema": {"$ref": "http://127.0.0.1:9/x"}, "instance": 1}).to_string(),
    ] {
        let (status, _, _) = refused(&app, body).await;
        assert!((400..500).contains(&status));
    }
    let (status, after) = app.validate(&good).await;
    assert_eq!(status, 200);
    assert_eq!(before, after);
}

/// The check routes are answered before the router; their other methods and near-miss paths
/// still get the router's 405 and 404, and a check with a query string is still a check.
#[tokio::test]
async fn check_routes_take_post_only_at_their_exact_paths() {
    let app = spawn_app().await;
    for path in ["/v1/validate", "/v1/validate/batch"] {
        let (status, body) = app.get(path).await;
        assert_eq!(status, 405, "GET {path}: {body}");
        assert!(body.contains("method_not_allowed"), "GET {path}: {body}");
    }
    let check = json!({"schema": {"type": "object"}, "instance": {}});
    let (status, body) = app.post_raw("/v1/validate/", check.to_string()).await;
    assert_eq!(status, 404, "{body}");
    assert_eq!(body["error"]["code"], "not_found");
    let (status, body) = app.post_raw("/v1/validate?x=1", check.to_string()).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["outcome"], "valid");
}
