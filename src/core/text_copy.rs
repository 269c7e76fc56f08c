//! A text block's `text` as it was sent: the content of its JSON string literal, escapes not
//! decoded, a slice of the request. A result's text copy is compared with `structuredContent`
//! without being decoded into a string of its own (see [`crate::core::drift`]).

#[cfg(any(test, not(all(target_arch = "x86_64", target_feature = "sse2"))))]
use crate::core::document::quotes_or_backslashes;
use bytes::Bytes;
use std::str::Chars;

/// The content of a JSON string literal (between its quotes), escapes not decoded: valid UTF-8,
/// no raw control character, and (checked by [`TextCopy::new`]) surrogate escapes in pairs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TextCopy {
    content: Bytes,
    /// The first character that is not white space, decoded: read once, when the copy is made.
    first_visible: Option<char>,
}

/// Where a string literal's `\u` escapes break the pairing of surrogates, and how (serde_json's
/// words).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoneSurrogate {
    /// Offset in the literal's content.
    pub at: usize,
    pub message: &'static str,
}

impl TextCopy {
    /// The literal's content `content` (a JSON string, already read as one, without its quotes),
    /// if its surrogate escapes come in pairs.
    pub fn new(content: Bytes) -> Result<TextCopy, LoneSurrogate> {
        // Most copies hold no `\u` escape at all: one pass finds that out.
        let unicode_escapes = memchr::memmem::find(&content, b"\\u").is_some();
        TextCopy::read(content, unicode_escapes)
    }

    /// As [`TextCopy::new`], for a literal whose reading told whether it holds a `\u` escape
    /// (`unicode_escapes`; a `\\u` may count too): without one, there are no surrogates to pair.
    pub fn read(content: Bytes, unicode_escapes: bool) -> Result<TextCopy, LoneSurrogate> {
        if !unicode_escapes {
            return Ok(TextCopy::checked(content));
        }
        let mut at = 0;
        while let Some(found) = content
            .get(at..)
            .and_then(|rest| memchr::memchr(b'\\', rest))
        {
            at += found + 1;
            if content.get(at) != Some(&b'u') {
                at += 1;
                continue;
            }
            let unit = hex4(&content, at + 1);
            at += 5;
            match unit {
                Some(0xDC00..=0xDFFF) => {
                    return Err(LoneSurrogate {
                        at,
                        message: "lone leading surrogate in hex escape",
                    })
                }
                Some(0xD800..=0xDBFF) => {
                    if content.get(at..at + 2) != Some(b"\\u") {
                        return Err(LoneSurrogate {
                            at,
                            message: "unexpected end of hex escape",
                        });
                    }
                    let second = hex4(&content, at + 2);
                    at += 6;
                    if !matches!(second, Some(0xDC00..=0xDFFF)) {
                        return Err(LoneSurrogate {
                            at,
                            message: "lone leading surrogate in hex escape",
                        });
                    }
                }
                _ => {}
            }
        }
        Ok(TextCopy::checked(content))
    }

    /// A copy whose surrogates were found paired.
    fn checked(content: Bytes) -> TextCopy {
        // Decoded from the start until something visible: white space at the start is short, so
        // only a prefix is looked at (a prefix ending inside a character is cut back to the last
        // whole one, and grown if it held only white space).
        let mut window = 64;
        let first_visible = loop {
            let prefix = &content[..window.min(content.len())];
            let text = std::str::from_utf8(prefix)
                .or_else(|e| std::str::from_utf8(&prefix[..e.valid_up_to()]))
                .unwrap_or_default();
            let found = Unescaped(text.chars()).find(|c| !c.is_whitespace());
            // U+FFFD may be an escape the prefix cut short: looked at again in a longer one.
            if found.is_some_and(|c| c != '\u{FFFD}') || window >= content.len() {
                break found;
            }
            window *= 4;
        };
        TextCopy {
            content,
            first_visible,
        }
    }

    /// The literal's content, as sent.
    pub fn as_sent(&self) -> &[u8] {
        &self.content
    }

    /// The text, decoded.
    pub fn chars(&self) -> Unescaped<'_> {
        Unescaped(
            std::str::from_utf8(&self.content)
                .unwrap_or_default()
                .chars(),
        )
    }

    /// The text, decoded into a string of its own.
    pub fn decoded(&self) -> String {
        let mut out = Vec::with_capacity(self.content.len());
        self.decode_into(&mut out);
        String::from_utf8(out).unwrap_or_default()
    }

    /// Appends the text's bytes, decoded (UTF-8), to `out`, in one pass.
    pub fn decode_into(&self, out: &mut Vec<u8>) {
        out.reserve(self.content.len());
        let text = &self.content[..];
        let mut i = 0;
        while i < text.len() {
            let run = memchr::memchr(b'\\', &text[i..]).unwrap_or(text.len() - i);
            out.extend_from_slice(&text[i..i + run]);
            i += run;
            if i == text.len() {
                break;
            }
            let simple = match text.get(i + 1) {
                Some(b'b') => Some(b'\x08'),
                Some(b'f') => Some(b'\x0c'),
                Some(b'n') => Some(b'\n'),
                Some(b'r') => Some(b'\r'),
                Some(b't') => Some(b'\t'),
                Some(b'u') => None,
                Some(&other) => Some(other),
                None => return,
            };
            if let Some(byte) = simple {
                out.push(byte);
                i += 2;
                continue;
            }
            // A `\u` escape (a surrogate pair is twelve bytes): decoded as a character.
            let end = (i + 12).min(text.len());
            let Ok(escape) = std::str::from_utf8(&text[i..end])
                .or_else(|e| std::str::from_utf8(&text[i..i + e.valid_up_to()]))
            else {
                return;
            };
            let mut chars = Unescaped(escape.chars());
            let c = chars.next().unwrap_or('\u{FFFD}');
            let mut buffer = [0u8; 4];
            out.extend_from_slice(c.encode_utf8(&mut buffer).as_bytes());
            i += escape.len() - chars.0.as_str().len();
        }
    }

    /// Whether the text is exactly `json`, written as a JSON string (its quotes and backslashes
    /// escaped the way serialisers write them), read without decoding: the usual copy, one
    /// serialiser's output put in a string by the same serialiser. A `json` holding a raw control
    /// character (pretty-printed white space among them) is never seen so: such a copy is decoded
    /// and compared by value instead.
    pub fn is_escaped(&self, json: &[u8]) -> bool {
        #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
        let escaped = if std::arch::is_x86_feature_detected!("ssse3") {
            // SAFETY: the processor has SSSE3, checked just above.
            unsafe { self.is_escaped_by_spreads(json) }
        } else {
            self.is_escaped_by_blocks(json)
        };
        #[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
        let escaped = self.is_escaped_by_words(json);
        escaped
    }

    /// [`TextCopy::is_escaped`], eight bytes of `json` at a time, each eight with their escapes
    /// written at once ([`blocks::escaped_prefix`](crate::core::document::blocks::escaped_prefix))
    /// and compared with as many of the copy's.
    ///
    /// # Safety
    ///
    /// The processor must have SSSE3.
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    #[target_feature(enable = "ssse3")]
    unsafe fn is_escaped_by_spreads(&self, json: &[u8]) -> bool {
        use crate::core::document::blocks;
        let copy = &self.content[..];
        let (mut i, mut j) = (0, 0);
        while let (Some(w), Some(c)) = (blocks::at::<8>(json, j), blocks::at(copy, i)) {
            // SAFETY: this function's caller has checked that the processor has SSSE3.
            match unsafe { blocks::escaped_prefix(w, c) } {
                Some(written) => (i, j) = (i + written, j + 8),
                None => return false,
            }
        }
        escaped_by_bytes(copy, json, i, j)
    }

    /// [`TextCopy::is_escaped`], sixteen bytes of each at a time: equal up to `json`'s first
    /// quote or backslash, whose escape is read from the copy's block when the block holds it.
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    fn is_escaped_by_blocks(&self, json: &[u8]) -> bool {
        use crate::core::document::blocks::{self, ALL, BLOCK};
        let copy = &self.content[..];
        let (mut i, mut j) = (0, 0);
        while let (Some(w), Some(c)) = (blocks::at(json, j), blocks::at(copy, i)) {
            let marks = blocks::quotes_or_backslashes(w);
            let same = blocks::equal(w, c);
            if marks == 0 {
                if same != ALL {
                    return false;
                }
                (i, j) = (i + BLOCK, j + BLOCK);
                continue;
            }
            let k = marks.trailing_zeros() as usize;
            if !same & ((1u32 << k) - 1) != 0 {
                return false;
            }
            let held = match (c.get(k), c.get(k + 1)) {
                (Some(&backslash), Some(&byte)) => backslash == b'\\' && byte == w[k],
                _ => escaped(copy, i + k, w[k]),
            };
            if !held {
                return false;
            }
            (i, j) = (i + k + 2, j + k + 1);
        }
        escaped_by_bytes(copy, json, i, j)
    }

    /// [`TextCopy::is_escaped`], eight bytes at a time.
    #[cfg(any(test, not(all(target_arch = "x86_64", target_feature = "sse2"))))]
    fn is_escaped_by_words(&self, json: &[u8]) -> bool {
        let copy = &self.content[..];
        let word = |s: &[u8], at: usize| {
            s.get(at..at + 8)
                .and_then(|w| <[u8; 8]>::try_from(w).ok())
                .map(u64::from_le_bytes)
        };
        let (mut i, mut j) = (0, 0);
        // Eight bytes of each at a time: equal up to `json`'s first quote or backslash, which the
        // copy escapes (handled here too: a result's JSON has one every few bytes, and going
        // through the byte-at-a-time step for each cost 5% on the criterion leg).
        while let (Some(w), Some(c)) = (word(json, j), word(copy, i)) {
            let marks = quotes_or_backslashes(w);
            if marks == 0 {
                if w != c {
                    return false;
                }
                (i, j) = (i + 8, j + 8);
                continue;
            }
            let k = (marks.trailing_zeros() / 8) as usize;
            if (w ^ c) & ((1u64 << (8 * k)) - 1) != 0 {
                return false;
            }
            (i, j) = (i + k, j + k);
            if !escaped(copy, i, json[j]) {
                return false;
            }
            (i, j) = (i + 2, j + 1);
        }
        // Fewer than eight bytes left in one of them, and never more again: a byte at a time.
        escaped_by_bytes(copy, json, i, j)
    }

    /// The first character that is not white space, decoded.
    pub fn first_visible(&self) -> Option<char> {
        self.first_visible
    }
}

/// Whether what is left of `copy` from `i` is what is left of `json` from `j`, escaped: a byte
/// at a time. A control character in `json` never matches: the copy, a string's content, has none.
fn escaped_by_bytes(copy: &[u8], json: &[u8], mut i: usize, mut j: usize) -> bool {
    loop {
        let matched = match json.get(j) {
            None => return i == copy.len(),
            Some(&b) if b == b'"' || b == b'\\' => escaped(copy, i, b).then_some(2),
            Some(&b) => (copy.get(i) == Some(&b)).then_some(1),
        };
        let Some(width) = matched else {
            return false;
        };
        (i, j) = (i + width, j + 1);
    }
}

/// Whether `copy` holds `byte` (a quote or backslash) escaped at `at`.
#[inline]
fn escaped(copy: &[u8], at: usize, byte: u8) -> bool {
    copy.get(at) == Some(&b'\\') && copy.get(at + 1) == Some(&byte)
}

fn hex4(text: &[u8], at: usize) -> Option<u32> {
    let digits = std::str::from_utf8(text.get(at..at + 4)?).ok()?;
    u32::from_str_radix(digits, 16).ok()
}

/// The characters of a string literal's content, escapes decoded (a surrogate pair as its one
/// character; anything else malformed, which [`TextCopy::new`] has refused, as U+FFFD).
pub struct Unescaped<'a>(Chars<'a>);

impl Unescaped<'_> {
    fn unit(&mut self) -> Option<u32> {
        let mut n = 0;
        for _ in 0..4 {
            n = n * 16 + self.0.next()?.to_digit(16)?;
        }
        Some(n)
    }
}

impl Iterator for Unescaped<'_> {
    type Item = char;

    fn next(&mut self) -> Option<char> {
        let c = self.0.next()?;
        if c != '\\' {
            return Some(c);
        }
        Some(match self.0.next()? {
            'b' => '\u{8}',
            'f' => '\u{c}',
            'n' => '\n',
            'r' => '\r',
            't' => '\t',
            'u' => {
                let first = self.unit().unwrap_or(0xFFFD);
                let code = if (0xD800..=0xDBFF).contains(&first) {
                    let second = match (self.0.next(), self.0.next()) {
                        (Some('\\'), Some('u')) => self.unit().unwrap_or(0),
                        _ => 0,
                    };
                    0x1_0000 + ((first - 0xD800) << 10) + second.saturating_sub(0xDC00)
                } else {
                    first
                };
                char::from_u32(code).unwrap_or('\u{FFFD}')
            }
            other => other,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn copy(literal: &str) -> Result<TextCopy, LoneSurrogate> {
        let inner = &literal[1..literal.len() - 1];
        TextCopy::new(Bytes::copy_from_slice(inner.as_bytes()))
    }

    /// Whether `copy` is `json` escaped, asked every way this build has (eight bytes at a time,
    /// sixteen, and eight with their escapes written at once where the processor has SSSE3):
    /// asserted to agree, and answered.
    fn judged(copy: &TextCopy, json: &[u8]) -> bool {
        let by_words = copy.is_escaped_by_words(json);
        #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
        {
            assert_eq!(
                copy.is_escaped_by_blocks(json),
                by_words,
                "by blocks, {json:?}"
            );
            if std::arch::is_x86_feature_detected!("ssse3") {
                // SAFETY: the processor has SSSE3, checked just above.
                let by_spreads = unsafe { copy.is_escaped_by_spreads(json) };
                assert_eq!(by_spreads, by_words, "by spreads, {json:?}");
            }
        }
        assert_eq!(copy.is_escaped(json), by_words);
        by_words
    }

    #[test]
    fn decodes_as_serde_json_does() {
        for literal in [
            r#""plain""#,
            r#""{\"a\": [1, \"x\\y\"]}\n""#,
            r#""\u00e9\ud83d\ude00 \/ \b\f\r\t""#,
            r#""""#,
        ] {
            let theirs: String = serde_json::from_str(literal).expect("a string");
            let ours = copy(literal).expect("a copy");
            assert_eq!(ours.decoded(), theirs, "{literal}");
            let chars: String = ours.chars().collect();
            assert_eq!(chars, theirs, "{literal}");
        }
    }

    #[test]
    fn a_copy_that_is_the_text_escaped_is_seen_without_decoding() {
        let json = br#"{"q":"a "b" c\d","n":[1,2]}"#;
        let escaped =
            serde_json::to_string(std::str::from_utf8(json).expect("utf-8")).expect("writes");
        assert!(copy(&escaped).expect("a copy").is_escaped(json));
        let spaced = serde_json::to_string("{\"q\": \"a \\\"b\\\" c\\\\d\", \"n\": [1, 2]}")
            .expect("writes");
        assert!(!copy(&spaced).expect("a copy").is_escaped(json));
        assert!(!copy(r#""{}""#).expect("a copy").is_escaped(b"{} "));
        assert!(copy(r#""""#).expect("a copy").is_escaped(b""));
        assert!(!copy(r#""a\nb""#).expect("a copy").is_escaped(br"a\nb"));
    }

    #[test]
    fn surrogates_must_pair() {
        assert!(copy(r#""\ud83d\ude00""#).is_ok());
        assert_eq!(
            copy(r#""x\ud83d""#).map(|_| ()).unwrap_err().message,
            "unexpected end of hex escape"
        );
        assert_eq!(
            copy(r#""\ude00""#).map(|_| ()).unwrap_err().message,
            "lone leading surrogate in hex escape"
        );
        assert_eq!(
            copy(r#""\ud83d\u0041""#).map(|_| ()).unwrap_err().message,
            "lone leading surrogate in hex escape"
        );
        assert!(
            copy(r#""\\ud83d""#).is_ok(),
            "an escaped backslash, then text"
        );
    }

    #[test]
    fn the_first_visible_character_is_decoded() {
        let far = format!(r#""{}\u005b1]""#, " ".repeat(60));
        assert_eq!(copy(&far).expect("ok").first_visible(), Some('['));
        let farther = format!(r#""{}x""#, "\\n".repeat(200));
        assert_eq!(copy(&farther).expect("ok").first_visible(), Some('x'));
        assert_eq!(
            copy(r#"" \n\t {\"a\":1}""#).expect("ok").first_visible(),
            Some('{')
        );
        assert_eq!(
            copy(r#""\u0020[1]""#).expect("ok").first_visible(),
            Some('[')
        );
        assert_eq!(
            copy(r#""\u3000done""#).expect("ok").first_visible(),
            Some('d')
        );
        assert_eq!(copy(r#""  ""#).expect("ok").first_visible(), None);
    }

    proptest::proptest! {
        /// No bytes make the copy's checks or its decoding panic, and both ways of comparing it
        /// agree.
        #[test]
        fn any_bytes_are_handled(bytes in proptest::collection::vec(
            proptest::prop_oneof![
                proptest::strategy::Just(b'\\'), proptest::strategy::Just(b'u'),
                proptest::strategy::Just(b'd'), proptest::strategy::Just(b'8'),
                proptest::strategy::Just(b'"'), proptest::prelude::any::<u8>(),
            ],
            0..48,
        )) {
            if let Ok(copy) = TextCopy::new(Bytes::from(bytes.clone())) {
                let _ = copy.decoded();
                let _ = copy.first_visible();
                let _ = judged(&copy, &bytes);
            }
        }
    }

    /// `json` written as a JSON string's content, as serialisers write it.
    fn escape(json: &[u8]) -> Vec<u8> {
        let text = serde_json::to_string(&String::from_utf8_lossy(json)).expect("writes");
        text.as_bytes()[1..text.len() - 1].to_vec()
    }

    /// A quote or backslash at every offset of the first blocks, and a copy a byte longer or
    /// shorter than the text escaped, are judged alike by blocks and by words.
    #[test]
    fn escapes_at_any_offset_and_copies_of_another_length() {
        for pad in 0..40 {
            for mark in [&b"\""[..], b"\\", b"\\\"", b"\"x\\"] {
                for tail in [&b""[..], b"bcdefghijklmnopqrstu"] {
                    let mut json = b"a".repeat(pad);
                    json.extend_from_slice(mark);
                    json.extend_from_slice(tail);
                    let escaped = escape(&json);
                    let same = TextCopy::new(Bytes::from(escaped.clone())).expect("a copy");
                    assert!(judged(&same, &json), "{pad} {mark:?} {tail:?}");
                    let mut longer = escaped.clone();
                    longer.push(b'x');
                    let longer = TextCopy::new(Bytes::from(longer)).expect("a copy");
                    assert!(!judged(&longer, &json), "{pad} {mark:?} {tail:?}");
                    let mut shorter = escaped.clone();
                    shorter.pop();
                    let shorter = TextCopy::new(Bytes::from(shorter)).expect("a copy");
                    assert!(!judged(&shorter, &json), "{pad} {mark:?} {tail:?}");
                }
            }
        }
    }

    proptest::proptest! {
        /// Text written as a string is seen as its copy, at any length and wherever its quotes
        /// and backslashes fall; a change of one byte in either is not.
        #[test]
        fn escaped_text_is_seen_and_any_change_is_not(
            json in "[ab\"\\\\:{}, \u{e9}]{0,80}",
            at in 0usize..128,
            to in proptest::prelude::any::<u8>(),
        ) {
            let escaped = escape(json.as_bytes());
            let same = TextCopy::new(Bytes::from(escaped.clone())).expect("a copy");
            proptest::prop_assert!(judged(&same, json.as_bytes()));
            let mut changed = escaped.clone();
            if let Some(byte) = changed.get_mut(at) {
                *byte = to;
            }
            if let Ok(other) = TextCopy::new(Bytes::from(changed.clone())) {
                proptest::prop_assert_eq!(judged(&other, json.as_bytes()), changed == escaped);
            }
            let mut longer = json.clone().into_bytes();
            longer.insert(at.min(longer.len()), b'x');
            proptest::prop_assert!(!judged(&same, &longer));
        }
    }

    proptest::proptest! {
        /// Any string, written as serde_json writes it (escapes and all), decodes back to itself.
        #[test]
        fn any_string_decodes_back(text in "(.|[\"\\\\\n\t\u{1}\u{7f}é😀])*") {
            let literal = serde_json::to_string(&text).expect("writes");
            let ours = copy(&literal).expect("a copy");
            proptest::prop_assert_eq!(ours.decoded(), text);
        }
    }
}
