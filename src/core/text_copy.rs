//! A text block's `text` as it was sent: the content of its JSON string literal, escapes not
//! decoded, a slice of the request. A result's text copy is compared with `structuredContent`
//! without being decoded into a string of its own (see [`crate::core::drift`]).

use bytes::Bytes;
use std::str::Chars;

/// The content of a JSON string literal (between its quotes), escapes not decoded: valid UTF-8,
/// no raw control character, and (checked by [`TextCopy::new`]) surrogate escapes in pairs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TextCopy(Bytes);

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
        let mut at = 0;
        while let Some(found) = memchr::memchr(b'\\', &content[at..]) {
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
        Ok(TextCopy(content))
    }

    /// The literal's content, as sent.
    pub fn as_sent(&self) -> &[u8] {
        &self.0
    }

    /// The text, decoded.
    pub fn chars(&self) -> Unescaped<'_> {
        Unescaped(std::str::from_utf8(&self.0).unwrap_or_default().chars())
    }

    /// The text's bytes (UTF-8), decoded.
    pub fn bytes(&self) -> impl Iterator<Item = u8> + '_ {
        self.chars().flat_map(|c| {
            let mut buffer = [0u8; 4];
            let length = c.encode_utf8(&mut buffer).len();
            buffer.into_iter().take(length)
        })
    }

    /// The text, decoded into a string of its own (for the cold paths).
    pub fn decoded(&self) -> String {
        self.chars().collect()
    }

    /// The first character that is not white space, decoded.
    pub fn first_visible(&self) -> Option<char> {
        self.chars().find(|c| !c.is_whitespace())
    }
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
            assert_eq!(
                ours.bytes().collect::<Vec<u8>>(),
                theirs.as_bytes(),
                "{literal}"
            );
        }
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
}
