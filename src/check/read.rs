//! One-pass readers for checks, batches and payload documents.
//!
//! These are serde visitors rather than derived structs, for two reasons the load harness
//! measured. A batch is read item by item in the same pass that reads each item: there is no
//! first pass to split it (that pass cost about a third of a whole parse), yet a problem in one
//! item (an unknown field, a wrong type, a payload nested too deep) becomes that item's own error
//! while the rest of the batch is read on. And documents are built as they are read, with their
//! depth held to the limit and their nodes counted for the work bound, so nothing walks them a
//! second time. Only broken JSON fails a whole body.

use super::{attempt, BatchItem, Check, Document, Payload, SchemaSource, ToolResult};
use crate::domain::ProtocolVersion;
use crate::error::{from_json_error, CheckError};
use bytes::Bytes;
use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Number, Value};
use std::borrow::Cow;
use std::fmt;

/// Reads one check from the JSON text in `body`.
pub(super) fn check(body: &Bytes, depth_limit: usize) -> Result<Check, CheckError> {
    let reader = CheckReader { body, depth_limit };
    whole(body, depth_limit, Shape(reader)).and_then(|checked| checked)
}

/// Reads a batch body `{"items": [...]}`: each item's check, or that item's own error.
pub(super) fn batch(
    body: &Bytes,
    depth_limit: usize,
    max_items: usize,
) -> Result<Vec<BatchItem>, CheckError> {
    let reader = BatchReader {
        body,
        depth_limit,
        max_items,
    };
    whole(body, depth_limit, Shape(reader)).and_then(|items| items)
}

/// Reads a payload document (`instance` or `arguments`, named by `field`) from JSON text.
pub(super) fn document(
    field: &str,
    text: &[u8],
    depth_limit: usize,
) -> Result<Document, CheckError> {
    whole(text, depth_limit, DocumentSeed::root(depth_limit))
        .map_err(|e| name_payload(field, e))
        .and_then(|doc| doc)
}

/// Reads an MCP tool result from JSON text.
pub(super) fn result(text: &Bytes, depth_limit: usize) -> Result<ToolResult, CheckError> {
    let reader = ResultReader {
        body: text,
        depth_limit,
    };
    whole(text, depth_limit, Shape(reader))
        .map_err(|e| name_payload("result", e))
        .and_then(|r| r)
}

/// Runs `seed` over all of `text`: trailing characters are malformed JSON too.
fn whole<'de, S: DeserializeSeed<'de>>(
    text: &'de [u8],
    depth_limit: usize,
    seed: S,
) -> Result<S::Value, CheckError> {
    let mut de = serde_json::Deserializer::from_slice(text);
    let value = seed
        .deserialize(&mut de)
        .and_then(|v| de.end().map(|()| v))
        .map_err(|e| from_json_error(&e, depth_limit))?;
    Ok(value)
}

fn name_payload(field: &str, e: CheckError) -> CheckError {
    match e {
        CheckError::MalformedJson(m) => CheckError::MalformedJson(format!(
            "`{field}` is not valid JSON: {}",
            m.trim_start_matches("request body is not valid JSON: ")
        )),
        CheckError::InvalidField(m) => CheckError::InvalidField(format!("`{field}`: {m}")),
        other => other,
    }
}

/// Keeps the first problem met; later ones are not reported (as a parser stops at its first).
fn note(problem: &mut Option<CheckError>, e: CheckError) {
    if problem.is_none() {
        *problem = Some(e);
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
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<R::Output, A::Error> {
        self.0.object(map)
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
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Scalar<'de>, A::Error> {
                drain_map(map)?;
                Ok(Scalar::Object)
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

/// Builds a document as serde_json's own `Value` would, holding its depth to the limit and
/// counting its nodes. Past the limit the rest of that branch is read through, not built.
struct DocumentSeed<'s> {
    depth: usize,
    limit: usize,
    stats: &'s mut DocumentStats,
}

#[derive(Default)]
struct DocumentStats {
    nodes: u64,
    depth: usize,
    string_bytes: u64,
    too_deep: bool,
    /// The first number that may not be held exactly (see [`CheckError::InexactNumber`]).
    inexact: Option<f64>,
}

/// From this magnitude on, a 64-bit float no longer holds every integer, so a number read as one
/// may have been rounded (integers beyond the 64-bit range are read as floats too).
const EXACT_FLOAT_LIMIT: f64 = 9_007_199_254_740_992.0;

impl DocumentSeed<'_> {
    /// A seed for a whole document; its value is the document, or TooDeep.
    fn root(limit: usize) -> RootDocument {
        RootDocument { limit }
    }

    fn child(&mut self) -> DocumentSeed<'_> {
        DocumentSeed {
            depth: self.depth + 1,
            limit: self.limit,
            stats: self.stats,
        }
    }

    fn leaf(self, value: Value) -> Value {
        self.stats.nodes += 1;
        self.stats.depth = self.stats.depth.max(self.depth);
        value
    }
}

/// Reads a whole payload document.
struct RootDocument {
    limit: usize,
}

impl<'de> DeserializeSeed<'de> for RootDocument {
    type Value = Result<Document, CheckError>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        let mut stats = DocumentStats::default();
        let value = DocumentSeed {
            depth: 1,
            limit: self.limit,
            stats: &mut stats,
        }
        .deserialize(d)?;
        if stats.too_deep {
            return Ok(Err(CheckError::TooDeep {
                what: "payload",
                limit: self.limit,
            }));
        }
        if let Some(number) = stats.inexact {
            return Ok(Err(CheckError::InexactNumber(number)));
        }
        Ok(Ok(Document {
            value,
            nodes: stats.nodes,
            depth: stats.depth,
            string_bytes: stats.string_bytes,
        }))
    }
}

impl<'de> DeserializeSeed<'de> for DocumentSeed<'_> {
    type Value = Value;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        if self.depth > self.limit {
            self.stats.too_deep = true;
            IgnoredAny::deserialize(d)?;
            return Ok(Value::Null);
        }
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for DocumentSeed<'_> {
    type Value = Value;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(self.leaf(Value::Bool(v)))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(self.leaf(Value::Number(v.into())))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(self.leaf(Value::Number(v.into())))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        if v.abs() >= EXACT_FLOAT_LIMIT && self.stats.inexact.is_none() {
            self.stats.inexact = Some(v);
        }
        Ok(self.leaf(Number::from_f64(v).map_or(Value::Null, Value::Number)))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        self.stats.string_bytes += v.len() as u64;
        Ok(self.leaf(Value::String(v.to_owned())))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        self.stats.string_bytes += v.len() as u64;
        Ok(self.leaf(Value::String(v)))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(self.leaf(Value::Null))
    }
    fn visit_seq<A: SeqAccess<'de>>(mut self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        while let Some(item) = seq.next_element_seed(self.child())? {
            items.push(item);
        }
        Ok(self.leaf(Value::Array(items)))
    }
    fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> Result<Value, A::Error> {
        let mut object = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            self.stats.string_bytes += key.len() as u64;
            let value = map.next_value_seed(self.child())?;
            object.insert(key, value);
        }
        Ok(self.leaf(Value::Object(object)))
    }
}

/// Reads a check object.
struct CheckReader<'b> {
    body: &'b Bytes,
    depth_limit: usize,
}

/// What a check's fields held, before they are put together.
#[derive(Default)]
struct CheckFields<'de> {
    server: Option<Cow<'de, str>>,
    tool: Option<Cow<'de, str>>,
    schema: Option<&'de RawValue>,
    schema_hash: Option<Cow<'de, str>>,
    instance: Option<Document>,
    result: Option<ToolResult>,
    arguments: Option<Document>,
    attempt: Option<u32>,
    call_id: Option<Cow<'de, str>>,
    protocol_version: Option<Cow<'de, str>>,
}

impl<'de> Reader<'de> for CheckReader<'_> {
    type Output = Result<Check, CheckError>;

    fn object<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Output, A::Error> {
        let mut f = CheckFields::default();
        let mut seen = 0u16;
        let mut problem = None;
        while let Some(Key(key)) = map.next_key()? {
            let bit = match CHECK_FIELD_NAMES.iter().position(|&n| n == key) {
                Some(i) => 1u16 << i,
                None => {
                    map.next_value::<IgnoredAny>()?;
                    note(
                        &mut problem,
                        invalid(format!(
                            "unknown field `{key}`, expected one of {}",
                            check_fields()
                        )),
                    );
                    continue;
                }
            };
            if seen & bit != 0 {
                map.next_value::<IgnoredAny>()?;
                note(&mut problem, invalid(format!("duplicate field `{key}`")));
                continue;
            }
            seen |= bit;
            let read = match key.as_ref() {
                "server" => text("server", map.next_value()?).map(|v| f.server = v),
                "tool" => text("tool", map.next_value()?).map(|v| f.tool = v),
                "schema_hash" => text("schema_hash", map.next_value()?).map(|v| f.schema_hash = v),
                "call_id" => text("call_id", map.next_value()?).map(|v| f.call_id = v),
                "protocol_version" => {
                    text("protocol_version", map.next_value()?).map(|v| f.protocol_version = v)
                }
                "schema" => {
                    f.schema = Some(map.next_value()?);
                    Ok(())
                }
                "attempt" => match map.next_value()? {
                    Scalar::Unsigned(n) => u32::try_from(n)
                        .map(|n| f.attempt = Some(n))
                        .map_err(|_| invalid(format!("`attempt` {n} is too large"))),
                    Scalar::Null => Ok(()),
                    other => Err(invalid(format!(
                        "`attempt` must be a whole number (1 for a first attempt), not {}",
                        other.kind()
                    ))),
                },
                "instance" | "arguments" => {
                    let doc = map.next_value_seed(DocumentSeed::root(self.depth_limit))?;
                    doc.map(|doc| {
                        if key == "instance" {
                            f.instance = Some(doc);
                        } else {
                            f.arguments = Some(doc);
                        }
                    })
                }
                "result" => map
                    .next_value_seed(Shape(ResultReader {
                        body: self.body,
                        depth_limit: self.depth_limit,
                    }))?
                    .map(|r| f.result = Some(r)),
                // Every name of CHECK_FIELD_NAMES has its arm above.
                _ => Ok(()),
            };
            if let Err(e) = read {
                note(&mut problem, e);
            }
        }
        if let Some(e) = problem {
            return Ok(Err(e));
        }
        Ok(self.assemble(f))
    }

    fn wrong(self, found: &'static str) -> Self::Output {
        Err(invalid(format!(
            "a check must be a JSON object with {}, not {found}",
            check_fields()
        )))
    }
}

/// The fields of a check, in the order of their bits in `seen`.
const CHECK_FIELD_NAMES: [&str; 10] = [
    "server",
    "tool",
    "schema",
    "schema_hash",
    "instance",
    "result",
    "arguments",
    "attempt",
    "call_id",
    "protocol_version",
];

/// The fields of a check, for the messages about a body that is not one: `` `server`, `tool`, ...``.
fn check_fields() -> String {
    CHECK_FIELD_NAMES.map(|name| format!("`{name}`")).join(", ")
}

impl CheckReader<'_> {
    fn assemble(&self, f: CheckFields<'_>) -> Result<Check, CheckError> {
        let schema = match (f.schema, f.schema_hash) {
            (Some(_), Some(_)) => return Err(CheckError::ConflictingSchemas),
            (Some(raw), None) => SchemaSource::Inline(self.body.slice_ref(raw.get().as_bytes())),
            (None, Some(hash)) => SchemaSource::Hash(hash.into_owned()),
            (None, None) => SchemaSource::Registered,
        };
        let payload = match (f.instance, f.result, f.arguments) {
            (Some(v), None, None) => Payload::Instance(v),
            (None, Some(r), None) => Payload::Result(r),
            (None, None, Some(v)) => Payload::Arguments(v),
            (None, None, None) => return Err(CheckError::MissingPayload),
            _ => return Err(CheckError::ConflictingPayloads),
        };
        Ok(Check {
            server: f.server.map(Cow::into_owned),
            tool: f.tool.map(Cow::into_owned),
            schema,
            payload,
            attempt: attempt(f.attempt)?,
            call_id: f.call_id.map(Cow::into_owned),
            protocol_version: f
                .protocol_version
                .map(|v| ProtocolVersion::parse(&v))
                .transpose()?,
        })
    }
}

/// Reads an MCP `CallToolResult`: `structuredContent`, the JSON-looking text blocks of
/// `content`, and `isError`. Its other fields (`_meta`, ...) are read through.
struct ResultReader<'b> {
    /// The text the result is read from, so `structuredContent`'s own text can be kept as a slice.
    body: &'b Bytes,
    depth_limit: usize,
}

impl<'de> Reader<'de> for ResultReader<'_> {
    type Output = Result<ToolResult, CheckError>;

    fn object<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Output, A::Error> {
        let mut result = ToolResult::default();
        let mut problem = None;
        // Whether `content` has been read and held no JSON text copy.
        let mut no_copy = false;
        while let Some(Key(key)) = map.next_key()? {
            let read = match key.as_ref() {
                // Nothing to compare it with: built in place.
                "structuredContent" if no_copy => map
                    .next_value_seed(DocumentSeed::root(self.depth_limit))?
                    .map(|doc| result.structured_content = Some(doc)),
                // Its text is kept too, for the drift check's fast path: a text copy that is the
                // same text needs no comparison value by value.
                "structuredContent" => {
                    let raw: &'de RawValue = map.next_value()?;
                    let text = self.body.slice_ref(raw.get().as_bytes());
                    whole(
                        &text,
                        self.depth_limit,
                        DocumentSeed::root(self.depth_limit),
                    )
                    .and_then(|doc| doc)
                    .map(|doc| {
                        result.structured_content = Some(doc);
                        result.structured_text = Some(text);
                    })
                }
                "content" => map
                    .next_value_seed(Shape(ContentReader))?
                    .map(|(texts, has_text)| {
                        no_copy = texts.is_empty();
                        result.json_texts = texts;
                        result.has_text_block = has_text;
                    }),
                "isError" => match map.next_value()? {
                    Scalar::Bool(b) => {
                        result.is_error = b;
                        Ok(())
                    }
                    Scalar::Null => Ok(()),
                    other => Err(invalid(format!(
                        "`result.isError` must be true or false, not {}",
                        other.kind()
                    ))),
                },
                _ => {
                    map.next_value::<IgnoredAny>()?;
                    Ok(())
                }
            };
            if let Err(e) = read {
                note(&mut problem, e);
            }
        }
        Ok(match problem {
            Some(e) => Err(e),
            None => Ok(result),
        })
    }

    fn wrong(self, found: &'static str) -> Self::Output {
        Err(invalid(format!(
            "`result` must be an MCP CallToolResult object, not {found}"
        )))
    }
}

/// Reads `content`, keeping the text of each text block that holds a JSON object or array.
struct ContentReader;

impl<'de> Reader<'de> for ContentReader {
    /// The JSON-looking texts, and whether any block is a text block.
    type Output = Result<(Vec<String>, bool), CheckError>;

    fn array<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Output, A::Error> {
        let mut texts = Vec::new();
        let mut has_text = false;
        let mut problem = None;
        while let Some(block) = seq.next_element_seed(Shape(BlockReader))? {
            match block {
                Ok(Block::Json(text)) => {
                    has_text = true;
                    texts.push(text);
                }
                Ok(Block::Text) => has_text = true,
                Ok(Block::Other) => {}
                Err(e) => note(&mut problem, e),
            }
        }
        Ok(match problem {
            Some(e) => Err(e),
            None => Ok((texts, has_text)),
        })
    }

    fn wrong(self, found: &'static str) -> Self::Output {
        match found {
            // As if absent: no text copy to compare.
            "null" => Ok((Vec::new(), false)),
            _ => Err(invalid(format!(
                "`result.content` must be an array of content blocks, not {found}"
            ))),
        }
    }
}

/// One block of `content`, as far as drift and the 2026-07-28 text rule care.
enum Block {
    /// A text block whose text may be JSON.
    Json(String),
    /// A text block of prose.
    Text,
    /// Any other block (image, resource, ...).
    Other,
}

/// Reads one content block.
struct BlockReader;

impl<'de> Reader<'de> for BlockReader {
    type Output = Result<Block, CheckError>;

    fn object<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Output, A::Error> {
        let mut is_text = false;
        let mut json_text = None;
        let mut problem = None;
        while let Some(Key(key)) = map.next_key()? {
            match key.as_ref() {
                "type" => match map.next_value()? {
                    Scalar::Str(kind) => is_text = kind == "text",
                    other => note(
                        &mut problem,
                        invalid(format!(
                            "`result.content[].type` must be a string, not {}",
                            other.kind()
                        )),
                    ),
                },
                "text" => match map.next_value::<JsonText>()? {
                    JsonText::Json(text) => json_text = Some(text),
                    JsonText::Prose => {}
                    JsonText::Wrong(kind) => note(
                        &mut problem,
                        invalid(format!(
                            "`result.content[].text` must be a string, not {kind}"
                        )),
                    ),
                },
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(match (problem, is_text, json_text) {
            (Some(e), _, _) => Err(e),
            (None, false, _) => Ok(Block::Other),
            (None, true, Some(text)) => Ok(Block::Json(text)),
            (None, true, None) => Ok(Block::Text),
        })
    }

    fn wrong(self, found: &'static str) -> Self::Output {
        Err(invalid(format!(
            "`result.content` items must be content block objects, not {found}"
        )))
    }
}

/// A text block's `text`, kept only when it may be a JSON copy of the structured content (it
/// starts, after white space, as a JSON value does); other prose is read and dropped without a
/// copy.
enum JsonText {
    Json(String),
    Prose,
    Wrong(&'static str),
}

impl<'de> Deserialize<'de> for JsonText {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match Scalar::deserialize(d)? {
            Scalar::Str(text) => {
                // Starts as a JSON value does: an object, array, string, number or literal.
                let start = text.trim_start().as_bytes().first().copied();
                Ok(
                    if matches!(
                        start,
                        Some(b'{' | b'[' | b'"' | b'-' | b'0'..=b'9' | b't' | b'f' | b'n')
                    ) {
                        JsonText::Json(text.into_owned())
                    } else {
                        JsonText::Prose
                    },
                )
            }
            other => Ok(JsonText::Wrong(other.kind())),
        }
    }
}

/// Reads a batch object: `items`, and nothing else.
struct BatchReader<'b> {
    body: &'b Bytes,
    depth_limit: usize,
    max_items: usize,
}

type BatchItems = Result<Vec<BatchItem>, CheckError>;

impl<'de> Reader<'de> for BatchReader<'_> {
    type Output = BatchItems;

    fn object<A: MapAccess<'de>>(self, mut map: A) -> Result<BatchItems, A::Error> {
        let mut items = None;
        let mut problem = None;
        while let Some(Key(key)) = map.next_key()? {
            if key == "items" && items.is_none() {
                items = Some(map.next_value_seed(Shape(ItemsReader {
                    body: self.body,
                    depth_limit: self.depth_limit,
                    max_items: self.max_items,
                    split_only: self.body.len() > ONE_PASS_MAX_BYTES,
                }))?);
                continue;
            }
            map.next_value::<IgnoredAny>()?;
            let message = if key == "items" {
                "duplicate field `items`".to_owned()
            } else {
                format!("unknown field `{key}`: a batch is {{\"items\": [check, ...]}}")
            };
            note(&mut problem, invalid(message));
        }
        if let Some(e) = problem {
            return Ok(Err(e));
        }
        Ok(items.unwrap_or_else(|| {
            Err(invalid(
                "missing field `items`: a batch is {\"items\": [check, ...]}".into(),
            ))
        }))
    }

    fn wrong(self, found: &'static str) -> BatchItems {
        Err(invalid(format!(
            "a batch must be a JSON object {{\"items\": [check, ...]}}, not {found}"
        )))
    }
}

/// Batch bodies up to this size are read whole in one pass. Larger ones are only split into their
/// items here, and each item is read when it is checked: reading a whole large batch first would
/// hold all its documents in memory at once (several times the body's size).
pub const ONE_PASS_MAX_BYTES: usize = 1024 * 1024;

/// Reads `items`: each check, or its own error; or, with `split_only`, each item's JSON text.
/// Past the limit, items are counted, not read.
struct ItemsReader<'b> {
    body: &'b Bytes,
    depth_limit: usize,
    max_items: usize,
    split_only: bool,
}

impl<'de> Reader<'de> for ItemsReader<'_> {
    type Output = BatchItems;

    fn array<A: SeqAccess<'de>>(self, mut seq: A) -> Result<BatchItems, A::Error> {
        let mut checks = Vec::new();
        let mut len = 0usize;
        loop {
            if len < self.max_items && self.split_only {
                match seq.next_element::<&'de RawValue>()? {
                    Some(raw) => {
                        checks.push(BatchItem::Unread(self.body.slice_ref(raw.get().as_bytes())))
                    }
                    None => break,
                }
            } else if len < self.max_items {
                let reader = CheckReader {
                    body: self.body,
                    depth_limit: self.depth_limit,
                };
                match seq.next_element_seed(Shape(reader))? {
                    Some(check) => checks.push(BatchItem::Read(check)),
                    None => break,
                }
            } else if seq.next_element::<IgnoredAny>()?.is_none() {
                break;
            }
            len += 1;
        }
        if len > self.max_items {
            return Ok(Err(CheckError::BatchTooLarge {
                len,
                limit: self.max_items,
            }));
        }
        Ok(Ok(checks))
    }

    fn wrong(self, found: &'static str) -> BatchItems {
        Err(invalid(format!(
            "`items` must be an array of checks, not {found}"
        )))
    }
}
