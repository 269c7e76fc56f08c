//! The policy's rules beside the schemas (`[[rules]]`, CEL) over REST: a rule that does not hold
//! is an error of the verdict, judged in the same pass and under the same tier, counted by its
//! name; one that cannot be evaluated fails too; a broken rule refuses the policy and the one in
//! force stays.

use crate::helpers::TestApp;
use serde_json::{json, Value};

const POLICY: &str = r#"
[[rules]]
name = "transfer_limit"
server = "bank-*"
tool = "transfer"
payload = "arguments"
expr = "arguments.amount <= 1000 || caller.name == 'treasury'"
message = "amount above 1,000 needs a person to approve it"
"#;

fn transfer(arguments: Value) -> Value {
    json!({"server": "bank-eu", "tool": "transfer",
           "schema": {"type": "object", "properties": {"amount": {"type": "number"}, "to": {"type": "string"}}},
           "arguments": arguments})
}

#[tokio::test]
async fn a_rule_that_does_not_hold_fails_the_verdict_as_a_schema_error_would() {
    let app = TestApp::with_policy(POLICY, &[]).await;
    let (status, v) = app
        .validate(&transfer(json!({"amount": 10, "to": "ann"})))
        .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(
        (v["valid"].clone(), v["action"].clone()),
        (json!(true), json!("pass")),
        "{v}"
    );

    let (_, v) = app
        .validate(&transfer(json!({"amount": 5000, "to": "ann"})))
        .await;
    assert_eq!(
        (v["valid"].clone(), v["action"].clone()),
        (json!(false), json!("reject")),
        "{v}"
    );
    let error = &v["errors"][0];
    assert_eq!(error["keyword"], "rule", "{v}");
    assert_eq!(error["schema_path"], "transfer_limit", "{v}");
    assert!(
        v["feedback"]
            .as_str()
            .unwrap_or("")
            .contains("amount above 1,000 needs a person to approve it"),
        "{v}"
    );

    // A member the expression reads is missing: not evaluated, so not a pass.
    let (_, v) = app.validate(&transfer(json!({"to": "ann"}))).await;
    assert_eq!(v["valid"], false, "{v}");
    assert!(
        v["errors"][0]["message"]
            .as_str()
            .unwrap_or("")
            .contains("could not be evaluated"),
        "{v}"
    );

    // Another server's tool of the same name: the rule does not apply.
    let mut other = transfer(json!({"amount": 5000}));
    other["server"] = json!("crm");
    assert_eq!(app.validate(&other).await.1["valid"], true);

    let counted = app
        .metric(r#"schemagate_field_failures_total{server="bank-eu",tool="transfer",payload="arguments",path="transfer_limit",keyword="rule"}"#)
        .await;
    assert_eq!(counted, 2.0);
}

#[tokio::test]
async fn a_broken_rule_refuses_the_policy_with_its_place_and_the_one_in_force_stays() {
    let app = TestApp::with_policy(POLICY, &[]).await;
    let (_, v) = app.validate(&transfer(json!({"amount": 5000}))).await;
    assert_eq!(v["errors"][0]["keyword"], "rule", "{v}");
    app.write_policy(&POLICY.replace("arguments.amount <= 1000", "arguments.amount <= "));
    let (status, v) = app.post_raw("/v1/admin/reload-policy", "").await;
    assert_eq!(status, 422, "{v}");
    let message = v["error"]["message"].as_str().unwrap_or("");
    assert!(
        message.contains("transfer_limit") && message.contains("line 7, column"),
        "{message}"
    );
    let (_, v) = app.validate(&transfer(json!({"amount": 5000}))).await;
    assert_eq!(
        v["errors"][0]["keyword"], "rule",
        "the rule in force still judges: {v}"
    );
}

/// A token file of two callers: `treasury` (scopes check and register) and `agent` (check).
fn tokens() -> tempfile::NamedTempFile {
    use sha2::{Digest, Sha256};
    let sha = |token: &str| -> String {
        Sha256::digest(token.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    };
    let file = tempfile::NamedTempFile::new().expect("token file");
    std::fs::write(
        file.path(),
        format!(
            "[[tokens]]\nname = \"treasury\"\nsha256 = \"{}\"\nscopes = [\"check\", \"register\"]\n\n[[tokens]]\nname = \"agent\"\nsha256 = \"{}\"\nscopes = [\"check\"]\n",
            sha("treasury-token"),
            sha("agent-token")
        ),
    )
    .expect("write the tokens");
    file
}

#[tokio::test]
async fn over_grpc_a_rule_reads_the_callers_name_and_scopes() {
    let tokens = tokens();
    let path = tokens.path().to_str().expect("UTF-8");
    let policy = POLICY.replace(
        "caller.name == 'treasury'",
        "caller.scopes.exists(s, s == 'register')",
    );
    let app = TestApp::with_policy(&policy, &["--auth-tokens", path]).await;
    let mut grpc = crate::helpers::client(&app).await;
    let check = crate::helpers::grpc_check(&transfer(json!({"amount": 5000, "to": "ann"})));
    let as_caller = |token: &str| {
        let mut request = tonic::Request::new(check.clone());
        let value = format!("Bearer {token}").parse().expect("ASCII");
        request.metadata_mut().insert("authorization", value);
        request
    };
    let treasury = grpc
        .validate(as_caller("treasury-token"))
        .await
        .expect("a verdict")
        .into_inner();
    assert!(treasury.errors.is_empty(), "{treasury:?}");
    let agent = grpc
        .validate(as_caller("agent-token"))
        .await
        .expect("a verdict")
        .into_inner();
    let rest = crate::helpers::as_rest(&agent);
    assert_eq!(
        (rest["valid"].clone(), rest["action"].clone()),
        (json!(false), json!("reject")),
        "{rest}"
    );
    assert_eq!(agent.errors[0].keyword, "rule");
    assert_eq!(agent.errors[0].schema_path, "transfer_limit");
}

#[tokio::test]
async fn a_million_element_argument_under_a_rule_is_refused_within_the_bound() {
    let app = TestApp::with_policy(
        "[[rules]]\nname = \"small_batches\"\ntool = \"import\"\npayload = \"arguments\"\nexpr = \"arguments.rows.all(r, r >= 0)\"\n",
        &[],
    )
    .await;
    let rows: Vec<u32> = (0..1_000_000).collect();
    let (status, v) = app
        .validate(&json!({"server": "crm", "tool": "import", "schema": {"type": "object"}, "arguments": {"rows": rows}}))
        .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["valid"], false, "{v}");
    let message = v["errors"][0]["message"].as_str().unwrap_or("");
    assert!(message.contains("more than 100000 values"), "{message}");
    // The rule judged the rest as usual.
    let (_, v) = app
        .validate(&json!({"server": "crm", "tool": "import", "schema": {"type": "object"}, "arguments": {"rows": [1, 2]}}))
        .await;
    assert_eq!(v["valid"], true, "{v}");
}

#[tokio::test]
async fn a_result_past_its_budget_is_a_finding_and_under_untrusted_a_failure() {
    let policy =
        "max_result_bytes = 200\n\n[[servers]]\nmatch = \"partner\"\ntier = \"semi-trusted\"\n";
    let app = TestApp::with_policy(policy, &[]).await;
    let mut grpc = crate::helpers::client(&app).await;
    let rows: Vec<String> = (0..20).map(|i| format!("row {i}")).collect();
    let result = |server: &str, rows: &[String]| {
        crate::helpers::grpc_check(&json!({"server": server, "tool": "list",
            "schema": {"type": "object"},
            "result": {"content": [], "structuredContent": {"rows": rows}}}))
    };
    let untrusted = grpc
        .validate(result("stranger", &rows))
        .await
        .expect("a verdict")
        .into_inner();
    let rest = crate::helpers::as_rest(&untrusted);
    assert_eq!(
        (rest["valid"].clone(), rest["action"].clone()),
        (json!(false), json!("reject")),
        "{rest}"
    );
    assert_eq!(untrusted.errors[0].keyword, "result_too_large");
    assert!(
        untrusted.errors[0]
            .message
            .contains("past the budget of 200"),
        "{rest}"
    );
    let partner = grpc
        .validate(result("partner", &rows))
        .await
        .expect("a verdict")
        .into_inner();
    assert!(partner.errors.is_empty(), "{partner:?}");
    assert_eq!(partner.findings[0].kind, "result_too_large");
    let small = grpc
        .validate(result("stranger", &rows[..2]))
        .await
        .expect("a verdict")
        .into_inner();
    assert!(
        small.errors.is_empty() && small.findings.is_empty(),
        "{small:?}"
    );
}

#[tokio::test]
async fn without_tokens_a_caller_holds_no_scope_a_rule_could_lean_on() {
    let policy = POLICY.replace(
        "caller.name == 'treasury'",
        "caller.scopes.exists(s, s == 'admin')",
    );
    let app = TestApp::with_policy(&policy, &[]).await;
    let (_, v) = app.validate(&transfer(json!({"amount": 5000}))).await;
    assert_eq!(v["errors"][0]["keyword"], "rule", "anyone is no admin: {v}");
}
