//! Sixteen bytes at a time, with SSE2 (in every x86_64 processor): the quotes, backslashes and
//! control characters of a block (or of a span of four blocks, in 64 bits), the bytes that may
//! follow an escape's backslash, hex digits, and where two blocks hold the same bytes, each as a
//! mask of one bit per byte (bit k for byte k), every such byte marked and no other. The long strings of
//! results (a text copy, dense with escapes) are read and compared through these: a block's
//! marks, once found, give a literal's reader every escape in it, where eight bytes at a time gave
//! only the first (the copy's comparison takes the first mark and looks again past its escape).
//! Built only where SSE2 is on (every x86_64 target but a few freestanding ones); elsewhere
//! [`super::strings`] and the copy's comparison go eight bytes at a time.

use std::arch::x86_64::{
    __m128i, _mm_cmpeq_epi8, _mm_loadl_epi64, _mm_loadu_si128, _mm_max_epu8, _mm_min_epu8,
    _mm_movemask_epi8, _mm_or_si128, _mm_set1_epi8, _mm_shuffle_epi8,
};

/// Bytes in a block.
pub(crate) const BLOCK: usize = 16;

/// All of a block's bytes marked.
pub(crate) const ALL: u32 = 0xFFFF;

// SAFETY (every `unsafe` here but `escaped_prefix`'s, which says its own): this module is built
// only with `target_feature = "sse2"` on (part of the x86_64 baseline, in every such processor);
// the one load reads 16 bytes through a reference to 16 bytes.

#[inline(always)]
fn load(block: &[u8; BLOCK]) -> __m128i {
    unsafe { _mm_loadu_si128(block.as_ptr().cast()) }
}

#[inline(always)]
fn each(byte: u8) -> __m128i {
    unsafe { _mm_set1_epi8(byte as i8) }
}

/// The quotes and backslashes of `v`, each such byte all ones, every other all zeros.
#[inline(always)]
fn quote_or_backslash_bytes(v: __m128i) -> __m128i {
    unsafe {
        _mm_or_si128(
            _mm_cmpeq_epi8(v, each(b'"')),
            _mm_cmpeq_epi8(v, each(b'\\')),
        )
    }
}

/// The control characters (below 0x20) of `v`, each such byte all ones, every other all zeros.
#[inline(always)]
fn controls(v: __m128i) -> __m128i {
    // Unsigned, a byte is below 0x20 exactly when the least of it and 0x1F is itself.
    unsafe { _mm_cmpeq_epi8(_mm_min_epu8(v, each(0x1F)), v) }
}

/// The quotes and backslashes of `block`.
#[inline(always)]
pub(crate) fn quotes_or_backslashes(block: &[u8; BLOCK]) -> u32 {
    unsafe { _mm_movemask_epi8(quote_or_backslash_bytes(load(block))) as u32 }
}

/// The quotes, backslashes and control characters (below 0x20) of `block`: the bytes that end a
/// string's plain run.
#[inline(always)]
pub(crate) fn stops(block: &[u8; BLOCK]) -> u32 {
    let v = load(block);
    unsafe { _mm_movemask_epi8(_mm_or_si128(quote_or_backslash_bytes(v), controls(v))) as u32 }
}

/// Bytes in a span: four blocks, whose marks fill 64 bits.
pub(crate) const SPAN: usize = 4 * BLOCK;

/// `found`'s masks of each block of `bytes` (a block or a span: a whole number of blocks, at most
/// four), block k's in bits 16k to 16k + 15.
#[inline(always)]
fn per_block<const N: usize>(bytes: &[u8], found: impl Fn(__m128i) -> [__m128i; N]) -> [u64; N] {
    debug_assert!(bytes.len() <= SPAN && bytes.len() % BLOCK == 0);
    let mut all = [0; N];
    for (k, block) in bytes.chunks_exact(BLOCK).take(SPAN / BLOCK).enumerate() {
        let Ok(block) = block.try_into() else {
            continue;
        };
        for (all, found) in all.iter_mut().zip(found(load(block))) {
            *all |= u64::from(unsafe { _mm_movemask_epi8(found) } as u32) << (BLOCK * k);
        }
    }
    all
}

/// The quotes, backslashes and control characters (below 0x20) of a block or a span, each a mask
/// of their own (block k of a span in bits 16k to 16k + 15).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Marks {
    pub quotes: u64,
    pub backslashes: u64,
    pub controls: u64,
}

/// The [`Marks`] of `bytes`, a block or a span (its length known where it is called, so that the
/// blocks are looked at with no count kept).
#[inline(always)]
pub(crate) fn marks<const LEN: usize>(bytes: &[u8; LEN]) -> Marks {
    let is = |v, byte| unsafe { _mm_cmpeq_epi8(v, each(byte)) };
    let [quotes, backslashes, controls] =
        per_block(bytes, |v| [is(v, b'"'), is(v, b'\\'), controls(v)]);
    Marks {
        quotes,
        backslashes,
        controls,
    }
}

/// The letters of a block or a span that may follow an escape's backslash: `short`, those of an
/// escape of two bytes but a quote and a backslash (`/`, `b`, `f`, `n`, `r`, `t`: an escaped quote
/// or backslash is known from the [`Marks`]), and `unicode`, each `u` (an escape of four hex
/// digits more).
#[derive(Debug, Clone, Copy)]
pub(crate) struct EscapeCodes {
    pub short: u64,
    pub unicode: u64,
}

/// The [`EscapeCodes`] of `bytes`, a block or a span.
#[inline(always)]
pub(crate) fn escape_codes(bytes: &[u8]) -> EscapeCodes {
    let [short, unicode] = per_block(bytes, |v| {
        let is = |byte: u8| unsafe { _mm_cmpeq_epi8(v, each(byte)) };
        let or = |a, b| unsafe { _mm_or_si128(a, b) };
        let short = or(
            or(is(b'/'), is(b'b')),
            or(or(is(b'f'), is(b'n')), or(is(b'r'), is(b't'))),
        );
        [short, is(b'u')]
    });
    EscapeCodes { short, unicode }
}

/// The hex digits (`0-9`, `a-f`, `A-F`) of `bytes`, a block or a span.
#[inline(always)]
pub(crate) fn hex_digits(bytes: &[u8]) -> u64 {
    let [digits] = per_block(bytes, |v| {
        // Unsigned, `low <= byte <= high` exactly when the byte, raised to at least `low` and
        // lowered to at most `high`, is itself.
        let within = |low: u8, high: u8| unsafe {
            _mm_cmpeq_epi8(_mm_min_epu8(_mm_max_epu8(v, each(low)), each(high)), v)
        };
        [unsafe {
            _mm_or_si128(
                within(b'0', b'9'),
                _mm_or_si128(within(b'a', b'f'), within(b'A', b'F')),
            )
        }]
    });
    digits
}

/// The bytes where `a` and `b` hold the same byte.
#[inline(always)]
pub(crate) fn equal(a: &[u8; BLOCK], b: &[u8; BLOCK]) -> u32 {
    unsafe { _mm_movemask_epi8(_mm_cmpeq_epi8(load(a), load(b))) as u32 }
}

/// Eight bytes written as a JSON string's content writes them when only their quotes and
/// backslashes need escaping, for each set of those (a mask of eight bits): where each byte goes
/// (a shuffle, `0x80` where a backslash goes), the backslashes, and how many bytes that makes.
struct Spreads {
    shuffle: [[u8; BLOCK]; 256],
    backslashes: [[u8; BLOCK]; 256],
    len: [u8; 256],
}

const fn spreads() -> Spreads {
    let mut spreads = Spreads {
        shuffle: [[0x80; BLOCK]; 256],
        backslashes: [[0; BLOCK]; 256],
        len: [0; 256],
    };
    let mut marks = 0;
    while marks < 256 {
        let (mut k, mut at) = (0, 0);
        while k < 8 {
            if marks & (1 << k) != 0 {
                spreads.backslashes[marks][at] = b'\\';
                at += 1;
            }
            spreads.shuffle[marks][at] = k as u8;
            at += 1;
            k += 1;
        }
        spreads.len[marks] = at as u8;
        marks += 1;
    }
    spreads
}

static SPREADS: Spreads = spreads();

/// How many bytes of `copy` are `json`'s eight, escaped (each quote and backslash preceded by a
/// backslash, every other byte as it is), when `copy` starts with them so; `None` when it does
/// not. One table lookup for all eight, however many escapes they hold: a result's JSON has a
/// quote every few bytes, each of which otherwise costs a look of its own.
///
/// # Safety
///
/// The processor must have SSSE3.
#[target_feature(enable = "ssse3")]
pub(crate) unsafe fn escaped_prefix(json: &[u8; 8], copy: &[u8; BLOCK]) -> Option<usize> {
    // SAFETY: the load reads eight bytes through a reference to eight (its upper half zero, and
    // never a mark); the rest are register operations of SSE2 and SSSE3, which this function is
    // built for and which its caller has checked the processor has.
    unsafe {
        let eight = _mm_loadl_epi64(json.as_ptr().cast());
        let marks = (_mm_movemask_epi8(quote_or_backslash_bytes(eight)) & 0xFF) as usize;
        let written = _mm_or_si128(
            _mm_shuffle_epi8(eight, load(&SPREADS.shuffle[marks])),
            load(&SPREADS.backslashes[marks]),
        );
        let len = u32::from(SPREADS.len[marks]);
        let wanted = (1u32 << len) - 1;
        let equal = _mm_movemask_epi8(_mm_cmpeq_epi8(written, load(copy))) as u32;
        (equal & wanted == wanted).then_some(len as usize)
    }
}

/// The `N` bytes of `bytes` starting at `at` (a block, a span), if there are as many from there.
#[inline(always)]
pub(crate) fn at<const N: usize>(bytes: &[u8], at: usize) -> Option<&[u8; N]> {
    bytes.get(at..at.checked_add(N)?)?.try_into().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every byte value, in every position of a block, is marked exactly when it is one.
    #[test]
    fn a_block_marks_exactly_its_stops_and_its_equal_bytes() {
        for byte in 0..=255u8 {
            for position in 0..BLOCK {
                let mut block = [b'a'; BLOCK];
                block[position] = byte;
                let bit = 1u32 << position;
                let quote_or_backslash = byte == b'"' || byte == b'\\';
                let expected = |marked: bool| if marked { bit } else { 0 };
                assert_eq!(
                    quotes_or_backslashes(&block),
                    expected(quote_or_backslash),
                    "{byte:#x} at {position}"
                );
                assert_eq!(
                    stops(&block),
                    expected(quote_or_backslash || byte < 0x20),
                    "{byte:#x} at {position}"
                );
                assert_eq!(
                    equal(&block, &[b'a'; BLOCK]),
                    ALL & !expected(byte != b'a'),
                    "{byte:#x} at {position}"
                );
            }
        }
        assert_eq!(at(b"0123456789abcdef", 0), Some(b"0123456789abcdef"));
        assert_eq!(at::<BLOCK>(b"0123456789abcdef", 1), None);
        assert_eq!(at::<BLOCK>(b"", usize::MAX), None);
    }
}
