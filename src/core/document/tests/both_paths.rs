//! Both paths, the document representation and serde_json's `Value`, give the same verdicts:
//! valid or not, and each error's keyword, instance path, schema path and message.

use super::*;
use proptest::prelude::*;

fn instance() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        (-5i64..5).prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        (-10.0f64..10.0).prop_map(Value::from),
        "[a-c]{0,3}".prop_map(Value::String),
        Just(json!("2024-01-02")),
        Just(json!("a@b.example")),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("[a-c]", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn schema() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(json!({"type": "integer"})),
        Just(json!({"type": ["string", "null"]})),
        Just(json!({"minimum": 0})),
        Just(json!({"exclusiveMaximum": 2.5})),
        Just(json!({"multipleOf": 2})),
        Just(json!({"multipleOf": 0.5})),
        Just(json!({"maxLength": 2})),
        Just(json!({"pattern": "^a"})),
        Just(json!({"format": "date"})),
        Just(json!({"format": "email"})),
        Just(json!({"const": 1})),
        Just(json!({"enum": [null, "a", 2, [1]]})),
        Just(json!({"uniqueItems": true})),
        Just(json!({"minItems": 2})),
        Just(json!({"required": ["a"]})),
        Just(json!({"maxProperties": 1})),
        Just(json!({"propertyNames": {"pattern": "^[ab]$"}})),
        Just(json!(true)),
        Just(json!(false)),
    ];
    leaf.prop_recursive(3, 16, 3, |inner| {
        prop_oneof![
            (inner.clone(), inner.clone())
                .prop_map(|(a, b)| json!({"properties": {"a": a, "b": b}})),
            inner.clone().prop_map(|s| json!({"items": s})),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| json!({"anyOf": [a, b]})),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| json!({"oneOf": [a, b]})),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| json!({"allOf": [a, b]})),
            inner.clone().prop_map(|s| json!({"not": s})),
            inner
                .clone()
                .prop_map(|s| json!({"additionalProperties": s})),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| json!({"if": a, "then": b})),
            inner.clone().prop_map(|s| json!({"contains": s})),
            inner.clone().prop_map(|s| json!({
                "$defs": {"d": s}, "properties": {"a": {"$ref": "#/$defs/d"}}
            })),
            inner.prop_map(|s| json!({
                "$id": "https://example.test/s",
                "$dynamicAnchor": "node",
                "properties": {"a": {"$dynamicRef": "#node"}},
                "unevaluatedProperties": s
            })),
        ]
    })
}

type Errors = Vec<(String, String, String, String)>;

fn errors<'a>(iter: impl Iterator<Item = jsonschema::ValidationError<'a>>) -> Errors {
    let mut found: Errors = iter
        .map(|e| {
            (
                e.kind().keyword().to_owned(),
                e.instance_path().as_str().to_owned(),
                e.schema_path().as_str().to_owned(),
                // The message, which shows the instance (built lazily on our side).
                e.to_string(),
            )
        })
        .collect();
    found.sort();
    found
}

/// Both verdicts on `instance` under `schema`.
fn both(schema: &Value, text: &str) -> Option<((bool, Errors), (bool, Errors))> {
    let theirs = jsonschema::options()
        .should_validate_formats(true)
        .build(schema)
        .ok()?;
    let ours = jsonschema::options_for::<DocumentJson>()
        .should_validate_formats(true)
        .build(schema)
        .ok()?;
    let value: Value = serde_json::from_str(text).ok()?;
    let doc = Document::read(text.as_bytes(), 64).ok()?;
    Some((
        (theirs.is_valid(&value), errors(theirs.iter_errors(&value))),
        (
            ours.is_valid(doc.root()),
            errors(ours.iter_errors(doc.root())),
        ),
    ))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn the_same_verdict_as_serde_json_values(schema in schema(), instance in instance()) {
        let text = instance.to_string();
        if let Some((theirs, ours)) = both(&schema, &text) {
            prop_assert_eq!(ours, theirs, "{} vs {}", schema, text);
        }
    }
}

/// The reference corpus, when it is there: every result's structuredContent under its
/// tool's outputSchema, and every tool's inputSchema over the same documents.
#[test]
fn the_same_verdict_on_the_reference_corpus() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus");
    let (Ok(tools), Ok(results)) = (
        std::fs::read_to_string(dir.join("tools.json")),
        std::fs::read_to_string(dir.join("results.jsonl")),
    ) else {
        eprintln!("no reference corpus at {}: skipped", dir.display());
        return;
    };
    let tools: Value = serde_json::from_str(&tools).expect("tools.json");
    let mut schemas = std::collections::HashMap::new();
    for (server, list) in tools["servers"].as_object().into_iter().flatten() {
        for tool in list["tools"].as_array().into_iter().flatten() {
            if let (Some(name), Some(schema)) = (tool["name"].as_str(), tool.get("outputSchema")) {
                schemas.insert((server.clone(), name.to_owned()), schema.clone());
            }
        }
    }
    let mut compared = 0;
    for line in results.lines() {
        let Ok(check) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        let (Some(server), Some(tool)) = (check["server"].as_str(), check["tool"].as_str()) else {
            continue;
        };
        let Some(schema) = schemas.get(&(server.to_owned(), tool.to_owned())) else {
            continue;
        };
        let Some(structured) = check["result"].get("structuredContent") else {
            continue;
        };
        if let Some((theirs, ours)) = both(schema, &structured.to_string()) {
            assert_eq!(ours, theirs, "{server}/{tool}: {structured}");
            compared += 1;
        }
    }
    assert!(compared > 0, "the corpus held checks to compare");
    eprintln!("{compared} corpus checks: the same verdicts");
}
