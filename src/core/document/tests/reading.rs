//! Reading JSON text into a document as serde_json reads it: the same values, the same refusals.

use super::*;
use crate::core::document::strings::literal_by_words;
use proptest::prelude::*;

fn text_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        ".{0,12}".prop_map(Value::String),
        "[\"\\\\\u{1}\u{1f}a/é😀]{0,20}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 40, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map(".{0,4}", inner, 0..24)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Any JSON serde_json writes, pretty or not, reads back as the same value.
    #[test]
    fn what_serde_json_writes_reads_back(value in text_value(), pretty in any::<bool>()) {
        let text = if pretty {
            serde_json::to_string_pretty(&value).expect("writes")
        } else {
            value.to_string()
        };
        let doc = Document::read(text.as_bytes(), 64).expect("reads");
        prop_assert_eq!(doc.to_value(), value);
    }

    /// Arbitrary bytes are read or refused, never a panic, and refused exactly when
    /// serde_json refuses them.
    #[test]
    fn bytes_are_read_or_refused_as_serde_json_does(bytes in prop::collection::vec(
        prop_oneof![
            Just(b'"'), Just(b'\\'), Just(b'u'), Just(b'{'), Just(b'}'), Just(b'['),
            Just(b']'), Just(b':'), Just(b','), Just(b'1'), Just(b'e'), Just(b'-'),
            Just(b'.'), Just(b' '), Just(0xff), Just(b'd'), Just(b'8'), any::<u8>(),
        ],
        0..40,
    )) {
        let ours = Document::read(&bytes, 64).map(|d| d.to_value());
        let theirs = serde_json::from_slice::<Value>(&bytes);
        prop_assert_eq!(ours.is_ok(), theirs.is_ok(), "{:?}", String::from_utf8_lossy(&bytes));
        if let (Ok(ours), Ok(theirs)) = (ours, theirs) {
            prop_assert_eq!(ours, theirs);
        }
    }

    /// A string literal's end is found where serde_json ends it, and a literal it refuses has
    /// none (no surrogate escapes: serde_json's skip does not pair them).
    #[test]
    fn a_string_ends_where_serde_json_ends_it(pieces in prop::collection::vec(
        prop::sample::select(vec![
            &b"\""[..], b"\\", b"u", b"n", b"/", b"0", b"a", b"F", b"x", b"\x01", b"\x1f",
            b" ", b"\\u00e9", b"\\u0041", b"\\u00", b"\\uZZZZ", b"\\\\", b"\\\"", b"\\n",
            b"\\q", b"abcdefghijklmnop", "\u{e9}".as_bytes(), b"\x7f", b"\x20\x21",
        ]),
        0..24,
    )) {
        let bytes = pieces.concat();
        let mut text = vec![b'"'];
        text.extend_from_slice(&bytes);
        let theirs = serde_json_end(&text);
        prop_assert_eq!(string_end(&text, 0), theirs, "{:?}", String::from_utf8_lossy(&text));
        prop_assert_eq!(literal_by_words(&text, 0), literal(&text, 0));
        // Whether it holds a `\u` escape: what is left once escaped backslashes are taken out.
        if let Some(read) = literal(&text, 0) {
            let read_text = String::from_utf8_lossy(&text[..read.end]).replace("\\\\", "");
            prop_assert_eq!(read.unicode_escapes, read_text.contains("\\u"));
        }
    }
}

/// An escape at every offset of the first blocks, whole, cut short or followed by more text, ends
/// a literal (or breaks it) where serde_json does, read by blocks and by words alike.
#[test]
fn an_escape_at_any_offset_is_read_alike() {
    for pad in 0..40 {
        for escape in [
            &br#"\""#[..],
            br"\\",
            br"\u0041",
            br"\n",
            br"\q",
            br"\u00",
            br"\",
        ] {
            for after in [&b""[..], b"\"", b"abcdefghijklmnopqrstuvwxyz\"", b"\x01\""] {
                let mut text = vec![b'"'];
                text.extend(std::iter::repeat_n(b'a', pad));
                text.extend_from_slice(escape);
                text.extend_from_slice(after);
                let shown = String::from_utf8_lossy(&text).into_owned();
                assert_eq!(string_end(&text, 0), serde_json_end(&text), "{shown}");
                assert_eq!(literal(&text, 0), literal_by_words(&text, 0), "{shown}");
            }
        }
    }
}

/// Runs of backslashes of every length up to four blocks, starting at every offset of the first
/// span and of the block after it, then a quote, a code or a control character, and a long tail
/// or none: a run's parity decides what the byte after it is, across the edges of blocks and
/// spans, whatever the bytes before carried, and into the last bytes read one at a time.
#[test]
fn runs_of_backslashes_are_read_alike_across_blocks() {
    let long = format!("{}\"", "t".repeat(70));
    for pad in 0..80 {
        for run in 1..66 {
            for after in [&b"\""[..], b"n\"", b"u0041\"", b"\x01\"", b"q\"", b""] {
                for tail in [long.as_bytes(), b""] {
                    let mut text = vec![b'"'];
                    text.extend(std::iter::repeat_n(b'a', pad));
                    text.extend(std::iter::repeat_n(b'\\', run));
                    text.extend_from_slice(after);
                    text.extend_from_slice(tail);
                    read_alike(&text);
                }
            }
        }
    }
}

/// Text of `\u` escapes (as Python's `json.dumps` writes every character past ASCII), whole, cut
/// short or broken, at every offset of the first spans: each escape's four digits are taken with
/// its span, or the span is read a byte at a time where they run past it or are not hex digits.
#[test]
fn unicode_escapes_are_read_alike_across_blocks() {
    for pad in 0..70 {
        for count in [1, 2, 9, 10, 11, 21] {
            for after in [
                &b"\""[..],
                b"\\u00\"",
                b"\\u00e\"",
                b"\\uZZZZ\"",
                b"\\u\"x",
                b"",
                b"\\u00e9",
            ] {
                let mut text = vec![b'"'];
                text.extend(std::iter::repeat_n(b'a', pad));
                for _ in 0..count {
                    text.extend_from_slice(br"\u00e9");
                }
                text.extend_from_slice(after);
                text.extend_from_slice(b"and more text, past another block or two of it\"");
                read_alike(&text);
            }
        }
    }
}

/// `text`, a literal or not, ends where serde_json ends it, and reads alike by blocks and by
/// words (its `\u` escapes noted alike).
fn read_alike(text: &[u8]) {
    let shown = String::from_utf8_lossy(text).into_owned();
    assert_eq!(string_end(text, 0), serde_json_end(text), "{shown}");
    assert_eq!(literal(text, 0), literal_by_words(text, 0), "{shown}");
}

/// Where serde_json ends the value at the start of `text`, if it reads one.
fn serde_json_end(text: &[u8]) -> Option<usize> {
    let mut values =
        serde_json::Deserializer::from_slice(text).into_iter::<serde::de::IgnoredAny>();
    match values.next() {
        Some(Ok(_)) => Some(values.byte_offset()),
        _ => None,
    }
}
