//! String literals by their bytes alone: where a plain run (no escape, no quote) stops, and where
//! a literal ends, read by the reading rules (see [`super::read`]) without being decoded.

/// The end (one past the closing quote) of the string literal whose opening quote is at `at`,
/// read by the reading rules (escapes well formed, no raw control character) without decoding it;
/// `None` when it is not one. Its UTF-8 and the pairing of its surrogate escapes are not checked
/// here. Eight bytes are looked at a time, as in [`plain_run`]'s first words: the string this
/// reads is a result's text copy, one long string dense with escapes, where a search call per
/// escape would cost more than the look.
pub(crate) fn string_end(text: &[u8], at: usize) -> Option<usize> {
    literal(text, at).map(|l| l.end)
}

/// A string literal read by [`string_end`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Literal {
    /// One past its closing quote.
    pub end: usize,
    /// It holds a `\u` escape (whose surrogates may need pairing).
    pub unicode_escapes: bool,
}

/// The string literal whose opening quote is at `at`, as [`string_end`] reads it.
pub(crate) fn literal(text: &[u8], at: usize) -> Option<Literal> {
    let mut i = at + 1;
    let mut unicode_escapes = false;
    loop {
        while let Some(word) = text.get(i..i + 8) {
            let found = stops(u64::from_le_bytes(word.try_into().ok()?));
            if found != 0 {
                i += (found.trailing_zeros() / 8) as usize;
                break;
            }
            i += 8;
        }
        match *text.get(i)? {
            b'"' => {
                return Some(Literal {
                    end: i + 1,
                    unicode_escapes,
                })
            }
            b'\\' => match text.get(i + 1)? {
                b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => i += 2,
                b'u' if text.get(i + 2..i + 6)?.iter().all(u8::is_ascii_hexdigit) => {
                    unicode_escapes = true;
                    i += 6;
                }
                _ => return None,
            },
            0..=0x1F => return None,
            _ => i += 1,
        }
    }
}

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGH: u64 = 0x8080_8080_8080_8080;

/// The quotes and backslashes among the eight bytes of `word` (read little-endian), each marked
/// by its high bit (a byte's high bit is set where it XORs to zero). The lowest mark is exact;
/// marks above it may not be. The JSON texts of results are searched so, eight bytes at a time.
#[inline]
pub(crate) fn quotes_or_backslashes(word: u64) -> u64 {
    let quote = word ^ (ONES * u64::from(b'"'));
    let backslash = word ^ (ONES * u64::from(b'\\'));
    ((quote.wrapping_sub(ONES) & !quote) | (backslash.wrapping_sub(ONES) & !backslash)) & HIGH
}

/// The bytes of `word` that end a plain run: a quote, a backslash or a control character,
/// marked as [`quotes_or_backslashes`] marks them.
#[inline]
fn stops(word: u64) -> u64 {
    quotes_or_backslashes(word) | (word.wrapping_sub(ONES * 0x20) & !word & HIGH)
}

/// The length of the run of `bytes` before a quote, a backslash or a control character. The first
/// 16 bytes eight at a time, each word tested for all three at once (most strings end there);
/// past them, the quote or backslash found by `memchr2`, then the run checked for control
/// characters in one pass the compiler vectorises.
pub(super) fn plain_run(bytes: &[u8]) -> usize {
    let mut at = 0;
    for word in bytes.chunks_exact(8).take(2) {
        let found = stops(u64::from_le_bytes(word.try_into().unwrap_or_default()));
        if found != 0 {
            return at + (found.trailing_zeros() / 8) as usize;
        }
        at += 8;
    }
    let rest = &bytes[at..];
    let stop = memchr::memchr2(b'"', b'\\', rest).unwrap_or(rest.len());
    let run = &rest[..stop];
    if run.iter().fold(false, |control, &b| control | (b < 0x20)) {
        return at + run.iter().position(|&b| b < 0x20).unwrap_or(stop);
    }
    at + stop
}
