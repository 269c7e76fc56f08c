//! A request body read whole, bounded: its declared length and its bytes against the body
//! limit, its arrival against the body-read timeout, and the bytes of every body still arriving
//! against the receiving budget ([`crate::core::receiving`]). REST bodies and the messages POSTed
//! to the gateway are read here; a refusal is a [`CheckError`] each edge words its own way.

use crate::core::error::CheckError;
use crate::core::gate::Gate;
use crate::core::receiving::Held;
use bytes::Bytes;
use http::header::{self, HeaderMap};
use http_body_util::BodyExt;
use std::fmt::Display;

/// Reads `body` (whose request has `headers`) whole, within the gate's body limit and body-read
/// timeout: refused at once when its declared length is over the limit, as soon as it passes
/// the limit otherwise, when it has not all arrived in time, and when the bodies still arriving
/// would hold more than the receiving budget (its declared length is held from the start, so
/// such a body is refused before it is read).
pub async fn read<B>(gate: &Gate, headers: &HeaderMap, body: B) -> Result<Bytes, CheckError>
where
    B: http_body::Body<Data = Bytes> + Unpin,
    B::Error: Display,
{
    let limits = gate.limits();
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let mut held = gate.hold_receiving();
    if let Some(len) = declared {
        let len = usize::try_from(len)
            .ok()
            .filter(|&len| len <= limits.max_body_bytes)
            .ok_or(CheckError::BodyTooLarge {
                limit: limits.max_body_bytes,
            })?;
        held.grow(len)?;
    }
    match tokio::time::timeout(
        limits.body_read_timeout,
        collect(body, limits.max_body_bytes, &mut held),
    )
    .await
    {
        Err(_) => Err(CheckError::BodyTimeout {
            secs: limits.body_read_timeout.as_secs(),
        }),
        Ok(read) => read,
    }
}

/// Collects a body of at most `limit` bytes, holding what has arrived so far.
async fn collect<B>(mut body: B, limit: usize, held: &mut Held) -> Result<Bytes, CheckError>
where
    B: http_body::Body<Data = Bytes> + Unpin,
    B::Error: Display,
{
    let mut pieces: Vec<Bytes> = Vec::new();
    let mut total = 0usize;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| {
            CheckError::MalformedJson(format!("the request body could not be read: {e}"))
        })?;
        let Ok(data) = frame.into_data() else {
            continue;
        };
        total += data.len();
        if total > limit {
            return Err(CheckError::BodyTooLarge { limit });
        }
        if total > held.bytes() {
            held.set(total)?;
        }
        pieces.push(data);
    }
    Ok(match pieces.len() {
        0 => Bytes::new(),
        1 => pieces.swap_remove(0),
        _ => {
            let mut whole = Vec::with_capacity(total);
            for piece in &pieces {
                whole.extend_from_slice(piece);
            }
            whole.into()
        }
    })
}
