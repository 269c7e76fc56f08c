//! An MCP `CallToolResult`: `structuredContent`, the text blocks of `content`, `isError`.

use super::*;
use crate::core::check::TextCopies;
use crate::core::text_copy::TextCopy;

/// Reads an MCP `CallToolResult`: `structuredContent`, the JSON-looking text blocks of
/// `content`, and `isError`. Its other fields (`_meta`, ...) are read through.
pub(super) struct ResultReader<'b> {
    /// The text the result is read from, so `structuredContent`'s own text can be kept as a slice.
    pub(super) body: &'b Bytes,
    pub(super) depth_limit: usize,
}

impl<'de> Reader<'de> for ResultReader<'_> {
    type Output = Result<ToolResult, CheckError>;

    fn object<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Output, A::Error> {
        let mut result = ToolResult::default();
        let mut problem = FirstError::default();
        while let Some(Key(key)) = map.next_key()? {
            let read = match key.as_ref() {
                "structuredContent" => payload(
                    "result.structuredContent",
                    map.next_value()?,
                    self.body,
                    self.depth_limit,
                )
                .map(|doc| result.structured_content = Some(doc)),
                "content" => map
                    .next_value_seed(Shape(ContentReader { body: self.body }))?
                    .map(|(texts, has_text)| {
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
                problem.note(e);
            }
        }
        Ok(problem.or(result))
    }

    fn wrong(self, found: &'static str) -> Self::Output {
        Err(invalid(format!(
            "`result` must be an MCP CallToolResult object, not {found}"
        )))
    }
}

/// Reads `content`, keeping the text of each text block that may hold a JSON value.
struct ContentReader<'b> {
    body: &'b Bytes,
}

impl<'de> Reader<'de> for ContentReader<'_> {
    /// The JSON-looking texts, and whether any block is a text block.
    type Output = Result<(TextCopies, bool), CheckError>;

    fn array<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Output, A::Error> {
        let mut texts = TextCopies::default();
        let mut has_text = false;
        let mut problem = FirstError::default();
        while let Some(block) = seq.next_element_seed(Shape(BlockReader { body: self.body }))? {
            match block {
                Ok(Block::Json(text)) => {
                    has_text = true;
                    texts.push(text);
                }
                Ok(Block::Text) => has_text = true,
                Ok(Block::Other) => {}
                Err(e) => problem.note(e),
            }
        }
        Ok(problem.or((texts, has_text)))
    }

    fn wrong(self, found: &'static str) -> Self::Output {
        match found {
            // As if absent: no text copy to compare.
            "null" => Ok((TextCopies::default(), false)),
            _ => Err(invalid(format!(
                "`result.content` must be an array of content blocks, not {found}"
            ))),
        }
    }
}

/// One block of `content`, as far as drift and the 2026-07-28 text rule care.
enum Block {
    /// A text block whose text may be JSON.
    Json(TextCopy),
    /// A text block of prose.
    Text,
    /// Any other block (image, resource, ...).
    Other,
}

/// Reads one content block.
struct BlockReader<'b> {
    body: &'b Bytes,
}

impl<'de> Reader<'de> for BlockReader<'_> {
    type Output = Result<Block, CheckError>;

    fn object<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Output, A::Error> {
        let mut is_text = false;
        let mut json_text = None;
        let mut problem = FirstError::default();
        while let Some(Key(key)) = map.next_key()? {
            match key.as_ref() {
                "type" => match map.next_value()? {
                    Scalar::Str(kind) => is_text = kind == "text",
                    other => problem.note(invalid(format!(
                        "`result.content[].type` must be a string, not {}",
                        other.kind()
                    ))),
                },
                "text" => match text_copy(map.next_value()?, self.body) {
                    Ok(Some(copy)) => json_text = Some(copy),
                    Ok(None) => json_text = None,
                    Err(e) => problem.note(e),
                },
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(problem.or(match (is_text, json_text) {
            (false, _) => Block::Other,
            (true, Some(text)) => Block::Json(text),
            (true, None) => Block::Text,
        }))
    }

    fn wrong(self, found: &'static str) -> Self::Output {
        Err(invalid(format!(
            "`result.content` items must be content block objects, not {found}"
        )))
    }
}

/// A text block's `text`, kept (as sent, a slice of the request) only when it may be a JSON copy
/// of the structured content: it starts, after white space, as a JSON value does. Other prose is
/// passed over without a copy.
fn text_copy(raw: &RawValue, body: &Bytes) -> Result<Option<TextCopy>, CheckError> {
    let literal = raw.get();
    let Some(content) = literal.strip_prefix('"').and_then(|l| l.strip_suffix('"')) else {
        let kind = match literal.as_bytes().first() {
            Some(b'{') => "an object",
            Some(b'[') => "an array",
            Some(b't' | b'f') => "a boolean",
            Some(b'n') => "null",
            _ => "a number",
        };
        return Err(invalid(format!(
            "`result.content[].text` must be a string, not {kind}"
        )));
    };
    let range = within(body, content.as_bytes());
    let content = match &range {
        Some(range) => body.slice(range.clone()),
        None => Bytes::copy_from_slice(content.as_bytes()),
    };
    let copy = TextCopy::new(content).map_err(|e| {
        let at = crate::core::document::ReadError::Syntax {
            at: e.at,
            message: e.message,
        }
        .describe(body, range.map_or(0, |r| r.start));
        CheckError::MalformedJson(format!("`result.content[].text` is not valid JSON: {at}"))
    })?;
    Ok(may_be_json(&copy).then_some(copy))
}

/// Whether a text block's text may be a JSON copy: it starts, after white space, as a JSON value
/// does.
pub(super) fn may_be_json(copy: &TextCopy) -> bool {
    matches!(
        copy.first_visible(),
        Some('{' | '[' | '"' | '-' | '0'..='9' | 't' | 'f' | 'n')
    )
}
