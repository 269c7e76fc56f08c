//! Reading a document from JSON text, in one pass, into the tape.
//!
//! The rules are serde_json's, so a payload is read as it was before it had a representation of
//! its own, and as the consumers of a tool's result read it: RFC 8259 syntax, strings of valid
//! UTF-8 with no raw control character, `\u` escapes whose surrogates come in pairs, and of a key
//! given twice in one object the last member is kept. Unlike serde_json, every number is kept
//! exactly, as its literal.

use super::strings::plain_run;
use super::{Document, Kind, Slot, INDEXED_MEMBERS};
use bytes::Bytes;
use bytestring::ByteString;

mod error;
mod number;
pub use error::ReadError;

/// The most characters a number literal may have. Numbers are compared exactly, from their
/// literal, with work that grows with its length; a value is never this long, a hostile payload
/// may be.
pub const MAX_NUMBER_LENGTH: usize = 4096;

/// Slots reserved for a value read from `length` bytes: a value takes at least two bytes but for
/// the last; compact rows of short members take about five, and most values far more. One in
/// five bytes up to 4,096 slots (a small result read without growing its slots, which cost as
/// much as reading a tenth of it), 4,096 up to 32 KB, then one in eight, grown past 65,536 slots.
fn reserved_slots(length: usize) -> usize {
    (length / 5).min(1 << 12).max((length / 8).min(1 << 16)) + 4
}

pub(super) fn read(source: &Bytes, depth_limit: usize) -> Result<Document, ReadError> {
    let text: &[u8] = source;
    // Checked as UTF-8 once, here, not string by string. Text that is not UTF-8 is never a
    // document (bytes past ASCII are allowed only in strings, and there only as UTF-8): it is
    // read only to say where it breaks.
    let checked = ByteString::try_from(source.clone()).ok();
    let slots = reserved_slots(text.len());
    let source = checked.clone().unwrap_or_default();
    let mut reader = Reader::new(text, checked.as_deref(), source, depth_limit, slots)?;
    reader.value(1)?;
    reader.space();
    if reader.at != text.len() {
        return Err(reader.error("trailing characters"));
    }
    // Objects are indexed as they end (inner ones first): put them in slot order.
    reader.doc.indexed.sort_unstable();
    if checked.is_none() {
        let at = std::str::from_utf8(text)
            .err()
            .map_or(0, |e| e.valid_up_to());
        return Err(ReadError::Syntax {
            at,
            message: "invalid unicode code point",
        });
    }
    Ok(reader.doc)
}

/// Reads the one value at the start of `source`, text already checked as UTF-8 (with the text
/// around it): the document, and where in `source` the value ends. What follows the value is not
/// read; the document's text is the value's own.
pub(super) fn read_prefix(
    source: &ByteString,
    depth_limit: usize,
) -> Result<(Document, usize), ReadError> {
    // What follows the value is not the value's, but is usually of its size or less (a result's
    // text copy), or the end of the message.
    read_value_at(source, depth_limit, reserved_slots(source.len()))
}

/// The end of the one value at the start of `source` (as [`read_prefix`]), read through, its
/// document dropped: `None` when it is not JSON by the rules above.
pub(crate) fn value_end(source: &ByteString, depth_limit: usize) -> Option<usize> {
    read_value_at(source, depth_limit, 16)
        .ok()
        .map(|(_, end)| end)
}

fn read_value_at(
    source: &ByteString,
    depth_limit: usize,
    slots: usize,
) -> Result<(Document, usize), ReadError> {
    let mut reader = Reader::new(
        source.as_bytes(),
        Some(source),
        source.clone(),
        depth_limit,
        slots,
    )?;
    reader.value(1)?;
    let end = reader.at;
    reader.doc.indexed.sort_unstable();
    reader.doc.source = source.slice_ref(&source[..end]);
    Ok((reader.doc, end))
}

struct Reader<'t> {
    text: &'t [u8],
    /// `text`, when all of it is valid UTF-8.
    utf8: Option<&'t str>,
    at: usize,
    limit: usize,
    doc: Document,
}

impl<'t> Reader<'t> {
    /// A reader of `text` (which is `utf8`, when that is known) into a document of `source`'s,
    /// its slots reserved.
    fn new(
        text: &'t [u8],
        utf8: Option<&'t str>,
        source: ByteString,
        limit: usize,
        slots: usize,
    ) -> Result<Self, ReadError> {
        // A text's offset is a `u32`, and a decoded one lies past the whole text (`arena_at`),
        // at most the text's length again.
        let Some(arena_at) = u32::try_from(text.len())
            .ok()
            .filter(|&length| length <= u32::MAX / 2)
        else {
            return Err(ReadError::Syntax {
                at: 0,
                message: "document of 2 GiB or more",
            });
        };
        Ok(Reader {
            text,
            utf8,
            at: 0,
            limit,
            doc: Document {
                slots: Vec::with_capacity(slots),
                source,
                arena_at,
                ..Document::default()
            },
        })
    }

    fn error(&self, message: &'static str) -> ReadError {
        ReadError::Syntax {
            at: self.at,
            message,
        }
    }

    fn peek(&self) -> Option<u8> {
        self.text.get(self.at).copied()
    }

    fn space(&mut self) {
        while let Some(b' ' | b'\n' | b'\r' | b'\t') = self.peek() {
            self.at += 1;
        }
    }

    /// The next byte that is not white space, the reader moved to it. Compact JSON has none
    /// between its tokens: a byte past the space character is one look, not a loop.
    #[inline(always)]
    fn significant(&mut self) -> Option<u8> {
        match self.peek() {
            Some(byte) if byte > b' ' => Some(byte),
            _ => self.past_space(),
        }
    }

    #[inline(never)]
    fn past_space(&mut self) -> Option<u8> {
        self.space();
        self.peek()
    }

    fn push(&mut self, kind: Kind, a: u32, b: u32, c: u64) -> u32 {
        let at = self.doc.slots.len() as u32;
        self.doc.slots.push(Slot { kind, a, b, c });
        at
    }

    /// Reads one value (the reader is at it, or at white space before it): inline where a
    /// member's or an element's is read, so that a scalar (most of them) takes no call.
    #[inline(always)]
    fn value(&mut self, depth: usize) -> Result<(), ReadError> {
        if depth > self.limit {
            return Err(ReadError::TooDeep);
        }
        self.doc.depth = self.doc.depth.max(depth);
        self.doc.nodes += 1;
        match self.significant() {
            Some(b'{') => self.object(depth),
            Some(b'[') => self.array(depth),
            Some(byte) => self.scalar(byte),
            None => Err(self.error("EOF while parsing a value")),
        }
    }

    /// Reads a value that is no container (the reader is at its first byte, `first`).
    #[inline(always)]
    fn scalar(&mut self, first: u8) -> Result<(), ReadError> {
        match first {
            b'"' => {
                let (a, b) = self.string()?;
                self.doc.string_bytes += u64::from(b);
                self.push(Kind::String, a, b, 0);
                Ok(())
            }
            b't' => self.literal(b"true", Kind::True),
            b'f' => self.literal(b"false", Kind::False),
            b'n' => self.literal(b"null", Kind::Null),
            b'-' | b'0'..=b'9' => self.number(),
            _ => Err(self.error("expected value")),
        }
    }

    fn literal(&mut self, word: &'static [u8], kind: Kind) -> Result<(), ReadError> {
        if self.text[self.at..].starts_with(word) {
            self.at += word.len();
            self.push(kind, 0, 0, 0);
            Ok(())
        } else {
            Err(self.error("expected ident"))
        }
    }

    fn array(&mut self, depth: usize) -> Result<(), ReadError> {
        let start = self.at;
        self.at += 1;
        let at = self.push(Kind::Array, 0, 0, 0);
        let mut count = 0u32;
        if self.significant() == Some(b']') {
            self.at += 1;
        } else {
            loop {
                self.value(depth + 1)?;
                count += 1;
                match self.significant() {
                    Some(b',') => self.at += 1,
                    Some(b']') => {
                        self.at += 1;
                        break;
                    }
                    Some(_) => return Err(self.error("expected `,` or `]`")),
                    None => return Err(self.error("EOF while parsing a list")),
                }
            }
        }
        let end = self.doc.slots.len() as u32;
        let slot = &mut self.doc.slots[at as usize];
        slot.a = count;
        slot.b = end;
        slot.c = span(start, self.at);
        Ok(())
    }

    fn object(&mut self, depth: usize) -> Result<(), ReadError> {
        let start = self.at;
        self.at += 1;
        let at = self.push(Kind::Object, 0, 0, 0);
        let mut count = 0u32;
        let mut distinct = 0u32;
        // A small object's keys, folded into 64 bits: a key whose bit is new is a new key, so only
        // a key whose bit was seen is compared with the keys before it.
        let mut seen = 0u64;
        if self.significant() == Some(b'}') {
            self.at += 1;
        } else {
            loop {
                match self.significant() {
                    Some(b'"') => {}
                    Some(_) => return Err(self.error("key must be a string")),
                    None => return Err(self.error("EOF while parsing an object")),
                }
                let (a, b) = self.string()?;
                self.doc.string_bytes += u64::from(b);
                let key = self.push(Kind::Key, a, b, 0);
                distinct += 1;
                if count < INDEXED_MEMBERS {
                    let bit = 1u64 << (key_fold(key_text(&self.doc, key)) & 63);
                    if seen & bit != 0 && self.shadow_earlier(at, key) {
                        distinct -= 1;
                    }
                    seen |= bit;
                }
                if self.significant() != Some(b':') {
                    return Err(self.error("expected `:`"));
                }
                self.at += 1;
                self.value(depth + 1)?;
                count += 1;
                match self.significant() {
                    Some(b',') => self.at += 1,
                    Some(b'}') => {
                        self.at += 1;
                        break;
                    }
                    Some(_) => return Err(self.error("expected `,` or `}`")),
                    None => return Err(self.error("EOF while parsing an object")),
                }
            }
        }
        let end = self.doc.slots.len() as u32;
        let distinct = if count > INDEXED_MEMBERS {
            self.index_members(at, end)
        } else {
            distinct
        };
        let slot = &mut self.doc.slots[at as usize];
        slot.a = distinct;
        slot.b = end;
        slot.c = span(start, self.at);
        Ok(())
    }

    /// Marks the member of `object` before `key` whose key is the same text as `key`'s, if
    /// there is one, as passed over (the later member is the one read).
    fn shadow_earlier(&mut self, object: u32, key: u32) -> bool {
        let doc = &mut self.doc;
        let target = doc.slot(key);
        let mut earlier = object + 1;
        while earlier < key {
            let slot = doc.slot(earlier);
            if slot.kind == Kind::Key && doc.text_of(slot) == doc.text_of(target) {
                doc.slots[earlier as usize].kind = Kind::Shadowed;
                return true;
            }
            earlier = doc.after(earlier + 1);
        }
        false
    }

    /// Indexes the members of a large object by key, passing over every member whose key is
    /// given again later. Returns the distinct member count.
    fn index_members(&mut self, object: u32, end: u32) -> u32 {
        let doc = &mut self.doc;
        let start = doc.index.len();
        let mut key = object + 1;
        while key < end {
            doc.index.push(key);
            key = doc.after(key + 1);
        }
        // Out of the document while it is sorted, so the keys' texts can be read beside it.
        let mut index = std::mem::take(&mut doc.index);
        // Sorted by key, then by position: of equal keys the last is the one kept.
        index[start..]
            .sort_unstable_by(|&x, &y| key_text(doc, x).cmp(key_text(doc, y)).then(x.cmp(&y)));
        let mut kept = start;
        for i in start..index.len() {
            let key = index[i];
            let repeated = index
                .get(i + 1)
                .is_some_and(|&next| key_text(doc, next) == key_text(doc, key));
            if repeated {
                doc.slots[key as usize].kind = Kind::Shadowed;
            } else {
                index[kept] = key;
                kept += 1;
            }
        }
        index.truncate(kept);
        doc.index = index;
        doc.indexed.push((object, start as u32));
        (kept - start) as u32
    }

    /// Reads a string (the reader is at its opening quote): where its text is (in the source, or
    /// past [`Document`]'s `arena_at` when it had escapes, decoded into the arena) and its length.
    ///
    /// Inlined where it is read: most strings are keys and short values with no escape, read
    /// in a few instructions, for which a call of its own cost as much again.
    #[inline(always)]
    fn string(&mut self) -> Result<(u32, u32), ReadError> {
        self.at += 1;
        let first = self.at;
        let run = plain_run(&self.text[first..]);
        self.at = first + run;
        if self.peek() == Some(b'"') {
            self.at += 1;
            // Checked as UTF-8 with the whole text.
            return Ok((first as u32, run as u32));
        }
        self.escaped_string(first)
    }

    /// The rest of a string from its first escape (or problem), the reader there: decoded into
    /// the arena.
    #[inline(never)]
    fn escaped_string(&mut self, first: usize) -> Result<(u32, u32), ReadError> {
        if self.doc.text.capacity() == 0 {
            // Decoded text is never longer than what is left of the source.
            self.doc.text.reserve(self.text.len() - first);
        }
        let start = self.doc.text.len();
        self.push_plain(first)?;
        loop {
            match self.peek() {
                Some(b'"') => {
                    self.at += 1;
                    let length = self.doc.text.len() - start;
                    return Ok((self.doc.arena_at + start as u32, length as u32));
                }
                Some(b'\\') => {
                    self.at += 1;
                    self.escape()?;
                }
                Some(_) => {
                    return Err(self
                        .error("control character (\\u0000-\\u001F) found while parsing a string"))
                }
                None => return Err(self.error("EOF while parsing a string")),
            }
            let run = self.at;
            self.at = run + plain_run(&self.text[run..]);
            self.push_plain(run)?;
        }
    }

    /// Copies the plain run from `run` to the reader's place into the arena.
    fn push_plain(&mut self, run: usize) -> Result<(), ReadError> {
        if self.at == run {
            return Ok(());
        }
        match self.utf8.and_then(|all| all.get(run..self.at)) {
            Some(plain) => self.doc.text.push_str(plain),
            None => match std::str::from_utf8(&self.text[run..self.at]) {
                Ok(plain) => self.doc.text.push_str(plain),
                Err(e) => {
                    self.at = run + e.valid_up_to();
                    return Err(self.error("invalid unicode code point"));
                }
            },
        }
        Ok(())
    }

    /// Decodes the escape after a backslash into the arena.
    fn escape(&mut self) -> Result<(), ReadError> {
        let Some(b) = self.peek() else {
            return Err(self.error("EOF while parsing a string"));
        };
        self.at += 1;
        let c = match b {
            b'"' => '"',
            b'\\' => '\\',
            b'/' => '/',
            b'b' => '\u{8}',
            b'f' => '\u{c}',
            b'n' => '\n',
            b'r' => '\r',
            b't' => '\t',
            b'u' => self.unicode_escape()?,
            _ => return Err(self.error("invalid escape")),
        };
        self.doc.text.push(c);
        Ok(())
    }

    /// A `\u` escape (the reader is after the `u`), with the second half of a surrogate pair.
    fn unicode_escape(&mut self) -> Result<char, ReadError> {
        let first = self.hex4()?;
        if (0xDC00..=0xDFFF).contains(&first) {
            return Err(self.error("lone leading surrogate in hex escape"));
        }
        if !(0xD800..=0xDBFF).contains(&first) {
            return char::from_u32(first).ok_or_else(|| self.error("invalid escape"));
        }
        if !self.text[self.at..].starts_with(b"\\u") {
            return Err(self.error("unexpected end of hex escape"));
        }
        self.at += 2;
        let second = self.hex4()?;
        if !(0xDC00..=0xDFFF).contains(&second) {
            return Err(self.error("lone leading surrogate in hex escape"));
        }
        let code = 0x1_0000 + ((first - 0xD800) << 10) + (second - 0xDC00);
        char::from_u32(code).ok_or_else(|| self.error("invalid escape"))
    }

    fn hex4(&mut self) -> Result<u32, ReadError> {
        let mut n = 0u32;
        for _ in 0..4 {
            let Some(b) = self.peek() else {
                return Err(self.error("EOF while parsing a string"));
            };
            let digit = match b {
                b'0'..=b'9' => b - b'0',
                b'a'..=b'f' => b - b'a' + 10,
                b'A'..=b'F' => b - b'A' + 10,
                _ => return Err(self.error("invalid escape")),
            };
            n = n * 16 + u32::from(digit);
            self.at += 1;
        }
        Ok(n)
    }
}

/// A key folded to a few bits' worth: its length and its first and last bytes.
#[inline]
fn key_fold(key: &str) -> u32 {
    let key = key.as_bytes();
    let (first, last) = match (key.first(), key.last()) {
        (Some(&first), Some(&last)) => (first, last),
        _ => (0, 0),
    };
    (key.len() as u32)
        .wrapping_mul(7)
        .wrapping_add(u32::from(first))
        .wrapping_add(u32::from(last).wrapping_mul(13))
}

/// A container's text, from `start` to `end` in the source, packed in a slot.
fn span(start: usize, end: usize) -> u64 {
    ((start as u64) << 32) | end as u64
}

/// The text of the key at slot `at` of `doc`.
fn key_text(doc: &Document, at: u32) -> &str {
    doc.text_of(doc.slot(at))
}
