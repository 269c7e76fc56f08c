//! A payload as rules read it: converted straight into CEL's values, whose strings borrow the
//! payload's, through the validator's representation traits (so a document and a
//! `serde_json::Value` convert alike), within a budget of values and string bytes.

use super::budget::{number_of, Budget, Number, MAX_VALUES};
use super::fast::{self, Fast, Member};
use crate::core::document::{Document, DocumentJson, NodeRef};
use cel::common::types::{
    CelBool, CelDouble, CelInt, CelList, CelMap, CelMapKey, CelNull, CelUInt,
};
use cel::common::value::Val;
use jsonschema::json::{Array, Json, Node, Object};
use jsonschema_value::SerdeJson;
use std::collections::HashMap;

/// A payload as rules read it: whole, or member by member (only what a rule reads is built).
/// The CEL values borrow the payload's strings. Every [`Rooted`] payload is one.
pub trait Readable {
    /// The whole payload, as a `serde_json::Value`.
    fn value(&self) -> serde_json::Value;
    /// The root object's member `key`, as a `serde_json::Value`.
    fn member_value(&self, key: &str) -> Option<serde_json::Value>;
    /// The whole payload as a CEL value, within `budget`.
    fn cel_whole(&self, budget: &mut Budget) -> Result<Box<dyn Val + '_>, String>;
    /// The root object's member `key` as a CEL value, within `budget`.
    fn cel_member(
        &self,
        key: &str,
        budget: &mut Budget,
    ) -> Option<Result<Box<dyn Val + '_>, String>>;
    /// What an expression of a shape decided without CEL (see [`fast`]) comes to, reading the
    /// root members `reads`, with the client's `roots` where known, and the values CEL would
    /// have been given; `None` where only CEL can say.
    fn decide(
        &self,
        fast: &Fast,
        reads: &[String],
        roots: Option<&[String]>,
    ) -> Option<(bool, usize)>;
}

/// A payload in one of the validator's representations: what rules read of it, they read
/// through its root node, alike in each.
pub trait Rooted {
    type Json: Json;
    type Node<'a>: Node<'a, Self::Json> + Member
    where
        Self: 'a;

    fn root_node(&self) -> Self::Node<'_>;
}

impl Rooted for serde_json::Value {
    type Json = SerdeJson;
    type Node<'a> = &'a serde_json::Value;

    fn root_node(&self) -> &serde_json::Value {
        self
    }
}

impl Rooted for Document {
    type Json = DocumentJson;
    type Node<'a> = NodeRef<'a>;

    fn root_node(&self) -> NodeRef<'_> {
        self.root()
    }
}

impl<T: Rooted> Readable for T {
    fn value(&self) -> serde_json::Value {
        self.root_node().to_value().into_owned()
    }

    fn member_value(&self, key: &str) -> Option<serde_json::Value> {
        let member = Member::member(&self.root_node(), key)?;
        Some(member.to_value().into_owned())
    }

    fn cel_whole(&self, budget: &mut Budget) -> Result<Box<dyn Val + '_>, String> {
        value_of(&self.root_node(), budget)
    }

    fn cel_member(
        &self,
        key: &str,
        budget: &mut Budget,
    ) -> Option<Result<Box<dyn Val + '_>, String>> {
        Member::member(&self.root_node(), key).map(|node| value_of(&node, budget))
    }

    fn decide(
        &self,
        fast: &Fast,
        reads: &[String],
        roots: Option<&[String]>,
    ) -> Option<(bool, usize)> {
        fast::decide(fast, (&self.root_node(), reads), roots)
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
    if !budget.counts_value() {
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
        return Ok(match number_of(&n)? {
            Number::Int(i) => Box::new(CelInt::from(i)),
            Number::UInt(u) => Box::new(CelUInt::from(u)),
            Number::Double(f) => Box::new(CelDouble::from(f)),
        });
    }
    Ok(match node.as_boolean() {
        Some(b) => Box::new(CelBool::from(b)),
        None => Box::new(CelNull),
    })
}
