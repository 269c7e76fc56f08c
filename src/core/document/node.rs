//! The validator's view of a document: `jsonschema`'s custom-representation traits, so that
//! validators built with `jsonschema::options_for::<DocumentJson>()` judge a document in place.

use super::number::Number;
use super::{Document, Kind, Slot, INDEXED_MEMBERS};
use ahash::{AHashSet, AHasher};
use jsonschema::json::JsonNumber;
use jsonschema::json::{Array, Json, Node, NodeIdentity, Object};
use jsonschema::JsonType;
use jsonschema_value::LazyInstance;
use serde_json::Value;
use std::borrow::Cow;
use std::hash::{Hash, Hasher};

/// The representation: documents read by [`Document::read`].
#[derive(Debug)]
pub enum DocumentJson {}

impl Json for DocumentJson {
    type Node<'a> = NodeRef<'a>;
    type PreparedKey = Box<str>;
    type StringBuffer = Document;
    /// A tape cannot hold a cycle.
    const ACYCLIC: bool = true;

    fn prepare_key(key: &str) -> Box<str> {
        key.into()
    }

    fn with_string_node<T>(
        buffer: &mut Document,
        string: &str,
        f: impl FnOnce(NodeRef<'_>) -> T,
    ) -> T {
        buffer.slots.clear();
        buffer.text.clear();
        buffer.text.push_str(string);
        // The buffer has no source: its arena starts at its texts' first offset.
        buffer.slots.push(super::Slot {
            kind: Kind::String,
            a: buffer.arena_at,
            b: string.len() as u32,
            c: 0,
        });
        f(NodeRef::new(buffer, 0))
    }
}

/// One value of a document: the document and the value's slot (read where the node is made: the
/// validator asks a node its kind, then its text or number). Two words, as the validator passes a
/// node by reference for every element it judges; where the slot is, the few that ask (an
/// object's members, an identity) derive from the slot's address.
#[derive(Clone, Copy)]
pub struct NodeRef<'a> {
    doc: &'a Document,
    slot: &'a Slot,
}

impl<'a> NodeRef<'a> {
    pub(super) fn new(doc: &'a Document, at: u32) -> Self {
        NodeRef {
            doc,
            slot: doc.slot_ref(at),
        }
    }

    fn kind(&self) -> Kind {
        self.slot.kind
    }

    /// Where the value's slot is in its document. (A node past the end, whose slot is the null
    /// `MISSING`, as an empty document's root is, answers a number of no meaning: a null has no
    /// members to look for from it, and such a document no other node whose identity it could
    /// share.)
    fn at(&self) -> u32 {
        let offset =
            (std::ptr::from_ref(self.slot) as usize).wrapping_sub(self.doc.slots.as_ptr() as usize);
        (offset / std::mem::size_of::<Slot>()) as u32
    }

    /// The member named `key` of an object value.
    pub(crate) fn member(&self, key: &str) -> Option<NodeRef<'a>> {
        let doc = self.doc;
        let slot = *self.slot;
        if slot.kind != Kind::Object {
            return None;
        }
        if slot.a > INDEXED_MEMBERS {
            let start = doc.index_of(self.at())?;
            let index = doc.index.get(start..start + slot.a as usize)?;
            let found = index
                .binary_search_by(|&k| doc.text_of(doc.slot(k)).cmp(key))
                .ok()?;
            return Some(NodeRef::new(doc, index[found] + 1));
        }
        let mut k = self.at() + 1;
        while k < slot.b {
            let key_slot = doc.slot(k);
            if key_slot.kind == Kind::Key && doc.text_of(key_slot) == key {
                return Some(NodeRef::new(doc, k + 1));
            }
            k = doc.after(k + 1);
        }
        None
    }

    /// The value as a `serde_json::Value` (numbers keep their literals).
    pub(super) fn value(&self) -> Value {
        let slot = *self.slot;
        match slot.kind {
            Kind::Null => Value::Null,
            Kind::False => Value::Bool(false),
            Kind::True => Value::Bool(true),
            Kind::Unsigned | Kind::Signed | Kind::Float => {
                Value::Number(self.doc.number(slot).to_serde())
            }
            Kind::String | Kind::Key | Kind::Shadowed => {
                Value::String(self.doc.text_of(slot).to_owned())
            }
            Kind::Array => Value::Array(Elements::of(*self).map(|e| e.value()).collect()),
            Kind::Object => Value::Object(
                Members::of(*self)
                    .map(|(k, v)| (k.to_owned(), v.value()))
                    .collect(),
            ),
        }
    }
}

impl<'a> Node<'a, DocumentJson> for NodeRef<'a> {
    type Object = NodeRef<'a>;
    type Array = NodeRef<'a>;
    type Number = Number<'a>;

    fn as_object(&self) -> Option<NodeRef<'a>> {
        (self.kind() == Kind::Object).then_some(*self)
    }

    fn as_array(&self) -> Option<NodeRef<'a>> {
        (self.kind() == Kind::Array).then_some(*self)
    }

    fn as_string(&self) -> Option<Cow<'a, str>> {
        let slot = *self.slot;
        (slot.kind == Kind::String).then(|| Cow::Borrowed(self.doc.text_of(slot)))
    }

    fn as_number(&self) -> Option<Number<'a>> {
        let slot = *self.slot;
        matches!(slot.kind, Kind::Unsigned | Kind::Signed | Kind::Float)
            .then(|| self.doc.number(slot))
    }

    fn is_number(&self) -> bool {
        matches!(self.kind(), Kind::Unsigned | Kind::Signed | Kind::Float)
    }

    fn as_boolean(&self) -> Option<bool> {
        match self.kind() {
            Kind::True => Some(true),
            Kind::False => Some(false),
            _ => None,
        }
    }

    fn is_null(&self) -> bool {
        self.kind() == Kind::Null
    }

    fn json_type(&self) -> JsonType {
        match self.kind() {
            Kind::Null => JsonType::Null,
            Kind::False | Kind::True => JsonType::Boolean,
            Kind::Unsigned | Kind::Signed | Kind::Float => JsonType::Number,
            Kind::String | Kind::Key | Kind::Shadowed => JsonType::String,
            Kind::Array => JsonType::Array,
            Kind::Object => JsonType::Object,
        }
    }

    fn equals_value(&self, expected: &Value) -> bool {
        let slot = *self.slot;
        match (slot.kind, expected) {
            (Kind::Null, Value::Null) => true,
            (Kind::True, Value::Bool(b)) => *b,
            (Kind::False, Value::Bool(b)) => !*b,
            (Kind::String, Value::String(s)) => self.doc.text_of(slot) == s,
            (Kind::Unsigned, Value::Number(n)) if n.as_u64().is_some() => {
                n.as_u64() == Some(slot.c)
            }
            (Kind::Signed, Value::Number(n)) if n.as_i64().is_some() => {
                n.as_i64() == Some(slot.c as i64)
            }
            (Kind::Unsigned | Kind::Signed | Kind::Float, Value::Number(_)) => {
                jsonschema::json::cmp::equal(&self.value(), expected)
            }
            (Kind::Array, Value::Array(items)) => {
                slot.a as usize == items.len()
                    && Elements::of(*self)
                        .zip(items)
                        .all(|(e, item)| e.equals_value(item))
            }
            (Kind::Object, Value::Object(map)) => {
                slot.a as usize == map.len()
                    && map
                        .iter()
                        .all(|(k, v)| self.member(k).is_some_and(|m| m.equals_value(v)))
            }
            _ => false,
        }
    }

    fn to_value(&self) -> Cow<'a, Value> {
        Cow::Owned(self.value())
    }

    /// An error's instance, built only when the error is read (its message, mostly): from the
    /// text of an array or object as sent, or from a string's or number's text.
    fn lazy_value(&self) -> LazyInstance<'a> {
        let doc = self.doc;
        let slot = *self.slot;
        let (bytes, tag): (&'a [u8], u32) = match slot.kind {
            Kind::Array | Kind::Object => (doc.span(slot), LAZY_JSON),
            Kind::Unsigned | Kind::Signed | Kind::Float => {
                (doc.text_of(slot).as_bytes(), LAZY_JSON)
            }
            Kind::String => (doc.text_of(slot).as_bytes(), LAZY_STRING),
            _ => return LazyInstance::Ready(Cow::Owned(self.value())),
        };
        LazyInstance::Deferred {
            bytes,
            tag,
            make: lazy_instance,
            cell: std::sync::OnceLock::new(),
        }
    }

    fn identity(&self) -> Option<NodeIdentity> {
        Some(NodeIdentity::tagged(
            std::ptr::from_ref(self.doc) as usize,
            self.at(),
        ))
    }
}

/// A deferred instance's text is JSON (an array's, an object's, a number's).
const LAZY_JSON: u32 = 0;
/// A deferred instance's text is a string's, decoded.
const LAZY_STRING: u32 = 1;

/// Builds a deferred instance from its text.
fn lazy_instance(bytes: &[u8], tag: u32) -> Value {
    match tag {
        LAZY_STRING => Value::String(String::from_utf8_lossy(bytes).into_owned()),
        _ => serde_json::from_slice(bytes).unwrap_or(Value::Null),
    }
}

impl<'a> Object<'a, DocumentJson> for NodeRef<'a> {
    type Node = NodeRef<'a>;
    type MemberName = &'a str;
    type MembersIter = Members<'a>;

    fn len(&self) -> usize {
        self.slot.a as usize
    }

    fn get(&self, key: &Box<str>) -> Option<NodeRef<'a>> {
        self.member(key)
    }

    fn members(&self) -> Members<'a> {
        Members::of(*self)
    }
}

impl<'a> Array<'a, DocumentJson> for NodeRef<'a> {
    type Node = NodeRef<'a>;
    type ElementsIter = Elements<'a>;

    fn len(&self) -> usize {
        self.slot.a as usize
    }

    fn elements(&self) -> Elements<'a> {
        Elements::of(*self)
    }

    fn is_unique(&self) -> bool {
        let len = Array::len(self);
        if len <= PAIRWISE_UNIQUE {
            // Pairwise for a few: no set built, nothing collected.
            return Elements::of(*self)
                .enumerate()
                .all(|(i, a)| Elements::of(*self).take(i).all(|b| !same(a, b)));
        }
        // Hashed on the document itself: no value built for an element.
        let mut seen = AHashSet::with_capacity(len);
        Elements::of(*self).all(|e| seen.insert(Hashed(e)))
    }
}

/// Up to this many elements, `uniqueItems` compares them pairwise; past it, by hash (the
/// validator's own threshold on `serde_json` values).
const PAIRWISE_UNIQUE: usize = 15;

/// A value of a document, hashed as [`same`] compares: numbers by their value (as the nearest
/// `f64`, `0` and `-0` alike, so equal numbers however written hash alike), objects whatever the
/// order of their members.
struct Hashed<'a>(NodeRef<'a>);

impl PartialEq for Hashed<'_> {
    fn eq(&self, other: &Self) -> bool {
        same(self.0, other.0)
    }
}

impl Eq for Hashed<'_> {}

impl Hash for Hashed<'_> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        let node = self.0;
        let slot = *node.slot;
        match slot.kind {
            Kind::Null => state.write_u32(3_221_225_473),
            Kind::True => true.hash(state),
            Kind::False => false.hash(state),
            Kind::Unsigned | Kind::Signed | Kind::Float => {
                // `0` and `-0` are one number.
                let bits = node.doc.number(slot).as_f64().map(|f| match f == 0.0 {
                    true => 0,
                    false => f.to_bits(),
                });
                state.write_u64(bits.unwrap_or(u64::MAX));
            }
            Kind::String | Kind::Key | Kind::Shadowed => node.doc.text_of(slot).hash(state),
            Kind::Array => {
                // The length first: `[[1],[2]]` and `[[1,2]]` must not feed the same words.
                state.write_u32(slot.a);
                Elements::of(node).for_each(|e| Hashed(e).hash(state));
            }
            Kind::Object => {
                let mut hash = 0;
                for (key, value) in Members::of(node) {
                    let mut member = AHasher::default();
                    key.hash(&mut member);
                    Hashed(value).hash(&mut member);
                    hash ^= member.finish();
                }
                state.write_u64(hash);
            }
        }
    }
}

/// JSON equality of two values of documents: numbers mathematically, objects in any order.
fn same(a: NodeRef<'_>, b: NodeRef<'_>) -> bool {
    let (sa, sb) = (*a.slot, *b.slot);
    let number = |k: Kind| matches!(k, Kind::Unsigned | Kind::Signed | Kind::Float);
    match (sa.kind, sb.kind) {
        (Kind::Unsigned, Kind::Unsigned) | (Kind::Signed, Kind::Signed) => sa.c == sb.c,
        (ka, kb) if number(ka) && number(kb) => {
            // Equal numbers have one nearest `f64`: two that differ are two numbers, found with
            // no value built (`as_f64` gives only finite ones). The rest are compared exactly.
            match (a.doc.number(sa).as_f64(), b.doc.number(sb).as_f64()) {
                (Some(x), Some(y)) if x != y => false,
                _ => a.equals_value(&b.value()),
            }
        }
        (Kind::String, Kind::String) => a.doc.text_of(sa) == b.doc.text_of(sb),
        (Kind::Array, Kind::Array) => {
            sa.a == sb.a
                && Elements::of(a)
                    .zip(Elements::of(b))
                    .all(|(x, y)| same(x, y))
        }
        (Kind::Object, Kind::Object) => {
            sa.a == sb.a && Members::of(a).all(|(k, v)| b.member(k).is_some_and(|w| same(v, w)))
        }
        (ka, kb) => ka == kb && matches!(ka, Kind::Null | Kind::True | Kind::False),
    }
}

/// An object's members, in document order, passing over keys given again later.
pub struct Members<'a>(Contents<'a>);

impl<'a> Members<'a> {
    fn of(object: NodeRef<'a>) -> Self {
        Members(Contents::of(object, Kind::Object))
    }
}

impl<'a> Iterator for Members<'a> {
    type Item = (&'a str, NodeRef<'a>);

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let key = self.0.rest.next()?;
            let value = self.0.value()?;
            if key.kind == Kind::Key {
                return Some((self.0.doc.text_of(*key), value));
            }
        }
    }
}

/// An array's elements, in order.
pub struct Elements<'a>(Contents<'a>);

impl<'a> Elements<'a> {
    fn of(array: NodeRef<'a>) -> Self {
        Elements(Contents::of(array, Kind::Array))
    }
}

impl<'a> Iterator for Elements<'a> {
    type Item = NodeRef<'a>;

    #[inline]
    fn next(&mut self) -> Option<NodeRef<'a>> {
        self.0.value()
    }
}

/// The slots inside an array or object, walked in order: an element's (or a member's value's)
/// are one step, or, for an array or object, a jump to the slot its own contents end at (a
/// `uniqueItems` or `enum` over many elements pays a step and a look at the kind for each).
struct Contents<'a> {
    doc: &'a Document,
    /// The document's slots up to the container's end.
    slots: &'a [Slot],
    /// The slots not yet walked.
    rest: std::slice::Iter<'a, Slot>,
}

impl<'a> Contents<'a> {
    /// The contents of `container`; none when it is not of `kind`.
    fn of(container: NodeRef<'a>, kind: Kind) -> Self {
        let doc = container.doc;
        let (slots, rest) = match container.slot.kind == kind {
            true => {
                let end = (container.slot.b as usize).min(doc.slots.len());
                let slots = &doc.slots[..end];
                let first = container.at() as usize + 1;
                (slots, slots.get(first..).unwrap_or_default().iter())
            }
            false => (&[][..], [].iter()),
        };
        Contents { doc, slots, rest }
    }

    /// The value whose slot is the next one, the walk moved past it and everything inside it.
    #[inline(always)]
    fn value(&mut self) -> Option<NodeRef<'a>> {
        let slot = self.rest.as_slice().first()?;
        match slot.contents_end() {
            Some(end) => self.rest = self.slots.get(end as usize..).unwrap_or_default().iter(),
            None => {
                self.rest.next();
            }
        }
        Some(NodeRef {
            doc: self.doc,
            slot,
        })
    }
}
