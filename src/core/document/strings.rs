//! String literals by their bytes alone: where a plain run (no escape, no quote) stops, and where
//! a literal ends, read by the reading rules (see [`super::read`]) without being decoded.

/// The end (one past the closing quote) of the string literal whose opening quote is at `at`,
/// read by the reading rules (escapes well formed, no raw control character) without decoding it;
/// `None` when it is not one. Its UTF-8 and the pairing of its surrogate escapes are not checked
/// here. Sixty-four bytes are looked at a time (after a first sixteen; eight off x86_64 or without
/// SSE2): the string this reads is a result's text copy, one long string dense with escapes, where
/// a look per escape would cost more than the bytes between them.
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

/// The string literal whose opening quote is at `at`, as [`string_end`] reads it, by blocks and
/// spans ([`literal_by_blocks`]).
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
pub(crate) fn literal(text: &[u8], at: usize) -> Option<Literal> {
    literal_by_blocks(text, at)
}

/// The string literal whose opening quote is at `at`, as [`string_end`] reads it.
#[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
pub(crate) fn literal(text: &[u8], at: usize) -> Option<Literal> {
    literal_by_words(text, at)
}

/// [`literal`], sixteen bytes, then sixty-four at a time (sixteen again near the text's end): a
/// span's escapes are all found from its backslashes at once (see [`escapes`]), its closing quote
/// is its first quote not escaped, and the span is passed in a few instructions however many
/// escapes it holds (a text copy has one every few bytes; `\u` escapes with their four hex digits
/// in the span included). A control character or a malformed escape before the closing quote is
/// no literal; a `\u` escape whose digits run past a span starts the next span; the last bytes,
/// fewer than a block, are read a byte at a time.
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
pub(crate) fn literal_by_blocks(text: &[u8], at: usize) -> Option<Literal> {
    use super::blocks::{self, BLOCK, SPAN};
    let mut i = at + 1;
    let mut unicode_escapes = false;
    // 1 when the byte at `i` is escaped by the backslash before it.
    let mut carried = 0u64;
    loop {
        // A block first: most literals are short, and end in it.
        let span = if i > at + 1 {
            blocks::at::<SPAN>(text, i)
        } else {
            None
        };
        let (marks, width) = match span {
            Some(span) => (blocks::marks(span), SPAN),
            None => match blocks::at::<BLOCK>(text, i) {
                Some(block) => (blocks::marks(block), BLOCK),
                None => break,
            },
        };
        let (escaped, escaping) = escapes(marks.backslashes, carried);
        let quotes = marks.quotes & !escaped;
        // The bytes before the closing quote (all of them, if it is not here).
        let before = match quotes {
            0 => u64::MAX >> (64 - width),
            quotes => (quotes & quotes.wrapping_neg()) - 1,
        };
        if marks.controls & before != 0 {
            // A control character before the closing quote: in no literal.
            return None;
        }
        // Escaped bytes other than a quote or a backslash (each always an escape of its own).
        let letters = escaped & before & !(marks.quotes | marks.backslashes);
        if letters != 0 {
            let bytes = &text[i..i + width];
            let codes = blocks::escape_codes(bytes);
            if letters & !(codes.short | codes.unicode) != 0 {
                return None;
            }
            let unicode = letters & codes.unicode;
            if unicode != 0 {
                // Each `u`'s four hex digits, those of them here.
                let digits = (unicode << 1) | (unicode << 2) | (unicode << 3) | (unicode << 4);
                if digits & (u64::MAX >> (64 - width)) & !blocks::hex_digits(bytes) != 0 {
                    return None;
                }
                unicode_escapes = true;
                // A `\u` escape whose digits run past the span (the last escape before the
                // closing quote, if any: a quote among its digits is no hex digit): the spans go
                // on from its backslash.
                let past = unicode >> (width - 4);
                if past != 0 {
                    (i, carried) = (i + width - 5 + past.trailing_zeros() as usize, 0);
                    continue;
                }
            }
        }
        if quotes != 0 {
            return Some(Literal {
                end: i + quotes.trailing_zeros() as usize + 1,
                unicode_escapes,
            });
        }
        carried = (escaping >> (width - 1)) & 1;
        i += width;
    }
    // From the backslash that escapes the byte at `i`, if one does.
    literal_by_bytes(text, i - carried as usize, unicode_escapes)
}

/// The bytes of a span that an escape's backslash escapes, and the backslashes that escape
/// them, from the span's backslashes (bit k for byte k) and whether its first byte is escaped
/// by the bytes before (`carried`, 0 or 1): in a run of backslashes every other one escapes the
/// byte after it, counted from the run's start. The run's parity comes from a subtraction, as in
/// simdjson (Langdale and Lemire, "Parsing Gigabytes of JSON per Second", 2019): subtracting a
/// run's bits from the odd positions above each of its backslashes borrows through it, so that
/// runs starting on even and on odd bytes come out alike. A borrow only goes up, so the bits of
/// a block never depend on the bits above them (a block's marks need no span's).
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
#[inline(always)]
fn escapes(backslashes: u64, carried: u64) -> (u64, u64) {
    const ODD: u64 = 0xAAAA_AAAA_AAAA_AAAA;
    // The backslashes not escaped by the bytes before.
    let unescaped = backslashes & !carried;
    // Each escaping backslash and the byte it escapes (simdjson's "escape and terminal code").
    let pairs = (((unescaped << 1) | ODD).wrapping_sub(unescaped)) ^ ODD;
    (pairs ^ (backslashes | carried), pairs & backslashes)
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
