//! An MCP `CallToolResult` read straight from its text, in one pass: `structuredContent` read
//! into its document where it lies, the text blocks of `content` kept as they are found.
//!
//! The serde reader ([`super::result`]) reads the whole result through before the document
//! reader reads `structuredContent` again, and a result is mostly its `structuredContent` and its
//! text copy. This reader is for results as tools send them; it gives up (`None`) on anything
//! else, and the serde reader then reads the result and says what is wrong with it in its own
//! words. So it never accepts a result the serde reader refuses, and what it reads is what the
//! serde reader reads: a key given twice, a key with an escape or one of serde_json's private
//! tokens, text that is not UTF-8, nesting past [`DEPTH`] or the check's limit, any error at all,
//! all give up.

use super::result::may_be_json;
use crate::core::check::ToolResult;
use crate::core::document::{literal, string_end, value_end, Document};
use crate::core::text_copy::TextCopy;
use bytes::Bytes;
use bytestring::ByteString;

/// Nesting this reader reads to, at most (serde_json, whose words the serde reader gives, stops
/// at 128 levels from the result's top).
const DEPTH: usize = 100;

/// The result in `text`, or `None` when it is not one this reader reads (see the module).
pub(super) fn read(text: &Bytes, depth_limit: usize) -> Option<ToolResult> {
    let source = ByteString::try_from(text.clone()).ok()?;
    let (result, end) = read_at(&source, 0, depth_limit, Members::Any)?;
    let rest = source.as_bytes().get(end..)?;
    rest.iter()
        .all(|b| matches!(b, b' ' | b'\n' | b'\r' | b'\t'))
        .then_some(result)
}

/// The tool result whose text starts at `at` in `line` (a message that carries it), and the
/// offset one past its end; `None` when this reader does not read it or it has a member besides
/// `structuredContent`, `content`, `isError` and `_meta` (see [`ToolResult::read_ahead`]).
pub(super) fn read_ahead(
    line: &ByteString,
    at: usize,
    depth_limit: usize,
) -> Option<(ToolResult, usize)> {
    read_at(line, at, depth_limit, Members::ToolResultOnly)
}

/// Which members besides a tool result's own a result read may have.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Members {
    /// Any, each read through and dropped.
    Any,
    /// `_meta` alone: a result with another member (a task, a `resultType`, an answer to
    /// another request altogether) is left to the readers of whole messages.
    ToolResultOnly,
}

/// The result whose text starts at `at` in `source`, and the offset one past its end.
fn read_at(
    source: &ByteString,
    at: usize,
    depth_limit: usize,
    others: Members,
) -> Option<(ToolResult, usize)> {
    let mut walk = Walk {
        source,
        at,
        limit: depth_limit.min(DEPTH),
    };
    let mut result = ToolResult::default();
    let mut seen = [false; 3];
    walk.members(|walk, key| {
        let which = match key {
            b"structuredContent" => 0,
            b"content" => 1,
            b"isError" => 2,
            b"_meta" => return walk.skip(),
            _ if others == Members::Any => return walk.skip(),
            _ => return None,
        };
        if std::mem::replace(&mut seen[which], true) {
            return None;
        }
        match which {
            0 => result.structured_content = Some(walk.document()?),
            1 => walk.content(&mut result)?,
            _ => match walk.word()? {
                b"true" => result.is_error = true,
                b"false" | b"null" => {}
                _ => return None,
            },
        }
        Some(())
    })?;
    Some((result, walk.at))
}

struct Walk<'s> {
    source: &'s ByteString,
    at: usize,
    limit: usize,
}

impl<'s> Walk<'s> {
    fn bytes(&self) -> &'s [u8] {
        self.source.as_bytes()
    }

    /// Passes white space; where the reader is then.
    fn space(&mut self) -> usize {
        while let Some(b' ' | b'\n' | b'\r' | b'\t') = self.bytes().get(self.at) {
            self.at += 1;
        }
        self.at
    }

    /// The next byte after white space, taken.
    fn take(&mut self) -> Option<u8> {
        let at = self.space();
        let byte = *self.bytes().get(at)?;
        self.at += 1;
        Some(byte)
    }

    /// Calls `member` for each member of the object here, the reader at its value.
    fn members(&mut self, mut member: impl FnMut(&mut Self, &'s [u8]) -> Option<()>) -> Option<()> {
        if self.take()? != b'{' {
            return None;
        }
        let at = self.space();
        if self.bytes().get(at) == Some(&b'}') {
            self.at += 1;
            return Some(());
        }
        loop {
            let key = self.plain_string()?;
            // serde_json reads an object keyed by its private tokens as something else (with
            // `arbitrary_precision`, a number): left to it.
            if key.starts_with(b"$serde_json::") {
                return None;
            }
            if self.take()? != b':' {
                return None;
            }
            member(self, key)?;
            match self.take()? {
                b',' => {}
                b'}' => return Some(()),
                _ => return None,
            }
        }
    }

    /// The text from the value here on, and where it starts.
    fn rest(&mut self) -> Option<(usize, ByteString)> {
        let start = self.space();
        Some((start, self.source.slice_ref(self.source.get(start..)?)))
    }

    /// The document of the value here, read where it lies.
    fn document(&mut self) -> Option<Document> {
        let (start, rest) = self.rest()?;
        let (document, end) = Document::read_prefix(&rest, self.limit).ok()?;
        self.at = start + end;
        Some(document)
    }

    /// Passes the value here, read as any value is.
    fn skip(&mut self) -> Option<()> {
        let (start, rest) = self.rest()?;
        self.at = start + value_end(&rest, self.limit)?;
        Some(())
    }

    /// The run of letters here (`true`, `false`, `null`, or not a word this reader reads).
    fn word(&mut self) -> Option<&'s [u8]> {
        let start = self.space();
        let length = self.bytes()[start..]
            .iter()
            .take_while(|b| b.is_ascii_lowercase())
            .count();
        self.at = start + length;
        Some(&self.bytes()[start..start + length])
    }

    /// `content`: its text blocks, the JSON-looking texts kept.
    fn content(&mut self, result: &mut ToolResult) -> Option<()> {
        match self.take()? {
            b'[' => {}
            b'n' if self.bytes().get(self.at..self.at + 3) == Some(b"ull") => {
                self.at += 3;
                return Some(());
            }
            _ => return None,
        }
        if self.bytes().get(self.space()) == Some(&b']') {
            self.at += 1;
            return Some(());
        }
        loop {
            self.block(result)?;
            match self.take()? {
                b',' => {}
                b']' => return Some(()),
                _ => return None,
            }
        }
    }

    /// One content block.
    fn block(&mut self, result: &mut ToolResult) -> Option<()> {
        let (mut kind, mut text) = (None, None);
        self.members(|walk, key| match key {
            b"type" if kind.is_none() => {
                kind = Some(walk.plain_string()?);
                Some(())
            }
            b"text" if text.is_none() => {
                text = Some(walk.text()?);
                Some(())
            }
            b"type" | b"text" => None,
            _ => walk.skip(),
        })?;
        if kind == Some(&b"text"[..]) {
            result.has_text_block = true;
            if let Some(copy) = text.flatten() {
                result.json_texts.push(copy);
            }
        }
        Some(())
    }

    /// The string here (a key, a block's `type`), when it holds no escape.
    fn plain_string(&mut self) -> Option<&'s [u8]> {
        let start = self.space();
        if self.bytes().get(start) != Some(&b'"') {
            return None;
        }
        let end = string_end(self.bytes(), start)?;
        let content = &self.bytes()[start + 1..end - 1];
        if content.contains(&b'\\') {
            return None;
        }
        self.at = end;
        Some(content)
    }

    /// A text block's `text`: its copy when it may be JSON.
    fn text(&mut self) -> Option<Option<TextCopy>> {
        let start = self.space();
        if self.bytes().get(start) != Some(&b'"') {
            return None;
        }
        let literal = literal(self.bytes(), start)?;
        self.at = literal.end;
        let content = self.source.as_bytes().slice(start + 1..literal.end - 1);
        let copy = TextCopy::read(content, literal.unicode_escapes).ok()?;
        Some(may_be_json(&copy).then_some(copy))
    }
}

#[cfg(test)]
mod tests;
