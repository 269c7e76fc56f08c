//! A number of a document: its literal, which is its exact value, and the primitive it fits in.

use super::Kind;
use jsonschema::json::JsonNumber;
use std::borrow::Cow;

/// A number as the validator reads it.
#[derive(Debug, Clone, Copy)]
pub struct Number<'a> {
    kind: Kind,
    bits: u64,
    literal: &'a str,
}

impl<'a> Number<'a> {
    pub(super) fn new(kind: Kind, bits: u64, literal: &'a str) -> Self {
        Number {
            kind,
            bits,
            literal,
        }
    }

    /// The number as `serde_json` holds it: its literal, exactly.
    pub(super) fn to_serde(self) -> serde_json::Number {
        match self.kind {
            Kind::Unsigned => self.bits.into(),
            Kind::Signed => (self.bits as i64).into(),
            _ => self
                .literal
                .parse()
                .unwrap_or_else(|_| serde_json::Number::from(0u8)),
        }
    }
}

/// The kind and bits of the number written as `literal` (a JSON number, already checked):
/// an integer in a `u64` or (negative) an `i64` when it fits, else its nearest `f64`.
pub(super) fn primitive(literal: &str, integer: bool) -> (Kind, u64) {
    if integer {
        if let Some(digits) = literal.strip_prefix('-') {
            if digits != "0" {
                if let Ok(n) = literal.parse::<i64>() {
                    return (Kind::Signed, n as u64);
                }
            }
        } else if let Ok(n) = literal.parse::<u64>() {
            return (Kind::Unsigned, n);
        }
    }
    let float = literal.parse::<f64>().unwrap_or(f64::NAN);
    (Kind::Float, float.to_bits())
}

impl JsonNumber for Number<'_> {
    fn as_u64(&self) -> Option<u64> {
        match self.kind {
            Kind::Unsigned => Some(self.bits),
            _ => None,
        }
    }

    fn as_i64(&self) -> Option<i64> {
        match self.kind {
            Kind::Unsigned => i64::try_from(self.bits).ok(),
            Kind::Signed => Some(self.bits as i64),
            _ => None,
        }
    }

    fn as_f64(&self) -> Option<f64> {
        match self.kind {
            Kind::Unsigned => Some(self.bits as f64),
            Kind::Signed => Some(self.bits as i64 as f64),
            _ => Some(f64::from_bits(self.bits)).filter(|f| f.is_finite()),
        }
    }

    fn as_str(&self) -> Cow<'_, str> {
        Cow::Borrowed(self.literal)
    }

    fn to_number(&self) -> Cow<'_, serde_json::Number> {
        Cow::Owned(self.to_serde())
    }

    fn is_integer(&self) -> bool {
        match self.kind {
            Kind::Unsigned | Kind::Signed => true,
            _ => literal_is_integer(self.literal),
        }
    }

    fn is_written_as_integer(&self) -> bool {
        !self.literal.contains(['.', 'e', 'E'])
    }
}

/// Whether the number written as `literal` (a JSON number) is an integer, exactly: its digits,
/// trailing zeros aside, end at or before the decimal point once the exponent has moved it.
pub(super) fn literal_is_integer(literal: &str) -> bool {
    let unsigned = literal.trim_start_matches('-');
    let (mantissa, exponent) = match unsigned.find(['e', 'E']) {
        Some(at) => (&unsigned[..at], &unsigned[at + 1..]),
        None => (unsigned, "0"),
    };
    let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let digits = whole.bytes().chain(fraction.bytes());
    if digits.clone().all(|b| b == b'0') {
        return true;
    }
    let trailing_zeros = fraction
        .bytes()
        .rev()
        .chain(whole.bytes().rev())
        .take_while(|&b| b == b'0')
        .count() as i64;
    let exponent = saturating_exponent(exponent);
    exponent
        .saturating_sub(fraction.len() as i64)
        .saturating_add(trailing_zeros)
        >= 0
}

/// An exponent's digits (with an optional sign) as an `i64`, saturating.
fn saturating_exponent(text: &str) -> i64 {
    let (negative, digits) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    let magnitude = digits.bytes().fold(0i64, |n, b| {
        n.saturating_mul(10).saturating_add(i64::from(b - b'0'))
    });
    if negative {
        -magnitude
    } else {
        magnitude
    }
}
