//! An MCP `CallToolResult`: `structuredContent`, the text blocks of `content`, `isError`.

use super::*;

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
                // Its text is kept too (a slice of the request), for the drift check's fast path:
                // a text copy that is the same text needs no comparison value by value.
                "structuredContent" => {
                    let raw: &'de RawValue = map.next_value()?;
                    payload("result.structuredContent", raw, self.body, self.depth_limit).map(
                        |doc| {
                            result.structured_content = Some(doc);
                            result.structured_text =
                                Some(self.body.slice_ref(raw.get().as_bytes()));
                        },
                    )
                }
                "content" => map
                    .next_value_seed(Shape(ContentReader))?
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

/// Reads `content`, keeping the text of each text block that holds a JSON object or array.
struct ContentReader;

impl<'de> Reader<'de> for ContentReader {
    /// The JSON-looking texts, and whether any block is a text block.
    type Output = Result<(Vec<String>, bool), CheckError>;

    fn array<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Output, A::Error> {
        let mut texts = Vec::new();
        let mut has_text = false;
        let mut problem = FirstError::default();
        while let Some(block) = seq.next_element_seed(Shape(BlockReader))? {
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
                "text" => match map.next_value::<JsonText>()? {
                    JsonText::Json(text) => json_text = Some(text),
                    JsonText::Prose => {}
                    JsonText::Wrong(kind) => problem.note(invalid(format!(
                        "`result.content[].text` must be a string, not {kind}"
                    ))),
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
