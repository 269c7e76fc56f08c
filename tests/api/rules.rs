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
