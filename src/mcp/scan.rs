//! Finding a JSON object's members by the structure of its text alone (quotes, escapes and
//! brackets), without parsing their values.
//!
//! The boundary reads each message's envelope to decide what to do with it, and most of a
//! message's bytes are its `params` or `result`, which the boundary either relays untouched or
//! hands to the check, which parses them anyway. Parsing them for the envelope too would read a
//! tool result twice. So members are found by structure, and each value is left unread (an
//! [`Unread`]): the code that uses one parses it then, and refuses it then if it is not JSON.
//!
//! On JSON text, the members found are exactly the parser's: strings are skipped with their
//! escapes, so a quote or bracket inside one never counts, and a key is compared as decoded
//! (`"res\u0075lt"` is `result`). Text that is not JSON may be cut differently than a parser
//! would (it has no one reading), but never yields a value a parser would read otherwise
//! without the value's own parse refusing it.

use crate::core::document::{plain_run, quotes_or_backslashes};
use serde::Deserialize;
use std::borrow::Cow;

/// One member's JSON text, found by structure and not yet parsed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Unread<'a>(&'a [u8]);

impl<'a> Unread<'a> {
    /// The value's text, as sent.
    pub fn bytes(self) -> &'a [u8] {
        self.0
    }

    /// The value, parsed as `T`; `None` when it is not JSON or not a `T`. Its text is checked as
    /// UTF-8 whole first: serde passes over the strings of members `T` does not name unchecked.
    pub fn parse<T: Deserialize<'a>>(self) -> Option<T> {
        serde_json::from_str(std::str::from_utf8(self.0).ok()?).ok()
    }

    /// The value as a string, when it is one: borrowed from the text unless it holds an escape
    /// (serde's `Cow<str>` copies unless it is told to borrow).
    pub fn string(self) -> Option<Cow<'a, str>> {
        // A string with no escape (a method, most ids and names) is the text between its
        // quotes, borrowed as serde would borrow it: no quote, backslash or control character
        // inside, and UTF-8.
        if let [b'"', inner @ .., b'"'] = self.0 {
            if plain_run(inner) == inner.len() {
                if let Ok(text) = std::str::from_utf8(inner) {
                    return Some(Cow::Borrowed(text));
                }
            }
        }
        #[derive(Deserialize)]
        #[serde(transparent)]
        struct Text<'a>(#[serde(borrow)] Cow<'a, str>);
        self.parse::<Text<'a>>().map(|t| t.0)
    }

    /// Whether the value is the JSON `null`.
    pub fn is_null(self) -> bool {
        self.0 == b"null"
    }

    /// The value whose text is `text`, found by structure before (see [`super::Envelope`]).
    pub fn new(text: &'a [u8]) -> Self {
        Self(text)
    }

    #[cfg(test)]
    pub fn text(self) -> &'a str {
        std::str::from_utf8(self.0).expect("UTF-8")
    }
}

/// Calls `member(key, value)` for each member of the JSON object that is the whole of `text`
/// (white space around it aside), in order; a repeated key is reported each time. `None` when
/// `text` is not structured as one object. Keys are decoded only when they hold an escape.
///
/// `read(key, at)` is asked first for the end of each value (which starts at `at`): a reader that
/// reads the value anyway, and so finds its end, saves the scan of it. A value it does not read
/// (`None`) is scanned. The end it gives must be the one a parser finds.
pub fn object<'a>(
    text: &'a [u8],
    mut member: impl FnMut(&[u8], Unread<'a>),
    mut read: impl FnMut(&[u8], usize) -> Option<usize>,
) -> Option<()> {
    let mut at = skip_space(text, 0);
    if text.get(at) != Some(&b'{') {
        return None;
    }
    at = skip_space(text, at + 1);
    if text.get(at) == Some(&b'}') {
        return end(text, at + 1);
    }
    loop {
        if text.get(at) != Some(&b'"') {
            return None;
        }
        let key_end = skip_string(text, at)?;
        let key = &text[at + 1..key_end - 1];
        let key: Cow<'_, [u8]> = if memchr::memchr(b'\\', key).is_some() {
            let decoded: String = serde_json::from_slice(&text[at..key_end]).ok()?;
            Cow::Owned(decoded.into_bytes())
        } else {
            Cow::Borrowed(key)
        };
        at = skip_space(text, key_end);
        if text.get(at) != Some(&b':') {
            return None;
        }
        at = skip_space(text, at + 1);
        let value_end = match read(&key, at) {
            Some(end) => end,
            None => skip_value(text, at)?,
        };
        member(&key, Unread(&text[at..value_end]));
        at = skip_space(text, value_end);
        match text.get(at)? {
            b',' => at = skip_space(text, at + 1),
            b'}' => return end(text, at + 1),
            _ => return None,
        }
    }
}

/// `Some` when only white space follows `at`.
fn end(text: &[u8], at: usize) -> Option<()> {
    (skip_space(text, at) == text.len()).then_some(())
}

fn skip_space(text: &[u8], mut at: usize) -> usize {
    while matches!(text.get(at), Some(b' ' | b'\t' | b'\n' | b'\r')) {
        at += 1;
    }
    at
}

/// The end (one past the closing quote) of the string opening at `at`. Eight bytes are read at
/// a time (the first quote or backslash in a word found by [`quotes_or_backslashes`]): a
/// result's text copy is one long string dense with escapes, where a search call per escape
/// would cost more than the scan.
fn skip_string(text: &[u8], at: usize) -> Option<usize> {
    let mut from = at + 1;
    loop {
        while let Some(chunk) = text.get(from..from + 8) {
            // Only the lowest mark is used: it is exact.
            let found = quotes_or_backslashes(u64::from_le_bytes(chunk.try_into().ok()?));
            if found == 0 {
                from += 8;
                continue;
            }
            let at = from + (found.trailing_zeros() / 8) as usize;
            if text[at] == b'"' {
                return Some(at + 1);
            }
            // An escape: the character after the backslash is never the string's end.
            from = at + 2;
        }
        match *text.get(from)? {
            b'"' => return Some(from + 1),
            b'\\' => from += 2,
            _ => from += 1,
        }
    }
}

/// The end of the value starting at `at`: a string, a container with everything nested in it,
/// or a scalar's run of characters.
fn skip_value(text: &[u8], at: usize) -> Option<usize> {
    match text.get(at)? {
        b'"' => skip_string(text, at),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut i = at;
            loop {
                match text.get(i)? {
                    b'"' => {
                        i = skip_string(text, i)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(i + 1);
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
        }
        _ => {
            let len = text[at..]
                .iter()
                .position(|b| matches!(b, b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r'))
                .unwrap_or(text.len() - at);
            (len > 0).then_some(at + len)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn members(text: &str) -> Option<Vec<(String, String)>> {
        let mut found = Vec::new();
        object(
            text.as_bytes(),
            |k, v| found.push((String::from_utf8(k.to_vec()).unwrap(), v.text().to_owned())),
            |_, _| None,
        )?;
        Some(found)
    }

    #[test]
    fn members_are_cut_where_the_parser_cuts_them() {
        assert_eq!(
            members(r#" {"a" : "x\"}],{" , "b":[1,{"c":"]"}], "c\u0064":-1.5e3 ,"e":{}} "#),
            Some(vec![
                ("a".into(), r#""x\"}],{""#.into()),
                ("b".into(), r#"[1,{"c":"]"}]"#.into()),
                ("cd".into(), "-1.5e3".into()),
                ("e".into(), "{}".into()),
            ])
        );
        assert_eq!(members("{}"), Some(vec![]));
        // Escapes at every offset of an eight-byte word, and strings ending at each.
        for pad in 0..17 {
            let text = format!(
                r#"{{"k":"{}\"\\{}","z":1}}"#,
                "a".repeat(pad),
                "b".repeat(pad)
            );
            let found = members(&text).expect("an object");
            assert_eq!(found.len(), 2, "{text}");
            assert_eq!(found[1], ("z".into(), "1".into()), "{text}");
        }
        assert_eq!(
            members(r#"{"a":"\\"}"#),
            Some(vec![("a".into(), r#""\\""#.into())])
        );
        for broken in [
            "",
            "[1]",
            r#"{"a":1"#,
            r#"{"a":1,}"#,
            r#"{"a" 1}"#,
            r#"{"a":}"#,
            r#"{"a":"x}"#,
            r#"{"a":[1}"#,
            r#"{"a":1} x"#,
            r#"{a:1}"#,
        ] {
            assert_eq!(members(broken), None, "{broken}");
        }
    }

    fn json() -> impl Strategy<Value = serde_json::Value> {
        let leaf = prop_oneof![
            Just(serde_json::Value::Null),
            any::<bool>().prop_map(Into::into),
            any::<i64>().prop_map(Into::into),
            "[\"\\\\{}\\[\\],:a-z\u{e9}\u{1F600} \n]{0,24}".prop_map(Into::into),
        ];
        leaf.prop_recursive(4, 32, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..5).prop_map(Into::into),
                prop::collection::btree_map("[\"\\\\a-c{]{0,3}", inner, 0..5)
                    .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
            ]
        })
    }

    #[test]
    fn a_string_member_is_borrowed_unless_it_holds_an_escape() {
        let plain = Unread::new(br#""tools/call""#).string();
        assert!(
            matches!(plain, Some(Cow::Borrowed("tools/call"))),
            "{plain:?}"
        );
        let escaped = Unread::new(br#""tools\/c\u0061ll""#).string();
        assert!(
            matches!(&escaped, Some(Cow::Owned(s)) if s == "tools/call"),
            "{escaped:?}"
        );
        assert_eq!(Unread::new(b"7").string(), None);
        assert_eq!(Unread::new(br#""unterminated"#).string(), None);
    }

    proptest! {
        /// On any bytes (quotes, escapes, control characters, broken UTF-8 among them), a
        /// member read as a string is what serde_json reads, or nothing when it reads nothing.
        #[test]
        fn a_string_member_is_the_parsers(
            inner in prop::collection::vec(prop_oneof![
                Just(b'"'), Just(b'\\'), Just(b'\n'), Just(0xC3u8), Just(0xA9u8), Just(0xFFu8),
                Just(b'u'), Just(b'0'), Just(b'a'), Just(b' '),
            ], 0..12),
            quoted in any::<bool>(),
        ) {
            let mut text = inner.clone();
            if quoted {
                text.insert(0, b'"');
                text.push(b'"');
            }
            let ours = Unread::new(&text).string().map(Cow::into_owned);
            let parsers = serde_json::from_slice::<String>(&text).ok();
            prop_assert_eq!(ours, parsers);
        }

        /// On any JSON object, written compactly or spaced out, each member's key and value are
        /// the parser's.
        #[test]
        fn members_of_json_objects_are_the_parsers(
            fields in prop::collection::vec(("[\"\\\\a-c]{0,3}", json()), 0..6),
            pretty in any::<bool>(),
        ) {
            let object_value = serde_json::Value::Object(fields.into_iter().collect());
            let text = if pretty {
                serde_json::to_string_pretty(&object_value).unwrap()
            } else {
                serde_json::to_string(&object_value).unwrap()
            };
            let mut found = serde_json::Map::new();
            object(
                text.as_bytes(),
                |k, v| {
                    let value: serde_json::Value = v.parse().expect("each value is JSON");
                    found.insert(String::from_utf8(k.to_vec()).unwrap(), value);
                },
                |_, _| None,
            )
            .expect("an object");
            prop_assert_eq!(serde_json::Value::Object(found), object_value);
        }
    }
}
