//! The gRPC API through a generated tonic client, against a real server on loopback ports; and
//! REST and gRPC giving the same verdicts over one core.

use crate::helpers::{
    as_rest, client, grpc_check, registration_as_rest, spawn_app, spawn_app_with, TestApp,
};
use schemagate::grpc::proto::{self, validator_client::ValidatorClient};
use serde_json::{json, Value};
use tonic::transport::Channel;
use tonic::Code;

fn schema() -> Value {
    json!({"type": "object", "properties": {
        "id": {"type": "integer"}, "email": {"type": "string", "format": "email"},
        "rows": {"type": "array", "items": {"type": "object", "required": ["n"]}}},
        "required": ["id"]})
}

/// Checks covering valid, invalid, isError, absent and null structuredContent, drift, each tier.
fn corpus() -> Vec<Value> {
    let mut checks = Vec::new();
    for server in ["internal-db", "partner", "stranger"] {
        let s = schema();
        checks.push(json!({"server": server, "tool": "get", "schema": s, "result": {"structuredContent": {"id": 1}}}));
        checks.push(json!({"server": server, "tool": "get", "schema": s, "attempt": 2,
            "result": {"structuredContent": {"id": "1", "email": "nope", "rows": [{}, {"n": 1}, {}]}}}));
        checks.push(
            json!({"server": server, "tool": "get", "schema": s, "result": {"isError": true}}),
        );
        checks
            .push(json!({"server": server, "tool": "get", "schema": s, "result": {"content": []}}));
        checks.push(json!({"server": server, "tool": "get", "schema": s, "result": {"structuredContent": null}}));
        checks.push(json!({"server": server, "tool": "get", "schema": s, "call_id": "x",
            "result": {"structuredContent": {"id": 2}, "content": [{"type": "text", "text": "{\"id\": 3}"}]}}));
        checks.push(json!({"server": server, "tool": "get", "schema": s, "instance": [1, 2]}));
    }
    checks.push(json!({"schema": {"type": "integer"}, "instance": 9007199254740993_u64}));
    checks
}

const POLICY: &str = "[[servers]]\nmatch = \"internal-*\"\ntier = \"trusted\"\n\n[[servers]]\nmatch = \"partner\"\ntier = \"semi-trusted\"\n";

#[tokio::test]
async fn rest_and_grpc_give_identical_verdicts() {
    let app = TestApp::with_policy(POLICY, &[]).await;
    let mut grpc = client(&app).await;
    for check in corpus() {
        let (status, rest) = app.validate(&check).await;
        assert_eq!(status, 200, "{check}: {rest}");
        let answer = grpc
            .validate(grpc_check(&check))
            .await
            .expect("verdict")
            .into_inner();
        assert_eq!(as_rest(&answer), rest, "{check}");
    }
}

#[tokio::test]
async fn large_integers_and_integer_types_judge_the_same_over_both() {
    let app = spawn_app().await;
    let mut grpc = client(&app).await;
    let schema = json!({"type": "object", "properties": {
        "id": {"type": "integer", "maximum": 9007199254740992_u64},
        "count": {"type": "integer"}}});
    for (instance, valid) in [
        (json!({"id": 9007199254740992_u64, "count": 3}), true),
        (json!({"id": 9007199254740993_u64, "count": 3}), false),
        (json!({"id": 1, "count": 3.5}), false),
        (json!({"id": 1, "count": 3.0}), true),
    ] {
        let check = json!({"schema": schema, "instance": instance});
        let (_, rest) = app.validate(&check).await;
        let answer = grpc
            .validate(grpc_check(&check))
            .await
            .expect("verdict")
            .into_inner();
        assert_eq!(rest["valid"], valid, "{instance}: {rest}");
        assert_eq!(answer.valid, Some(valid), "{instance}");
        assert_eq!(as_rest(&answer), rest);
    }
    // Raw JSON text keeps 64-bit ids exact, with no double in between.
    let check = proto::Check {
        schema_source: Some(proto::check::SchemaSource::Schema(
            r#"{"const": 18446744073709551615}"#.into(),
        )),
        payload: Some(proto::check::Payload::Instance(
            "18446744073709551614".into(),
        )),
        ..Default::default()
    };
    assert_eq!(
        grpc.validate(check)
            .await
            .expect("verdict")
            .into_inner()
            .valid,
        Some(false)
    );
}

#[tokio::test]
async fn registered_tools_over_grpc() {
    let app = spawn_app().await;
    let mut grpc = client(&app).await;
    let tools = json!({"tools": [
        {"name": "get", "inputSchema": {"type": "object", "required": ["id"]}, "outputSchema": schema()},
        {"name": "broken", "outputSchema": {"type": "strnig"}}
    ]});
    let reg = grpc
        .register_tools(proto::RegisterToolsRequest {
            server: "crm".into(),
            tools_list: tools.to_string().into(),
            ..Default::default()
        })
        .await
        .expect("registered")
        .into_inner();
    assert_eq!(reg.tools.len(), 2);
    assert_eq!(reg.tools[0].output_schema_hash.len(), 64);
    assert_eq!(reg.tools[1].errors[0].code, "schema_invalid");
    // The same registration as REST's, field for field (the tools removed first, so that both
    // add them).
    let removed = app
        .client
        .delete(app.url("/v1/servers/crm/tools"))
        .send()
        .await
        .expect("DELETE");
    assert_eq!(removed.status(), 200);
    let (status, rest) = app.register("crm", &tools).await;
    assert_eq!(status, 200);
    assert_eq!(registration_as_rest(&reg), rest);

    let by_name =
        json!({"server": "crm", "tool": "get", "result": {"structuredContent": {"id": 1}}});
    let v = grpc
        .validate(grpc_check(&by_name))
        .await
        .expect("verdict")
        .into_inner();
    assert_eq!(v.valid, Some(true));
    assert_eq!(v.schema_hash, reg.tools[0].output_schema_hash);
    let args = json!({"server": "crm", "tool": "get", "arguments": {}});
    let v = grpc
        .validate(grpc_check(&args))
        .await
        .expect("verdict")
        .into_inner();
    assert_eq!(v.valid, Some(false));
    assert!(
        v.feedback.starts_with("Arguments failed schema"),
        "{}",
        v.feedback
    );
    // Registered over gRPC, visible over REST: one core.
    let (_, rest) = app.validate(&by_name).await;
    assert_eq!(rest["valid"], true);

    let bad = grpc
        .register_tools(proto::RegisterToolsRequest {
            server: "crm".into(),
            tools_list: "{".into(),
            ..Default::default()
        })
        .await
        .expect_err("malformed");
    assert_eq!(bad.code(), Code::InvalidArgument);
}

#[tokio::test]
async fn refusals_map_to_their_status_codes() {
    let app = spawn_app_with(&["--max-batch-items", "3"]).await;
    let mut grpc = client(&app).await;
    let malformed = proto::Check {
        schema_source: Some(proto::check::SchemaSource::Schema("{}".into())),
        payload: Some(proto::check::Payload::Instance("{\"a\": ".into())),
        ..Default::default()
    };
    let status = grpc.validate(malformed).await.expect_err("malformed");
    assert_eq!(status.code(), Code::InvalidArgument);
    assert!(
        status.message().contains("`instance` is not valid JSON"),
        "{}",
        status.message()
    );
    assert_eq!(
        status
            .metadata()
            .get(schemagate::grpc::ERROR_CODE_KEY)
            .and_then(|v| v.to_str().ok()),
        Some("malformed_json")
    );

    let unknown = grpc_check(&json!({"schema_hash": "ab".repeat(32), "instance": 1}));
    assert_eq!(
        grpc.validate(unknown).await.expect_err("unknown").code(),
        Code::NotFound
    );
    let broken = grpc_check(&json!({"schema": {"type": "strnig"}, "instance": 1}));
    assert_eq!(
        grpc.validate(broken).await.expect_err("broken").code(),
        Code::InvalidArgument
    );
    let no_payload = proto::Check::default();
    assert_eq!(
        grpc.validate(no_payload).await.expect_err("empty").code(),
        Code::InvalidArgument
    );

    let items = vec![grpc_check(&json!({"schema": {}, "instance": 1})); 4];
    let status = grpc
        .validate_batch(proto::ValidateBatchRequest { items })
        .await
        .expect_err("too long");
    assert_eq!(status.code(), Code::ResourceExhausted);
    assert!(status.message().contains("--max-batch-items"));
    // Refusals are counted, those of the core and the adapter's own alike.
    for (code, count) in [("malformed_json", 1.0), ("batch_too_large", 1.0)] {
        let series =
            format!(r#"schemagate_request_errors_total{{transport="grpc",code="{code}"}}"#);
        assert_eq!(app.metric(&series).await, count, "{series}");
    }
}

#[tokio::test]
async fn messages_over_the_size_limit_are_refused_by_the_grpc_layer() {
    let app = spawn_app_with(&["--grpc-max-message-bytes", "4096"]).await;
    let mut grpc = client(&app).await;
    let big = json!({"schema": {"type": "string"}, "instance": "x".repeat(8192)});
    let status = grpc
        .validate(grpc_check(&big))
        .await
        .expect_err("too large");
    // tonic's code for a message over its limit; the check never reached schemagate.
    assert_eq!(status.code(), Code::OutOfRange, "{status:?}");
    let small = json!({"schema": {"type": "string"}, "instance": "x"});
    assert_eq!(
        grpc.validate(grpc_check(&small))
            .await
            .expect("verdict")
            .into_inner()
            .valid,
        Some(true)
    );
}

#[tokio::test]
async fn batches_answer_in_order_with_errors_in_place() {
    let app = spawn_app().await;
    let mut grpc = client(&app).await;
    let checks = corpus();
    let mut items: Vec<_> = checks.iter().map(grpc_check).collect();
    items.insert(3, proto::Check::default());
    let results = grpc
        .validate_batch(proto::ValidateBatchRequest { items })
        .await
        .expect("batch")
        .into_inner()
        .results;
    assert_eq!(results.len(), checks.len() + 1);
    match &results[3].answer {
        Some(proto::check_answer::Answer::Error(e)) => assert_eq!(e.code, "missing_payload"),
        other => panic!("expected an error entry, got {other:?}"),
    }
    let rest_results = app.validate_batch(&checks).await.1["results"].clone();
    for (i, r) in results.iter().enumerate().filter(|(i, _)| *i != 3) {
        let rest = &rest_results[if i < 3 { i } else { i - 1 }];
        match &r.answer {
            Some(proto::check_answer::Answer::Verdict(v)) => assert_eq!(&as_rest(v), rest),
            Some(proto::check_answer::Answer::Error(e)) => {
                assert_eq!(rest["error"]["code"], e.code)
            }
            None => panic!("empty answer"),
        }
    }
}

#[tokio::test]
async fn streams_answer_every_id_once_and_survive_bad_checks() {
    let app = spawn_app().await;
    let mut grpc = client(&app).await;
    let schema = schema().to_string();
    let total = 3000;
    let checks: Vec<proto::StreamCheck> = (0..total)
        .map(|i| {
            let payload = if i % 500 == 250 {
                "{ not json".to_owned()
            } else if i % 5 == 0 {
                json!({"id": "wrong"}).to_string()
            } else {
                json!({"id": i}).to_string()
            };
            let check = (i != 1234).then(|| proto::Check {
                schema_source: Some(proto::check::SchemaSource::Schema(schema.clone().into())),
                payload: Some(proto::check::Payload::Instance(payload.into())),
                ..Default::default()
            });
            proto::StreamCheck {
                id: format!("c{i}"),
                check,
            }
        })
        .collect();
    let mut answers = grpc
        .validate_stream(tokio_stream::iter(checks))
        .await
        .expect("stream")
        .into_inner();
    let mut seen = std::collections::HashMap::new();
    while let Some(answer) = answers.message().await.expect("answer") {
        assert!(
            seen.insert(answer.id.clone(), answer).is_none(),
            "each id once"
        );
    }
    assert_eq!(seen.len(), total);
    for i in 0..total {
        let answer = &seen[&format!("c{i}")];
        match (&answer.answer, i) {
            (Some(proto::stream_answer::Answer::Error(e)), 1234) => {
                assert_eq!(e.code, "invalid_field")
            }
            (Some(proto::stream_answer::Answer::Error(e)), i) if i % 500 == 250 => {
                assert_eq!(e.code, "malformed_json")
            }
            (Some(proto::stream_answer::Answer::Verdict(v)), i) if i % 500 != 250 => {
                assert_eq!(v.valid, Some(i % 5 != 0), "c{i}")
            }
            other => panic!("c{i}: unexpected {other:?}"),
        }
    }
}

#[tokio::test]
async fn a_slow_check_does_not_hold_up_the_quick_ones_of_its_stream() {
    let app = spawn_app().await;
    let mut grpc = client(&app).await;
    let slow = proto::StreamCheck {
        id: "slow".into(),
        check: Some(grpc_check(&json!({
            "schema": {"type": "array", "items": {"type": "integer", "minimum": 0}, "uniqueItems": true},
            "instance": (0..400_000).collect::<Vec<u32>>(),
        }))),
    };
    let quick = (0..20).map(|i| proto::StreamCheck {
        id: format!("quick{i}"),
        check: Some(grpc_check(
            &json!({"schema": {"type": "integer"}, "instance": i}),
        )),
    });
    let mut answers = grpc
        .validate_stream(tokio_stream::iter(std::iter::once(slow).chain(quick)))
        .await
        .expect("stream")
        .into_inner();
    let mut order = Vec::new();
    while let Some(answer) = answers.message().await.expect("answer") {
        assert!(
            matches!(answer.answer, Some(proto::stream_answer::Answer::Verdict(ref v)) if v.valid == Some(true)),
            "{answer:?}"
        );
        order.push(answer.id);
    }
    assert_eq!(order.len(), 21);
    assert_ne!(order[0], "slow", "answers go out as they are ready");
}

/// Reads `series` until two reads 300 ms apart agree; returns that value.
async fn settled(app: &TestApp, series: &str) -> f64 {
    let mut last = app.metric(series).await;
    for _ in 0..100 {
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        let now = app.metric(series).await;
        if now == last {
            return now;
        }
        last = now;
    }
    panic!("{series} never settled");
}

#[tokio::test]
async fn a_stream_nobody_reads_is_held_back_and_one_left_behind_stops() {
    let app = spawn_app().await;
    let series = r#"schemagate_validations_total{server="flood",tool="t",tier="untrusted",payload="instance",attempt="first",outcome="valid"}"#;
    // The client lives on a runtime of its own, so that it can go away the way a crashed
    // process does: its connection closes mid-stream.
    let client_runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("client runtime");
    let (started, first_answer) = tokio::sync::oneshot::channel();
    let address = format!("http://{}", app.grpc_addr);
    client_runtime.spawn(async move {
        // Small HTTP/2 windows, so what the count measures is the server's buffering, not the
        // answers this client's connection would take in unread (2 MiB by default).
        let channel = Channel::from_shared(address)
            .expect("uri")
            .initial_stream_window_size(64 * 1024)
            .initial_connection_window_size(64 * 1024)
            .connect()
            .await
            .expect("connect");
        // A million checks, made only as fast as the server takes them.
        let flood = tokio_stream::iter((0..1_000_000).map(|i| proto::StreamCheck {
            id: i.to_string(),
            check: Some(grpc_check(&json!({
                "server": "flood", "tool": "t", "schema": {"type": "integer"}, "instance": i
            }))),
        }));
        let mut answers = ValidatorClient::new(channel)
            .validate_stream(flood)
            .await
            .expect("stream")
            .into_inner();
        answers
            .message()
            .await
            .expect("answer")
            .expect("a first answer");
        let _ = started.send(());
        // No more is read.
        std::future::pending::<()>().await;
        drop(answers);
    });
    first_answer.await.expect("the stream started");
    // The server fills its bounded buffers, then stops taking checks.
    let held = settled(&app, series).await;
    assert!(
        held < 5_000.0,
        "{held} checks done for a client that reads nothing"
    );

    client_runtime.shutdown_background();
    let after = settled(&app, series).await;
    assert!(
        after - held < 1_000.0,
        "{held} checks before the client left, {after} after"
    );
    let v = client(&app)
        .await
        .validate(grpc_check(
            &json!({"schema": {"type": "integer"}, "instance": 1}),
        ))
        .await
        .expect("still serving")
        .into_inner();
    assert_eq!(v.valid, Some(true));
}

#[tokio::test]
async fn draining_turns_health_not_serving_then_ends_open_streams() {
    use tonic_health::pb::{
        health_check_response::ServingStatus, health_client::HealthClient, HealthCheckRequest,
    };
    let app = spawn_app().await;
    let mut grpc = client(&app).await;
    let channel = Channel::from_shared(format!("http://{}", app.grpc_addr))
        .expect("uri")
        .connect()
        .await
        .expect("connect");
    let mut watch = HealthClient::new(channel)
        .watch(HealthCheckRequest {
            service: String::new(),
        })
        .await
        .expect("watch")
        .into_inner();
    let status = |m: Option<tonic_health::pb::HealthCheckResponse>| m.expect("a status").status;
    assert_eq!(
        status(watch.message().await.expect("health")),
        ServingStatus::Serving as i32
    );
    // A pipeline with its stream open and its checks still coming.
    let (checks, rx) = tokio::sync::mpsc::channel(4);
    let mut answers = grpc
        .validate_stream(tokio_stream::wrappers::ReceiverStream::new(rx))
        .await
        .expect("stream")
        .into_inner();
    let check = |id: &str| proto::StreamCheck {
        id: id.into(),
        check: Some(grpc_check(
            &json!({"schema": {"type": "integer"}, "instance": 1}),
        )),
    };
    checks.send(check("before")).await.expect("send");
    let first = answers.message().await.expect("answer").expect("one");
    assert_eq!(first.id, "before");

    let started = std::time::Instant::now();
    let stopping = tokio::spawn(app.stop());
    assert_eq!(
        status(watch.message().await.expect("health")),
        ServingStatus::NotServing as i32
    );
    // ...and then the watch ends, so a watcher does not hold the shutdown up.
    assert!(watch.message().await.expect("a clean end").is_none());
    let end = answers
        .message()
        .await
        .expect_err("the stream ends with a status");
    assert_eq!(end.code(), Code::Unavailable);
    assert_eq!(
        end.metadata()
            .get(schemagate::grpc::ERROR_CODE_KEY)
            .and_then(|v| v.to_str().ok()),
        Some("unavailable")
    );
    stopping.await.expect("task").expect("clean stop");
    // Well inside the 30-second grace period: the open streams did not hold the server up.
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
    drop(checks);
}

#[tokio::test]
async fn health_reflection_and_metrics() {
    let app = spawn_app().await;
    let channel = Channel::from_shared(format!("http://{}", app.grpc_addr))
        .expect("uri")
        .connect()
        .await
        .expect("connect");
    let mut health = tonic_health::pb::health_client::HealthClient::new(channel);
    for service in ["", "schemagate.v1.Validator"] {
        let status = health
            .check(tonic_health::pb::HealthCheckRequest {
                service: service.into(),
            })
            .await
            .expect("health")
            .into_inner()
            .status;
        assert_eq!(
            status,
            tonic_health::pb::health_check_response::ServingStatus::Serving as i32
        );
    }
    let mut grpc = client(&app).await;
    grpc.validate(grpc_check(
        &json!({"server": "crm", "tool": "t", "schema": {"type": "integer"}, "instance": 1}),
    ))
    .await
    .expect("verdict");
    assert_eq!(
        app.metric(r#"schemagate_validation_duration_seconds_count{transport="grpc"}"#)
            .await,
        1.0
    );
    assert_eq!(
        app.metric(r#"schemagate_validations_total{server="crm",tool="t",tier="untrusted",payload="instance",attempt="first",outcome="valid"}"#).await,
        1.0
    );
}

#[tokio::test]
async fn the_shared_corpus_judges_the_same_over_both() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus");
    let (Ok(tools), Ok(results)) = (
        std::fs::read_to_string(dir.join("tools.json")),
        std::fs::read_to_string(dir.join("results.jsonl")),
    ) else {
        eprintln!("skipping: no reference corpus at {}", dir.display());
        return;
    };
    let app = spawn_app().await;
    let mut grpc = client(&app).await;
    let tools: Value = serde_json::from_str(&tools).expect("tools.json");
    for (server, list) in tools["servers"].as_object().expect("servers") {
        let (status, rest) = app.register(server, list).await;
        assert_eq!(status, 200, "{rest}");
        // Removed, so the gRPC registration adds the same tools again (the same `changes`).
        let removed = app
            .client
            .delete(app.url(&format!("/v1/servers/{server}/tools")))
            .send()
            .await
            .expect("DELETE");
        assert_eq!(removed.status(), 200);
        let registration = grpc
            .register_tools(proto::RegisterToolsRequest {
                server: server.clone(),
                tools_list: list.to_string().into(),
                ..Default::default()
            })
            .await
            .expect("registered")
            .into_inner();
        assert_eq!(registration_as_rest(&registration), rest, "{server}");
    }
    let lines: Vec<Value> = results
        .lines()
        .step_by(4)
        .map(|l| serde_json::from_str(l).expect("jsonl"))
        .collect();
    let checks: Vec<Value> = lines
        .iter()
        .map(|l| json!({"server": l["server"], "tool": l["tool"], "result": l["result"]}))
        .collect();
    let rest = app.validate_batch(&checks).await.1["results"].clone();
    let grpc_results = grpc
        .validate_batch(proto::ValidateBatchRequest {
            items: checks.iter().map(grpc_check).collect(),
        })
        .await
        .expect("batch")
        .into_inner()
        .results;
    for (i, line) in lines.iter().enumerate() {
        let Some(proto::check_answer::Answer::Verdict(v)) = &grpc_results[i].answer else {
            panic!("line {i}: no verdict");
        };
        assert_eq!(as_rest(v), rest[i], "line {i}");
        assert_eq!(rest[i]["outcome"], line["expect"], "line {i}");
    }
}

#[tokio::test]
async fn reflection_lists_the_services_so_grpcurl_needs_no_proto() {
    use tonic_reflection::pb::v1::{
        server_reflection_client::ServerReflectionClient,
        server_reflection_request::MessageRequest, server_reflection_response::MessageResponse,
        ServerReflectionRequest,
    };
    let app = spawn_app().await;
    let channel = Channel::from_shared(format!("http://{}", app.grpc_addr))
        .expect("uri")
        .connect()
        .await
        .expect("connect");
    let mut reflection = ServerReflectionClient::new(channel);
    let request = ServerReflectionRequest {
        host: String::new(),
        message_request: Some(MessageRequest::ListServices(String::new())),
    };
    let mut answers = reflection
        .server_reflection_info(tokio_stream::iter([request]))
        .await
        .expect("reflection")
        .into_inner();
    let answer = answers
        .message()
        .await
        .expect("answer")
        .expect("one answer");
    let Some(MessageResponse::ListServicesResponse(list)) = answer.message_response else {
        panic!("expected a service list");
    };
    let names: Vec<_> = list.service.iter().map(|s| s.name.as_str()).collect();
    assert!(names.contains(&"schemagate.v1.Validator"), "{names:?}");
    assert!(names.contains(&"grpc.health.v1.Health"), "{names:?}");
}
