//! The classes of schema and annotation changes, pair by pair, written from the rules (see the
//! module's documentation), with the reasons each must give.

use super::*;
use serde_json::json;

struct Case {
    name: &'static str,
    part: Part,
    old: Option<Value>,
    new: Option<Value>,
    class: Class,
    /// Reasons that must be among those given, exactly.
    reasons: &'static [&'static str],
}

fn case(
    name: &'static str,
    part: Part,
    old: Value,
    new: Value,
    class: Class,
    reasons: &'static [&'static str],
) -> Case {
    Case {
        name,
        part,
        old: Some(old),
        new: Some(new),
        class,
        reasons,
    }
}

fn object(properties: Value, required: &[&str]) -> Value {
    json!({"type": "object", "properties": properties, "required": required})
}

fn closed(properties: Value) -> Value {
    json!({"type": "object", "properties": properties, "additionalProperties": false})
}

fn cases() -> Vec<Case> {
    use Class::*;
    use Part::*;
    let customer = || json!({"id": {"type": "integer"}, "email": {"type": "string"}});
    let user = |required: &[&str]| {
        json!({
            "$defs": {"User": {"type": "object", "properties": {"id": {"type": "integer"}, "email": {"type": "string"}}, "required": required}},
            "type": "object",
            "properties": {"user": {"$ref": "#/$defs/User"}}
        })
    };
    vec![
        case(
            "the same schema",
            Output,
            object(customer(), &["id"]),
            object(customer(), &["id"]),
            Identical,
            &[],
        ),
        case(
            "key order and a description",
            Output,
            json!({"type": "object", "required": ["id"], "properties": {"id": {"type": "integer"}}}),
            json!({"properties": {"id": {"description": "the id", "type": "integer"}}, "required": ["id"], "type": "object", "title": "Customer"}),
            Identical,
            &[],
        ),
        case(
            "output: a field now required",
            Output,
            object(customer(), &["id"]),
            object(customer(), &["id", "email"]),
            Compatible,
            &["/properties/email: added to required"],
        ),
        case(
            "output: a field no longer required",
            Output,
            object(customer(), &["id", "email"]),
            object(customer(), &["id"]),
            Breaking,
            &["/properties/email: removed from required"],
        ),
        case(
            "output: null no longer a type",
            Output,
            json!({"type": ["string", "null"]}),
            json!({"type": "string"}),
            Compatible,
            &["/type: removed \"null\""],
        ),
        case(
            "output: null now a type",
            Output,
            json!({"type": "string"}),
            json!({"type": ["string", "null"]}),
            Breaking,
            &["/type: added \"null\""],
        ),
        case(
            "output: integer now number",
            Output,
            json!({"type": "integer"}),
            json!({"type": "number"}),
            Breaking,
            &["/type: added \"number\"", "/type: removed \"integer\""],
        ),
        case(
            "output: number now integer",
            Output,
            json!({"type": "number"}),
            json!({"type": "integer"}),
            Compatible,
            &[],
        ),
        case(
            "output, open model: a property added",
            Output,
            json!({"type": "object", "properties": {"a": {"type": "string"}}}),
            json!({"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "integer"}}}),
            Compatible,
            &["/properties/b: added"],
        ),
        case(
            "output, open model: a property removed",
            Output,
            json!({"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "integer"}}}),
            json!({"type": "object", "properties": {"a": {"type": "string"}}}),
            Breaking,
            &["/properties/b: removed"],
        ),
        case(
            "output, closed model: a property added",
            Output,
            closed(json!({"a": {"type": "string"}})),
            closed(json!({"a": {"type": "string"}, "b": {"type": "integer"}})),
            Breaking,
            &["/properties/b: added"],
        ),
        case(
            "output, closed model: a property removed",
            Output,
            closed(json!({"a": {"type": "string"}, "b": {"type": "integer"}})),
            closed(json!({"a": {"type": "string"}})),
            Compatible,
            &["/properties/b: removed"],
        ),
        case(
            "output: the model closed",
            Output,
            json!({"type": "object", "properties": {"a": {"type": "string"}}}),
            closed(json!({"a": {"type": "string"}})),
            Compatible,
            &["/additionalProperties: added false"],
        ),
        case(
            "output: the model opened",
            Output,
            closed(json!({"a": {"type": "string"}})),
            json!({"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": true}),
            Breaking,
            &["/additionalProperties: false -> true"],
        ),
        case(
            "output: additional properties of more types",
            Output,
            json!({"type": "object", "additionalProperties": {"type": "string"}}),
            json!({"type": "object", "additionalProperties": {"type": ["string", "number"]}}),
            Breaking,
            &["/additionalProperties/type: added \"number\""],
        ),
        case(
            "output: an enum value added",
            Output,
            json!({"type": "object", "properties": {"plan": {"enum": ["free", "pro"]}}}),
            json!({"type": "object", "properties": {"plan": {"enum": ["free", "pro", "trial"]}}}),
            Breaking,
            &["/properties/plan/enum: added \"trial\""],
        ),
        case(
            "output: an enum value removed",
            Output,
            json!({"enum": ["free", "pro", "trial"]}),
            json!({"enum": ["free", "pro"]}),
            Compatible,
            &["/enum: removed \"trial\""],
        ),
        case(
            "output: a const changed",
            Output,
            json!({"const": true}),
            json!({"const": false}),
            Breaking,
            &["/const: true -> false"],
        ),
        case(
            "output: a const added",
            Output,
            json!({"type": "boolean"}),
            json!({"type": "boolean", "const": true}),
            Compatible,
            &["/const: added true"],
        ),
        case(
            "output: a maximum raised",
            Output,
            json!({"type": "integer", "maximum": 10}),
            json!({"type": "integer", "maximum": 20}),
            Breaking,
            &["/maximum: 10 -> 20"],
        ),
        case(
            "output: a maximum lowered",
            Output,
            json!({"type": "integer", "maximum": 20}),
            json!({"type": "integer", "maximum": 10}),
            Compatible,
            &["/maximum: 20 -> 10"],
        ),
        case(
            "output: a minimum lowered",
            Output,
            json!({"type": "number", "minimum": 0}),
            json!({"type": "number", "minimum": -1}),
            Breaking,
            &["/minimum: 0 -> -1"],
        ),
        case(
            "output: an exclusive maximum added",
            Output,
            json!({"type": "number"}),
            json!({"type": "number", "exclusiveMaximum": 100}),
            Compatible,
            &["/exclusiveMaximum: added 100"],
        ),
        case(
            "output: a multipleOf added",
            Output,
            json!({"type": "integer"}),
            json!({"type": "integer", "multipleOf": 5}),
            Compatible,
            &["/multipleOf: added 5"],
        ),
        case(
            "output: a longer maxLength",
            Output,
            json!({"type": "string", "maxLength": 10}),
            json!({"type": "string", "maxLength": 50}),
            Breaking,
            &["/maxLength: 10 -> 50"],
        ),
        case(
            "output: a longer minLength",
            Output,
            json!({"type": "string", "minLength": 1}),
            json!({"type": "string", "minLength": 3}),
            Compatible,
            &["/minLength: 1 -> 3"],
        ),
        case(
            "output: a different pattern",
            Output,
            json!({"type": "string", "pattern": "^[a-z]+$"}),
            json!({"type": "string", "pattern": "^[a-z0-9]+$"}),
            Unknown,
            &["/pattern: \"^[a-z]+$\" -> \"^[a-z0-9]+$\" (only identical patterns compare)"],
        ),
        case(
            "output: a pattern removed",
            Output,
            json!({"type": "string", "pattern": "^a"}),
            json!({"type": "string"}),
            Breaking,
            &["/pattern: removed (was \"^a\") (only identical patterns compare)"],
        ),
        case(
            "output: items of more types",
            Output,
            json!({"type": "array", "items": {"type": "string"}}),
            json!({"type": "array", "items": {}}),
            Breaking,
            &["/items/type: removed (any type now)"],
        ),
        case(
            "output: items of fewer types",
            Output,
            json!({"type": "array", "items": {"type": ["string", "null"]}}),
            json!({"type": "array", "items": {"type": "string"}}),
            Compatible,
            &["/items/type: removed \"null\""],
        ),
        case(
            "output: more items allowed",
            Output,
            json!({"type": "array", "maxItems": 3}),
            json!({"type": "array", "maxItems": 5}),
            Breaking,
            &["/maxItems: 3 -> 5"],
        ),
        case(
            "output: a tuple's first item narrowed",
            Output,
            json!({"type": "array", "prefixItems": [{"type": ["string", "null"]}, {"type": "integer"}]}),
            json!({"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}]}),
            Compatible,
            &["/prefixItems/0/type: removed \"null\""],
        ),
        case(
            "output: a tuple item added",
            Output,
            json!({"type": "array", "prefixItems": [{"type": "string"}]}),
            json!({"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}]}),
            Compatible,
            &["/prefixItems/1: added"],
        ),
        case(
            "output: a local definition narrowed",
            Output,
            user(&["id"]),
            user(&["id", "email"]),
            Compatible,
            &["/$defs/User/properties/email: added to required"],
        ),
        case(
            "output: a local definition widened",
            Output,
            user(&["id", "email"]),
            user(&["id"]),
            Breaking,
            &["/$defs/User/properties/email: removed from required"],
        ),
        case(
            "output: an anyOf member added",
            Output,
            json!({"anyOf": [{"type": "string"}, {"type": "integer"}]}),
            json!({"anyOf": [{"type": "string"}, {"type": "integer"}, {"type": "null"}]}),
            Breaking,
            &["/anyOf/2: member added"],
        ),
        case(
            "output: an anyOf member removed",
            Output,
            json!({"anyOf": [{"type": "string"}, {"type": "integer"}, {"type": "null"}]}),
            json!({"anyOf": [{"type": "string"}, {"type": "integer"}]}),
            Compatible,
            &["/anyOf: member 2 of the old schema removed"],
        ),
        case(
            "output: an anyOf member changed in place",
            Output,
            json!({"anyOf": [{"type": "string", "maxLength": 5}, {"type": "integer"}]}),
            json!({"anyOf": [{"type": "string", "maxLength": 9}, {"type": "integer"}]}),
            Breaking,
            &["/anyOf/0/maxLength: 5 -> 9"],
        ),
        case(
            "output: a oneOf member added",
            Output,
            json!({"oneOf": [{"type": "string"}, {"type": "integer"}]}),
            json!({"oneOf": [{"type": "string"}, {"type": "integer"}, {"type": "boolean"}]}),
            Breaking,
            &["/oneOf/2: member added"],
        ),
        case(
            "output: an allOf member added",
            Output,
            json!({"allOf": [{"type": "object"}]}),
            json!({"allOf": [{"type": "object"}, {"required": ["id"]}]}),
            Compatible,
            &["/allOf/1: member added"],
        ),
        case(
            "output: a format added",
            Output,
            json!({"type": "string"}),
            json!({"type": "string", "format": "email"}),
            Compatible,
            &["/format: added \"email\""],
        ),
        case(
            "output: a format removed",
            Output,
            json!({"type": "string", "format": "email"}),
            json!({"type": "string"}),
            Breaking,
            &["/format: removed (was \"email\")"],
        ),
        case(
            "output: a nested field no longer required",
            Output,
            json!({"type": "object", "properties": {"address": {"type": "object", "properties": {"zip": {"type": "string"}}, "required": ["zip"]}}}),
            json!({"type": "object", "properties": {"address": {"type": "object", "properties": {"zip": {"type": "string"}}}}}),
            Breaking,
            &["/properties/address/properties/zip: removed from required"],
        ),
        Case {
            name: "output: the schema removed",
            part: Output,
            old: Some(json!({"type": "object"})),
            new: None,
            class: Breaking,
            reasons: &["(root): {\"type\":\"object\"} -> true"],
        },
        Case {
            name: "output: a schema declared",
            part: Output,
            old: None,
            new: Some(json!({"type": "object"})),
            class: Compatible,
            reasons: &["(root): true -> {\"type\":\"object\"}"],
        },
        case(
            "output: a construct the analysis does not model",
            Output,
            json!({"type": "object", "dependencies": {"a": ["b"]}, "unevaluatedProperties": false}),
            json!({"type": "object", "dependencies": {"a": ["c"]}, "unevaluatedProperties": false}),
            Unknown,
            &["/dependencies: {\"a\":[\"b\"]} -> {\"a\":[\"c\"]}"],
        ),
        case(
            "input: an argument now required",
            Input,
            object(customer(), &["id"]),
            object(customer(), &["id", "email"]),
            Breaking,
            &["/properties/email: added to required"],
        ),
        case(
            "input: an argument no longer required",
            Input,
            object(customer(), &["id", "email"]),
            object(customer(), &["id"]),
            Compatible,
            &["/properties/email: removed from required"],
        ),
        case(
            "input: an enum value added",
            Input,
            json!({"enum": ["a", "b"]}),
            json!({"enum": ["a", "b", "c"]}),
            Compatible,
            &["/enum: added \"c\""],
        ),
        case(
            "input: an enum value removed",
            Input,
            json!({"enum": ["a", "b", "c"]}),
            json!({"enum": ["a", "b"]}),
            Breaking,
            &["/enum: removed \"c\""],
        ),
        case(
            "input: a maximum lowered",
            Input,
            json!({"type": "integer", "maximum": 20}),
            json!({"type": "integer", "maximum": 10}),
            Breaking,
            &["/maximum: 20 -> 10"],
        ),
        case(
            "input, closed model: an optional argument added",
            Input,
            closed(json!({"a": {"type": "string"}})),
            closed(json!({"a": {"type": "string"}, "b": {"type": "integer"}})),
            Compatible,
            &["/properties/b: added"],
        ),
        case(
            "input: the model closed",
            Input,
            json!({"type": "object", "properties": {"a": {"type": "string"}}}),
            closed(json!({"a": {"type": "string"}})),
            Breaking,
            &["/additionalProperties: added false"],
        ),
        case(
            "input: a type widened",
            Input,
            json!({"type": "integer"}),
            json!({"type": ["integer", "string"]}),
            Compatible,
            &["/type: added \"string\""],
        ),
    ]
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
        let change = schema_change(case.old.as_ref(), case.new.as_ref(), case.part, options);
        let missing: Vec<&&str> = case
            .reasons
            .iter()
            .filter(|r| !change.reasons.iter().any(|given| given == *r))
            .collect();
        if change.class != case.class || !missing.is_empty() {
            wrong.push(format!(
                "{}: expected {:?} with {:?}, got {:?} with {:?}",
                case.name, case.class, missing, change.class, change.reasons
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
fn annotation_changes_that_weaken_a_safety_claim_are_breaking() {
    use Class::*;
    for (old, new, class, reason) in [
        (
            json!({"destructiveHint": true}),
            json!({"destructiveHint": false}),
            Breaking,
            "/destructiveHint: true -> false (a safety claim weakened)",
        ),
        (
            json!({"destructiveHint": true}),
            json!({}),
            Breaking,
            "/destructiveHint: true -> absent (a safety claim weakened)",
        ),
        (
            json!({}),
            json!({"readOnlyHint": true}),
            Breaking,
            "/readOnlyHint: absent -> true (a safety claim weakened)",
        ),
        (
            json!({"readOnlyHint": false}),
            json!({"readOnlyHint": true}),
            Breaking,
            "/readOnlyHint: false -> true (a safety claim weakened)",
        ),
        (
            json!({"openWorldHint": true}),
            json!({"openWorldHint": false}),
            Breaking,
            "/openWorldHint: true -> false (a safety claim weakened)",
        ),
        (
            json!({"title": "Get"}),
            json!({"title": "Get a customer"}),
            Compatible,
            "/title: \"Get\" -> \"Get a customer\"",
        ),
        (
            json!({"destructiveHint": false}),
            json!({"destructiveHint": true}),
            Compatible,
            "/destructiveHint: false -> true",
        ),
        (
            json!({"idempotentHint": false}),
            json!({"idempotentHint": true}),
            Compatible,
            "/idempotentHint: false -> true",
        ),
    ] {
        let change = annotations_change(Some(&old), Some(&new));
        assert_eq!(
            (change.class, change.reasons.as_slice()),
            (class, [reason.to_owned()].as_slice()),
            "{old} -> {new}"
        );
    }
    let same = annotations_change(
        Some(&json!({"readOnlyHint": true, "title": "T"})),
        Some(&json!({"title": "T", "readOnlyHint": true})),
    );
    assert_eq!(same.class, Identical);
    assert_eq!(annotations_change(None, Some(&json!({}))).class, Identical);
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
