//! What rules may read of one payload, and how they read its numbers: the budget a payload's
//! conversion into CEL's values is held to (values and bytes of strings), counted alike by the
//! conversion and by the expressions decided without it.

use cel::common::types::CelString;
use jsonschema::json::JsonNumber;
use std::borrow::Cow;

/// The most values of a payload rules read.
pub const MAX_VALUES: usize = 100_000;
/// The most bytes of strings of a payload rules read.
pub const MAX_STRING_BYTES: usize = 1 << 20;

/// What a conversion has used.
#[derive(Debug, Default)]
pub struct Budget {
    values: usize,
    string_bytes: usize,
}

impl Budget {
    /// The values converted so far.
    pub fn values(&self) -> usize {
        self.values
    }

    /// Counts `bytes` more of strings: whether they are still within the budget.
    pub(super) fn counts_bytes(&mut self, bytes: usize) -> bool {
        self.string_bytes += bytes;
        self.string_bytes <= MAX_STRING_BYTES
    }

    /// Counts one more value: whether the values are still within the budget.
    pub(super) fn counts_value(&mut self) -> bool {
        self.values += 1;
        self.values <= MAX_VALUES
    }

    /// A string of the payload, counted.
    pub(super) fn string<'a>(
        &mut self,
        s: impl Into<Cow<'a, str>>,
    ) -> Result<CelString<'a>, String> {
        let s = s.into();
        if !self.counts_bytes(s.len()) {
            return Err(format!(
                "holds more than {MAX_STRING_BYTES} bytes of strings: too many for a rule to judge"
            ));
        }
        Ok(CelString::from(s))
    }
}

/// A number as CEL reads it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Number {
    Int(i64),
    UInt(u64),
    Double(f64),
}

/// `n` as CEL reads it: an integer as `int`, or `uint` past it; any other number as `double`.
/// An error says it is past a double's range.
pub(super) fn number_of(n: &impl JsonNumber) -> Result<Number, String> {
    match (n.as_i64(), n.as_u64(), n.as_f64()) {
        (Some(i), _, _) => Ok(Number::Int(i)),
        (None, Some(u), _) => Ok(Number::UInt(u)),
        // `-0` is an integer, written so (the document keeps its sign as a double's).
        (None, None, Some(f)) if f == 0.0 && n.is_written_as_integer() => Ok(Number::Int(0)),
        (None, None, Some(f)) if f.is_finite() => Ok(Number::Double(f)),
        _ => Err(format!(
            "holds the number {}, past a double's range",
            n.as_str()
        )),
    }
}
