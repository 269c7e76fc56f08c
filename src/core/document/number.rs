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
    let float = short_decimal(literal)
        .or_else(|| literal.parse::<f64>().ok())
        .unwrap_or(f64::NAN);
    (Kind::Float, float.to_bits())
}

/// [`primitive`] for a literal with no exponent that the reader has read digit by digit:
/// `digits` their value (exact when there are at most 19), `whole` how many come before its
/// point and `fraction` how many after, if it has one. An integer of at most 19 digits and a
/// short decimal (see [`short_decimal`]) are made from `digits`; any other literal is parsed.
pub(super) fn scanned(
    literal: &str,
    negative: bool,
    digits: u64,
    whole: usize,
    fraction: Option<usize>,
) -> (Kind, u64) {
    match fraction {
        None if whole <= 19 => match (negative, digits) {
            (false, n) => return (Kind::Unsigned, n),
            // `-0` is no integer of its own: the float, as the general path makes it.
            (true, 0) => return (Kind::Float, (-0.0f64).to_bits()),
            // Down to -2^63, whose digits as an `i64` are already its own negation.
            (true, n) if n <= 1 << 63 => return (Kind::Signed, (n as i64).wrapping_neg() as u64),
            _ => {}
        },
        Some(after) if whole + after <= 15 => {
            if let Some(value) = short_value(negative, digits, after) {
                return (Kind::Float, value.to_bits());
            }
        }
        _ => {}
    }
    primitive(literal, fraction.is_none())
}

/// Powers of ten that an `f64` holds exactly, up to the most a short decimal divides by.
const EXACT_POWERS: [f64; 16] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
];

/// The nearest `f64` to a number literal of at most 16 characters after its sign, no exponent and
/// digits at most 2^53 (`0.125`, `-3.5`), the commonest fractions in a payload, without the
/// general parse: its digits as an integer and the power of ten it is divided by (at most 10^15)
/// are both exact as `f64`, and IEEE division rounds their quotient correctly (Clinger's fast
/// path). `None` for any other literal.
fn short_decimal(literal: &str) -> Option<f64> {
    let (negative, digits) = match literal.strip_prefix('-') {
        Some(digits) => (true, digits),
        None => (false, literal),
    };
    if digits.len() > 16 {
        return None;
    }
    // At most 16 digits: below 10^16, no overflow.
    let (mut mantissa, mut count, mut fraction) = (0u64, 0usize, None);
    for (at, &b) in digits.as_bytes().iter().enumerate() {
        match b {
            b'0'..=b'9' => {
                mantissa = mantissa * 10 + u64::from(b - b'0');
                count += 1;
            }
            b'.' if fraction.is_none() => fraction = Some(digits.len() - at - 1),
            _ => return None,
        }
    }
    if count == 0 || mantissa > 1 << 53 {
        return None;
    }
    short_value(negative, mantissa, fraction.unwrap_or(0))
}

/// `mantissa` (at most 2^53) divided by ten to the `fraction` (at most 15), negated if
/// `negative`: Clinger's fast path, see [`short_decimal`].
fn short_value(negative: bool, mantissa: u64, fraction: usize) -> Option<f64> {
    let value = mantissa as f64 / EXACT_POWERS.get(fraction)?;
    Some(if negative { -value } else { value })
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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// A short decimal's fast path gives the general parse's `f64`, bit for bit, and a literal
        /// past it (an exponent, more digits) is left to the general parse.
        #[test]
        fn a_short_decimal_is_the_nearest_f64(
            negative in any::<bool>(),
            whole in "(0|[1-9][0-9]{0,17})",
            fraction in proptest::option::of("[0-9]{1,17}"),
            exponent in proptest::option::of(-30i32..30),
        ) {
            let mut literal = format!("{}{whole}", if negative { "-" } else { "" });
            if let Some(fraction) = &fraction {
                literal.push('.');
                literal.push_str(fraction);
            }
            if let Some(exponent) = exponent {
                literal.push_str(&format!("e{exponent}"));
            }
            let general: f64 = literal.parse().expect("a JSON number");
            match short_decimal(&literal) {
                Some(fast) => prop_assert_eq!(fast.to_bits(), general.to_bits(), "{}", literal),
                None => prop_assert!(
                    exponent.is_some() || whole.len() + fraction.map_or(0, |f| f.len()) > 15,
                    "{} left to the general parse", literal
                ),
            }
            if exponent.is_none() && literal.trim_start_matches('-').len() <= 15 {
                prop_assert!(short_decimal(&literal).is_some(), "{} is short", literal);
            }
            prop_assert_eq!(primitive(&literal, false).1, general.to_bits());
        }

        /// A literal read digit by digit has the kind and bits of the general path, for
        /// integers at and past the 19 digits that always fit and decimals at and past 15.
        #[test]
        fn a_scanned_literal_is_the_parsed_one(
            negative in any::<bool>(),
            whole in "(0|[1-9][0-9]{0,21})",
            fraction in proptest::option::of("[0-9]{1,17}"),
        ) {
            let mut literal = format!("{}{whole}", if negative { "-" } else { "" });
            let mut digits = whole.bytes().fold(0u64, |n, d| n.wrapping_mul(10).wrapping_add(u64::from(d - b'0')));
            if let Some(fraction) = &fraction {
                literal.push('.');
                literal.push_str(fraction);
                digits = fraction.bytes().fold(digits, |n, d| n.wrapping_mul(10).wrapping_add(u64::from(d - b'0')));
            }
            let expected = primitive(&literal, fraction.is_none());
            let read = scanned(&literal, negative, digits, whole.len(), fraction.as_ref().map(String::len));
            prop_assert_eq!(read, expected, "{}", literal);
        }
    }

    /// The edges of the integers read digit by digit: the largest `u64` and `i64`, one past
    /// each, and `-0`.
    #[test]
    fn scanned_integers_at_their_edges() {
        for literal in [
            "9999999999999999999",
            "18446744073709551615",
            "18446744073709551616",
            "-9223372036854775808",
            "-9223372036854775809",
            "-0",
            "0",
        ] {
            let (negative, whole) = match literal.strip_prefix('-') {
                Some(whole) => (true, whole),
                None => (false, literal),
            };
            let digits = whole.bytes().fold(0u64, |n, d| {
                n.wrapping_mul(10).wrapping_add(u64::from(d - b'0'))
            });
            let read = scanned(literal, negative, digits, whole.len(), None);
            let expected = primitive(literal, true);
            assert_eq!(read, expected, "{literal}");
        }
    }

    #[test]
    fn short_decimals_and_their_edges() {
        for (literal, expected) in [
            ("0.125", 0.125),
            ("-0.0", -0.0),
            ("-0", -0.0),
            ("0.1", 0.1),
            ("123456789012345", 123456789012345.0),
            ("0.00000000000001", 1e-14),
            ("9007199254740992", 9007199254740992.0),
        ] {
            assert_eq!(
                short_decimal(literal).map(f64::to_bits),
                Some(f64::to_bits(expected)),
                "{literal}"
            );
        }
        for literal in [
            "1e5",
            "9007199254740993",
            "0.1234567890123456",
            "0.000000000000001",
            "-",
            ".",
        ] {
            assert_eq!(short_decimal(literal), None, "{literal}");
        }
    }
}
