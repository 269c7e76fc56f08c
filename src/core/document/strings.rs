//! String literals by their bytes alone: where a plain run (no escape, no quote) stops, and where
//! a literal ends, read by the reading rules (see [`super::read`]) without being decoded.

/// The end (one past the closing quote) of the string literal whose opening quote is at `at`,
/// read by the reading rules (escapes well formed, no raw control character) without decoding it;
/// `None` when it is not one. Its UTF-8 and the pairing of its surrogate escapes are not checked
/// here. Sixteen bytes are looked at a time (eight off x86_64 or without SSE2), as in [`plain_run`]'s
/// first bytes: the string this reads is a result's text copy, one long string dense with
/// escapes, where a search call per escape would cost more than the look.
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

/// The string literal whose opening quote is at `at`, as [`string_end`] reads it: sixteen bytes
/// at a time.
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
pub(crate) fn literal(text: &[u8], at: usize) -> Option<Literal> {
    literal_by_blocks(text, at)
}

/// The string literal whose opening quote is at `at`, as [`string_end`] reads it.
#[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
pub(crate) fn literal(text: &[u8], at: usize) -> Option<Literal> {
    literal_by_words(text, at)
}

/// [`literal`], sixteen bytes at a time: every stop of a block is in its one mask, so the
/// escapes in it are passed over without another look (a text copy has one every few bytes).
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
pub(crate) fn literal_by_blocks(text: &[u8], at: usize) -> Option<Literal> {
    use super::blocks::{self, BLOCK};
    let mut i = at + 1;
    let mut unicode_escapes = false;
    while let Some(block) = blocks::at(text, i) {
        let mut marks = blocks::stops(block);
        let mut next = i + BLOCK;
        while marks != 0 {
            let offset = marks.trailing_zeros() as usize;
            match *block.get(offset)? {
                b'"' => {
                    return Some(Literal {
                        end: i + offset + 1,
                        unicode_escapes,
                    })
                }
                b'\\' => {
                    let after = escape_end(text, i + offset, &mut unicode_escapes)?;
                    if after >= next {
                        next = after;
                        break;
                    }
                    // The escaped bytes are not stops.
                    marks &= u32::MAX << (after - i);
                }
                _ => return None,
            }
        }
        i = next;
    }
    literal_by_bytes(text, i, unicode_escapes)
}

/// The rest of a literal from `i` (a plain byte, an escape or its end), a byte at a time.
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
fn literal_by_bytes(text: &[u8], mut i: usize, mut unicode_escapes: bool) -> Option<Literal> {
    loop {
        match byte_step(text, i, &mut unicode_escapes)? {
            Step::End(literal) => return Some(literal),
            Step::At(next) => i = next,
        }
    }
}

/// A literal read one step on from a byte.
enum Step {
    /// The literal ends here.
    End(Literal),
    /// It goes on from this byte.
    At(usize),
}

/// One step of a literal at byte `i` (a plain byte, an escape or its closing quote); `None` when
/// it is not one.
#[inline(always)]
fn byte_step(text: &[u8], i: usize, unicode_escapes: &mut bool) -> Option<Step> {
    match *text.get(i)? {
        b'"' => Some(Step::End(Literal {
            end: i + 1,
            unicode_escapes: *unicode_escapes,
        })),
        b'\\' => escape_end(text, i, unicode_escapes).map(Step::At),
        0..=0x1F => None,
        _ => Some(Step::At(i + 1)),
    }
}

/// Where the escape whose backslash is at `at` ends, if it is well formed; a `\u` escape is
/// noted in `unicode_escapes`.
#[inline(always)]
fn escape_end(text: &[u8], at: usize, unicode_escapes: &mut bool) -> Option<usize> {
    match text.get(at + 1)? {
        b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => Some(at + 2),
        b'u' if text.get(at + 2..at + 6)?.iter().all(u8::is_ascii_hexdigit) => {
            *unicode_escapes = true;
            Some(at + 6)
        }
        _ => None,
    }
}

/// [`literal`], eight bytes at a time, each word's first stop marked.
#[cfg(any(test, not(all(target_arch = "x86_64", target_feature = "sse2"))))]
pub(crate) fn literal_by_words(text: &[u8], at: usize) -> Option<Literal> {
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
        match byte_step(text, i, &mut unicode_escapes)? {
            Step::End(literal) => return Some(literal),
            Step::At(next) => i = next,
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
/// 16 bytes in one block, here, where the string is read (most strings end there, and a call for
/// each cost as much as the block's test, with the reader's state saved around it); past them,
/// or with fewer, [`longer_run`].
#[inline(always)]
pub(crate) fn plain_run(bytes: &[u8]) -> usize {
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    if let Some(block) = super::blocks::at(bytes, 0) {
        let found = super::blocks::stops(block);
        if found != 0 {
            return found.trailing_zeros() as usize;
        }
    }
    longer_run(bytes)
}

/// [`plain_run`] of a run that is not within one block: with a block, a run past its sixteen
/// bytes; with fewer than sixteen (or no SSE2), eight at a time, each word tested for all three
/// at once.
#[inline(never)]
fn longer_run(bytes: &[u8]) -> usize {
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    if let Some(rest) = bytes.get(super::blocks::BLOCK..) {
        return super::blocks::BLOCK + run_on(rest);
    }
    let mut at = 0;
    for word in bytes.chunks_exact(8).take(2) {
        let found = stops(u64::from_le_bytes(word.try_into().unwrap_or_default()));
        if found != 0 {
            return at + (found.trailing_zeros() / 8) as usize;
        }
        at += 8;
    }
    at + run_on(&bytes[at..])
}

/// [`plain_run`] past its first bytes: the quote or backslash found by `memchr2`, then the run
/// checked for control characters in one pass the compiler vectorises.
fn run_on(rest: &[u8]) -> usize {
    let stop = memchr::memchr2(b'"', b'\\', rest).unwrap_or(rest.len());
    let run = &rest[..stop];
    if run.iter().fold(false, |control, &b| control | (b < 0x20)) {
        return run.iter().position(|&b| b < 0x20).unwrap_or(stop);
    }
    stop
}
