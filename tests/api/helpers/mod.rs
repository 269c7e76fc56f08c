//! Starts a real schemagate on loopback ports and talks to it like a client would: one
//! `TestApp` with typed request helpers, a gRPC client and a metrics reader, shared by every test
//! module.

pub mod gateway;
pub mod mcp;

use schemagate::config::ServeArgs;
use schemagate::grpc::proto::{self, validator_client::ValidatorClient};
use serde_json::{json, Value};
use std::net::SocketAddr;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tonic::transport::Channel;

/// A running server; shuts down when dropped.
pub struct TestApp {
    pub http_addr: SocketAddr,
    pub grpc_addr: SocketAddr,
    pub client: reqwest::Client,
    shutdown: Option<oneshot::Sender<()>>,
    pub task: Option<tokio::task::JoinHandle<anyhow::Result<()>>>,
    /// The policy file of [`TestApp::with_policy`], kept for as long as the server runs.
    policy: Option<tempfile::NamedTempFile>,
}

/// Starts schemagate with the default flags plus `extra` (e.g. `["--policy", path]`).
pub async fn spawn_app_with(extra: &[&str]) -> TestApp {
    let mut argv = vec!["serve"];
    if !extra.contains(&"--policy-poll-interval") {
        argv.extend_from_slice(&["--policy-poll-interval", "0"]);
    }
    if !extra.contains(&"--drain-delay-secs") {
        argv.extend_from_slice(&["--drain-delay-secs", "0"]);
    }
    argv.extend_from_slice(extra);
    let args = <ServeArgs as clap::Parser>::parse_from(argv);
    let http = TcpListener::bind("127.0.0.1:0").await.expect("bind http");
    let grpc = TcpListener::bind("127.0.0.1:0").await.expect("bind grpc");
    let http_addr = http.local_addr().expect("addr");
    let grpc_addr = grpc.local_addr().expect("addr");
    let (tx, rx) = oneshot::channel::<()>();
    let task = tokio::spawn(schemagate::run(
        args,
        schemagate::Listeners { http, grpc },
        async move {
            let _ = rx.await;
        },
    ));
    TestApp {
        http_addr,
        grpc_addr,
        client: crate::http_client::builder()
            .timeout(Duration::from_secs(30))
            .build()
            .expect("client"),
        shutdown: Some(tx),
        task: Some(task),
        policy: None,
    }
}

pub async fn spawn_app() -> TestApp {
    spawn_app_with(&[]).await
}

impl TestApp {
    /// Starts schemagate with `policy` (TOML) as its policy file, plus `extra` flags.
    pub async fn with_policy(policy: &str, extra: &[&str]) -> TestApp {
        let file = tempfile::NamedTempFile::new().expect("policy file");
        std::fs::write(file.path(), policy).expect("write policy");
        let path = file.path().to_str().expect("utf-8").to_owned();
        let mut args = vec!["--policy", path.as_str()];
        args.extend_from_slice(extra);
        let mut app = spawn_app_with(&args).await;
        app.policy = Some(file);
        app
    }

    /// Rewrites the policy file of [`TestApp::with_policy`] (a reload reads it).
    pub fn write_policy(&self, policy: &str) {
        let file = self.policy.as_ref().expect("started with_policy");
        std::fs::write(file.path(), policy).expect("write policy");
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.http_addr, path)
    }

    /// POSTs raw bytes; returns status and parsed JSON body.
    pub async fn post_raw(&self, path: &str, body: impl Into<reqwest::Body>) -> (u16, Value) {
        let response = self
            .client
            .post(self.url(path))
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .expect("request");
        let status = response.status().as_u16();
        let text = response.text().await.expect("body");
        let json = serde_json::from_str(&text).unwrap_or(Value::String(text));
        (status, json)
    }

    /// POST /v1/validate.
    pub async fn validate(&self, check: &Value) -> (u16, Value) {
        self.post_raw("/v1/validate", check.to_string()).await
    }

    /// POST /v1/validate/batch with `{"items": items}`.
    pub async fn validate_batch(&self, items: &[Value]) -> (u16, Value) {
        let body = serde_json::json!({ "items": items });
        self.post_raw("/v1/validate/batch", body.to_string()).await
    }

    /// PUT /v1/servers/{server}/tools.
    pub async fn register(&self, server: &str, tools_list: &Value) -> (u16, Value) {
        self.register_with(server, "", tools_list).await
    }

    /// PUT /v1/servers/{server}/tools{query} (`query` empty or starting with `?`).
    pub async fn register_with(
        &self,
        server: &str,
        query: &str,
        tools_list: &Value,
    ) -> (u16, Value) {
        let response = self
            .client
            .put(self.url(&format!("/v1/servers/{server}/tools{query}")))
            .body(tools_list.to_string())
            .send()
            .await
            .expect("request");
        let status = response.status().as_u16();
        (status, response.json().await.expect("json"))
    }

    pub async fn get(&self, path: &str) -> (u16, String) {
        let response = self
            .client
            .get(self.url(path))
            .send()
            .await
            .expect("request");
        (
            response.status().as_u16(),
            response.text().await.expect("body"),
        )
    }

    /// The value of one series in /metrics (exact label set as rendered), or 0 when absent.
    pub async fn metric(&self, series: &str) -> f64 {
        let (_, text) = self.get("/metrics").await;
        metric(&text, series)
    }

    /// Sends the shutdown signal (the drain begins) without waiting.
    pub fn begin_shutdown(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }

    /// Stops the server and waits for it to finish.
    pub async fn stop(mut self) -> anyhow::Result<()> {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        match self.task.take() {
            Some(task) => task.await.expect("server task"),
            None => Ok(()),
        }
    }
}

impl Drop for TestApp {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }
}

// Hostile schemas shared by the tests.

/// `levels` definitions, each referencing the next twice: 2 KB of schema, 2^levels evaluations.
pub fn doubling_chain(levels: usize) -> Value {
    let mut defs = serde_json::Map::new();
    for i in 0..levels {
        let next = format!("#/$defs/d{}", i + 1);
        defs.insert(
            format!("d{i}"),
            json!({"anyOf": [{"$ref": next}, {"$ref": next, "type": "number"}]}),
        );
    }
    defs.insert(
        format!("d{levels}"),
        json!({"type": "string", "minLength": 5}),
    );
    json!({"$defs": defs, "$ref": "#/$defs/d0"})
}

/// A doubling chain whose definitions carry `$id`s, referenced as `spell(n)`.
pub fn id_chain(levels: usize, spell: impl Fn(usize) -> String) -> Value {
    let mut defs = serde_json::Map::new();
    for i in 0..levels {
        let next = spell(i + 1);
        defs.insert(
            format!("d{i}"),
            json!({"$id": format!("d{i}.json"), "allOf": [{"$ref": next}, {"$ref": next}]}),
        );
    }
    defs.insert(
        format!("d{levels}"),
        json!({"$id": format!("d{levels}.json"), "type": "string"}),
    );
    json!({"$defs": defs, "$ref": spell(0)})
}

// gRPC helpers: a client, and conversions between REST bodies and gRPC messages.

pub async fn client(app: &TestApp) -> ValidatorClient<Channel> {
    let channel = Channel::from_shared(format!("http://{}", app.grpc_addr))
        .expect("address")
        .connect()
        .await
        .expect("connect");
    ValidatorClient::new(channel).max_decoding_message_size(64 << 20)
}

/// The `schemagate-error-code` a gRPC refusal carries ("" when none).
pub fn error_code(status: &tonic::Status) -> &str {
    status
        .metadata()
        .get(schemagate::grpc::ERROR_CODE_KEY)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
}

/// The gRPC form of a REST check body.
pub fn grpc_check(rest: &Value) -> proto::Check {
    use proto::check::{Payload as P, SchemaSource as S};
    let text = |v: &Value| bytes::Bytes::from(v.to_string());
    let field = |name: &str| rest.get(name).map(text);
    let schema_source = match (rest.get("schema"), rest.get("schema_hash")) {
        (Some(s), _) => Some(S::Schema(text(s))),
        (None, Some(h)) => Some(S::SchemaHash(h.as_str().expect("hash").to_owned())),
        (None, None) => None,
    };
    let payload = field("instance")
        .map(P::Instance)
        .or_else(|| field("result").map(P::Result))
        .or_else(|| field("arguments").map(P::Arguments));
    let string = |name: &str| {
        rest.get(name)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    proto::Check {
        server: string("server"),
        tool: string("tool"),
        schema_source,
        payload,
        attempt: rest.get("attempt").and_then(Value::as_u64).unwrap_or(0) as u32,
        call_id: string("call_id"),
        protocol_version: string("protocol_version"),
    }
}

/// A gRPC verdict in REST's JSON shape, for comparison.
pub fn as_rest(v: &proto::Verdict) -> Value {
    let action = match proto::Action::try_from(v.action) {
        Ok(proto::Action::Pass) => "pass",
        Ok(proto::Action::Reject) => "reject",
        _ => "?",
    };
    let tier = match proto::Tier::try_from(v.tier) {
        Ok(proto::Tier::Trusted) => "trusted",
        Ok(proto::Tier::SemiTrusted) => "semi-trusted",
        Ok(proto::Tier::Untrusted) => "untrusted",
        _ => "?",
    };
    let outcome = match proto::Outcome::try_from(v.outcome) {
        Ok(proto::Outcome::Valid) => "valid",
        Ok(proto::Outcome::Invalid) => "invalid",
        Ok(proto::Outcome::Skipped) => "skipped",
        Ok(proto::Outcome::ToolError) => "tool_error",
        Ok(proto::Outcome::Unchecked) => "unchecked",
        _ => "?",
    };
    let mut out = json!({
        "action": action, "tier": tier, "outcome": outcome,
        "errors": v.errors.iter().map(|e| json!({"instance_path": e.instance_path,
            "schema_path": e.schema_path, "keyword": e.keyword, "message": e.message})).collect::<Vec<_>>(),
        "truncated": v.truncated, "feedback": v.feedback,
    });
    if let Some(valid) = v.valid {
        out["valid"] = json!(valid);
    }
    if !v.schema_hash.is_empty() {
        out["schema_hash"] = json!(v.schema_hash);
    }
    if !v.findings.is_empty() {
        out["findings"] = json!(v
            .findings
            .iter()
            .map(
                |f| json!({"kind": f.kind, "instance_path": f.instance_path, "message": f.message})
            )
            .collect::<Vec<_>>());
    }
    if !v.call_id.is_empty() {
        out["call_id"] = json!(v.call_id);
    }
    out
}

/// A gRPC registration in REST's JSON shape, for comparison.
pub fn registration_as_rest(r: &proto::RegisterToolsResponse) -> Value {
    let tools: Vec<Value> = r
        .tools
        .iter()
        .map(|t| {
            let mut tool = json!({"name": t.name});
            for (key, hash) in [
                ("input_schema_hash", &t.input_schema_hash),
                ("output_schema_hash", &t.output_schema_hash),
            ] {
                if !hash.is_empty() {
                    tool[key] = json!(hash);
                }
            }
            if !t.errors.is_empty() {
                tool["errors"] = json!(t
                    .errors
                    .iter()
                    .map(|e| json!({"schema": e.schema, "code": e.code, "message": e.message}))
                    .collect::<Vec<_>>());
            }
            tool
        })
        .collect();
    let mut out =
        json!({"server": r.server, "tools": tools, "protocol_version": r.protocol_version});
    if !r.next_cursor.is_empty() {
        out["next_cursor"] = json!(r.next_cursor);
    }
    if !r.changes.is_empty() {
        out["changes"] = json!(r
            .changes
            .iter()
            .map(|c| {
                let mut change = json!({"tool": c.tool, "change": c.change, "class": c.class});
                if !c.schemas.is_empty() {
                    change["schemas"] = json!(c
                        .schemas
                        .iter()
                        .map(
                            |p| json!({"schema": p.schema, "class": p.class, "reasons": p.reasons})
                        )
                        .collect::<Vec<_>>());
                }
                change
            })
            .collect::<Vec<_>>());
    }
    out
}

/// The value of `series` (name and labels, as exposed) in a Prometheus exposition; 0 when absent.
pub fn metric(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|line| {
            let (name, value) = line.rsplit_once(' ')?;
            (name == series).then(|| value.parse().ok()).flatten()
        })
        .unwrap_or(0.0)
}
