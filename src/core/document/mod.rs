//! A payload document in the core's own representation: read once from the request's bytes
//! into a flat tape of slots, with every number kept as its literal, and validated in place.
//!
//! The validator judges it through `jsonschema`'s custom-representation traits (`node`), so no
//! `serde_json::Value` is built on the hot path; one is built only for the cold ones (an error's
//! instance, a test). Schemas stay `serde_json::Value`.
//!
//! The tape: each value is one [`Slot`], in document order; an array's elements follow it, an
//! object's members follow it as a key slot then the value's slots. A container records where
//! its slots end, so a sibling is reached in one step. Strings, keys and number literals are
//! borrowed from the request's bytes (shared, not copied); only strings with escapes are decoded
//! into a text arena. So a document is one allocation, its slots, plus the arena if it has
//! escapes, plus a sorted member index if it has objects of many members.
//!
//! The rooms: `read` builds a document from JSON text (the reading rules: duplicate keys,
//! escapes, surrogates, UTF-8, depth; `read::error` why a text is not one, and where);
//! `strings` where string literals end, by their bytes;
//! `node` is the validator's view of it; `number` a number literal and the primitive it fits in;
//! `blocks` (x86_64 with SSE2) marks sixteen bytes at a time.

#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
pub(crate) mod blocks;
mod node;
mod number;
mod read;
mod strings;

pub use node::{DocumentJson, NodeRef};
pub(crate) use read::value_end;
pub use read::{ReadError, MAX_NUMBER_LENGTH};
pub(crate) use strings::{literal, plain_run, quotes_or_backslashes, string_end};

use bytes::Bytes;
use bytestring::ByteString;
use number::Number;

/// A payload document, measured as it was read: its nesting depth, its node count and the bytes
/// of its strings and keys, which bound the work of validating it.
#[derive(Clone, Default)]
pub struct Document {
    slots: Vec<Slot>,
    /// The JSON text the document was read from (checked as UTF-8 once): where its number
    /// literals, and its strings and keys without escapes, are.
    source: ByteString,
    /// Strings and keys with escapes, decoded, one after another.
    text: String,
    /// Where the arena starts among the texts' offsets: a string or key whose text starts at or
    /// past it is in the arena, that far in; any other text is in the source. At least the
    /// source's length, so the check that a text lies in the source is the one that finds it.
    arena_at: u32,
    /// For objects of more than [`INDEXED_MEMBERS`] members: their key slots, sorted by key.
    index: Vec<u32>,
    /// Which objects have an index, and where it starts in `index`: (object slot, start), by
    /// object slot.
    indexed: Vec<(u32, u32)>,
    /// Values (not keys) in the document.
    pub nodes: u64,
    pub depth: usize,
    /// Bytes of every string and object key: what regular expressions run over.
    pub string_bytes: u64,
}

/// Objects with more members than this get a sorted index, so a lookup is a binary search
/// rather than a scan; a scan of fewer is faster than a search.
const INDEXED_MEMBERS: u32 = 16;

/// What a slot past the end reads as.
static MISSING: Slot = Slot {
    kind: Kind::Null,
    a: 0,
    b: 0,
    c: 0,
};

/// One value of the tape (or an object's key).
#[derive(Debug, Clone, Copy)]
struct Slot {
    kind: Kind,
    /// Strings, keys, numbers: where the text starts, in the source or (for strings and keys
    /// that had escapes, decoded) in the arena (see [`Document`]'s `arena_at`). Arrays and
    /// objects: their element or (distinct) member count.
    a: u32,
    /// Strings, keys, numbers: the text's length. Arrays and objects: the slot after their last.
    b: u32,
    /// Numbers: the primitive's bits. Arrays and objects: where their text starts and ends in the source (start in the
    /// high 32 bits), for an error's instance.
    c: u64,
}

impl Slot {
    /// The slot after this value, which is at `at`, and everything inside it.
    fn after(&self, at: u32) -> u32 {
        self.contents_end().unwrap_or(at + 1)
    }

    /// For an array or object, the slot after everything inside it; for any other value, none
    /// (the value is its one slot).
    #[inline(always)]
    fn contents_end(&self) -> Option<u32> {
        matches!(self.kind, Kind::Array | Kind::Object).then_some(self.b)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Null,
    False,
    True,
    /// An integer literal that fits in a `u64` (`c` holds it).
    Unsigned,
    /// A negative integer literal that fits in an `i64` (`c` holds its bits).
    Signed,
    /// Any other number: `c` holds its nearest `f64`, which may be infinite (`1e400`); the
    /// literal is the exact value.
    Float,
    String,
    /// An object's key; its value's slots follow.
    Key,
    /// A key given again later in the same object: the later member is the one read (as
    /// serde_json, `JSON.parse` and Python's `json` read it), so this one is passed over.
    Shadowed,
    Array,
    Object,
}

impl Document {
    /// Reads a document from the JSON text `source` (a request's bytes, shared, not copied),
    /// refusing it past `depth_limit` levels of nesting.
    pub fn read_shared(source: &Bytes, depth_limit: usize) -> Result<Document, ReadError> {
        read::read(source, depth_limit)
    }

    /// Reads the one value at the start of `source` (text checked as UTF-8 with what surrounds
    /// it: a member of a larger text, read in place), refusing it past `depth_limit` levels of
    /// nesting: the document, whose text is the value's own, and where in `source` it ends.
    pub fn read_prefix(
        source: &ByteString,
        depth_limit: usize,
    ) -> Result<(Document, usize), ReadError> {
        read::read_prefix(source, depth_limit)
    }

    /// Reads a document from a copy of the JSON text `text`.
    pub fn read(text: &[u8], depth_limit: usize) -> Result<Document, ReadError> {
        read::read(&Bytes::copy_from_slice(text), depth_limit)
    }

    /// A document holding `value` (written out and read back, so it is measured as any other).
    pub fn from_value(value: &serde_json::Value) -> Document {
        let text = serde_json::to_vec(value).unwrap_or_default();
        Document::read(&text, 128).unwrap_or_default()
    }

    /// The root value.
    pub fn root(&self) -> NodeRef<'_> {
        NodeRef::new(self, 0)
    }

    /// The JSON text the document was read from, as sent (a slice of the request).
    pub fn text(&self) -> &[u8] {
        self.source.as_bytes()
    }

    /// The root is an object.
    pub fn is_object(&self) -> bool {
        self.slots.first().is_some_and(|s| s.kind == Kind::Object)
    }

    /// The root is neither an object nor an array.
    pub fn is_scalar(&self) -> bool {
        !matches!(
            self.slots.first().map(|s| s.kind),
            Some(Kind::Object | Kind::Array)
        )
    }

    /// The document as a `serde_json::Value`, for cold paths (an error's instance, tests) and
    /// the policy's rules.
    pub fn to_value(&self) -> serde_json::Value {
        self.root().value()
    }

    fn slot(&self, at: u32) -> Slot {
        *self.slot_ref(at)
    }

    /// The slot at `at` (a null past the end).
    fn slot_ref(&self, at: u32) -> &Slot {
        self.slots.get(at as usize).unwrap_or(&MISSING)
    }

    /// The text of a string, key or number slot.
    ///
    /// Every such slot's text starts and ends on a character's boundary: a string's or key's
    /// text without escapes lies between its quotes in the source, a decoded one is whole
    /// characters pushed to the arena, a number's literal is ASCII, and both texts are UTF-8
    /// (`read`, [`DocumentJson`]'s string node). So a text in the source is checked at its end
    /// only, and that check is also the one that tells it is there: an enum of strings looks up
    /// each element's text, and the boundary checks and the choice of a text were most of that
    /// lookup's cost.
    #[inline]
    fn text_of(&self, slot: Slot) -> &str {
        let (start, end) = (slot.a as usize, slot.a as usize + slot.b as usize);
        let source: &str = &self.source;
        if end > source.len() {
            return self.decoded(start, end);
        }
        debug_assert!(
            self.arena_at as usize >= source.len(),
            "the arena starts past the source"
        );
        debug_assert!(source.is_char_boundary(start) && source.is_char_boundary(end));
        // SAFETY: `start <= end <= source.len()` (a slot's length is not negative, and the end
        // is checked above), and both are on character boundaries of the source, as said above.
        // A decoded text is never here: it starts at or past `arena_at`, which is at least the
        // source's length, and is never empty. A document read from text that is not UTF-8 has
        // an empty source (it is refused once read): only empty texts are here, at 0.
        unsafe { source.get_unchecked(start..end) }
    }

    /// The text from `start` to `end` past where the arena starts: a decoded string's or key's.
    #[cold]
    fn decoded(&self, start: usize, end: usize) -> &str {
        let at = self.arena_at as usize;
        match (start.checked_sub(at), end.checked_sub(at)) {
            (Some(start), Some(end)) => self.text.get(start..end).unwrap_or_default(),
            _ => "",
        }
    }

    /// The slot after the value at `at` and everything inside it.
    fn after(&self, at: u32) -> u32 {
        self.slot_ref(at).after(at)
    }

    /// The JSON text of the array or object at `slot`, as sent.
    fn span(&self, slot: Slot) -> &[u8] {
        let (start, end) = ((slot.c >> 32) as usize, (slot.c & 0xFFFF_FFFF) as usize);
        self.source.as_bytes().get(start..end).unwrap_or_default()
    }

    /// Where the index of the object at `at` starts, if it has one.
    fn index_of(&self, at: u32) -> Option<usize> {
        let found = self
            .indexed
            .binary_search_by_key(&at, |&(object, _)| object)
            .ok()?;
        Some(self.indexed[found].1 as usize)
    }

    fn number(&self, slot: Slot) -> Number<'_> {
        Number::new(slot.kind, slot.c, self.text_of(slot))
    }
}

impl std::fmt::Debug for Document {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Document({})", self.to_value())
    }
}

impl PartialEq for Document {
    /// The same JSON text read twice is equal; for tests.
    fn eq(&self, other: &Self) -> bool {
        self.to_value() == other.to_value()
    }
}

#[cfg(test)]
mod tests;
