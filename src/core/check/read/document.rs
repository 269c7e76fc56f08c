//! Payload documents, built as serde_json's own `Value` would be, measured as they are read.

use super::*;

/// Builds a document as serde_json's own `Value` would, holding its depth to the limit and
/// counting its nodes. Past the limit the rest of that branch is read through, not built.
pub(super) struct DocumentSeed<'s> {
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
    pub(super) fn root(limit: usize) -> RootDocument {
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
pub(super) struct RootDocument {
    pub(super) limit: usize,
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
