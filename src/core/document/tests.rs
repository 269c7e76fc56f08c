use super::*;
use jsonschema::json::{Array, JsonNumber, Node, Object};
use serde_json::{json, Value};

fn read(text: &str) -> Result<Document, ReadError> {
    Document::read(text.as_bytes(), 64)
}

fn value(text: &str) -> Value {
    read(text).expect("a document").to_value()
}

fn syntax(text: &str) -> &'static str {
    match read(text) {
        Err(ReadError::Syntax { message, .. }) => message,
        other => panic!("{text}: expected a syntax error, got {other:?}"),
    }
}

/// Whether `instance` (JSON text) is valid under `schema`, judged in the document representation.
fn valid(schema: Value, instance: &str) -> bool {
    let validator = jsonschema::options_for::<DocumentJson>()
        .build(&schema)
        .expect("schema compiles");
    validator.is_valid(read(instance).expect("a document").root())
}

#[test]
fn it_meets_the_validators_contract_for_representations() {
    let doc = Document::from_value(&jsonschema::json::conformance::document());
    jsonschema::json::conformance::assert_conformance::<DocumentJson>(&doc.root());
}

#[test]
fn values_read_back_as_serde_json_reads_them() {
    for text in [
        r#"{"a": [1, -2, 3.5, "x", true, false, null, {}, []], "b": {"c": "d"}}"#,
        r#""é\n\t\"\\\/\b\f\r\u00e9\ud83d\ude00""#,
        "  [ 0 , -0 , 1e2 , 1E-2 , 0.5 ]  ",
        "[]",
        "{}",
    ] {
        let theirs: Value = serde_json::from_str(text).expect("serde_json reads it");
        assert_eq!(value(text), theirs, "{text}");
    }
}

#[test]
fn of_a_key_given_twice_the_last_member_is_read() {
    assert_eq!(
        value(r#"{"a": 1, "b": 2, "a": 3}"#),
        json!({"a": 3, "b": 2})
    );
    let doc = read(r#"{"a": 1, "b": 2, "a": {"x": 3}}"#).expect("a document");
    let root = doc.root();
    let object = root.as_object().expect("an object");
    assert_eq!(Object::len(&object), 2);
    let a = object.get(&"a".into()).expect("a");
    assert!(a.as_object().is_some(), "the later `a` is the one read");
    let names: Vec<&str> = object.members().map(|(k, _)| k).collect();
    assert_eq!(names, ["b", "a"]);
    // An escaped spelling of the same key is the same key.
    assert_eq!(value(r#"{"a": 1, "\u0061": 2}"#), json!({"a": 2}));
    // Large objects are indexed: the same rule holds there, and every member is found.
    let mut text = String::from("{");
    for i in 0..40 {
        text.push_str(&format!(r#""k{i}": {i}, "#));
    }
    text.push_str(r#""k7": "last"}"#);
    let doc = read(&text).expect("a document");
    let object = doc.root().as_object().expect("an object");
    assert_eq!(Object::len(&object), 40);
    assert_eq!(
        object
            .get(&"k7".into())
            .and_then(|n| n.as_string())
            .as_deref(),
        Some("last")
    );
    for i in 0..40 {
        assert!(object.get(&format!("k{i}").into()).is_some(), "k{i}");
    }
    assert!(object.get(&"k40".into()).is_none());
    assert_eq!(object.members().count(), 40);
    // There too, a key written with an escape is the key written without one, whichever comes
    // last, and an escaped key is found by its text.
    let mut text = String::from(r#"{"\u006b3": "first", "#);
    for i in 0..40 {
        text.push_str(&format!(r#""k{i}": {i}, "#));
    }
    text.push_str(r#""\u006b7": "last", "k\u00e9": "é"}"#);
    let doc = read(&text).expect("a document");
    let object = doc.root().as_object().expect("an object");
    assert_eq!(Object::len(&object), 41);
    let string = |key: &str| object.get(&key.into()).and_then(|n| n.as_string());
    assert_eq!(string("k7").as_deref(), Some("last"));
    assert_eq!(string("ké").as_deref(), Some("é"));
    assert_eq!(object.get(&"k3".into()).map(|n| n.value()), Some(json!(3)));
    // The validator judges the member the consumer reads.
    assert!(!valid(
        json!({"properties": {"n": {"type": "integer"}}}),
        r#"{"n": 1, "n": "one"}"#
    ));
    assert!(valid(
        json!({"properties": {"n": {"type": "integer"}}}),
        r#"{"n": "one", "n": 1}"#
    ));
}

#[test]
fn a_value_read_from_the_start_of_a_text_keeps_its_decoded_strings() {
    // The document's text is the value's own, shorter than the text its strings were decoded
    // from: a decoded string is still found in the arena, a plain one in the text.
    let line = ByteString::from(r#"{"a": "x\ny", "b": ["plain", "t\u00e9"]} and more"#);
    let (doc, end) = Document::read_prefix(&line, 64).expect("a document");
    assert_eq!(&line[end..], " and more");
    assert_eq!(doc.to_value(), json!({"a": "x\ny", "b": ["plain", "té"]}));
    assert_eq!(doc.text(), &line.as_bytes()[..end]);
}

#[test]
fn strings_follow_serde_jsons_rules() {
    assert_eq!(value(r#""\ud83d\ude00""#), json!("😀"));
    assert_eq!(
        syntax(r#""\ud83d""#),
        "unexpected end of hex escape",
        "a leading surrogate alone"
    );
    assert_eq!(
        syntax(r#""\ud83d\u0041""#),
        "lone leading surrogate in hex escape"
    );
    assert_eq!(
        syntax(r#""\ude00""#),
        "lone leading surrogate in hex escape",
        "a trailing surrogate alone"
    );
    assert_eq!(
        syntax("\"\u{1}\""),
        "control character (\\u0000-\\u001F) found while parsing a string"
    );
    assert_eq!(syntax(r#""\x""#), "invalid escape");
    match Document::read(b"[\"ok\", \"\xff\xfe\"]", 64) {
        Err(ReadError::Syntax { at, message }) => {
            assert_eq!(message, "invalid unicode code point");
            assert_eq!(at, 8, "at the first invalid byte");
        }
        other => panic!("expected invalid UTF-8 to be refused, got {other:?}"),
    }
    let doc = read(r#"{"ключ": "значение"}"#).expect("a document");
    assert_eq!(doc.string_bytes, ("ключ".len() + "значение".len()) as u64);
}

#[test]
fn syntax_is_refused_where_it_breaks() {
    for (text, at) in [
        ("[1,]", 3),
        ("{\"a\" 1}", 5),
        ("[1 2]", 3),
        ("01", 1),
        ("1.", 2),
        ("1e", 2),
        ("-", 1),
        ("tru", 0),
        ("[1] x", 4),
        ("", 0),
        ("{\"a\":1,}", 7),
    ] {
        match read(text) {
            Err(ReadError::Syntax { at: found, .. }) => assert_eq!(found, at, "{text}"),
            other => panic!("{text}: expected a syntax error, got {other:?}"),
        }
    }
}

#[test]
fn depth_is_held_to_the_limit_and_nodes_are_counted() {
    let nested = |n: usize| format!("{}1{}", "[".repeat(n), "]".repeat(n));
    let doc = Document::read(nested(8).as_bytes(), 9).expect("within the limit");
    assert_eq!((doc.depth, doc.nodes), (9, 9));
    assert_eq!(
        Document::read(nested(9).as_bytes(), 9).err(),
        Some(ReadError::TooDeep)
    );
    let doc = read(r#"{"a": [1, 2, {"b": null}], "c": "x"}"#).expect("a document");
    assert_eq!((doc.depth, doc.nodes), (4, 7));
    assert_eq!(doc.string_bytes, 4);
}

#[test]
fn every_number_keeps_its_literal() {
    let doc = read("[18446744073709551615, 18446744073709551616, -9223372036854775809, 6.02e23, 1.50, -0, 1e400]")
        .expect("a document");
    let items: Vec<_> = doc
        .root()
        .as_array()
        .expect("an array")
        .elements()
        .collect();
    let number = |i: usize| items[i].as_number().expect("a number");
    assert_eq!(number(0).as_u64(), Some(u64::MAX));
    assert_eq!(number(1).as_u64(), None);
    assert_eq!(number(1).as_str(), "18446744073709551616");
    assert_eq!(number(2).as_i64(), None);
    assert_eq!(number(2).as_str(), "-9223372036854775809");
    assert_eq!(number(3).as_f64(), Some(6.02e23));
    assert_eq!(number(4).as_str(), "1.50");
    assert_eq!(number(5).as_f64(), Some(-0.0));
    assert_eq!(
        number(6).as_f64(),
        None,
        "past f64: only the literal holds it"
    );
    assert!(number(1).is_integer() && number(3).is_integer() && number(6).is_integer());
    assert!(!number(4).is_integer());
    assert!(number(1).is_written_as_integer() && !number(3).is_written_as_integer());
    let long = format!("[{}]", "9".repeat(MAX_NUMBER_LENGTH + 1));
    assert_eq!(
        read(&long).err(),
        Some(ReadError::NumberTooLong {
            length: MAX_NUMBER_LENGTH + 1
        })
    );
}

#[test]
fn literals_decide_integers_exactly() {
    use super::number::literal_is_integer;
    for (literal, integer) in [
        ("1e2", true),
        ("1.5e1", true),
        ("1.25e1", false),
        ("1.0000000000000000001", false),
        ("100e-2", true),
        ("100e-3", false),
        ("0.0e-999", true),
        (
            "12345678910111213141516171819202122232425262728293031",
            true,
        ),
        ("-1.000", true),
        ("1e-400", false),
    ] {
        assert_eq!(literal_is_integer(literal), integer, "{literal}");
    }
}

/// The issue's cases, and the JSON Schema suite's optional `bignum` and `float-overflow` tests.
#[test]
fn numbers_are_judged_exactly_never_refused() {
    let cases: &[(Value, &str, bool)] = &[
        (json!({"type": "number", "minimum": 0}), "6.02e23", true),
        (
            json!({"maximum": 18446744073709551615u64}),
            "18446744073709551616",
            false,
        ),
        (
            json!({"maximum": 18446744073709551615u64}),
            "18446744073709551615",
            true,
        ),
        (json!({"multipleOf": 0.123456789}), "1e308", false),
        (
            json!({"const": 9007199254740992u64}),
            "9007199254740992.0",
            true,
        ),
        (
            json!({"const": 9007199254740992u64}),
            "9007199254740993",
            false,
        ),
        (json!({"enum": [1e20]}), "100000000000000000001", false),
        (json!({"enum": [1e20]}), "100000000000000000000", true),
        // bignum.json
        (
            json!({"type": "integer"}),
            "12345678910111213141516171819202122232425262728293031",
            true,
        ),
        (
            json!({"type": "number"}),
            "98249283749234923498293171823948729348710298301928331",
            true,
        ),
        (
            json!({"type": "integer"}),
            "-12345678910111213141516171819202122232425262728293031",
            true,
        ),
        (
            json!({"type": "number"}),
            "-98249283749234923498293171823948729348710298301928331",
            true,
        ),
        (
            json!({"type": "string"}),
            "98249283749234923498293171823948729348710298301928331",
            false,
        ),
        (
            json!({"maximum": 18446744073709551615u64}),
            "18446744073709551600",
            true,
        ),
        (
            json!({"minimum": -18446744073709551615i128 as f64}),
            "-18446744073709551600",
            true,
        ),
        // float-overflow.json: all integers are multiples of 0.5, even past f64.
        (json!({"type": "integer", "multipleOf": 0.5}), "1e308", true),
    ];
    for (schema, instance, expected) in cases {
        assert_eq!(
            valid(schema.clone(), instance),
            *expected,
            "{schema} vs {instance}"
        );
    }
    // Limits past f64's precision, from the schema's own literal.
    let schema: Value =
        serde_json::from_str(r#"{"exclusiveMaximum": 972783798187987123879878123.18878137}"#)
            .expect("a schema");
    assert!(!valid(schema, "972783798187987123879878123.188781371"));
    let schema: Value =
        serde_json::from_str(r#"{"exclusiveMinimum": -972783798187987123879878123.18878137}"#)
            .expect("a schema");
    assert!(!valid(schema, "-972783798187987123879878123.188781371"));
    let schema: Value =
        serde_json::from_str(r#"{"minimum": -18446744073709551615}"#).expect("a schema");
    assert!(valid(schema, "-18446744073709551600"));
    let schema: Value =
        serde_json::from_str(r#"{"maximum": 18446744073709551616}"#).expect("a schema");
    assert!(!valid(schema, "18446744073709551617"));
}

#[test]
fn const_enum_and_unique_items_compare_by_value() {
    assert!(valid(
        json!({"const": {"a": [1, "x"]}}),
        r#"{"a": [1.0, "x"]}"#
    ));
    assert!(!valid(
        json!({"const": {"a": [1, "x"]}}),
        r#"{"a": [1, "x"], "b": 0}"#
    ));
    assert!(valid(json!({"enum": ["x", null, 2]}), "null"));
    assert!(!valid(json!({"enum": ["x", null, 2]}), "false"));
    assert!(!valid(
        json!({"uniqueItems": true}),
        r#"[1, {"a": 2}, {"a": 2.0}]"#
    ));
    assert!(valid(
        json!({"uniqueItems": true}),
        r#"[1, {"a": 2}, {"a": 3}, true]"#
    ));
    let many: Vec<String> = (0..40).map(|i| i.to_string()).collect();
    let unique = format!("[{}]", many.join(","));
    let repeated = format!("[{},5.0]", many.join(","));
    assert!(valid(json!({"uniqueItems": true}), &unique));
    assert!(!valid(json!({"uniqueItems": true}), &repeated));
    // Past the pairwise threshold, elements are hashed: equal values however written collide.
    let past = |tail: &str| format!("[{},{tail}]", many.join(","));
    for repeat in [
        r#"{"a":1,"b":[2,"x"]},{"b":[2.0,"x"],"a":1e0}"#,
        "0.0,-0",
        r#"[1,[2]],[1,[2.0]]"#,
        r#""x","x""#,
        "-3,-3.0",
        "null,null",
    ] {
        assert!(
            !valid(json!({"uniqueItems": true}), &past(repeat)),
            "{repeat}"
        );
    }
    for distinct in [
        r#"{"a":1,"b":2},{"a":2,"b":1}"#,
        r#"[1,2],[2,1]"#,
        "1e400,2e400",
        r#""1",1.5,true,false,[],{}"#,
        "9007199254740993,9007199254740992",
    ] {
        assert!(
            valid(json!({"uniqueItems": true}), &past(distinct)),
            "{distinct}"
        );
    }
}

mod both_paths;

mod reading;

#[test]
fn a_string_ends_or_breaks_at_exactly_the_right_byte_whatever_its_length() {
    for length in 0..70 {
        for at in 0..length {
            let mut text = vec![b'"'];
            text.extend(std::iter::repeat_n(b'a', length));
            text.push(b'"');
            let mut control = text.clone();
            control[1 + at] = 0x1f;
            match Document::read(&control, 8) {
                Err(ReadError::Syntax { at: found, message }) => {
                    assert_eq!((found, message.starts_with("control")), (1 + at, true))
                }
                other => panic!("{length}/{at}: {other:?}"),
            }
            let mut escaped = text.clone();
            escaped.splice(1 + at..1 + at, *b"\\n");
            let doc = Document::read(&escaped, 8).expect("an escape anywhere");
            let expected = format!("{}\n{}", "a".repeat(at), "a".repeat(length - at));
            assert_eq!(doc.to_value(), Value::String(expected));
        }
    }
}
