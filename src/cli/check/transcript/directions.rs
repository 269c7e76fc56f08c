//! Which way each message of a transcript went, read from the messages: requests go to the
//! server, but for the ones only a server sends (`sampling/createMessage`, `elicitation/create`,
//! `roots/list`, a `ping` whose id the client awaits); an answer goes back to whichever side
//! sent the request it answers (when both await one with its id, the request sent last: a
//! server's request made while the client's call runs); notifications go to the client, but for
//! those only a client sends (`notifications/initialized`, `notifications/roots/list_changed`, and
//! `notifications/cancelled` of a client's request).

use crate::mcp::{Direction, Framing};
use serde_json::value::RawValue;
use std::collections::HashMap;

/// Requests only a server sends.
const SERVER_REQUESTS: [&str; 3] = ["sampling/createMessage", "elicitation/create", "roots/list"];
/// Notifications only a client sends (besides `notifications/cancelled`, read by its id).
const CLIENT_NOTIFICATIONS: [&str; 2] = [
    "notifications/initialized",
    "notifications/roots/list_changed",
];
/// Request ids awaiting an answer that are remembered; past it, they are forgotten.
pub(super) const MAX_PENDING: usize = 65_536;
/// The longest request id remembered.
const MAX_ID_BYTES: usize = 256;
/// One message's way, and the ids the replay follows: a client's request's, an answer's to the
/// client (for a message alone, not in a batch).
pub(super) struct Read {
    pub(super) direction: Direction,
    pub(super) request: Option<String>,
    pub(super) answer: Option<String>,
}

impl From<Direction> for Read {
    fn from(direction: Direction) -> Self {
        Read {
            direction,
            request: None,
            answer: None,
        }
    }
}

/// Which way each message went, read from the messages (see the module's notes).
#[derive(Default)]
pub(super) struct Directions {
    /// Requests awaiting their answer, by id: when the client's and the server's were sent
    /// (an order number), for each side that sent one.
    pending: HashMap<Box<str>, [Option<u64>; 2]>,
    sent: u64,
}

/// The sides, as [`Directions::pending`] indexes them.
const CLIENT: usize = 0;
const SERVER: usize = 1;

impl Directions {
    /// `None`: not JSON-RPC. A batch goes the way its first message goes (its items are read
    /// one level deep: an array inside a batch is no message; a batch of none is not JSON-RPC).
    pub(super) fn of(&mut self, text: &[u8]) -> Option<Read> {
        let batch = text.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'[');
        if !batch {
            return self.one(text);
        }
        let items: Vec<&RawValue> = serde_json::from_slice(text).ok()?;
        let mut first = None;
        for item in items {
            if item.get().starts_with('[') {
                continue;
            }
            let direction = self.one(item.get().as_bytes()).map(|read| read.direction);
            first = first.or(direction);
        }
        first.map(Read::from)
    }

    fn one(&mut self, text: &[u8]) -> Option<Read> {
        match crate::mcp::framing(text) {
            Framing::Request { id, method } => {
                let clients = self.pending.get(id).is_some_and(|p| p[CLIENT].is_some());
                // A `ping` with an id the client awaits an answer to is the server's.
                let servers =
                    SERVER_REQUESTS.contains(&method.as_ref()) || (method == "ping" && clients);
                if servers {
                    self.sent(id.to_owned(), SERVER);
                    return Some(Direction::ToClient.into());
                }
                self.sent(id.to_owned(), CLIENT);
                Some(Read {
                    direction: Direction::ToServer,
                    request: Some(id.to_owned()),
                    answer: None,
                })
            }
            Framing::Other {
                method: Some(method),
            } => {
                if CLIENT_NOTIFICATIONS.contains(&method.as_ref()) {
                    return Some(Direction::ToServer.into());
                }
                if method == "notifications/cancelled" {
                    // Sent by the side whose request it cancels.
                    let id = cancelled_id(text).unwrap_or_default();
                    let servers = self
                        .pending
                        .get(id.as_str())
                        .is_some_and(|p| p[SERVER].is_some() && p[CLIENT].is_none());
                    let direction = if servers {
                        Direction::ToClient
                    } else {
                        Direction::ToServer
                    };
                    return Some(direction.into());
                }
                Some(Direction::ToClient.into())
            }
            Framing::Other { method: None } => {
                let id = crate::mcp::message_head(text).id.unwrap_or_default();
                let to_client = |id| Read {
                    direction: Direction::ToClient,
                    request: None,
                    answer: Some(id),
                };
                let Some(pending) = self.pending.get_mut(id.as_str()) else {
                    return Some(to_client(id));
                };
                // Both sides await an answer with this id: the request sent last is answered
                // first (a server's request made while the client's call runs).
                let side = match *pending {
                    [Some(client), Some(server)] if server > client => SERVER,
                    [None, Some(_)] => SERVER,
                    _ => CLIENT,
                };
                pending[side] = None;
                if pending.iter().all(Option::is_none) {
                    self.pending.remove(id.as_str());
                }
                Some(if side == SERVER {
                    Direction::ToServer.into()
                } else {
                    to_client(id)
                })
            }
            Framing::Batch | Framing::NotJsonRpc => None,
        }
    }

    /// A request `id` sent by `side`. Ids past [`MAX_ID_BYTES`] are not remembered (their
    /// answers go to the client); past [`MAX_PENDING`], the ones remembered are forgotten.
    fn sent(&mut self, id: String, side: usize) {
        if id.len() > MAX_ID_BYTES {
            return;
        }
        if self.pending.len() >= MAX_PENDING && !self.pending.contains_key(id.as_str()) {
            self.pending.clear();
        }
        self.sent += 1;
        self.pending.entry(id.into()).or_default()[side] = Some(self.sent);
    }
}

/// The `requestId` of a `notifications/cancelled`, as JSON text.
fn cancelled_id(text: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Params<'a> {
        #[serde(borrow, rename = "requestId")]
        request_id: &'a RawValue,
    }
    #[derive(serde::Deserialize)]
    struct Note<'a> {
        #[serde(borrow)]
        params: Params<'a>,
    }
    let note: Note<'_> = serde_json::from_slice(text).ok()?;
    Some(note.params.request_id.get().to_owned())
}
