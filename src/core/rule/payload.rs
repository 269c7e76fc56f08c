//! A payload as rules read it: converted straight into CEL's values, whose strings borrow the
//! payload's, through the validator's representation traits (so a document and a
//! `serde_json::Value` convert alike), within a budget of values and string bytes.

use crate::core::document::DocumentJson;
use cel::common::types::{
    CelBool, CelDouble, CelInt, CelList, CelMap, CelMapKey, CelNull, CelString, CelUInt,
};
use cel::common::value::Val;
use jsonschema::json::{Array, Json, JsonNumber, Node, Object};
use jsonschema_value::SerdeJson;
use std::borrow::Cow;
use std::collections::HashMap;

/// The most values of a payload rules read.
pub const MAX_VALUES: usize = 100_000;
/// The most bytes of strings of a payload rules read.
pub const MAX_STRING_BYTES: usize = 1 << 20;

/// A payload as rules read it: whole, or member by member (only what a rule reads is built).
/// The CEL values borrow the payload's strings.
pub trait Readable {
    /// The whole payload.
    fn whole(&self) -> serde_json::Value;
    /// The root object's member `key`.
    fn member(&self, key: &str) -> Option<serde_json::Value>;
    /// The whole payload as a CEL value, within `budget`.
    fn cel_whole(&self, budget: &mut Budget) -> Result<Box<dyn Val + '_>, String>;
    /// The root object's member `key` as a CEL value, within `budget`.
    fn cel_member(
        &self,
        key: &str,
        budget: &mut Budget,
    ) -> Option<Result<Box<dyn Val + '_>, String>>;
}

impl Readable for serde_json::Value {
    fn whole(&self) -> serde_json::Value {
        self.clone()
    }

    fn member(&self, key: &str) -> Option<serde_json::Value> {
        self.get(key).cloned()
    }

    fn cel_whole(&self, budget: &mut Budget) -> Result<Box<dyn Val + '_>, String> {
        value_of::<SerdeJson, _>(&self, budget)
    }

    fn cel_member(
        &self,
        key: &str,
        budget: &mut Budget,
    ) -> Option<Result<Box<dyn Val + '_>, String>> {
        self.get(key)
            .map(|value| value_of::<SerdeJson, _>(&value, budget))
    }
}

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

    /// A string of the payload, counted.
    fn string<'a>(&mut self, s: impl Into<Cow<'a, str>>) -> Result<CelString<'a>, String> {
        let s = s.into();
        self.string_bytes += s.len();
        if self.string_bytes > MAX_STRING_BYTES {
            return Err(format!(
                "holds more than {MAX_STRING_BYTES} bytes of strings: too many for a rule to judge"
            ));
        }
        Ok(CelString::from(s))
    }
}

/// The members `keys` of the root object of `payload`, those it has, as a CEL map.
pub fn members<'a>(
    payload: &'a dyn Readable,
    keys: &'a [String],
    budget: &mut Budget,
) -> Result<Box<dyn Val + 'a>, String> {
    let mut map = HashMap::with_capacity(keys.len());
    for key in keys {
        if let Some(value) = payload.cel_member(key, budget) {
            let name = budget.string(key.as_str())?;
            map.insert(CelMapKey::String(name), value?);
        }
    }
    Ok(Box::new(CelMap::from(map)))
}

/// `node` as a CEL value (integers as `int`, or `uint` past it; other numbers as `double`), its
/// strings borrowed, within the budget: an error says which bound it passed. Documents are
/// depth-bounded when read, and so is this recursion.
fn value_of<'a, F: Json, N: Node<'a, F>>(
    node: &N,
    budget: &mut Budget,
) -> Result<Box<dyn Val + 'a>, String> {
    budget.values += 1;
    if budget.values > MAX_VALUES {
        return Err(format!(
            "holds more than {MAX_VALUES} values: too many for a rule to judge"
        ));
    }
    if let Some(members) = node.as_object() {
        let mut map = HashMap::with_capacity(members.len().min(MAX_VALUES));
        for (key, item) in members.members() {
            let key = budget.string(key)?;
            map.insert(CelMapKey::String(key), value_of(&item, budget)?);
        }
        return Ok(Box::new(CelMap::from(map)));
    }
    if let Some(items) = node.as_array() {
        let mut list = Vec::with_capacity(items.len().min(MAX_VALUES));
        for item in items.elements() {
            list.push(value_of(&item, budget)?);
        }
        return Ok(Box::new(CelList::from(list)));
    }
    if let Some(text) = node.as_string() {
        return Ok(Box::new(budget.string(text)?));
    }
    if let Some(n) = node.as_number() {
        return match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => Ok(Box::new(CelInt::from(i))),
            (None, Some(u), _) => Ok(Box::new(CelUInt::from(u))),
            // `-0` is an integer, written so (the document keeps its sign as a double's).
            (None, None, Some(f)) if f == 0.0 && n.is_written_as_integer() => {
                Ok(Box::new(CelInt::from(0)))
            }
            (None, None, Some(f)) if f.is_finite() => Ok(Box::new(CelDouble::from(f))),
            _ => Err(format!(
                "hold the number {}, past a double's range",
                n.as_str()
            )),
        };
    }
    Ok(match node.as_boolean() {
        Some(b) => Box::new(CelBool::from(b)),
        None => Box::new(CelNull),
    })
}

impl Readable for crate::core::document::Document {
    fn whole(&self) -> serde_json::Value {
        self.to_value()
    }

    fn member(&self, key: &str) -> Option<serde_json::Value> {
        self.member_value(key)
    }

    fn cel_whole(&self, budget: &mut Budget) -> Result<Box<dyn Val + '_>, String> {
        value_of::<DocumentJson, _>(&self.root(), budget)
    }

    fn cel_member(
        &self,
        key: &str,
        budget: &mut Budget,
    ) -> Option<Result<Box<dyn Val + '_>, String>> {
        self.member(key)
            .map(|node| value_of::<DocumentJson, _>(&node, budget))
    }
}
