//! Registrations you can see and remove, schema hashes that outlive their compiled validators,
//! and many replicas sharing one registry in a real `redis-server` (Debian package
//! `redis-server`). The Redis tests are skipped with a message when it is not on PATH, unless
//! SCHEMAGATE_REQUIRE_REDIS=1 (as in CI).

use crate::helpers::{client, error_code, grpc_check, spawn_app_with, TestApp};
use crate::redis_server::{self, RedisServer};
use schemagate::grpc::proto;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// A started Redis, or `None` (the test then skips) when redis-server is not installed.
pub(crate) fn start_redis() -> Option<RedisServer> {
    if !redis_server::installed() {
        if std::env::var("SCHEMAGATE_REQUIRE_REDIS").as_deref() == Ok("1") {
            panic!("SCHEMAGATE_REQUIRE_REDIS=1 but no redis-server on PATH (apt-get install redis-server)");
        }
        eprintln!(
            "skipping: no redis-server on PATH (apt-get install redis-server to run this test)"
        );
        return None;
    }
    Some(RedisServer::start().expect("redis-server"))
}

/// A replica on `redis`, with short timeouts so a lost Redis is noticed quickly.
async fn replica(redis: &RedisServer) -> TestApp {
    let url = redis.url();
    spawn_app_with(&["--registry", &url, "--registry-timeout-ms", "500"]).await
}

/// Waits until `app` reports ready (it has read the registry in full).
pub(crate) async fn wait_ready(app: &TestApp) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if app.get("/readyz").await.0 == 200 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("replica not ready within 10 s");
}

/// Polls `probe` until it holds, for at most `within`; says how long it took, or fails.
async fn eventually<F, Fut>(within: Duration, what: &str, mut probe: F) -> Duration
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let start = Instant::now();
    loop {
        if probe().await {
            return start.elapsed();
        }
        assert!(start.elapsed() < within, "{what}: not within {within:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn crm_tools(required: &str) -> Value {
    json!({"tools": [
        {"name": "get_customer",
         "inputSchema": {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]},
         "outputSchema": {"type": "object", "properties": {"id": {"type": "integer"}, "name": {"type": "string"}}, "required": [required]}},
        {"name": "ping", "inputSchema": {"type": "object"}}
    ]})
}

/// A check of get_customer's result `{"id": 7}` by server and tool.
fn crm_check() -> Value {
    json!({"server": "crm", "tool": "get_customer", "result": {"structuredContent": {"id": 7}}})
}

async fn delete(app: &TestApp, path: &str) -> (u16, Value) {
    let response = app
        .client
        .delete(app.url(path))
        .send()
        .await
        .expect("request");
    let status = response.status().as_u16();
    (status, response.json().await.expect("json"))
}

async fn get_json(app: &TestApp, path: &str) -> (u16, Value) {
    let (status, text) = app.get(path).await;
    (status, serde_json::from_str(&text).expect("json"))
}

#[tokio::test]
async fn a_schema_hash_resolves_after_its_compiled_validator_was_dropped() {
    let app = spawn_app_with(&["--cache-idle-secs", "1"]).await;
    let schema = json!({"type": "object", "required": ["id"]});
    let (status, first) = app
        .validate(&json!({"schema": schema, "instance": {"id": 1}}))
        .await;
    assert_eq!(status, 200, "{first}");
    let hash = first["schema_hash"].as_str().expect("hash").to_owned();
    // Idle past --cache-idle-secs: the compiled validator is gone, the text is not.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let (status, verdict) = app
        .validate(&json!({"schema_hash": hash, "instance": {}}))
        .await;
    assert_eq!(status, 200, "{verdict}");
    assert_eq!(verdict["valid"], false);
    assert_eq!(
        app.metric("schemagate_cache_misses_total").await,
        2.0,
        "compiled again from the kept text"
    );
}

#[tokio::test]
async fn registrations_are_listed_and_removed_over_rest_and_grpc() {
    let app = spawn_app_with(&[]).await;
    assert_eq!(app.register("crm", &crm_tools("id")).await.0, 200);
    assert_eq!(
        app.register("shop", &json!({"tools": [{"name": "buy"}]}))
            .await
            .0,
        200
    );

    let (status, list) = get_json(&app, "/v1/servers").await;
    assert_eq!(status, 200);
    let servers = list["servers"].as_array().expect("servers");
    assert_eq!(servers.len(), 2);
    assert_eq!(servers[0]["server"], "crm");
    assert_eq!(servers[0]["tools"], 2);
    assert!(servers[0]["registered_at"]
        .as_str()
        .is_some_and(|t| t.ends_with('Z')));

    let (_, tools) = get_json(&app, "/v1/servers/crm/tools").await;
    assert_eq!(tools["tools"][0]["name"], "get_customer");
    assert!(tools["tools"][0]["output_schema_hash"].is_string());
    assert!(tools["tools"][0].get("output_schema").is_none());
    assert!(tools["tools"][1].get("output_schema_hash").is_none());
    let (_, with_schemas) = get_json(&app, "/v1/servers/crm/tools?schemas=true").await;
    assert_eq!(
        with_schemas["tools"][0]["output_schema"],
        crm_tools("id")["tools"][0]["outputSchema"]
    );

    // gRPC twins see the same.
    let mut grpc = client(&app).await;
    let listed = grpc
        .list_servers(proto::ListServersRequest {})
        .await
        .expect("list servers")
        .into_inner();
    assert_eq!(listed.servers.len(), 2);
    assert_eq!(listed.servers[1].server, "shop");
    let tools = grpc
        .list_tools(proto::ListToolsRequest {
            server: "crm".into(),
            schemas: true,
        })
        .await
        .expect("list tools")
        .into_inner();
    assert_eq!(tools.tools.len(), 2);
    let output: Value = serde_json::from_slice(&tools.tools[0].output_schema).expect("json");
    assert_eq!(output, crm_tools("id")["tools"][0]["outputSchema"]);

    // Removing one tool: its checks are then refused; the other tool stays.
    let (status, removed) = delete(&app, "/v1/servers/crm/tools/get_customer").await;
    assert_eq!((status, removed["removed"].clone()), (200, json!(1)));
    let (status, refused) = app.validate(&crm_check()).await;
    assert_eq!(
        (status, refused["error"]["code"].as_str()),
        (404, Some("unknown_tool"))
    );
    let (status, again) = delete(&app, "/v1/servers/crm/tools/get_customer").await;
    assert_eq!(
        (status, again["error"]["code"].as_str()),
        (404, Some("unknown_tool"))
    );

    // Removing a server over gRPC; then it is unknown everywhere.
    let gone = grpc
        .remove_tools(proto::RemoveToolsRequest {
            server: "crm".into(),
            tool: String::new(),
            shadow: false,
        })
        .await
        .expect("remove")
        .into_inner();
    assert_eq!(gone.removed, 1, "ping was left");
    let (status, unknown) = get_json(&app, "/v1/servers/crm/tools").await;
    assert_eq!(
        (status, unknown["error"]["code"].as_str()),
        (404, Some("unknown_server"))
    );
    let status = grpc
        .list_tools(proto::ListToolsRequest {
            server: "crm".into(),
            schemas: false,
        })
        .await
        .expect_err("unknown server");
    assert_eq!(status.code(), tonic::Code::NotFound);
    assert_eq!(error_code(&status), "unknown_server");
    let (_, list) = get_json(&app, "/v1/servers").await;
    assert_eq!(list["servers"].as_array().map(Vec::len), Some(1));
}

#[tokio::test]
async fn replicas_share_registrations_through_redis() {
    let Some(redis) = start_redis() else { return };
    let (a, mut b, c) = (
        replica(&redis).await,
        replica(&redis).await,
        replica(&redis).await,
    );
    for app in [&a, &b, &c] {
        wait_ready(app).await;
    }

    // Registered on A; checked on B by server and tool, on C (gRPC) by hash, at once.
    let (status, registration) = a.register("crm", &crm_tools("id")).await;
    assert_eq!(status, 200, "{registration}");
    let hash = registration["tools"][0]["output_schema_hash"]
        .as_str()
        .expect("hash")
        .to_owned();
    let (status, verdict) = b.validate(&crm_check()).await;
    assert_eq!(
        (status, verdict["valid"].clone()),
        (200, json!(true)),
        "{verdict}"
    );
    let mut grpc_c = client(&c).await;
    let by_hash = grpc_c
        .validate(grpc_check(
            &json!({"schema_hash": hash, "instance": {"name": "x"}}),
        ))
        .await
        .expect("C knows the hash")
        .into_inner();
    assert_eq!(by_hash.valid, Some(false), "id is required");

    // A hash first seen inline on A resolves on B: B reads it through to Redis (no change is
    // notified for texts), at the latest once A's write of it and B's remembered miss (1 s) pass.
    let inline = json!({"type": "object", "required": ["sku"]});
    let (_, seen) = a
        .validate(&json!({"schema": inline, "instance": {"sku": 1}}))
        .await;
    let inline_hash = seen["schema_hash"].as_str().expect("hash").to_owned();
    eventually(
        Duration::from_secs(3),
        "an inline hash on another replica",
        || async {
            let (status, verdict) = b
                .validate(&json!({"schema_hash": inline_hash, "instance": {}}))
                .await;
            status == 200 && verdict["valid"] == json!(false)
        },
    )
    .await;

    // Registered again on A with a new contract: B and C use it within a second.
    assert_eq!(a.register("crm", &crm_tools("name")).await.0, 200);
    for replica in [&b, &c] {
        eventually(
            Duration::from_secs(1),
            "new contract on another replica",
            || async { replica.validate(&crm_check()).await.1["valid"] == json!(false) },
        )
        .await;
    }

    // A replica started afresh holds every contract once it is ready (no read-through: the
    // listing shows only what it holds).
    b.stop().await.expect("b stops");
    b = replica(&redis).await;
    wait_ready(&b).await;
    let (_, list) = get_json(&b, "/v1/servers").await;
    assert_eq!(list["servers"][0]["server"], "crm");
    assert_eq!(list["servers"][0]["tools"], 2);
    let (_, verdict) = b.validate(&crm_check()).await;
    assert_eq!(verdict["valid"], false, "the second contract: {verdict}");

    // Removed on B: gone from A and C within a second.
    let (status, _) = delete(&b, "/v1/servers/crm/tools/get_customer").await;
    assert_eq!(status, 200);
    for replica in [&a, &c] {
        eventually(
            Duration::from_secs(1),
            "removal on another replica",
            || async { replica.validate(&crm_check()).await.0 == 404 },
        )
        .await;
    }
    assert_eq!(a.metric("schemagate_registry_connected").await, 1.0);
}

#[tokio::test]
async fn a_lost_redis_keeps_known_contracts_and_refuses_registrations_until_it_returns() {
    let Some(mut redis) = start_redis() else {
        return;
    };
    let (a, b) = (replica(&redis).await, replica(&redis).await);
    wait_ready(&a).await;
    wait_ready(&b).await;
    assert_eq!(a.register("crm", &crm_tools("id")).await.0, 200);
    eventually(Duration::from_secs(1), "B holds crm", || async {
        get_json(&b, "/v1/servers").await.1["servers"][0]["server"] == "crm"
    })
    .await;

    redis.stop();
    eventually(Duration::from_secs(10), "A notices", || async {
        a.metric("schemagate_registry_connected").await == 0.0
    })
    .await;
    // Known contracts are still served.
    let (status, verdict) = b.validate(&crm_check()).await;
    assert_eq!((status, verdict["valid"].clone()), (200, json!(true)));
    // Registrations and removals are refused, and nothing changes.
    let (status, refused) = a
        .register("shop", &json!({"tools": [{"name": "buy"}]}))
        .await;
    assert_eq!(
        (status, refused["error"]["code"].as_str()),
        (503, Some("registry_unavailable")),
        "{refused}"
    );
    let status = client(&b)
        .await
        .register_tools(proto::RegisterToolsRequest {
            server: "shop".into(),
            tools_list: json!({"tools": []}).to_string().into(),
            ..Default::default()
        })
        .await
        .expect_err("no Redis");
    assert_eq!(status.code(), tonic::Code::Unavailable);
    assert_eq!(error_code(&status), "registry_unavailable");
    let (status, _) = delete(&a, "/v1/servers/crm/tools").await;
    assert_eq!(status, 503);
    assert!(
        a.metric("schemagate_registry_errors_total{op=\"write\"}")
            .await
            >= 2.0
    );
    let (_, list) = get_json(&a, "/v1/servers").await;
    assert_eq!(list["servers"].as_array().map(Vec::len), Some(1));

    // A replica started while Redis is away is not ready...
    let fresh = replica(&redis).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(fresh.get("/readyz").await.0, 503);

    // ...until Redis is back (with what it held): then every replica reads it again.
    redis.resume().expect("redis-server again");
    wait_ready(&fresh).await;
    let (_, verdict) = fresh.validate(&crm_check()).await;
    assert_eq!(verdict["valid"], true, "{verdict}");
    eventually(
        Duration::from_secs(10),
        "A reconnects and reads again",
        || async { a.metric("schemagate_registry_connected").await == 1.0 },
    )
    .await;
    assert!(a.metric("schemagate_registry_resyncs_total").await >= 2.0);
    assert_eq!(
        b.register("shop", &json!({"tools": [{"name": "buy"}]}))
            .await
            .0,
        200
    );
    eventually(Duration::from_secs(1), "A sees shop", || async {
        get_json(&a, "/v1/servers/shop/tools").await.0 == 200
    })
    .await;
}

#[tokio::test]
async fn unknown_names_are_answered_404_on_a_shared_registry() {
    let Some(redis) = start_redis() else { return };
    let app = replica(&redis).await;
    wait_ready(&app).await;
    let before = redis.calls("hgetall").expect("INFO");
    let start = Instant::now();
    for i in 0..50 {
        let (status, refused) = app
            .validate(&json!({"server": "nobody", "tool": format!("t{}", i % 5), "instance": {}}))
            .await;
        assert_eq!(
            (status, refused["error"]["code"].as_str()),
            (404, Some("unknown_tool"))
        );
    }
    // Each of the 5 names was read through at most once per second (the miss is remembered).
    let seconds = start.elapsed().as_secs() + 1;
    let reads = redis.calls("hgetall").expect("INFO") - before;
    assert!(
        (1..=5 * seconds).contains(&reads),
        "{reads} reads of Redis for 50 checks of 5 unknown names in {seconds} s"
    );
    let unknown_hash = "0".repeat(64);
    let (status, refused) = app
        .validate(&json!({"schema_hash": unknown_hash, "instance": {}}))
        .await;
    assert_eq!(
        (status, refused["error"]["code"].as_str()),
        (404, Some("unknown_schema_hash"))
    );
    assert_eq!(
        app.metric("schemagate_registry_errors_total{op=\"read_through\"}")
            .await,
        0.0
    );
}
