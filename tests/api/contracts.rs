//! Contracts over time: each registration's changes classed from the consumer's side (the table
//! of tests/data/contract_changes.json, registered over REST here and learned through the
//! gateway in gateway.rs), counted, and kept in each tool's history, in process and in a shared
//! Redis registry.

use crate::helpers::{client, metric, spawn_app_with, TestApp};
use crate::registry::{start_redis, wait_ready};
use schemagate::grpc::proto;
use serde::Deserialize;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// One pair of the table.
#[derive(Deserialize)]
pub(crate) struct Case {
    pub name: String,
    pub part: String,
    pub old: Option<Value>,
    pub new: Option<Value>,
    pub class: String,
    pub reasons: Vec<String>,
}

pub(crate) fn table() -> Vec<Case> {
    serde_json::from_str(include_str!("../data/contract_changes.json")).expect("the table reads")
}

/// The table as two tools/list results: tool `t{i}` with case i's old schema, then its new one.
pub(crate) fn tools_lists(table: &[Case]) -> (Value, Value) {
    let list = |new: bool| {
        let tools: Vec<Value> = table
            .iter()
            .enumerate()
            .map(|(i, case)| {
                let mut tool = json!({"name": format!("t{i}")});
                let schema = if new { &case.new } else { &case.old };
                match (schema, case.part.as_str()) {
                    (None, _) => {}
                    // A tool fragment: its texts, and the schemas that hold texts.
                    (Some(Value::Object(fragment)), "description") => {
                        for (key, value) in fragment {
                            tool[key.as_str()] = value.clone();
                        }
                    }
                    (Some(schema), part) => {
                        let key = match part {
                            "input" => "inputSchema",
                            "annotations" => "annotations",
                            _ => "outputSchema",
                        };
                        tool[key] = schema.clone();
                    }
                }
                tool
            })
            .collect();
        json!({"tools": tools})
    };
    (list(false), list(true))
}

/// Whether case `i` changes its tool's registration at all (the same text registered again
/// does not).
pub(crate) fn changes_anything(case: &Case) -> bool {
    case.old != case.new
}

#[tokio::test]
async fn the_table_of_changes_is_classed_the_same_over_rest() {
    let app = spawn_app_with(&[]).await;
    let table = table();
    let (old, new) = tools_lists(&table);
    let (status, first) = app.register("table", &old).await;
    assert_eq!(status, 200, "{first}");
    let added = first["changes"].as_array().expect("changes");
    assert_eq!(added.len(), table.len());
    assert!(added
        .iter()
        .all(|c| c["change"] == "added" && c["class"] == "compatible"));

    let (status, second) = app.register("table", &new).await;
    assert_eq!(status, 200, "{second}");
    let changes = second["changes"].as_array().expect("changes");
    let mut wrong = Vec::new();
    for (i, case) in table.iter().enumerate() {
        let tool = format!("t{i}");
        let change = changes.iter().find(|c| c["tool"] == tool.as_str());
        if !changes_anything(case) {
            if change.is_some() {
                wrong.push(format!("{}: listed though nothing changed", case.name));
            }
            continue;
        }
        let Some(change) = change else {
            wrong.push(format!("{}: not listed", case.name));
            continue;
        };
        // The case's part (a text edited inside a schema also lists that schema, `identical`).
        let part = change["schemas"]
            .as_array()
            .and_then(|parts| parts.iter().find(|p| p["schema"] == case.part.as_str()))
            .unwrap_or(&Value::Null);
        let reasons: Vec<&str> = part["reasons"]
            .as_array()
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let missing: Vec<&String> = case
            .reasons
            .iter()
            .filter(|r| !reasons.contains(&r.as_str()))
            .collect();
        if change["change"] != "changed"
            || change["class"] != case.class.as_str()
            || part["schema"] != case.part.as_str()
            || part["class"] != case.class.as_str()
            || !missing.is_empty()
        {
            wrong.push(format!(
                "{}: expected {} with {missing:?}, got {change}",
                case.name, case.class
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "{} of {}:\n{}",
        wrong.len(),
        table.len(),
        wrong.join("\n")
    );

    // Each changed part is counted by its class.
    let (_, text) = app.get("/metrics").await;
    for (i, case) in table
        .iter()
        .enumerate()
        .filter(|(_, c)| changes_anything(c))
    {
        let series = format!(
            r#"schemagate_contract_changes_total{{server="table",tool="t{i}",schema="{}",class="{}"}}"#,
            case.part, case.class
        );
        assert_eq!(metric(&text, &series), 1.0, "{}: {series}", case.name);
    }
}

fn customer(required: &[&str], annotations: Value) -> Value {
    json!({"tools": [{
        "name": "get_customer",
        "inputSchema": {"type": "object", "properties": {"id": {"type": "integer"}}},
        "outputSchema": {"type": "object", "properties": {"id": {"type": "integer"}, "email": {"type": "string"}}, "required": required},
        "annotations": annotations,
    }]})
}

/// Registers get_customer's three versions on `app`: the first, then one that no longer
/// promises `email` (breaking), then one whose annotations claim it reads only (breaking).
async fn three_versions(app: &TestApp) {
    for list in [
        customer(&["id", "email"], json!({"readOnlyHint": false})),
        customer(&["id"], json!({"readOnlyHint": false})),
        customer(&["id"], json!({"readOnlyHint": true})),
    ] {
        let (status, answer) = app.register("crm", &list).await;
        assert_eq!(status, 200, "{answer}");
    }
}

/// Asserts `versions` (newest first) are the three of [`three_versions`], after `extra` newer.
fn assert_three(versions: &[Value], extra: usize) {
    assert_eq!(versions.len(), 3 + extra, "{versions:?}");
    let v = &versions[extra..];
    assert_eq!(
        (v[0]["change"].as_str(), v[0]["class"].as_str()),
        (Some("changed"), Some("breaking"))
    );
    assert_eq!(v[0]["schemas"][0]["schema"], "annotations");
    assert_eq!(
        v[0]["schemas"][0]["reasons"][0],
        "/readOnlyHint: false -> true (the tool claims more safety: a host may stop asking before it runs it)"
    );
    assert_eq!(v[0]["annotations"], json!({"readOnlyHint": true}));
    assert_eq!(v[1]["class"], "breaking");
    assert_eq!(v[1]["schemas"][0]["schema"], "output");
    let reasons = v[1]["schemas"][0]["reasons"].as_array().expect("reasons");
    assert!(
        reasons.contains(&json!("/properties/email: removed from required")),
        "{reasons:?}"
    );
    assert_ne!(v[1]["output_schema_hash"], v[2]["output_schema_hash"]);
    assert_eq!(
        (v[2]["change"].as_str(), v[2]["class"].as_str()),
        (Some("added"), Some("compatible"))
    );
    assert!(v[2]["registered_at"]
        .as_str()
        .is_some_and(|t| t.ends_with('Z')));
    assert_eq!(v[2]["protocol_version"], "2026-07-28");
}

async fn history(app: &TestApp, tool: &str) -> (u16, Value) {
    let (status, text) = app
        .get(&format!("/v1/servers/crm/tools/{tool}/history"))
        .await;
    (status, serde_json::from_str(&text).expect("JSON"))
}

#[tokio::test]
async fn a_tools_history_keeps_each_version_and_how_it_changed() {
    let app = spawn_app_with(&[]).await;
    three_versions(&app).await;
    let (status, body) = history(&app, "get_customer").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        (body["server"].as_str(), body["tool"].as_str()),
        (Some("crm"), Some("get_customer"))
    );
    assert_three(body["versions"].as_array().expect("versions"), 0);

    // Registering the same contract again changes nothing and adds no version.
    let (_, again) = app
        .register("crm", &customer(&["id"], json!({"readOnlyHint": true})))
        .await;
    assert!(again.get("changes").is_none(), "{again}");

    // A removal is a version too.
    let removed = app
        .client
        .delete(app.url("/v1/servers/crm/tools/get_customer"))
        .send()
        .await
        .expect("DELETE");
    assert_eq!(removed.status(), 200);
    let (_, body) = history(&app, "get_customer").await;
    let versions = body["versions"].as_array().expect("versions");
    assert_eq!(
        (
            versions[0]["change"].as_str(),
            versions[0]["class"].as_str()
        ),
        (Some("removed"), Some("breaking"))
    );
    assert_three(versions, 1);

    // The same over gRPC.
    let mut grpc = client(&app).await;
    let answer = grpc
        .tool_history(proto::ToolHistoryRequest {
            server: "crm".into(),
            tool: "get_customer".into(),
        })
        .await
        .expect("ToolHistory")
        .into_inner();
    let classes: Vec<(&str, &str)> = answer
        .versions
        .iter()
        .map(|v| (v.change.as_str(), v.class.as_str()))
        .collect();
    assert_eq!(
        classes,
        [
            ("removed", "breaking"),
            ("changed", "breaking"),
            ("changed", "breaking"),
            ("added", "compatible")
        ]
    );
    assert_eq!(
        answer.versions[1].annotations_json,
        r#"{"readOnlyHint":true}"#
    );

    // A schema that cannot be used (here one that would fetch a $ref) is reported, and its
    // change left unknown, never analysed.
    let (status, answer) = app
        .register(
            "crm",
            &json!({"tools": [{"name": "get_customer", "outputSchema": {"$ref": "https://schemas.example/c.json"}}]}),
        )
        .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(
        answer["tools"][0]["errors"][0]["code"], "schema_ref_not_allowed",
        "{answer}"
    );
    assert_eq!(answer["changes"][0]["change"], "added", "{answer}");
    let (_, answer) = app
        .register(
            "crm",
            &json!({"tools": [{"name": "get_customer", "outputSchema": {"type": "object"}}]}),
        )
        .await;
    assert_eq!(
        answer["changes"][0]["schemas"][0]["class"], "unknown",
        "{answer}"
    );

    // A tool never registered has no history.
    let (status, body) = history(&app, "nope").await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (404, Some("unknown_tool")),
        "{body}"
    );
    let status = grpc
        .tool_history(proto::ToolHistoryRequest {
            server: "crm".into(),
            tool: "nope".into(),
        })
        .await
        .expect_err("no history");
    assert_eq!(status.code(), tonic::Code::NotFound);
}

#[tokio::test]
async fn history_in_redis_is_seen_by_every_replica_and_outlives_them() {
    let Some(redis) = start_redis() else { return };
    let url = redis.url();
    let flags = ["--registry", url.as_str(), "--registry-timeout-ms", "500"];
    let (a, b) = (spawn_app_with(&flags).await, spawn_app_with(&flags).await);
    for app in [&a, &b] {
        wait_ready(app).await;
    }
    three_versions(&a).await;
    let (status, body) = history(&b, "get_customer").await;
    assert_eq!(status, 200, "{body}");
    assert_three(body["versions"].as_array().expect("versions"), 0);

    // A shadow schema registered on A judges B's checks too.
    let candidate = customer(&["id", "email"], json!({"readOnlyHint": true}));
    assert_eq!(
        a.register_with("crm", "?shadow=true", &candidate).await.0,
        200
    );
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        let (_, verdict) = b.validate(&result_check(4)).await;
        if verdict["shadow"]["would_block"] == true {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no shadow verdict on B: {verdict}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // Every replica gone, a new one reads the same history.
    a.stop().await.expect("a stops");
    b.stop().await.expect("b stops");
    let c = spawn_app_with(&flags).await;
    let (_, body) = history(&c, "get_customer").await;
    assert_three(body["versions"].as_array().expect("versions"), 0);
}

/// The hash a `contract_pinned` refusal names for its (first) tool.
fn accept_hash(message: &str) -> String {
    let (_, rest) = message
        .split_once("accept it with hash ")
        .unwrap_or_else(|| panic!("no hash in {message}"));
    rest.chars().take(64).collect()
}

/// get_customer's result `{"id": 7}`, checked by server and tool.
fn check() -> Value {
    json!({"server": "crm", "tool": "get_customer", "result": {"structuredContent": {"id": 7}}})
}

async fn accept(app: &TestApp, tool: &str, hash: &str) -> (u16, Value) {
    let response = app
        .client
        .post(app.url(&format!("/v1/servers/crm/tools/{tool}/accept")))
        .body(json!({"hash": hash}).to_string())
        .send()
        .await
        .expect("accept");
    let status = response.status().as_u16();
    (status, response.json().await.expect("JSON"))
}

#[tokio::test]
async fn a_pinned_contract_changes_only_once_its_change_is_accepted() {
    let app = TestApp::with_policy(
        "[[servers]]\nmatch = \"crm\"\ntier = \"untrusted\"\npin = true\n",
        &[],
    )
    .await;
    let v1 = customer(&["id"], json!({"title": "Customer"}));
    assert_eq!(
        app.register("crm", &v1).await.0,
        200,
        "the first contract is pinned, not refused"
    );
    assert_eq!(app.validate(&check()).await.1["valid"], true);

    // A breaking change is refused with its class, reasons and the hash that accepts it; the
    // old contract stays in force.
    let v2 = customer(&["id", "email"], json!({"title": "Customer"}));
    let v3 = customer(&["id"], json!({"title": "Customer"}));
    let v3 = {
        let mut v = v3;
        v["tools"][0]["outputSchema"]["properties"]["id"] = json!({"type": "string"});
        v
    };
    let (status, refusal) = app.register("crm", &v3).await;
    assert_eq!(status, 409, "{refusal}");
    assert_eq!(refusal["error"]["code"], "contract_pinned");
    let message = refusal["error"]["message"].as_str().expect("message");
    assert!(
        message.contains("tool \"get_customer\" changed (breaking; output breaking"),
        "{message}"
    );
    assert!(message.contains("/properties/id/type"), "{message}");
    assert_eq!(
        app.validate(&check()).await.1["valid"],
        true,
        "still the first contract"
    );
    assert_eq!(
        app.metric(r#"schemagate_contract_changes_total{server="crm",tool="get_customer",schema="output",class="breaking"}"#).await,
        1.0,
        "a refused change is counted"
    );
    // A compatible change of the schema is refused too (the contract is pinned, not only its
    // breaking changes); so is a tool added to the pinned server.
    let (status, _) = app.register("crm", &v2).await;
    assert_eq!(status, 409);
    let mut more = v1.clone();
    more["tools"]
        .as_array_mut()
        .expect("tools")
        .push(json!({"name": "renamed_customer"}));
    let (status, refusal) = app.register("crm", &more).await;
    assert_eq!(status, 409, "{refusal}");
    assert!(refusal["error"]["message"]
        .as_str()
        .unwrap_or("")
        .contains("tool \"renamed_customer\" added"));
    // A title is text people and the model read: a change for review, refused until accepted.
    let retitled = customer(&["id"], json!({"title": "A customer"}));
    let (status, refusal) = app.register("crm", &retitled).await;
    assert_eq!(status, 409, "{refusal}");
    let message = refusal["error"]["message"].as_str().unwrap_or("");
    assert!(
        message.contains(
            "(review; description review: /annotations/title: [-Customer-]{+A customer+})"
        ),
        "{message}"
    );
    assert_eq!(
        app.metric(r#"schemagate_contract_changes_total{server="crm",tool="get_customer",schema="description",class="review"}"#).await,
        1.0,
        "a refused text change is counted"
    );

    // Accepted by its hash, the change registers; then checks follow it.
    let (status, body) = accept(&app, "get_customer", "not-a-hash").await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (400, Some("invalid_field")),
        "{body}"
    );
    let (status, refusal) = app.register("crm", &v3).await;
    assert_eq!(status, 409);
    let hash = accept_hash(refusal["error"]["message"].as_str().expect("message"));
    let (status, body) = accept(&app, "get_customer", &hash).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["accepted"], hash.as_str());
    let (status, answer) = app.register("crm", &v3).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(
        app.validate(&check()).await.1["valid"],
        false,
        "id must now be a string"
    );

    // Over gRPC, the refusal is FAILED_PRECONDITION.
    let mut grpc = client(&app).await;
    let refused = grpc
        .register_tools(proto::RegisterToolsRequest {
            server: "crm".into(),
            tools_list: v1.to_string().into(),
            ..Default::default()
        })
        .await
        .expect_err("pinned");
    assert_eq!(refused.code(), tonic::Code::FailedPrecondition);
    assert!(
        refused.message().contains("contract_pinned") || refused.message().contains("pinned"),
        "{}",
        refused.message()
    );

    // A removal is a change: refused until accepted (its hash is the removal's).
    let url = app.url("/v1/servers/crm/tools/get_customer");
    let removed = app.client.delete(&url).send().await.expect("DELETE");
    assert_eq!(removed.status(), 409);
    let refusal: Value = removed.json().await.expect("JSON");
    let message = refusal["error"]["message"]
        .as_str()
        .expect("message")
        .to_owned();
    assert!(
        message.contains("tool \"get_customer\" removed"),
        "{message}"
    );
    let server = app
        .client
        .delete(app.url("/v1/servers/crm/tools"))
        .send()
        .await
        .expect("DELETE");
    assert_eq!(server.status(), 409, "the whole server neither");
    assert_eq!(app.validate(&check()).await.0, 200, "still registered");

    // The first page of a paginated listing keeps a pinned tool it does not list.
    let mut two = v3.clone();
    two["tools"]
        .as_array_mut()
        .expect("tools")
        .push(json!({"name": "ping", "inputSchema": {"type": "object"}}));
    let hash = {
        let (_, refusal) = app.register("crm", &two).await;
        accept_hash(refusal["error"]["message"].as_str().expect("message"))
    };
    assert_eq!(accept(&app, "ping", &hash).await.0, 200);
    assert_eq!(app.register("crm", &two).await.0, 200, "ping accepted");
    let page = json!({"tools": [two["tools"][1].clone()], "nextCursor": "2"});
    let (status, answer) = app.register("crm", &page).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(
        app.validate(&check()).await.0,
        200,
        "get_customer is kept: {answer}"
    );

    let hash = accept_hash(&message);
    assert_eq!(accept(&app, "get_customer", &hash).await.0, 200);
    let removed = app.client.delete(&url).send().await.expect("DELETE");
    assert_eq!(removed.status(), 200, "accepted, the removal goes through");
}

#[tokio::test]
async fn a_pin_on_one_tool_leaves_the_others_free() {
    let app = TestApp::with_policy(
        "[[servers]]\nmatch = \"crm\"\ntier = \"untrusted\"\ntools = { get_customer = { pin = true } }\n",
        &[],
    )
    .await;
    let mut v1 = customer(&["id"], json!({}));
    v1["tools"]
        .as_array_mut()
        .expect("tools")
        .push(json!({"name": "ping", "inputSchema": {"type": "object"}}));
    assert_eq!(app.register("crm", &v1).await.0, 200);
    let mut v2 = v1.clone();
    v2["tools"][1]["inputSchema"] = json!({"type": "object", "required": ["x"]});
    v2["tools"]
        .as_array_mut()
        .expect("tools")
        .push(json!({"name": "new_tool"}));
    let (status, answer) = app.register("crm", &v2).await;
    assert_eq!(
        status, 200,
        "another tool changes, a tool is added: {answer}"
    );
    // Removing the pinned tool is a change to it.
    let mut v3 = v2.clone();
    v3["tools"].as_array_mut().expect("tools").remove(0);
    let (status, refusal) = app.register("crm", &v3).await;
    assert_eq!(status, 409, "{refusal}");
    assert!(refusal["error"]["message"]
        .as_str()
        .unwrap_or("")
        .contains("tool \"get_customer\" removed"));
}

#[tokio::test]
async fn accepted_changes_are_shared_through_redis() {
    let Some(redis) = start_redis() else { return };
    let url = redis.url();
    let policy = "[[servers]]\nmatch = \"crm\"\ntier = \"untrusted\"\npin = true\n";
    let flags = ["--registry", url.as_str(), "--registry-timeout-ms", "500"];
    let (a, b) = (
        TestApp::with_policy(policy, &flags).await,
        TestApp::with_policy(policy, &flags).await,
    );
    for app in [&a, &b] {
        wait_ready(app).await;
    }
    assert_eq!(
        a.register("crm", &customer(&["id"], json!({}))).await.0,
        200
    );
    let v2 = customer(&["id", "email"], json!({}));
    // B refuses it too (it holds A's contract through Redis); accepted on B, A takes it.
    let deadline = Instant::now() + Duration::from_secs(5);
    let refusal = loop {
        let (status, refusal) = b.register("crm", &v2).await;
        if status == 409 {
            break refusal;
        }
        assert!(
            Instant::now() < deadline,
            "B never saw the pinned contract: {status} {refusal}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let hash = accept_hash(refusal["error"]["message"].as_str().expect("message"));
    assert_eq!(accept(&b, "get_customer", &hash).await.0, 200);
    // Every replica gone, a new one still honours the pin and the accepted hash.
    a.stop().await.expect("a stops");
    b.stop().await.expect("b stops");
    let c = TestApp::with_policy(policy, &flags).await;
    wait_ready(&c).await;
    let unaccepted = customer(&["id", "email", "name"], json!({}));
    assert_eq!(c.register("crm", &unaccepted).await.0, 409, "still pinned");
    let (status, answer) = c.register("crm", &v2).await;
    assert_eq!(status, 200, "{answer}");
}

/// get_customer's result: with `email` unless `i` is a multiple of 4.
fn result_check(i: usize) -> Value {
    let mut content = json!({"id": i});
    if i % 4 != 0 {
        content["email"] = json!(format!("c{i}@example.com"));
    }
    json!({"server": "crm", "tool": "get_customer", "result": {"structuredContent": content}, "call_id": format!("c{i}")})
}

#[tokio::test]
async fn a_shadow_schema_reports_what_it_would_block_and_changes_nothing_until_promoted() {
    let app = spawn_app_with(&[]).await;
    assert_eq!(
        app.register("crm", &customer(&["id"], json!({}))).await.0,
        200
    );
    // The candidate requires `email`, which one result in four lacks.
    let candidate = customer(&["id", "email"], json!({}));
    let (status, shadow) = app.register_with("crm", "?shadow=true", &candidate).await;
    assert_eq!(status, 200, "{shadow}");
    assert!(
        shadow.get("changes").is_none(),
        "the contract does not change: {shadow}"
    );
    let candidate_hash = shadow["tools"][0]["output_schema_hash"].clone();

    let checks: Vec<Value> = (0..40).map(result_check).collect();
    let (status, answer) = app.validate_batch(&checks).await;
    assert_eq!(status, 200, "{answer}");
    let verdicts = answer["results"].as_array().expect("results");
    for (i, verdict) in verdicts.iter().enumerate() {
        assert_eq!(
            verdict["valid"], true,
            "the enforced verdict is unchanged: {verdict}"
        );
        assert_eq!(verdict["action"], "pass");
        let blocks = verdict["shadow"]["would_block"]
            .as_bool()
            .expect("a shadow verdict");
        assert_eq!(blocks, i % 4 == 0, "{i}: {verdict}");
        assert_eq!(verdict["shadow"]["schema_hash"], candidate_hash);
        if blocks {
            assert_eq!(verdict["shadow"]["errors"][0]["keyword"], "required");
        }
    }
    let (_, text) = app.get("/metrics").await;
    for (outcome, count) in [("valid", 30.0), ("invalid", 10.0)] {
        let series = format!(
            r#"schemagate_shadow_validations_total{{server="crm",tool="get_customer",outcome="{outcome}"}}"#
        );
        assert_eq!(metric(&text, &series), count, "{series}");
    }

    // Over gRPC, the same shadow verdict.
    let mut grpc = client(&app).await;
    let verdict = grpc
        .validate(crate::helpers::grpc_check(&result_check(4)))
        .await
        .expect("validate")
        .into_inner();
    let shadow = verdict.shadow.expect("a shadow verdict");
    assert!(shadow.would_block);
    assert_eq!(verdict.valid, Some(true));

    // Registered again (as a proxy re-lists), the tool keeps its shadow schema.
    assert_eq!(
        app.register("crm", &customer(&["id"], json!({}))).await.0,
        200
    );
    assert!(app.validate(&result_check(8)).await.1["shadow"]["would_block"] == true);

    // Promoted: a normal, classified change; then enforced, and no shadow any more.
    let promoted = app
        .client
        .post(app.url("/v1/servers/crm/tools/get_customer/promote"))
        .send()
        .await
        .expect("promote");
    assert_eq!(promoted.status(), 200);
    let promoted: Value = promoted.json().await.expect("JSON");
    assert_eq!(promoted["changes"][0]["class"], "compatible", "{promoted}");
    assert_eq!(
        promoted["changes"][0]["schemas"][0]["reasons"][0],
        "/properties/email: added to required"
    );
    let (_, verdict) = app.validate(&result_check(8)).await;
    assert_eq!(verdict["valid"], false, "{verdict}");
    assert!(verdict.get("shadow").is_none(), "{verdict}");
    let (_, body) = history(&app, "get_customer").await;
    assert_eq!(body["versions"][0]["output_schema_hash"], candidate_hash);

    // Dropped with ?shadow=true: the verdict has no shadow; the contract stays.
    let relaxed = customer(&["id"], json!({}));
    assert_eq!(
        app.register_with("crm", "?shadow=true", &relaxed).await.0,
        200
    );
    assert!(app
        .validate(&result_check(8))
        .await
        .1
        .get("shadow")
        .is_some());
    let dropped = app
        .client
        .delete(app.url("/v1/servers/crm/tools/get_customer?shadow=true"))
        .send()
        .await
        .expect("DELETE");
    assert_eq!(dropped.status(), 200);
    let (_, verdict) = app.validate(&result_check(8)).await;
    assert!(verdict.get("shadow").is_none(), "{verdict}");
    assert_eq!(verdict["valid"], false, "the promoted contract stays");

    // A shadow for a tool not registered, or a promotion with no shadow, is refused.
    let (status, body) = app
        .register_with("crm", "?shadow=true", &json!({"tools": [{"name": "nope"}]}))
        .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (404, Some("unknown_tool")),
        "{body}"
    );
    let promoted = app
        .client
        .post(app.url("/v1/servers/crm/tools/get_customer/promote"))
        .send()
        .await
        .expect("promote");
    assert_eq!(promoted.status(), 400);
}

#[tokio::test]
async fn a_rename_is_marked_and_texts_are_kept_in_history() {
    let app = spawn_app_with(&[]).await;
    let schema =
        json!({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]});
    let (status, _) = app
        .register(
            "calc",
            &json!({"tools": [
                {"name": "add", "title": "Add", "description": "Adds two numbers.", "inputSchema": schema},
                {"name": "ping", "inputSchema": {"type": "object"}}
            ]}),
        )
        .await;
    assert_eq!(status, 200);
    let (status, answer) = app
        .register(
            "calc",
            &json!({"tools": [
                {"name": "get-sum", "description": "Adds two numbers.", "inputSchema": schema},
                {"name": "ping", "inputSchema": {"type": "object", "properties": {"x": {"type": "string"}}}}
            ]}),
        )
        .await;
    assert_eq!(status, 200, "{answer}");
    let changes = answer["changes"].as_array().expect("changes");
    let of = |tool: &str| {
        changes
            .iter()
            .find(|c| c["tool"] == tool)
            .cloned()
            .unwrap_or(Value::Null)
    };
    assert_eq!(
        (
            &of("add")["change"],
            &of("add")["class"],
            &of("add")["likely_rename"]
        ),
        (&json!("removed"), &json!("breaking"), &json!("get-sum")),
        "{answer}"
    );
    assert_eq!(of("get-sum")["likely_rename"], "add", "{answer}");
    // Another tool whose schema changed is no rename.
    assert_eq!(of("ping")["likely_rename"], Value::Null, "{answer}");

    // History keeps each version's texts.
    let (status, text) = app.get("/v1/servers/calc/tools/add/history").await;
    assert_eq!(status, 200, "{text}");
    let history: Value = serde_json::from_str(&text).expect("JSON");
    let added = &history["versions"][1];
    assert_eq!(
        (&added["title"], &added["description"]),
        (&json!("Add"), &json!("Adds two numbers.")),
        "{history}"
    );
}
