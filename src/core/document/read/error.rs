//! Why a text is not a document, and where in it: the reader's errors, with the line and column
//! serde_json would give.

use super::MAX_NUMBER_LENGTH;
use std::fmt;

/// Why a text is not a document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadError {
    /// Nested deeper than the limit.
    TooDeep,
    /// Not JSON, or JSON the rules refuse; `at` is the byte offset in the text where it was found.
    Syntax { at: usize, message: &'static str },
    /// A number literal longer than [`MAX_NUMBER_LENGTH`].
    NumberTooLong { length: usize },
}

impl ReadError {
    /// The message with its line and column in `text` (1-based, as serde_json gives them), or in
    /// the larger text `text` is a part of, starting at `offset`.
    pub fn describe(&self, text: &[u8], offset: usize) -> String {
        match self {
            ReadError::TooDeep => "nested too deep".into(),
            ReadError::NumberTooLong { length } => {
                format!("a number of {length} characters, past {MAX_NUMBER_LENGTH}")
            }
            ReadError::Syntax { at, message } => {
                let end = (offset + at).min(text.len());
                let before = &text[..end];
                let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
                let line_start = before
                    .iter()
                    .rposition(|&b| b == b'\n')
                    .map_or(0, |n| n + 1);
                let column = end - line_start + 1;
                format!("{message} at line {line} column {column}")
            }
        }
    }
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadError::TooDeep => f.write_str("nested too deep"),
            ReadError::NumberTooLong { length } => {
                write!(
                    f,
                    "a number of {length} characters, past {MAX_NUMBER_LENGTH}"
                )
            }
            ReadError::Syntax { at, message } => write!(f, "{message} at byte {at}"),
        }
    }
}
