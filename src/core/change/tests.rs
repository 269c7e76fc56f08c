//! The classes of schema and annotation changes, pair by pair, written from the rules (see the
//! module's documentation), with the reasons each must give. The pairs are a table in
//! tests/data/contract_changes.json.

use super::*;
use serde_json::json;

/// One pair of the table: a schema in force, a new one, and what the change must be said to be.
#[derive(serde::Deserialize)]
struct Case {
    name: String,
    part: Part,
    old: Option<Value>,
    new: Option<Value>,
    class: Class,
    /// Reasons that must be among those given, exactly.
    reasons: Vec<String>,
}

/// The table (shared with the API tests, which register each pair over REST and through the
/// gateway).
fn cases() -> Vec<Case> {
    serde_json::from_str(include_str!("../../../tests/data/contract_changes.json"))
        .expect("the table of contract changes reads")
}

#[test]
fn schema_changes_get_their_class_and_reasons() {
    let options = CompileOptions {
        assert_formats: true,
        regex_engine: RegexEngine::BoundedBacktracking,
    };
    let mut wrong = Vec::new();
    let cases = cases();
    assert!(cases.len() >= 40, "{} pairs", cases.len());
    for case in &cases {
        let change = match case.part {
            Part::Annotations => annotations_change(case.old.as_ref(), case.new.as_ref()),
            // Tool fragments: their texts.
            Part::Description => {
                fn texts(tool: Option<&Value>) -> Texts<'_> {
                    let get = |key: &str| tool.and_then(|t| t.get(key));
                    Texts {
                        title: get("title").and_then(Value::as_str),
                        description: get("description").and_then(Value::as_str),
                        annotations: get("annotations"),
                        input: get("inputSchema"),
                        output: get("outputSchema"),
                    }
                }
                description_change(&texts(case.old.as_ref()), &texts(case.new.as_ref())).unwrap_or(
                    Change::uniform(Part::Description, Class::Identical, Vec::new()),
                )
            }
            part => schema_change(case.old.as_ref(), case.new.as_ref(), part, options),
        };
        let missing: Vec<&String> = case
            .reasons
            .iter()
            .filter(|r| !change.reasons.contains(r))
            .collect();
        if change.class != case.class || !missing.is_empty() {
            wrong.push(format!(
                "{}: expected {:?} with {:?}, got {:?} with {:?}",
                case.name, case.class, missing, change.class, change.reasons
            ));
        }
        // Every breaking schema change shows a value that proves it.
        let schema = matches!(case.part, Part::Input | Part::Output);
        if schema
            && change.class == Class::Breaking
            && !change.reasons.iter().any(|r| r.starts_with("(for example"))
        {
            wrong.push(format!(
                "{}: breaking without a counterexample: {:?}",
                case.name, change.reasons
            ));
        }
        if case.class == Class::Identical {
            assert!(
                change.reasons.is_empty(),
                "{}: {:?}",
                case.name,
                change.reasons
            );
        }
    }
    assert!(
        wrong.is_empty(),
        "{} of {} pairs:\n{}",
        wrong.len(),
        cases.len(),
        wrong.join("\n")
    );
}

#[test]
fn annotation_changes_are_read_against_mcps_defaults() {
    use Class::*;
    const MORE: &str = " (the tool claims more safety: a host may stop asking before it runs it)";
    for (old, new, class, reason) in [
        // Claims of more safety: breaking.
        (
            json!({}),
            json!({"destructiveHint": false}),
            Breaking,
            format!("/destructiveHint: absent (true) -> false{MORE}"),
        ),
        (
            json!({"destructiveHint": true}),
            json!({"destructiveHint": false}),
            Breaking,
            format!("/destructiveHint: true -> false{MORE}"),
        ),
        (
            json!({}),
            json!({"readOnlyHint": true}),
            Breaking,
            format!("/readOnlyHint: absent (false) -> true{MORE}"),
        ),
        (
            json!({"readOnlyHint": false}),
            json!({"readOnlyHint": true}),
            Breaking,
            format!("/readOnlyHint: false -> true{MORE}"),
        ),
        (
            json!({"openWorldHint": true}),
            json!({"openWorldHint": false}),
            Breaking,
            format!("/openWorldHint: true -> false{MORE}"),
        ),
        (
            json!({}),
            json!({"openWorldHint": false}),
            Breaking,
            format!("/openWorldHint: absent (true) -> false{MORE}"),
        ),
        (
            json!({"idempotentHint": false}),
            json!({"idempotentHint": true}),
            Breaking,
            format!("/idempotentHint: false -> true{MORE}"),
        ),
        // Claims of less: compatible.
        (
            json!({"destructiveHint": false}),
            json!({"destructiveHint": true}),
            Compatible,
            "/destructiveHint: false -> true".to_owned(),
        ),
        (
            json!({"destructiveHint": false}),
            json!({}),
            Compatible,
            "/destructiveHint: false -> absent (true)".to_owned(),
        ),
        (
            json!({"readOnlyHint": true}),
            json!({}),
            Compatible,
            "/readOnlyHint: true -> absent (false)".to_owned(),
        ),
        (
            json!({"readOnlyHint": "yes"}),
            json!({"readOnlyHint": true}),
            Compatible,
            "/readOnlyHint: \"yes\" -> true".to_owned(),
        ),
    ] {
        let change = annotations_change(Some(&old), Some(&new));
        assert_eq!(
            (change.class, change.reasons.as_slice()),
            (class, [reason].as_slice()),
            "{old} -> {new}"
        );
    }
    // A default spelled out or dropped claims the same.
    for (old, new) in [
        (json!({}), json!({"destructiveHint": true})),
        (json!({"destructiveHint": true}), json!({})),
        (json!({"openWorldHint": true}), json!({})),
        (
            json!({}),
            json!({"readOnlyHint": false, "idempotentHint": false}),
        ),
        (
            json!({"readOnlyHint": true, "title": "T"}),
            json!({"title": "T", "readOnlyHint": true}),
        ),
        // A title is text, the `description` part's.
        (json!({"title": "Get"}), json!({"title": "Get a customer"})),
    ] {
        let change = annotations_change(Some(&old), Some(&new));
        assert_eq!(
            change.class, Identical,
            "{old} -> {new}: {:?}",
            change.reasons
        );
    }
    assert_eq!(annotations_change(None, Some(&json!({}))).class, Identical);
}

#[test]
fn long_values_in_reasons_leave_out_whole_members_never_half_a_token() {
    let big = json!({
        "type": "object",
        "description": "a customer as the CRM keeps it, with every field it may have",
        "properties": {
            "id": {"type": "integer"},
            "email": {"type": "string", "format": "email"},
            "name": {"type": "string", "maxLength": 200}
        },
        "required": ["id", "email", "name"]
    });
    let given = reasons::between(&json!({"const": 1}), &json!({"const": big}));
    let reason = given
        .iter()
        .find(|r| r.starts_with("/const: 1 -> "))
        .unwrap_or_else(|| panic!("{given:?}"));
    let quoted = reason.trim_start_matches("/const: 1 -> ");
    assert!(quoted.chars().count() <= 100, "bounded: {quoted}");
    assert!(quoted.contains("...") && quoted.ends_with('}'), "{quoted}");
    // Every string is closed and every bracket matched: nothing is cut in two.
    let mut depth = 0i32;
    let (mut in_string, mut escaped) = (false, false);
    for c in quoted.chars() {
        match (in_string, escaped, c) {
            (true, true, _) => escaped = false,
            (true, false, '\\') => escaped = true,
            (true, false, '"') => in_string = false,
            (true, false, _) => {}
            (false, _, '"') => in_string = true,
            (false, _, '{' | '[') => depth += 1,
            (false, _, '}' | ']') => depth -= 1,
            _ => {}
        }
        assert!(depth >= 0, "{quoted}");
    }
    assert!(!in_string && depth == 0, "{quoted}");
    assert!(
        quoted.starts_with(r#"{"description":"a customer"#),
        "{quoted}"
    );
}

#[test]
fn reasons_are_bounded_and_pointers_escaped() {
    let old = json!({"properties": {"a/b~c": {"type": "string"}}});
    let new = json!({"properties": {"a/b~c": {"type": "integer"}}});
    assert_eq!(
        reasons::between(&old, &new),
        [
            "/properties/a~1b~0c/type: added \"integer\"",
            "/properties/a~1b~0c/type: removed \"string\""
        ]
    );
    let many: serde_json::Map<String, Value> = (0..100)
        .map(|i| (format!("p{i}"), json!({"type": "string"})))
        .collect();
    let given = reasons::between(&json!({}), &json!({"properties": many}));
    assert_eq!(given.len(), 65);
    assert_eq!(given[64], "... and 36 more differences");
    let mut deep = json!({"type": "string"});
    for _ in 0..200 {
        deep = json!({"items": deep});
    }
    let given = reasons::between(&deep, &json!({"items": {}}));
    assert!(!given.is_empty());
}

#[test]
fn each_reason_has_the_class_of_what_it_alone_does() {
    let options = CompileOptions {
        assert_formats: true,
        regex_engine: RegexEngine::BoundedBacktracking,
    };
    let classes = |old: Value, new: Value, part: Part| {
        let change = schema_change(Some(&old), Some(&new), part, options);
        assert_eq!(change.reasons.len(), change.reason_classes.len());
        change
            .reasons
            .into_iter()
            .zip(change.reason_classes)
            .filter(|(r, _)| !r.starts_with('('))
            .collect::<Vec<_>>()
    };
    use Class::*;
    let object = |required: &[&str], max: u64| {
        json!({"type": "object", "required": required,
            "properties": {"a": {"type": "string", "maxLength": max}, "b": {"type": "string"}}})
    };
    // An output: admitting more is breaking, less compatible; for an input, the other way.
    assert_eq!(
        classes(object(&["a"], 5), object(&["b"], 3), Part::Output),
        vec![
            ("/properties/a/maxLength: 5 -> 3".to_owned(), Compatible),
            ("/properties/b: added to required".to_owned(), Compatible),
            ("/properties/a: removed from required".to_owned(), Breaking),
        ]
    );
    assert_eq!(
        classes(object(&["a"], 5), object(&["b"], 3), Part::Input),
        vec![
            ("/properties/a/maxLength: 5 -> 3".to_owned(), Breaking),
            ("/properties/b: added to required".to_owned(), Breaking),
            (
                "/properties/a: removed from required".to_owned(),
                Compatible
            ),
        ]
    );
    // Under `not`, an edit does the contrary; under `oneOf`, it cannot be told (the part's class).
    let change = classes(
        json!({"not": {"type": "string", "maxLength": 5}}),
        json!({"not": {"type": "string", "maxLength": 3}}),
        Part::Output,
    );
    assert_eq!(
        change,
        vec![("/not/maxLength: 5 -> 3".to_owned(), Breaking)]
    );
    let old = json!({"oneOf": [{"type": "string", "maxLength": 5}, {"type": "integer"}]});
    let new = json!({"oneOf": [{"type": "string", "maxLength": 3}, {"type": "integer"}]});
    let whole = schema_change(Some(&old), Some(&new), Part::Output, options).class;
    assert_eq!(
        classes(old, new, Part::Output),
        vec![("/oneOf/0/maxLength: 5 -> 3".to_owned(), whole)]
    );
}
