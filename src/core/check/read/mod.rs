//! One-pass readers for checks, batches and payload documents.
//!
//! These are serde visitors rather than derived structs, for two reasons the load harness
//! measured. A batch is read item by item in the same pass that reads each item: there is no
//! first pass to split it (that pass cost about a third of a whole parse), yet a problem in one
//! item (an unknown field, a wrong type, a payload nested too deep) becomes that item's own error
//! while the rest of the batch is read on. And documents are built as they are read, with their
//! depth held to the limit and their nodes counted for the work bound, so nothing walks them a
//! second time. Only broken JSON fails a whole body.
//!
//! The rooms: [`document`] builds payload documents, [`check`] reads a check's fields,
//! [`result`] an MCP CallToolResult ([`direct`] reads one as tools send it, in one pass, and
//! gives the others to `result`), [`batch`] a batch's items; this file holds the entry points
//! and the pieces they share (the shape dispatch, keys, scalars, the first-error rule).

mod batch;
mod check;
mod direct;
mod document;
mod result;

pub use batch::ONE_PASS_MAX_BYTES;

use super::{attempt, BatchItem, Check, Document, Payload, SchemaSource, ToolResult};
use crate::core::domain::ProtocolVersion;
use crate::core::error::{from_json_error, CheckError};
use batch::BatchReader;
use bytes::Bytes;
use bytestring::ByteString;
use check::CheckReader;
use document::payload;
use result::ResultReader;
use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;
use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

/// Reads one check from the JSON text in `body`.
pub(super) fn read_check(body: &Bytes, depth_limit: usize) -> Result<Check, CheckError> {
    let reader = CheckReader { body, depth_limit };
    whole(body, depth_limit, None, Shape(reader)).and_then(|checked| checked)
}

/// Reads a batch body `{"items": [...]}`: each item's check, or that item's own error.
pub(super) fn read_batch(
    body: &Bytes,
    depth_limit: usize,
    max_items: usize,
) -> Result<Vec<BatchItem>, CheckError> {
    let reader = BatchReader {
        body,
        depth_limit,
        max_items,
    };
    whole(body, depth_limit, None, Shape(reader)).and_then(|items| items)
}

/// Reads a payload document (`instance` or `arguments`, named by `field`) from JSON text.
pub(super) fn read_document(
    field: &str,
    text: &Bytes,
    depth_limit: usize,
) -> Result<Document, CheckError> {
    let raw: &RawValue = whole(text, depth_limit, Some(field), PhantomData)?;
    payload(field, raw, text, depth_limit)
}

/// The tool result whose text starts at `at` in `line`, read in one pass, and where it ends.
pub(super) fn read_result_ahead(
    line: &ByteString,
    at: usize,
    depth_limit: usize,
) -> Option<(ToolResult, usize)> {
    direct::read_ahead(line, at, depth_limit)
}

/// Reads an MCP tool result from JSON text.
pub(super) fn read_result(text: &Bytes, depth_limit: usize) -> Result<ToolResult, CheckError> {
    // Most results are read in one pass; the rest, and every problem, by the serde reader.
    if let Some(result) = direct::read(text, depth_limit) {
        return Ok(result);
    }
    by_serde(text, depth_limit)
}

/// Reads an MCP tool result with the serde reader, whatever it holds.
fn by_serde(text: &Bytes, depth_limit: usize) -> Result<ToolResult, CheckError> {
    let reader = ResultReader {
        body: text,
        depth_limit,
    };
    whole(text, depth_limit, Some("result"), Shape(reader)).and_then(|r| r)
}

/// Runs `seed` over all of `text` (a request body, or the payload `field` of one): trailing
/// characters are malformed JSON too.
fn whole<'de, S: DeserializeSeed<'de>>(
    text: &'de [u8],
    depth_limit: usize,
    field: Option<&str>,
    seed: S,
) -> Result<S::Value, CheckError> {
    let mut de = serde_json::Deserializer::from_slice(text);
    let value = seed
        .deserialize(&mut de)
        .and_then(|v| de.end().map(|()| v))
        .map_err(|e| from_json_error(&e, depth_limit, field))?;
    Ok(value)
}

/// Where `part` lies in `whole`, if it is a slice of it (a value read from a body is a slice of
/// that body).
fn within(whole: &[u8], part: &[u8]) -> Option<std::ops::Range<usize>> {
    let start = (part.as_ptr() as usize).checked_sub(whole.as_ptr() as usize)?;
    (start + part.len() <= whole.len()).then_some(start..start + part.len())
}

/// Keeps the first problem met while an object or array is read on; later ones are not reported
/// (as a parser stops at its first).
#[derive(Default)]
struct FirstError(Option<CheckError>);

impl FirstError {
    fn note(&mut self, e: CheckError) {
        if self.0.is_none() {
            self.0 = Some(e);
        }
    }

    /// `value`, unless a problem was noted.
    fn or<T>(self, value: T) -> Result<T, CheckError> {
        match self.0 {
            Some(e) => Err(e),
            None => Ok(value),
        }
    }
}

fn invalid(message: String) -> CheckError {
    CheckError::InvalidField(message)
}

/// Reads a value of the shape `R` expects (an object or an array) with `R`; a value of any other
/// shape is read through and answered by [`Reader::wrong`].
struct Shape<R>(R);

trait Reader<'de>: Sized {
    type Output;
    fn object<A: MapAccess<'de>>(self, map: A) -> Result<Self::Output, A::Error> {
        drain_map(map)?;
        Ok(self.wrong("an object"))
    }
    fn array<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Output, A::Error> {
        drain_seq(seq)?;
        Ok(self.wrong("an array"))
    }
    /// The answer when the value is not of the expected shape but `found`.
    fn wrong(self, found: &'static str) -> Self::Output;
}

impl<'de, R: Reader<'de>> DeserializeSeed<'de> for Shape<R> {
    type Value = R::Output;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<R::Output, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de, R: Reader<'de>> Visitor<'de> for Shape<R> {
    type Value = R::Output;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object or array")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<R::Output, A::Error> {
        match map.next_key::<Key<'de>>()? {
            Some(Key(key)) if key == NUMBER_TOKEN => {
                drain_number(map)?;
                Ok(self.0.wrong("a number"))
            }
            first => self.0.object(Resumed { first, map }),
        }
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<R::Output, A::Error> {
        self.0.array(seq)
    }
    fn visit_bool<E>(self, _: bool) -> Result<R::Output, E> {
        Ok(self.0.wrong("a boolean"))
    }
    fn visit_i64<E>(self, _: i64) -> Result<R::Output, E> {
        Ok(self.0.wrong("a number"))
    }
    fn visit_u64<E>(self, _: u64) -> Result<R::Output, E> {
        Ok(self.0.wrong("a number"))
    }
    fn visit_f64<E>(self, _: f64) -> Result<R::Output, E> {
        Ok(self.0.wrong("a number"))
    }
    fn visit_str<E>(self, _: &str) -> Result<R::Output, E> {
        Ok(self.0.wrong("a string"))
    }
    fn visit_unit<E>(self) -> Result<R::Output, E> {
        Ok(self.0.wrong("null"))
    }
}

/// The one member of the map serde_json hands a number over as (with `arbitrary_precision`, which
/// the validator's exact numbers turn on) when it is not an integer that fits in 64 bits.
const NUMBER_TOKEN: &str = "$serde_json::private::Number";

/// Reads the rest of a number handed over as a map (its key already read).
fn drain_number<'de, A: MapAccess<'de>>(mut map: A) -> Result<(), A::Error> {
    map.next_value::<IgnoredAny>()?;
    drain_map(map)
}

/// A map whose first key was read already, to look for [`NUMBER_TOKEN`]: it is handed over first.
struct Resumed<'de, A> {
    first: Option<Key<'de>>,
    map: A,
}

impl<'de, A: MapAccess<'de>> MapAccess<'de> for Resumed<'de, A> {
    type Error = A::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, A::Error> {
        use serde::de::value::{BorrowedStrDeserializer, StringDeserializer};
        match self.first.take() {
            Some(Key(Cow::Borrowed(key))) => seed
                .deserialize(BorrowedStrDeserializer::<A::Error>::new(key))
                .map(Some),
            Some(Key(Cow::Owned(key))) => seed
                .deserialize(StringDeserializer::<A::Error>::new(key))
                .map(Some),
            None => self.map.next_key_seed(seed),
        }
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, A::Error> {
        self.map.next_value_seed(seed)
    }
}

fn drain_seq<'de, A: SeqAccess<'de>>(mut seq: A) -> Result<(), A::Error> {
    while seq.next_element::<IgnoredAny>()?.is_some() {}
    Ok(())
}

fn drain_map<'de, A: MapAccess<'de>>(mut map: A) -> Result<(), A::Error> {
    while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
    Ok(())
}

/// An object key, borrowed from the text when it has no escapes.
pub(crate) struct Key<'de>(pub Cow<'de, str>);

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object key")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(v.to_owned())))
            }
        }
        d.deserialize_str(KeyVisitor)
    }
}

/// A field's value when only scalars are wanted; arrays and objects are read through.
enum Scalar<'de> {
    Str(Cow<'de, str>),
    Bool(bool),
    Unsigned(u64),
    Number,
    Null,
    Array,
    Object,
}

impl Scalar<'_> {
    fn kind(&self) -> &'static str {
        match self {
            Scalar::Str(_) => "a string",
            Scalar::Bool(_) => "a boolean",
            Scalar::Unsigned(_) | Scalar::Number => "a number",
            Scalar::Null => "null",
            Scalar::Array => "an array",
            Scalar::Object => "an object",
        }
    }
}

impl<'de> Deserialize<'de> for Scalar<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct ScalarVisitor;
        impl<'de> Visitor<'de> for ScalarVisitor {
            type Value = Scalar<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Scalar<'de>, E> {
                Ok(Scalar::Str(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Scalar<'de>, E> {
                Ok(Scalar::Str(Cow::Owned(v.to_owned())))
            }
            fn visit_bool<E>(self, v: bool) -> Result<Scalar<'de>, E> {
                Ok(Scalar::Bool(v))
            }
            fn visit_u64<E>(self, v: u64) -> Result<Scalar<'de>, E> {
                Ok(Scalar::Unsigned(v))
            }
            fn visit_i64<E>(self, _: i64) -> Result<Scalar<'de>, E> {
                Ok(Scalar::Number)
            }
            fn visit_f64<E>(self, _: f64) -> Result<Scalar<'de>, E> {
                Ok(Scalar::Number)
            }
            fn visit_unit<E>(self) -> Result<Scalar<'de>, E> {
                Ok(Scalar::Null)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Scalar<'de>, A::Error> {
                drain_seq(seq)?;
                Ok(Scalar::Array)
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Scalar<'de>, A::Error> {
                match map.next_key::<Key<'de>>()? {
                    Some(Key(key)) if key == NUMBER_TOKEN => {
                        drain_number(map)?;
                        Ok(Scalar::Number)
                    }
                    Some(_) => {
                        map.next_value::<IgnoredAny>()?;
                        drain_map(map)?;
                        Ok(Scalar::Object)
                    }
                    None => Ok(Scalar::Object),
                }
            }
        }
        d.deserialize_any(ScalarVisitor)
    }
}

/// A string field (`null` is the same as absent).
fn text<'de>(field: &str, value: Scalar<'de>) -> Result<Option<Cow<'de, str>>, CheckError> {
    match value {
        Scalar::Str(s) => Ok(Some(s)),
        Scalar::Null => Ok(None),
        other => Err(invalid(format!(
            "`{field}` must be a string, not {}",
            other.kind()
        ))),
    }
}
