//! Compares a result's JSON text copy with its `structuredContent` as JSON values. When the copy
//! is the very text `structuredContent` was sent as (the usual case: one serialiser wrote both),
//! a byte comparison settles it. Otherwise both texts are read with their numbers held exactly
//! (as decimals, never as floats), so `42.0` and `42` are the same value while `2^53 + 1` and
//! `2^53` are not, and the first path where they differ is reported. [`text_drift`] makes of it
//! a verdict's finding, decoding each copy into a buffer its thread keeps.

use crate::core::check::{Document, ToolResult};
use crate::core::verdict::Finding;

/// Whether two JSON texts are the same tokens: equal bytes once white space outside strings is
/// set aside. Such texts read as the same value (or, if neither is JSON, as nothing); texts that
/// differ here may still be equal values (key order, escapes, number forms), which
/// [`first_difference`] decides.
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

/// Where two JSON texts first differ as JSON values (JSON Schema's equality: numbers equal when
/// mathematically equal, so `42.0`, `4.2e1` and `42` are one value; object keys in any order).
/// `None` when either text is not JSON; `Some(None)` when they are the same value;
/// `Some(Some(path))` with the JSON pointer of the first difference (keys in sorted order).
pub fn first_difference(a: &[u8], b: &[u8]) -> Option<Option<String>> {
    let a = Exact::parse(a)?;
    let b = Exact::parse(b)?;
    let mut path = String::new();
    Some(differ(&a, &b, &mut path).then_some(path))
}

/// A JSON value with its numbers held exactly, as normalised decimals.
#[derive(Debug, PartialEq)]
enum Exact {
    Null,
    Bool(bool),
    Number(Decimal),
    String(String),
    Array(Vec<Exact>),
    /// Sorted by key; of duplicate keys the last is kept, as serde_json keeps it.
    Object(Vec<(String, Exact)>),
}

/// `digits × 10^exponent`, negative or not: no leading or trailing zero digit, and zero has no
/// digits and no sign, so equal numbers are equal values.
#[derive(Debug, PartialEq)]
struct Decimal {
    negative: bool,
    digits: Vec<u8>,
    exponent: i64,
}

/// Deeper than this, a text is not compared (the readers refuse such documents long before).
const MAX_DEPTH: usize = 128;

impl Exact {
    fn parse(text: &[u8]) -> Option<Exact> {
        let mut parser = Parser { text, at: 0 };
        let value = parser.value(0)?;
        parser.space();
        (parser.at == text.len()).then_some(value)
    }
}

struct Parser<'t> {
    text: &'t [u8],
    at: usize,
}

impl Parser<'_> {
    fn space(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.at += 1;
        }
    }

    fn peek(&self) -> Option<u8> {
        self.text.get(self.at).copied()
    }

    fn eat(&mut self, byte: u8) -> Option<()> {
        self.space();
        (self.peek()? == byte).then(|| self.at += 1)
    }

    fn literal(&mut self, word: &[u8], value: Exact) -> Option<Exact> {
        let end = self.at.checked_add(word.len())?;
        (self.text.get(self.at..end)? == word).then(|| {
            self.at = end;
            value
        })
    }

    fn value(&mut self, depth: usize) -> Option<Exact> {
        if depth > MAX_DEPTH {
            return None;
        }
        self.space();
        match self.peek()? {
            b'n' => self.literal(b"null", Exact::Null),
            b't' => self.literal(b"true", Exact::Bool(true)),
            b'f' => self.literal(b"false", Exact::Bool(false)),
            b'"' => self.string().map(Exact::String),
            b'[' => {
                self.at += 1;
                let mut items = Vec::new();
                self.space();
                if self.peek()? == b']' {
                    self.at += 1;
                    return Some(Exact::Array(items));
                }
                loop {
                    items.push(self.value(depth + 1)?);
                    self.space();
                    match self.peek()? {
                        b',' => self.at += 1,
                        b']' => {
                            self.at += 1;
                            return Some(Exact::Array(items));
                        }
                        _ => return None,
                    }
                }
            }
            b'{' => {
                self.at += 1;
                let mut members: Vec<(String, Exact)> = Vec::new();
                self.space();
                if self.peek()? == b'}' {
                    self.at += 1;
                    return Some(Exact::Object(members));
                }
                loop {
                    self.space();
                    let key = self.string()?;
                    self.eat(b':')?;
                    let value = self.value(depth + 1)?;
                    members.push((key, value));
                    self.space();
                    match self.peek()? {
                        b',' => self.at += 1,
                        b'}' => {
                            self.at += 1;
                            break;
                        }
                        _ => return None,
                    }
                }
                // Stable, so of equal keys the last stays last; then keep only it.
                members.sort_by(|x, y| x.0.cmp(&y.0));
                let mut kept: Vec<(String, Exact)> = Vec::with_capacity(members.len());
                for member in members {
                    match kept.last_mut() {
                        Some(last) if last.0 == member.0 => *last = member,
                        _ => kept.push(member),
                    }
                }
                Some(Exact::Object(kept))
            }
            b'-' | b'0'..=b'9' => self.number().map(Exact::Number),
            _ => None,
        }
    }

    /// A string token, decoded by serde_json (escapes, surrogates, control characters).
    fn string(&mut self) -> Option<String> {
        let start = self.at;
        if self.peek()? != b'"' {
            return None;
        }
        let mut i = start + 1;
        loop {
            let run = memchr::memchr2(b'"', b'\\', self.text.get(i..)?)?;
            i += run;
            if self.text[i] == b'"' {
                break;
            }
            i += 2;
        }
        self.at = i + 1;
        serde_json::from_slice(&self.text[start..=i]).ok()
    }

    fn number(&mut self) -> Option<Decimal> {
        let negative = self.peek() == Some(b'-');
        if negative {
            self.at += 1;
        }
        let int_start = self.at;
        self.skip_digits();
        let int = &self.text[int_start..self.at];
        if int.is_empty() || (int.len() > 1 && int[0] == b'0') {
            return None;
        }
        let mut frac: &[u8] = &[];
        if self.peek() == Some(b'.') {
            self.at += 1;
            let start = self.at;
            self.skip_digits();
            frac = &self.text[start..self.at];
            if frac.is_empty() {
                return None;
            }
        }
        let mut exponent: i64 = 0;
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.at += 1;
            let minus = match self.peek() {
                Some(b'-') => {
                    self.at += 1;
                    true
                }
                Some(b'+') => {
                    self.at += 1;
                    false
                }
                _ => false,
            };
            let start = self.at;
            self.skip_digits();
            let digits = &self.text[start..self.at];
            if digits.is_empty() {
                return None;
            }
            for &d in digits {
                // Saturates far beyond any exponent that could be equal by accident.
                exponent = (exponent * 10 + i64::from(d - b'0')).min(1 << 40);
            }
            if minus {
                exponent = -exponent;
            }
        }
        let mut digits: Vec<u8> = int.iter().chain(frac).map(|d| d - b'0').collect();
        exponent -= frac.len() as i64;
        let leading = digits.iter().take_while(|&&d| d == 0).count();
        digits.drain(..leading);
        while digits.last() == Some(&0) {
            digits.pop();
            exponent += 1;
        }
        Some(if digits.is_empty() {
            Decimal {
                negative: false,
                digits,
                exponent: 0,
            }
        } else {
            Decimal {
                negative,
                digits,
                exponent,
            }
        })
    }

    fn skip_digits(&mut self) {
        while matches!(self.peek(), Some(b'0'..=b'9')) {
            self.at += 1;
        }
    }
}

/// Whether `a` and `b` differ; if so `path` is left at the first difference.
fn differ(a: &Exact, b: &Exact, path: &mut String) -> bool {
    match (a, b) {
        (Exact::Array(x), Exact::Array(y)) => {
            for (i, (p, q)) in x.iter().zip(y).enumerate() {
                let len = path.len();
                path.push('/');
                path.push_str(&i.to_string());
                if differ(p, q, path) {
                    return true;
                }
                path.truncate(len);
            }
            if x.len() != y.len() {
                path.push('/');
                path.push_str(&x.len().min(y.len()).to_string());
                return true;
            }
            false
        }
        (Exact::Object(x), Exact::Object(y)) => {
            let (mut i, mut j) = (0, 0);
            loop {
                let key = match (x.get(i), y.get(j)) {
                    (None, None) => return false,
                    (Some((k, _)), None) | (None, Some((k, _))) => k,
                    (Some((k, p)), Some((l, q))) => match k.cmp(l) {
                        std::cmp::Ordering::Equal => {
                            let len = path.len();
                            push_key(path, k);
                            if differ(p, q, path) {
                                return true;
                            }
                            path.truncate(len);
                            i += 1;
                            j += 1;
                            continue;
                        }
                        std::cmp::Ordering::Less => k,
                        std::cmp::Ordering::Greater => l,
                    },
                };
                push_key(path, key);
                return true;
            }
        }
        _ => a != b,
    }
}

/// Appends `/key` to a JSON pointer, escaped.
fn push_key(path: &mut String, key: &str) {
    path.push('/');
    for c in key.chars() {
        match c {
            '~' => path.push_str("~0"),
            '/' => path.push_str("~1"),
            c => path.push(c),
        }
    }
}

thread_local! {
    /// A text copy, decoded: one buffer per thread, reused from check to check.
    static DECODED_COPY: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// A decoding buffer larger than this is given back after its check.
const MAX_KEPT_COPY_BYTES: usize = 1 << 20;

/// A text block of `content` that parses as JSON and is a different JSON value from
/// `structuredContent` (numbers compared exactly, by value), with where they first differ. A text
/// holding a JSON scalar is compared only with a scalar `structuredContent`: beside an object it
/// is prose that happens to parse (a count, a word), not a copy.
pub(crate) fn text_drift(result: &ToolResult, structured: &Document) -> Option<Finding> {
    let structured_is_scalar = structured.is_scalar();
    // structuredContent's own text, as sent: a copy that is the same text is the same value.
    let sent = structured.text();
    for text in result.json_texts.iter() {
        let scalar_text = !matches!(text.first_visible(), Some('{' | '['));
        if scalar_text && !structured_is_scalar {
            continue;
        }
        // structuredContent's own text, escaped into a string: the same value (the usual case,
        // seen without decoding).
        if text.is_escaped(sent) {
            continue;
        }
        // The same text, white space aside: the same value, with nothing to read. The copy is
        // decoded into this thread's buffer, which is kept for the next check.
        let found = DECODED_COPY.with(|buffer| {
            let mut buffer = buffer.borrow_mut();
            buffer.clear();
            text.decode_into(&mut buffer);
            let found = if same_tokens(&buffer, sent) {
                None
            } else {
                first_difference(&buffer, sent)
            };
            if buffer.capacity() > MAX_KEPT_COPY_BYTES {
                *buffer = Vec::new();
            }
            found
        });
        if let Some(Some(path)) = found {
            let at = if path.is_empty() { "/" } else { path.as_str() };
            return Some(Finding {
                kind: "text_drift",
                message: format!(
                    "the text copy in content parses as JSON but is a different value from structuredContent, first at {at}"
                ),
                instance_path: path,
            });
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn diff(a: &str, b: &str) -> Option<Option<String>> {
        first_difference(a.as_bytes(), b.as_bytes())
    }

    #[test]
    fn compares_values_not_spellings() {
        let sent = r#"{"a": 1, "b": [true, null, "x"], "c": {"d": 2.5}}"#;
        let cases = [
            (r#"{"c": {"d": 2.5}, "b": [true, null, "x"], "a": 1}"#, None),
            (
                r#"{"a": 1.0, "b": [true, null, "x"], "c": {"d": 25e-1}}"#,
                None,
            ),
            (
                r#"{"\u0061": 1e0, "b": [true, null, "x"], "c": {"d": 2.50}}"#,
                None,
            ),
            (r#"{"a": 1, "b": [true, null, "x"]}"#, Some("/c")),
            (
                r#"{"a": 1, "b": [true, null, "x"], "c": {"d": 2.5}, "e": 0}"#,
                Some("/e"),
            ),
            (
                r#"{"a": 2, "b": [true, null, "x"], "c": {"d": 2.5}}"#,
                Some("/a"),
            ),
            (
                r#"{"a": 1, "b": [true, null], "c": {"d": 2.5}}"#,
                Some("/b/2"),
            ),
            (
                r#"{"a": 1, "b": [true, null, "y"], "c": {"d": 2.5}}"#,
                Some("/b/2"),
            ),
            (
                r#"{"a": 1, "b": [true, null, "x"], "c": {"d": 2.51}}"#,
                Some("/c/d"),
            ),
            (r#"[1, 2]"#, Some("")),
        ];
        for (text, path) in cases {
            assert_eq!(diff(text, sent), Some(path.map(str::to_owned)), "{text}");
            assert_eq!(diff(sent, text), Some(path.map(str::to_owned)), "{text}");
        }
        assert_eq!(diff("{\"a\": ", sent), None);
        assert_eq!(diff("{} trailing", sent), None);
        assert_eq!(diff("-3", "-3.0e0"), Some(None));
        assert_eq!(diff("0", "-0.0"), Some(None));
        assert_eq!(diff("null", "null"), Some(None));
        assert_eq!(diff("01", "1"), None, "not JSON");
    }

    #[test]
    fn float_literals_a_float_would_round_are_still_compared_exactly() {
        // 42.00000000000000001 reads as the float 42.0, but it is not 42.
        let copy = r#"{"a": 42.00000000000000001, "b": 0.5}"#;
        assert_eq!(
            first_difference(copy.as_bytes(), br#"{"a": 42, "b": 0.5}"#),
            Some(Some("/a".into()))
        );
        assert_eq!(
            first_difference(br#"{"b": 0.50, "a": 42.0}"#, br#"{"a": 42, "b": 0.5}"#),
            Some(None)
        );
    }

    #[test]
    fn numbers_are_exact_beyond_floats() {
        assert_eq!(
            diff("9007199254740993", "9007199254740992"),
            Some(Some(String::new()))
        );
        assert_eq!(
            diff("18446744073709551617", "1.8446744073709551617e19"),
            Some(None)
        );
        assert_eq!(
            diff("0.1", "0.10000000000000001"),
            Some(Some(String::new()))
        );
        assert_eq!(
            diff(r#"{"a/b~": 1}"#, r#"{"a/b~": 2}"#),
            Some(Some("/a~1b~0".into()))
        );
    }

    mod properties {
        use super::*;
        use proptest::prelude::*;
        use serde_json::Value;

        fn json() -> impl Strategy<Value = Value> {
            let leaf = prop_oneof![
                Just(Value::Null),
                any::<bool>().prop_map(Value::Bool),
                any::<i64>().prop_map(Value::from),
                any::<u64>().prop_map(Value::from),
                (-1e6f64..1e6).prop_map(Value::from),
                "[a-z\u{e9}\"\\\\]{0,6}".prop_map(Value::String),
            ];
            leaf.prop_recursive(4, 40, 5, |inner| {
                prop_oneof![
                    prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                    prop::collection::btree_map("[a-d~/]{1,3}", inner, 0..5)
                        .prop_map(|m| Value::Object(m.into_iter().collect())),
                ]
            })
        }

        /// `value` written with its keys in reverse order and each number in another spelling.
        fn respell(value: &Value, seed: u64, out: &mut String) {
            match value {
                Value::Object(map) => {
                    out.push('{');
                    for (i, (k, v)) in map.iter().rev().enumerate() {
                        if i > 0 {
                            out.push_str(" , ");
                        }
                        out.push_str(&Value::String(k.clone()).to_string());
                        out.push(':');
                        respell(v, seed.wrapping_add(i as u64), out);
                    }
                    out.push('}');
                }
                Value::Array(items) => {
                    out.push('[');
                    for (i, v) in items.iter().enumerate() {
                        if i > 0 {
                            out.push(',');
                        }
                        respell(v, seed.wrapping_mul(31).wrapping_add(i as u64), out);
                    }
                    out.push(']');
                }
                Value::Number(n) => {
                    let text = n.to_string();
                    let (mantissa, exp) = match text.split_once(['e', 'E']) {
                        Some((m, e)) => (m.to_owned(), e.parse::<i64>().unwrap_or(0)),
                        None => (text.clone(), 0),
                    };
                    let mantissa = if mantissa.contains('.') {
                        mantissa
                    } else {
                        format!("{mantissa}.0")
                    };
                    match seed % 3 {
                        0 => out.push_str(&format!("{mantissa}00e{exp}")),
                        1 => out.push_str(&format!("{mantissa}0E+{exp}")),
                        _ => out.push_str(&text),
                    }
                }
                other => out.push_str(&other.to_string()),
            }
        }

        /// The paths of every leaf (and empty container) of `value`.
        fn leaves(value: &Value, path: String, out: &mut Vec<String>) {
            match value {
                Value::Object(map) if !map.is_empty() => {
                    for (k, v) in map {
                        let mut p = path.clone();
                        push_key(&mut p, k);
                        leaves(v, p, out);
                    }
                }
                Value::Array(items) if !items.is_empty() => {
                    for (i, v) in items.iter().enumerate() {
                        leaves(v, format!("{path}/{i}"), out);
                    }
                }
                _ => out.push(path),
            }
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(256))]

            /// Re-spelled numbers and re-ordered keys are never drift.
            #[test]
            fn respellings_are_the_same_value(value in json(), seed in any::<u64>()) {
                let mut text = String::new();
                respell(&value, seed, &mut text);
                let sent = value.to_string();
                prop_assert_eq!(first_difference(text.as_bytes(), sent.as_bytes()), Some(None), "{}", text);
            }

            /// Any one changed leaf is drift, reported at that leaf's path.
            #[test]
            fn a_changed_leaf_is_drift_at_its_path(value in json(), pick in any::<prop::sample::Index>()) {
                let mut paths = Vec::new();
                leaves(&value, String::new(), &mut paths);
                let path = pick.get(&paths).clone();
                let mut changed = value.clone();
                let leaf = changed.pointer_mut(&path).expect("a leaf");
                *leaf = match leaf {
                    Value::String(s) => Value::String(format!("{s}!")),
                    Value::Number(_) => Value::String("n".into()),
                    _ => serde_json::json!(0.5),
                };
                let found = first_difference(changed.to_string().as_bytes(), value.to_string().as_bytes());
                prop_assert_eq!(found, Some(Some(path)));
            }
        }
    }

    #[test]
    fn a_copy_as_sent_is_compared_decoding_its_escapes() {
        let copy = |literal: &str| {
            crate::core::text_copy::TextCopy::new(bytes::Bytes::copy_from_slice(literal.as_bytes()))
                .expect("a copy")
        };
        let same = |copy: crate::core::text_copy::TextCopy, sent: &[u8]| {
            same_tokens(copy.decoded().as_bytes(), sent)
        };
        let sent = br#"{"q":"a \"b\" c\\d","n":[1,2]}"#;
        // The copy's literal holds the JSON text with its quotes and backslashes escaped again.
        assert!(same(
            copy(r#"{\"q\":\"a \\\"b\\\" c\\\\d\",\"n\":[1,2]}"#),
            sent
        ));
        assert!(same(
            copy(r#"{\n  \"q\": \"a \\\"b\\\" c\\\\d\",\n  \"n\": [1, 2]\n}"#),
            sent
        ));
        assert!(!same(
            copy(r#"{\"q\":\"a \\\"b\\\" c\\\\d \",\"n\":[1,2]}"#),
            sent
        ));
        assert!(!same(copy(r#"{\"q\":\"a"#), sent));
        assert!(same(copy(r#"\u005b1, 2\u005d"#), b"[1,2]"));
        assert_eq!(
            first_difference(
                copy(r#"{\"q\":\"a \\\"b\\\" c\\\\e\",\"n\":[1,2]}"#)
                    .decoded()
                    .as_bytes(),
                sent
            ),
            Some(Some("/q".into()))
        );
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
                assert_eq!(first_difference(copy, sent), Some(None));
            }
        }
    }
}
