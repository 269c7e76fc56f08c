//! Compares a result's JSON text copy with its `structuredContent` without building a second
//! document: the text is walked once against the value already parsed. When the copy is the very
//! text `structuredContent` was sent as (the usual case: one serialiser wrote both), a byte
//! comparison settles it first.

use crate::check::Key;
use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;
use std::fmt;

/// `Some(true)` when `text` is JSON equal to `expected` (as `Value`'s `==` judges), `Some(false)`
/// when it is JSON that differs, `None` when it is not JSON at all.
pub fn json_text_equals(text: &str, expected: &Value) -> Option<bool> {
    let mut de = serde_json::Deserializer::from_str(text);
    let same = Same(Some(expected)).deserialize(&mut de).ok()?;
    de.end().ok()?;
    Some(same)
}

/// Whether two JSON texts are the same tokens: equal bytes once white space outside strings is
/// set aside. Such texts read as the same value (or, if neither is JSON, as nothing); texts that
/// differ here may still be equal values (key order, escapes, number forms), which
/// [`json_text_equals`] decides.
pub fn same_tokens(a: &[u8], b: &[u8]) -> bool {
    if a == b {
        return true;
    }
    let is_space = |c: &u8| matches!(c, b' ' | b'\t' | b'\n' | b'\r');
    let (mut i, mut j) = (0, 0);
    loop {
        while a.get(i).is_some_and(is_space) {
            i += 1;
        }
        while b.get(j).is_some_and(is_space) {
            j += 1;
        }
        match (a.get(i), b.get(j)) {
            (None, None) => return true,
            (Some(&x), Some(&y)) if x == y => {
                i += 1;
                j += 1;
                if x != b'"' {
                    continue;
                }
                // A string, compared in runs up to each quote or backslash: white space in it
                // counts, and the byte after a backslash is compared as it is.
                loop {
                    let Some(run) = memchr::memchr2(b'"', b'\\', &a[i..]) else {
                        return false;
                    };
                    if b.get(j..=j + run) != Some(&a[i..=i + run]) {
                        return false;
                    }
                    let closing = a[i + run] == b'"';
                    i += run + 1;
                    j += run + 1;
                    if closing {
                        break;
                    }
                    match (a.get(i), b.get(j)) {
                        (Some(p), Some(q)) if p == q => {
                            i += 1;
                            j += 1;
                        }
                        _ => return false,
                    }
                }
            }
            _ => return false,
        }
    }
}

/// Compares the next value with the expected one (`None`: nothing expected, so just skip it).
struct Same<'a>(Option<&'a Value>);

impl<'de> DeserializeSeed<'de> for Same<'_> {
    type Value = bool;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
        match self.0 {
            Some(expected) => d.deserialize_any(SameVisitor(expected)),
            None => <IgnoredAny as serde::Deserialize>::deserialize(d).map(|_| false),
        }
    }
}

struct SameVisitor<'a>(&'a Value);

impl<'de> Visitor<'de> for SameVisitor<'_> {
    type Value = bool;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<bool, E> {
        Ok(matches!(self.0, Value::Bool(b) if *b == v))
    }
    // As `Value`'s `==`: integers equal integers of the same value, floats equal floats.
    fn visit_i64<E>(self, v: i64) -> Result<bool, E> {
        Ok(matches!(self.0, Value::Number(n) if n.as_i64() == Some(v)))
    }
    fn visit_u64<E>(self, v: u64) -> Result<bool, E> {
        Ok(matches!(self.0, Value::Number(n) if n.as_u64() == Some(v)))
    }
    fn visit_f64<E>(self, v: f64) -> Result<bool, E> {
        Ok(matches!(self.0, Value::Number(n) if n.is_f64() && n.as_f64() == Some(v)))
    }
    fn visit_str<E>(self, v: &str) -> Result<bool, E> {
        Ok(matches!(self.0, Value::String(s) if s == v))
    }
    fn visit_unit<E>(self) -> Result<bool, E> {
        Ok(self.0.is_null())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<bool, A::Error> {
        let items = match self.0 {
            Value::Array(items) => Some(items),
            _ => None,
        };
        let mut same = items.is_some();
        let mut n = 0;
        loop {
            let expected = if same {
                items.and_then(|i| i.get(n))
            } else {
                None
            };
            let Some(eq) = seq.next_element_seed(Same(expected))? else {
                break;
            };
            same &= eq;
            n += 1;
        }
        Ok(same && items.is_some_and(|i| i.len() == n))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<bool, A::Error> {
        let object = match self.0 {
            Value::Object(object) => Some(object),
            _ => None,
        };
        let mut same = object.is_some();
        let mut n = 0;
        while let Some(Key(key)) = map.next_key()? {
            let expected = if same {
                object.and_then(|o| o.get(key.as_ref()))
            } else {
                None
            };
            same &= map.next_value_seed(Same(expected))?;
            n += 1;
        }
        Ok(same && object.is_some_and(|o| o.len() == n))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn agrees_with_value_equality() {
        let cases = [
            (r#"{"a": 1, "b": [true, null, "x"], "c": {"d": 2.5}}"#, true),
            (r#"{"c": {"d": 2.5}, "b": [true, null, "x"], "a": 1}"#, true),
            (r#"{"a": 1, "b": [true, null, "x"]}"#, false),
            (
                r#"{"a": 1, "b": [true, null, "x"], "c": {"d": 2.5}, "e": 0}"#,
                false,
            ),
            (
                r#"{"a": 2, "b": [true, null, "x"], "c": {"d": 2.5}}"#,
                false,
            ),
            (r#"{"a": 1, "b": [true, null], "c": {"d": 2.5}}"#, false),
            (
                r#"{"a": 1, "b": [true, null, "x", 4], "c": {"d": 2.5}}"#,
                false,
            ),
            (
                r#"{"a": 1.0, "b": [true, null, "x"], "c": {"d": 2.5}}"#,
                false,
            ),
            (
                r#"{"\u0061": 1, "b": [true, null, "x"], "c": {"d": 2.5}}"#,
                true,
            ),
            (r#"[1, 2]"#, false),
        ];
        let expected = json!({"a": 1, "b": [true, null, "x"], "c": {"d": 2.5}});
        for (text, same) in cases {
            let parsed: Value = serde_json::from_str(text).expect("json");
            assert_eq!(parsed == expected, same, "the table is right about {text}");
            assert_eq!(json_text_equals(text, &expected), Some(same), "{text}");
        }
        assert_eq!(json_text_equals("{\"a\": ", &expected), None);
        assert_eq!(json_text_equals("{} trailing", &expected), None);
        assert_eq!(json_text_equals("-3", &json!(-3)), Some(true));
        assert_eq!(json_text_equals("null", &Value::Null), Some(true));
    }

    #[test]
    fn same_tokens_reads_escapes_at_the_ends_of_strings() {
        let sent = br#"{"path":"c:\\dir\\","q":"\"","u":"\u00e9"}"#;
        assert!(same_tokens(
            br#"{ "path": "c:\\dir\\", "q": "\"", "u": "\u00e9" }"#,
            sent
        ));
        assert!(!same_tokens(
            br#"{ "path": "c:\\dir\\ ", "q": "\"", "u": "\u00e9" }"#,
            sent
        ));
        assert!(!same_tokens(br#"{"path":"c:\\dir\\"#, sent));
        assert!(!same_tokens(br#"{"path":"c:\"#, sent));
    }

    #[test]
    fn same_tokens_sets_white_space_aside_only_outside_strings() {
        let sent = br#"{"a":1,"b":[true,null,"x y"],"c":{"d":"q\"uote"}}"#;
        for (copy, same) in [
            (&br#"{"a": 1, "b": [true, null, "x y"], "c": {"d": "q\"uote"}}"#[..], true),
            (br#"  {"a":1,"b":[true,null,"x y"],"c":{"d":"q\"uote"}}  "#, true),
            (b"{\n  \"a\": 1,\n  \"b\": [true, null, \"x y\"],\n  \"c\": {\"d\": \"q\\\"uote\"}\n}", true),
            (br#"{"a":1,"b":[true,null,"xy"],"c":{"d":"q\"uote"}}"#, false),
            (br#"{"a":1,"b":[true,null,"x  y"],"c":{"d":"q\"uote"}}"#, false),
            (br#"{"b":[true,null,"x y"],"a":1,"c":{"d":"q\"uote"}}"#, false),
            (br#"{"a":1.0,"b":[true,null,"x y"],"c":{"d":"q\"uote"}}"#, false),
            (br#"{"a":1,"b":[true,null,"x y"],"c":{"d":"q\u0022uote"}}"#, false),
            (br#"{"a":1,"b":[true,null,"x y"],"c":{"d":"q\"uote"}"#, false),
        ] {
            assert_eq!(same_tokens(copy, sent), same, "{}", String::from_utf8_lossy(copy));
            assert_eq!(same_tokens(sent, copy), same, "{}", String::from_utf8_lossy(copy));
            // Whenever the tokens are the same, so are the values.
            if same {
                let text = std::str::from_utf8(copy).expect("utf-8");
                let value: Value = serde_json::from_slice(sent).expect("json");
                assert_eq!(json_text_equals(text, &value), Some(true));
            }
        }
    }
}
