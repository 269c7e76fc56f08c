//! What operators see: the metrics after a known sequence of checks, the cache at work, bounded
//! labels, and policy reloads.

use crate::helpers::{spawn_app, spawn_app_with, TestApp};
use serde_json::json;
use std::time::Duration;

fn series(name: &str, labels: &str) -> String {
    format!("{name}{{{labels}}}")
}

#[tokio::test]
async fn many_requests_compile_a_schema_once() {
    let app = spawn_app().await;
    let schema = json!({"type": "object", "properties": {"id": {"type": "integer"}}});
    let checks: Vec<_> = (0..50)
        .map(|i| json!({"server": "crm", "tool": "get", "schema": schema, "instance": {"id": i}}))
        .collect();
    // Concurrent first requests for one key, then sequential ones.
    let answers = futures_join(&app, &checks[..20]).await;
    assert!(answers.iter().all(|(s, v)| *s == 200 && v["valid"] == true));
    for check in &checks[20..] {
        assert_eq!(app.validate(check).await.0, 200);
    }
    assert_eq!(app.metric("schemagate_schema_compiles_total").await, 1.0);
    assert_eq!(app.metric("schemagate_cache_misses_total").await, 1.0);
    assert_eq!(app.metric("schemagate_cache_hits_total").await, 49.0);
    assert_eq!(app.metric("schemagate_cache_entries").await, 1.0);
    // Another tool with the same schema is another key.
    let other = json!({"server": "crm", "tool": "list", "schema": schema, "instance": {}});
    app.validate(&other).await;
    assert_eq!(app.metric("schemagate_schema_compiles_total").await, 2.0);
}

async fn futures_join(
    app: &crate::helpers::TestApp,
    checks: &[serde_json::Value],
) -> Vec<(u16, serde_json::Value)> {
    let mut handles = Vec::new();
    for check in checks {
        let client = app.client.clone();
        let url = app.url("/v1/validate");
        let body = check.to_string();
        handles.push(tokio::spawn(async move {
            let r = client.post(url).body(body).send().await.expect("request");
            let status = r.status().as_u16();
            (status, r.json::<serde_json::Value>().await.expect("json"))
        }));
    }
    let mut out = Vec::new();
    for h in handles {
        out.push(h.await.expect("task"));
    }
    out
}

#[tokio::test]
async fn a_compile_failure_is_cached() {
    let app = spawn_app().await;
    let broken =
        json!({"server": "crm", "tool": "get", "schema": {"type": "strnig"}, "instance": 1});
    for _ in 0..5 {
        let (status, v) = app.validate(&broken).await;
        assert_eq!(
            (status, v["error"]["code"].clone()),
            (422, json!("schema_invalid"))
        );
    }
    assert_eq!(app.metric("schemagate_schema_compiles_total").await, 1.0);
    assert_eq!(
        app.metric("schemagate_schema_compile_failures_total").await,
        1.0
    );
    assert_eq!(
        app.metric(r#"schemagate_request_errors_total{transport="rest",code="schema_invalid"}"#)
            .await,
        5.0
    );
    // The same server's other tools are unaffected.
    let fine =
        json!({"server": "crm", "tool": "list", "schema": {"type": "integer"}, "instance": 1});
    assert_eq!(app.validate(&fine).await.1["valid"], true);
}

#[tokio::test]
async fn metrics_follow_a_known_sequence_of_attempts() {
    let app = TestApp::with_policy("[[servers]]\nmatch = \"ops\"\ntier = \"trusted\"\n", &[]).await;
    let schema = json!({"type": "object", "properties": {"items": {"type": "array",
        "items": {"type": "object", "properties": {"id": {"type": "integer"}}}}}});
    let good = json!({"items": [{"id": 1}]});
    let bad = json!({"items": [{"id": 1}, {"id": "x"}, {"id": "y"}]});
    let check = |instance: &serde_json::Value, attempt: u32| {
        json!({"server": "crm", "tool": "list", "schema": schema, "attempt": attempt,
               "result": {"structuredContent": instance}})
    };
    // 4 first attempts: 1 valid, 3 invalid; 3 retries: 2 valid, 1 invalid; 1 tool error.
    for (instance, attempt) in [
        (&good, 1),
        (&bad, 1),
        (&bad, 1),
        (&bad, 1),
        (&good, 2),
        (&good, 3),
        (&bad, 2),
    ] {
        assert_eq!(app.validate(&check(instance, attempt)).await.0, 200);
    }
    app.validate(
        &json!({"server": "crm", "tool": "list", "schema": schema, "result": {"isError": true}}),
    )
    .await;
    app.validate(&json!({"server": "ops", "tool": "x", "schema": schema, "instance": bad}))
        .await;

    let v = |attempt: &str, outcome: &str| {
        series(
            "schemagate_validations_total",
            &format!(
                r#"server="crm",tool="list",tier="untrusted",payload="result",attempt="{attempt}",outcome="{outcome}""#
            ),
        )
    };
    assert_eq!(app.metric(&v("first", "valid")).await, 1.0);
    assert_eq!(app.metric(&v("first", "invalid")).await, 3.0);
    assert_eq!(app.metric(&v("retry", "valid")).await, 2.0);
    assert_eq!(app.metric(&v("retry", "invalid")).await, 1.0);
    assert_eq!(app.metric(&v("first", "tool_error")).await, 1.0);
    assert_eq!(
        app.metric(r#"schemagate_validations_total{server="ops",tool="x",tier="trusted",payload="instance",attempt="first",outcome="skipped"}"#).await,
        1.0
    );
    // Two failing ids per bad result, four bad results: indices fold to *.
    assert_eq!(
        app.metric(r#"schemagate_field_failures_total{server="crm",tool="list",payload="result",path="/items/*/id",keyword="type"}"#).await,
        8.0
    );
    let count = app
        .metric(r#"schemagate_validation_duration_seconds_count{transport="rest"}"#)
        .await;
    assert_eq!(count, 9.0);
}

#[tokio::test]
async fn client_controlled_labels_fold_past_their_bound() {
    let app = spawn_app_with(&["--metrics-label-limit", "3"]).await;
    for i in 0..10 {
        let check = json!({"server": format!("s{i}"), "tool": "t", "schema": {"type": "integer"}, "instance": "x"});
        assert_eq!(app.validate(&check).await.0, 200);
    }
    let (_, text) = app.get("/metrics").await;
    let servers: std::collections::BTreeSet<_> = text
        .lines()
        .filter(|l| l.starts_with("schemagate_validations_total{"))
        .filter_map(|l| l.split("server=\"").nth(1)?.split('"').next())
        .collect();
    assert_eq!(servers.len(), 4, "three names and _other: {servers:?}");
    assert!(servers.contains("_other"));
    let other = r#"schemagate_validations_total{server="_other",tool="t",tier="untrusted",payload="instance",attempt="first",outcome="invalid"}"#;
    assert_eq!(app.metric(other).await, 7.0);
}

#[tokio::test]
async fn policy_reloads_without_a_restart_and_keeps_the_old_one_when_bad() {
    let app = TestApp::with_policy("", &[]).await;
    let check = json!({"server": "crm", "schema": {"type": "integer"}, "instance": "x"});
    assert_eq!(app.validate(&check).await.1["tier"], "untrusted");

    app.write_policy("[[servers]]\nmatch = \"crm\"\ntier = \"semi-trusted\"\n");
    let (status, v) = app.post_raw("/v1/admin/reload-policy", "").await;
    assert_eq!(status, 200, "{v}");
    let (_, v) = app.validate(&check).await;
    assert_eq!(
        (v["tier"].clone(), v["action"].clone()),
        (json!("semi-trusted"), json!("pass"))
    );

    app.write_policy("[[servers]]\nmatch = \"crm\"\ntier = \"friendly\"\n");
    let (status, v) = app.post_raw("/v1/admin/reload-policy", "").await;
    assert_eq!(status, 422, "{v}");
    let message = v["error"]["message"].as_str().expect("message");
    assert!(
        message.contains("friendly") && message.contains("previous policy stays"),
        "{message}"
    );
    assert_eq!(
        app.validate(&check).await.1["tier"],
        "semi-trusted",
        "old policy kept"
    );
    assert_eq!(
        app.metric(r#"schemagate_policy_reloads_total{result="error"}"#)
            .await,
        1.0
    );
}

#[tokio::test]
async fn a_changed_policy_file_is_picked_up_by_polling() {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("policy.toml");
    std::fs::write(&path, "").expect("write");
    let app = spawn_app_with(&[
        "--policy",
        path.to_str().expect("utf-8"),
        "--policy-poll-interval",
        "1",
    ])
    .await;
    let check = json!({"server": "crm", "schema": {"type": "integer"}, "instance": "x"});
    assert_eq!(app.validate(&check).await.1["tier"], "untrusted");
    // Replace the file the way a ConfigMap update does: write aside, rename over.
    let staged = dir.path().join("policy.toml.new");
    std::fs::write(
        &staged,
        "[[servers]]\nmatch = \"crm\"\ntier = \"trusted\"\n",
    )
    .expect("write");
    std::fs::rename(&staged, &path).expect("rename");
    let mut tier = String::new();
    for _ in 0..50 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        tier = app.validate(&check).await.1["tier"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        if tier == "trusted" {
            break;
        }
    }
    assert_eq!(tier, "trusted");
}

#[tokio::test]
async fn metrics_endpoint_describes_every_series() {
    let app = spawn_app().await;
    app.validate(&json!({"schema": {"type": "integer"}, "instance": 1}))
        .await;
    let (status, text) = app.get("/metrics").await;
    assert_eq!(status, 200);
    for name in [
        "schemagate_validations_total",
        "schemagate_validation_duration_seconds",
        "schemagate_cache_hits_total",
        "schemagate_cache_entries",
    ] {
        assert!(text.contains(&format!("# HELP {name}")), "{name} described");
    }
    assert!(
        text.contains(r#"server="_none",tool="_none""#),
        "bare checks label as _none"
    );
}

#[tokio::test]
async fn the_drain_delay_fails_readiness_while_checks_are_answered() {
    use schemagate::grpc::proto::validator_client::ValidatorClient;
    use tonic_health::pb::{health_client::HealthClient, HealthCheckRequest};
    let mut app = spawn_app_with(&["--drain-delay-secs", "2"]).await;
    assert_eq!(app.get("/readyz").await.0, 200);
    let channel = tonic::transport::Channel::from_shared(format!("http://{}", app.grpc_addr))
        .expect("uri")
        .connect()
        .await
        .expect("connect");
    let mut health = HealthClient::new(channel.clone());
    let serving = |s: i32| s == tonic_health::ServingStatus::Serving as i32;
    let status = health
        .check(HealthCheckRequest::default())
        .await
        .expect("health")
        .into_inner()
        .status;
    assert!(serving(status));

    app.begin_shutdown();
    // Within the delay: not ready, NOT_SERVING, yet checks are accepted and answered on both ports.
    let mut unready = false;
    for _ in 0..20 {
        if app.get("/readyz").await.0 == 503 {
            unready = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(unready, "/readyz answers 503 during the drain delay");
    let (status, v) = app
        .validate(&json!({"schema": {"type": "integer"}, "instance": 1}))
        .await;
    assert_eq!((status, v["outcome"].as_str()), (200, Some("valid")), "{v}");
    let status = health
        .check(HealthCheckRequest::default())
        .await
        .expect("health")
        .into_inner()
        .status;
    assert!(!serving(status), "NOT_SERVING during the drain delay");
    let mut grpc = ValidatorClient::new(channel);
    let check = crate::helpers::grpc_check(&json!({"schema": {"type": "integer"}, "instance": 1}));
    let verdict = grpc.validate(check).await.expect("answered").into_inner();
    assert_eq!(verdict.valid, Some(true));

    // After it, the listeners close.
    app.stop().await.expect("clean stop");
}

#[tokio::test]
async fn series_past_the_limit_fold_into_other() {
    // 90 series per (server, tool) pair: room for two pairs and the `_other` one.
    let app = spawn_app_with(&["--metrics-series-limit", "270"]).await;
    for i in 0..10 {
        let (status, _) = app
            .validate(&json!({"server": format!("s{i}"), "tool": "t",
                              "schema": {"type": "integer"}, "instance": "x"}))
            .await;
        assert_eq!(status, 200);
    }
    let (_, text) = app.get("/metrics").await;
    let pairs: std::collections::BTreeSet<&str> = text
        .lines()
        .filter(|l| l.starts_with("schemagate_validations_total{"))
        .filter_map(|l| l.split(",tier=").next())
        .collect();
    assert_eq!(pairs.len(), 3, "{pairs:?}");
    let folded = app
        .metric(r#"schemagate_series_folded_total{family="schemagate_validations_total"}"#)
        .await;
    assert_eq!(folded, 8.0);
    let other = app
        .metric(r#"schemagate_validations_total{server="_other",tool="_other",tier="untrusted",payload="instance",attempt="first",outcome="invalid"}"#)
        .await;
    assert_eq!(other, 8.0);
}
