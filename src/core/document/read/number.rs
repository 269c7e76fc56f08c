//! The reader's numbers: a literal read, its digits added up on the way (see
//! [`scanned`]), kept as its text with its kind and bits.

use super::{ReadError, Reader, MAX_NUMBER_LENGTH};
use crate::core::document::number::{primitive, scanned};

impl Reader<'_> {
    /// Reads a number literal (the reader is at its first character), keeping its text. Its
    /// digits are added up as they are read, so that the usual number (an integer, a short
    /// decimal) has its kind and bits with no second look at the literal.
    pub(super) fn number(&mut self) -> Result<(), ReadError> {
        let text = self.text;
        let byte = |at: usize| text.get(at).copied();
        let start = self.at;
        let mut at = start;
        let negative = byte(at) == Some(b'-');
        at += usize::from(negative);
        // The digits' value: exact while there are at most 19 of them (below 10^19 < 2^64).
        let mut digits = 0u64;
        let mut add = |at: &mut usize| {
            let from = *at;
            while let Some(d @ b'0'..=b'9') = byte(*at) {
                digits = digits.wrapping_mul(10).wrapping_add(u64::from(d - b'0'));
                *at += 1;
            }
            *at - from
        };
        let whole = match byte(at) {
            Some(b'0') => {
                at += 1;
                1
            }
            Some(b'1'..=b'9') => add(&mut at),
            _ => return Err(self.invalid_number(at)),
        };
        let mut fraction = None;
        if byte(at) == Some(b'.') {
            at += 1;
            if !matches!(byte(at), Some(b'0'..=b'9')) {
                return Err(self.invalid_number(at));
            }
            fraction = Some(add(&mut at));
        }
        let mut exponent = false;
        if let Some(b'e' | b'E') = byte(at) {
            exponent = true;
            at += 1;
            if let Some(b'+' | b'-') = byte(at) {
                at += 1;
            }
            if !matches!(byte(at), Some(b'0'..=b'9')) {
                return Err(self.invalid_number(at));
            }
            while let Some(b'0'..=b'9') = byte(at) {
                at += 1;
            }
        }
        self.at = at;
        if at - start > MAX_NUMBER_LENGTH {
            return Err(ReadError::NumberTooLong { length: at - start });
        }
        // ASCII digits and signs only: always UTF-8, and a slice of the text's own `str` when
        // the text is known to be UTF-8.
        let literal = match self.utf8 {
            Some(text) => text.get(start..at),
            None => std::str::from_utf8(&text[start..at]).ok(),
        }
        .unwrap_or("0");
        let (kind, bits) = match exponent {
            false => scanned(literal, negative, digits, whole, fraction),
            true => primitive(literal, false),
        };
        self.push(kind, start as u32, literal.len() as u32, bits);
        Ok(())
    }

    /// A number that breaks off at `at`.
    fn invalid_number(&mut self, at: usize) -> ReadError {
        self.at = at;
        self.error("invalid number")
    }
}
