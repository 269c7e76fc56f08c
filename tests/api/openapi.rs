//! `docs/openapi.yaml` is checked against the running server: every route it documents is
//! answered with each method it lists (and only those), and its error codes are exactly the ones
//! the REST port can send.

use crate::helpers::spawn_app;
use serde::Deserialize;
use serde_json::Value;
use std::collections::BTreeSet;

const METHODS: [&str; 4] = ["get", "post", "put", "delete"];

fn openapi() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/openapi.yaml");
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let doc = serde_yaml_ng::Deserializer::from_str(&text)
        .next()
        .expect("one YAML document");
    Value::deserialize(doc).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// A documented path with its parameters filled in.
fn concrete(path: &str) -> String {
    path.replace("{server}", "crm")
        .replace("{tool}", "get_customer")
}

#[test]
fn it_is_openapi_3_1_with_one_error_schema() {
    let doc = openapi();
    let version = doc["openapi"].as_str().expect("an `openapi` version");
    assert!(version.starts_with("3.1"), "openapi {version}");
    let paths = doc["paths"].as_object().expect("paths");
    assert!(!paths.is_empty());
    let code = &doc["components"]["schemas"]["Error"];
    assert!(
        code.to_string().contains("\"enum\""),
        "components.schemas.Error holds the error-code enum"
    );
}

#[tokio::test]
async fn every_documented_route_is_answered_with_the_methods_it_lists() {
    let doc = openapi();
    let app = spawn_app().await;
    for (path, operations) in doc["paths"].as_object().expect("paths") {
        let url = app.url(&concrete(path));
        for method in METHODS {
            let documented = operations.get(method).is_some();
            let request = match method {
                "get" => app.client.get(&url),
                "post" => app.client.post(&url),
                "put" => app.client.put(&url),
                _ => app.client.delete(&url),
            };
            let response = request
                .header("content-type", "application/json")
                .body("{}")
                .send()
                .await
                .expect("request");
            let status = response.status().as_u16();
            let body: Value = response.json().await.unwrap_or(Value::Null);
            let code = body["error"]["code"].as_str().unwrap_or("");
            if documented {
                assert_ne!(status, 405, "{method} {path} is documented but refused");
                assert_ne!(
                    code, "not_found",
                    "{method} {path} is documented but unrouted"
                );
            } else {
                assert_eq!(
                    status, 405,
                    "{method} {path} is answered ({status}) but not documented"
                );
            }
        }
    }
}

#[test]
fn the_error_codes_are_exactly_those_the_rest_port_sends() {
    let doc = openapi();
    let documented: BTreeSet<String> = doc["components"]["schemas"]["Error"]["properties"]["error"]
        ["properties"]["code"]["enum"]
        .as_array()
        .or_else(|| doc["components"]["schemas"]["Error"]["properties"]["code"]["enum"].as_array())
        .expect("components.schemas.Error: the code enum")
        .iter()
        .map(|c| c.as_str().expect("a code is a string").to_owned())
        .collect();
    let sent: BTreeSet<String> = schemagate::rest::codes()
        .into_iter()
        .map(str::to_owned)
        .collect();
    assert_eq!(
        documented.difference(&sent).collect::<Vec<_>>(),
        Vec::<&String>::new(),
        "documented, never sent"
    );
    assert_eq!(
        sent.difference(&documented).collect::<Vec<_>>(),
        Vec::<&String>::new(),
        "sent, not documented"
    );
}
