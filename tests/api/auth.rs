//! Who may do what, over both transports: a token file with scopes and server globs, each
//! refusal as a client sees it, reloads that revoke a token, and the refusal to serve a public
//! address without tokens.

use crate::helpers::{client, error_code, grpc_check, spawn_app_with, TestApp};
use schemagate::config::ServeArgs;
use schemagate::grpc::proto;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use tonic::metadata::MetadataValue;
use tonic::transport::Channel;
use tonic::Code;

const ORCHESTRATOR: &str = "orch-3f1c9a";
const REGISTRAR: &str = "reg-77d2e0";
const OPERATOR: &str = "op-a91b44";

fn sha(token: &str) -> String {
    Sha256::digest(token.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn token_file(with_orchestrator: bool) -> String {
    let mut text = String::new();
    if with_orchestrator {
        text += &format!(
            "[[tokens]]\nname = \"orchestrator-crm\"\nsha256 = \"{}\"\nscopes = [\"check\"]\nservers = [\"crm\", \"partner-*\"]\n\n",
            sha(ORCHESTRATOR)
        );
    }
    text += &format!(
        "[[tokens]]\nname = \"registrar\"\nsha256 = \"{}\"\nscopes = [\"register\", \"check\"]\nservers = [\"crm\"]\n\n[[tokens]]\nname = \"operator\"\nsha256 = \"{}\"\nscopes = [\"admin\"]\n",
        sha(REGISTRAR),
        sha(OPERATOR)
    );
    text
}

/// A server with the token file (kept alive with the server).
async fn app_with_tokens() -> (TestApp, tempfile::NamedTempFile) {
    let file = tempfile::NamedTempFile::new().expect("token file");
    std::fs::write(file.path(), token_file(true)).expect("write");
    let path = file.path().to_str().expect("utf-8").to_owned();
    let app = spawn_app_with(&["--auth-tokens", &path]).await;
    (app, file)
}

fn crm_tools() -> Value {
    json!({"tools": [{
        "name": "lookup",
        "inputSchema": {"type": "object"},
        "outputSchema": {"type": "object", "required": ["id"], "properties": {"id": {"type": "string"}}}
    }]})
}

async fn send(
    app: &TestApp,
    method: reqwest::Method,
    path: &str,
    token: Option<&str>,
    body: Option<&Value>,
) -> (u16, reqwest::header::HeaderMap, Value) {
    let mut request = app.client.request(method, app.url(path));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    if let Some(body) = body {
        request = request.json(body);
    }
    let response = request.send().await.expect("answered");
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let text = response.text().await.expect("body");
    (
        status,
        headers,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

fn check(server: &str) -> Value {
    json!({"server": server, "tool": "lookup", "result": {"structuredContent": {"id": "c1"}, "content": []}})
}

#[tokio::test]
async fn rest_answers_each_refusal_and_lets_each_scope_do_its_part() {
    let (app, _file) = app_with_tokens().await;
    let post = reqwest::Method::POST;
    let put = reqwest::Method::PUT;

    // No token, and an unknown one: 401 with a Bearer challenge.
    let (status, headers, body) = send(
        &app,
        post.clone(),
        "/v1/validate",
        None,
        Some(&check("crm")),
    )
    .await;
    assert_eq!(status, 401, "{body}");
    assert_eq!(body["error"]["code"], "unauthenticated");
    assert!(headers
        .get("www-authenticate")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("Bearer")));
    let (status, _, body) = send(
        &app,
        post.clone(),
        "/v1/validate",
        Some("not-a-token"),
        Some(&check("crm")),
    )
    .await;
    assert_eq!(status, 401);
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("not one schemagate knows")),
        "{body}"
    );

    // A check-only token may not register; the registrar may, for its own server only.
    let (status, _, body) = send(
        &app,
        put.clone(),
        "/v1/servers/crm/tools",
        Some(ORCHESTRATOR),
        Some(&crm_tools()),
    )
    .await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(body["error"]["code"], "forbidden");
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("`register` scope") && m.contains("orchestrator-crm")),
        "{body}"
    );
    let (status, _, body) = send(
        &app,
        put.clone(),
        "/v1/servers/crm/tools",
        Some(REGISTRAR),
        Some(&crm_tools()),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let (status, _, body) = send(
        &app,
        put.clone(),
        "/v1/servers/internal-billing/tools",
        Some(REGISTRAR),
        Some(&json!({"tools": [{"name": "lookup", "inputSchema": {"type": "object"}, "outputSchema": {"type": "object"}}]})),
    )
    .await;
    assert_eq!(status, 403, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("internal-billing")),
        "{body}"
    );

    // The orchestrator checks its own server, and may not claim another's name.
    let (status, _, body) = send(
        &app,
        post.clone(),
        "/v1/validate",
        Some(ORCHESTRATOR),
        Some(&check("crm")),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["valid"], true, "{body}");
    let (status, _, body) = send(
        &app,
        post.clone(),
        "/v1/validate",
        Some(ORCHESTRATOR),
        Some(&check("internal-anything")),
    )
    .await;
    assert_eq!(status, 403, "{body}");
    // In a batch, the forbidden item alone is refused.
    let (status, _, body) = send(
        &app,
        post.clone(),
        "/v1/validate/batch",
        Some(ORCHESTRATOR),
        Some(&json!({"items": [check("crm"), check("internal-anything")]})),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["results"][0]["valid"], true, "{body}");
    assert_eq!(body["results"][1]["error"]["code"], "forbidden", "{body}");

    // Operator endpoints need `admin`; the probes and /metrics stay open.
    let (status, _, _) = send(
        &app,
        post.clone(),
        "/v1/admin/reload-policy",
        Some(ORCHESTRATOR),
        None,
    )
    .await;
    assert_eq!(status, 403);
    let (status, _, body) = send(
        &app,
        post.clone(),
        "/v1/admin/reload-tokens",
        Some(OPERATOR),
        None,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["tokens"], 3);
    for path in ["/healthz", "/readyz", "/metrics"] {
        let (status, _, _) = send(&app, reqwest::Method::GET, path, None, None).await;
        assert_eq!(status, 200, "{path}");
    }

    // Refusals never reach the core: only the two checks allowed were counted.
    let metrics = app.get("/metrics").await.1;
    assert!(
        !metrics.contains("internal-anything"),
        "a refused check was counted as a verdict"
    );
    for (reason, n) in [
        ("missing", 1.0),
        ("unknown", 1.0),
        ("scope", 2.0),
        ("server", 3.0),
    ] {
        assert_eq!(
            app.metric(&format!(
                r#"schemagate_auth_failures_total{{transport="rest",reason="{reason}"}}"#
            ))
            .await,
            n,
            "{reason}"
        );
    }
}

fn with_token<T>(message: T, token: &str) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    let value: MetadataValue<_> = format!("Bearer {token}").parse().expect("ascii");
    request.metadata_mut().insert("authorization", value);
    request
}

#[tokio::test]
async fn grpc_answers_each_refusal_and_authorises_each_check_of_a_stream() {
    let (app, _file) = app_with_tokens().await;
    let mut grpc = client(&app).await;
    let refused = grpc
        .validate(grpc_check(&check("crm")))
        .await
        .expect_err("no token");
    assert_eq!(refused.code(), Code::Unauthenticated, "{refused:?}");
    assert_eq!(error_code(&refused), "unauthenticated");
    let refused = grpc
        .validate(with_token(grpc_check(&check("crm")), "wrong"))
        .await
        .expect_err("unknown token");
    assert_eq!(refused.code(), Code::Unauthenticated);
    let register = proto::RegisterToolsRequest {
        server: "crm".into(),
        tools_list: crm_tools().to_string().into(),
        ..Default::default()
    };
    let refused = grpc
        .register_tools(with_token(register.clone(), ORCHESTRATOR))
        .await
        .expect_err("no register scope");
    assert_eq!(refused.code(), Code::PermissionDenied, "{refused:?}");
    assert_eq!(error_code(&refused), "forbidden");
    grpc.register_tools(with_token(register, REGISTRAR))
        .await
        .expect("the registrar registers crm");
    let refused = grpc
        .validate(with_token(
            grpc_check(&check("internal-anything")),
            ORCHESTRATOR,
        ))
        .await
        .expect_err("another server's name");
    assert_eq!(refused.code(), Code::PermissionDenied);
    let verdict = grpc
        .validate(with_token(grpc_check(&check("crm")), ORCHESTRATOR))
        .await
        .expect("its own server")
        .into_inner();
    assert_eq!(verdict.valid, Some(true));

    // A stream is authorised once; each check in it against its own server.
    let checks = ["crm", "partner-eu", "internal-anything", "crm"]
        .iter()
        .enumerate()
        .map(|(i, server)| proto::StreamCheck {
            id: i.to_string(),
            check: Some(grpc_check(
                &json!({"server": server, "schema": {"type": "string"}, "instance": "x"}),
            )),
        })
        .collect::<Vec<_>>();
    let mut answers = grpc
        .validate_stream(with_token(
            futures_util::stream::iter(checks.clone()),
            ORCHESTRATOR,
        ))
        .await
        .expect("stream opened")
        .into_inner();
    let mut forbidden = Vec::new();
    let mut verdicts = 0;
    while let Some(answer) = answers.message().await.expect("stream goes on") {
        match answer.answer {
            Some(proto::stream_answer::Answer::Verdict(_)) => verdicts += 1,
            Some(proto::stream_answer::Answer::Error(e)) => {
                assert_eq!(e.code, "forbidden", "{e:?}");
                forbidden.push(answer.id);
            }
            None => panic!("empty answer"),
        }
    }
    assert_eq!((verdicts, forbidden), (3, vec!["2".to_owned()]));
    let refused = grpc
        .validate_stream(futures_util::stream::iter(checks))
        .await
        .expect_err("a stream without a token");
    assert_eq!(refused.code(), Code::Unauthenticated);

    // Health stays open.
    let channel = Channel::from_shared(format!("http://{}", app.grpc_addr))
        .expect("address")
        .connect()
        .await
        .expect("connect");
    let health = tonic_health::pb::health_client::HealthClient::new(channel)
        .check(tonic_health::pb::HealthCheckRequest::default())
        .await
        .expect("health needs no token")
        .into_inner();
    assert_eq!(health.status, 1, "SERVING");
    assert_eq!(
        app.metric(r#"schemagate_auth_failures_total{transport="grpc",reason="missing"}"#)
            .await,
        2.0
    );
}

#[tokio::test]
async fn a_revoked_token_stops_working_without_restart_and_a_bad_file_keeps_the_old_tokens() {
    let (app, file) = app_with_tokens().await;
    let post = reqwest::Method::POST;
    let (status, _, _) = send(
        &app,
        post.clone(),
        "/v1/validate",
        Some(ORCHESTRATOR),
        Some(&json!({"schema": {"type": "string"}, "instance": "x"})),
    )
    .await;
    assert_eq!(status, 200);
    // A broken file is refused and the tokens in force stay.
    std::fs::write(
        file.path(),
        "[[tokens]]\nname = \"x\"\nsha256 = \"nothex\"\nscopes = []\n",
    )
    .expect("write");
    let (status, _, body) = send(
        &app,
        post.clone(),
        "/v1/admin/reload-tokens",
        Some(OPERATOR),
        None,
    )
    .await;
    assert_eq!(status, 422, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("64 hex digits") && m.contains("previous tokens")),
        "{body}"
    );
    // Revoked: the orchestrator's entry is gone from the file.
    std::fs::write(file.path(), token_file(false)).expect("write");
    let (status, _, body) = send(
        &app,
        post.clone(),
        "/v1/admin/reload-tokens",
        Some(OPERATOR),
        None,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let (status, _, _) = send(
        &app,
        post,
        "/v1/validate",
        Some(ORCHESTRATOR),
        Some(&json!({"schema": {"type": "string"}, "instance": "x"})),
    )
    .await;
    assert_eq!(status, 401, "the revoked token still worked");
}

#[tokio::test]
async fn a_token_file_change_is_picked_up_by_polling() {
    let file = tempfile::NamedTempFile::new().expect("token file");
    std::fs::write(file.path(), token_file(true)).expect("write");
    let path = file.path().to_str().expect("utf-8").to_owned();
    let app = spawn_app_with(&["--auth-tokens", &path, "--policy-poll-interval", "1"]).await;
    let (status, _, body) = send(
        &app,
        reqwest::Method::POST,
        "/v1/validate",
        Some(ORCHESTRATOR),
        Some(&json!({"schema": {"type": "string"}, "instance": "x"})),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    std::fs::write(file.path(), token_file(false)).expect("write");
    let mut status = 0;
    for _ in 0..100 {
        (status, _, _) = send(
            &app,
            reqwest::Method::POST,
            "/v1/validate",
            Some(ORCHESTRATOR),
            Some(&json!({"schema": {"type": "string"}, "instance": "x"})),
        )
        .await;
        if status == 401 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(status, 401, "the revoked token still worked after polling");
}

#[test]
fn a_public_address_without_tokens_is_refused_unless_allowed() {
    let args = |extra: &[&str]| {
        let mut argv = vec!["serve", "--listen", "0.0.0.0:8080"];
        argv.extend_from_slice(extra);
        <ServeArgs as clap::Parser>::parse_from(argv)
    };
    let refused = args(&[]).gate_config().expect_err("refused");
    let message = format!("{refused:#}");
    assert!(
        message.contains("--allow-unauthenticated") && message.contains("--auth-tokens"),
        "{message}"
    );
    args(&["--allow-unauthenticated"])
        .gate_config()
        .expect("allowed when asked");
    let inline = format!("ci:{}:check", sha("t"));
    args(&["--auth-token", &inline])
        .gate_config()
        .expect("tokens given");
}

#[tokio::test]
async fn metrics_can_require_the_metrics_scope() {
    let scraper = "scrape-5c2d";
    let inline = format!("prometheus:{}:metrics", sha(scraper));
    let app = spawn_app_with(&["--auth-token", &inline, "--metrics-require-token"]).await;
    let (status, _, _) = send(&app, reqwest::Method::GET, "/metrics", None, None).await;
    assert_eq!(status, 401);
    let (status, _, body) = send(&app, reqwest::Method::GET, "/metrics", Some(scraper), None).await;
    assert_eq!(status, 200);
    assert!(body.as_str().is_some_and(|t| t.contains("schemagate_")));
    let (status, _, _) = send(&app, reqwest::Method::GET, "/readyz", None, None).await;
    assert_eq!(status, 200, "probes stay open");
}
