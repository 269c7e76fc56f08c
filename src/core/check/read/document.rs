//! Payload documents: serde_json has read the payload's text through (so broken JSON is refused
//! with serde_json's own message and position, as every other part of a body is); the
//! document reader builds the payload from that text, numbers exact, depth held to the limit.

use super::*;
use crate::core::document::{ReadError, MAX_NUMBER_LENGTH};

/// Reads the payload `field` from `raw`, its JSON text within `outer` (the text the reader reads:
/// a request body, or a payload field of one), so a problem's position is given in `outer`.
pub(super) fn payload(
    field: &str,
    raw: &RawValue,
    outer: &Bytes,
    depth_limit: usize,
) -> Result<Document, CheckError> {
    let text = raw.get().as_bytes();
    let range = within(outer, text);
    let shared = match &range {
        Some(range) => outer.slice(range.clone()),
        None => Bytes::copy_from_slice(text),
    };
    Document::read_shared(&shared, depth_limit).map_err(|e| match e {
        ReadError::TooDeep => CheckError::TooDeep {
            what: "payload",
            limit: depth_limit,
        },
        ReadError::NumberTooLong { length } => CheckError::NumberTooLong {
            length,
            limit: MAX_NUMBER_LENGTH,
        },
        ReadError::Syntax { .. } => {
            let at = match range {
                Some(range) => e.describe(outer, range.start),
                None => e.describe(text, 0),
            };
            CheckError::MalformedJson(format!("`{field}` is not valid JSON: {at}"))
        }
    })
}
