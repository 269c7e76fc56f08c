//! The JSON-RPC envelope of a message, found without parsing what it carries: its `params`,
//! `result` and `error` are found by structure ([`scan`]) and stay slices of the line, so
//! traffic the boundary does not act on is never parsed, and a tool result is parsed once, by
//! the check.

use super::scan::{self, Unread};
use serde::de::{DeserializeSeed, IgnoredAny, MapAccess, Visitor};
use serde_json::value::RawValue;
use std::borrow::Cow;
use std::fmt;

/// A JSON-RPC 2.0 message, as far as the boundary reads it. `id` and `method` are parsed (and
/// a message whose `id` or `method` is not JSON is no message); `params` of a request or a
/// notification too; a response's `result` is left unread.
#[derive(Debug)]
pub enum Message<'a> {
    Request {
        id: &'a RawValue,
        method: Cow<'a, str>,
        params: Option<&'a RawValue>,
    },
    Notification {
        method: Cow<'a, str>,
        params: Option<&'a RawValue>,
    },
    Response {
        id: Option<&'a RawValue>,
        result: Option<Unread<'a>>,
    },
}

/// The envelope's members, in [`members`] order.
const ENVELOPE: [&str; 5] = ["id", "method", "params", "result", "error"];

/// Finds the members `names` of the JSON object `text`, each as its unread JSON text (`null` as
/// absent), or `None` when `text` is not structured as a JSON object. A member repeated counts
/// once, its last value: that is the one JavaScript's `JSON.parse`, Python's `json` and
/// serde_json's `Value` keep, so what the boundary judges is what the peer will read (a reader
/// that refused repeated members would leave the message unread, and relayed unjudged).
pub fn members<'a, const N: usize>(
    text: &'a [u8],
    names: [&'static str; N],
) -> Option<[Option<Unread<'a>>; N]> {
    let mut found = [None; N];
    scan::object(text, |key, value| {
        if let Some(i) = names.iter().position(|name| name.as_bytes() == key) {
            found[i] = (!value.is_null()).then_some(value);
        }
    })?;
    Some(found)
}

/// What a line holds.
pub enum Parsed<'a> {
    One(Message<'a>),
    /// A JSON array (a JSON-RPC batch, which MCP has not allowed since 2025-06-18): its elements.
    Batch(Vec<&'a RawValue>),
    /// Not JSON, or JSON that is not a JSON-RPC message.
    NotJsonRpc,
}

/// Reads one line's envelope.
pub fn parse(line: &[u8]) -> Parsed<'_> {
    let text = trim(line);
    match text.first() {
        Some(b'{') => match message(text) {
            Some(m) => Parsed::One(m),
            None => Parsed::NotJsonRpc,
        },
        Some(b'[') => match serde_json::from_slice::<Vec<&RawValue>>(text) {
            Ok(items) => Parsed::Batch(items),
            Err(_) => Parsed::NotJsonRpc,
        },
        _ => Parsed::NotJsonRpc,
    }
}

/// Reads one JSON object as a JSON-RPC message.
pub fn message(text: &[u8]) -> Option<Message<'_>> {
    let [id, method, params, result, error] = members(text, ENVELOPE)?;
    let method = match method {
        Some(m) => Some(m.parse::<Cow<'_, str>>()?),
        None => None,
    };
    let id = match id {
        Some(id) => Some(id.parse::<&RawValue>()?),
        None => None,
    };
    match (method, id) {
        (Some(method), Some(id)) => Some(Message::Request {
            id,
            method,
            params: parsed(params)?,
        }),
        (Some(method), None) => Some(Message::Notification {
            method,
            params: parsed(params)?,
        }),
        (None, id) if result.is_some() || error.is_some() => Some(Message::Response { id, result }),
        _ => None,
    }
}

/// A request's `params`, parsed: `Some(None)` when absent, `None` when not JSON.
fn parsed(params: Option<Unread<'_>>) -> Option<Option<&RawValue>> {
    match params {
        Some(p) => Some(Some(p.parse()?)),
        None => Some(None),
    }
}

/// The line without its line ending and surrounding white space.
pub fn trim(line: &[u8]) -> &[u8] {
    line.trim_ascii()
}

/// What the first bytes of a line too long to read say: its `id` (JSON text) and whether it has
/// a `method`, when they come before the part cut off.
#[derive(Debug, Default, PartialEq)]
pub struct Head {
    pub id: Option<String>,
    pub has_method: bool,
}

/// Reads the top-level `id` and `method` of a JSON object from its first bytes (the rest of the
/// object may be missing: whatever was read before the cut is kept).
pub fn head(bytes: &[u8]) -> Head {
    let mut head = Head::default();
    let mut de = serde_json::Deserializer::from_slice(bytes);
    // The cut makes this fail; what was read before it is in `head`.
    let _ = HeadSeed(&mut head).deserialize(&mut de);
    head
}

struct HeadSeed<'h>(&'h mut Head);

impl<'de> DeserializeSeed<'de> for HeadSeed<'_> {
    type Value = ();

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for HeadSeed<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON-RPC message")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(key) = map.next_key::<Cow<'de, str>>()? {
            match key.as_ref() {
                "id" => {
                    let id = map.next_value::<Box<RawValue>>()?;
                    if id.get() != "null" {
                        self.0.id = Some(id.get().to_owned());
                    }
                }
                "method" => {
                    self.0.has_method = true;
                    map.next_value::<IgnoredAny>()?;
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn envelopes_are_told_apart() {
        let kind = |line: &str| match parse(line.as_bytes()) {
            Parsed::One(Message::Request { method, .. }) => format!("request {method}"),
            Parsed::One(Message::Notification { method, .. }) => format!("notification {method}"),
            Parsed::One(Message::Response { id, .. }) => {
                format!("response {}", id.map_or("-", |i| i.get()))
            }
            Parsed::Batch(items) => format!("batch of {}", items.len()),
            Parsed::NotJsonRpc => "not json-rpc".into(),
        };
        assert_eq!(
            kind(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}}"#),
            "request tools/call"
        );
        assert_eq!(
            kind(r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#),
            "notification notifications/tools/list_changed"
        );
        assert_eq!(
            kind("{\"jsonrpc\":\"2.0\",\"id\":\"a\",\"result\":{}}\r\n"),
            "response \"a\""
        );
        assert_eq!(
            kind(r#"{"jsonrpc":"2.0","error":{"code":-32700,"message":"x"}}"#),
            "response -"
        );
        assert_eq!(
            kind(r#"[{"id":1,"result":{}},{"id":2,"result":{}}]"#),
            "batch of 2"
        );
        assert_eq!(kind("not json"), "not json-rpc");
        assert_eq!(kind(r#"{"hello":"world"}"#), "not json-rpc");
        assert_eq!(kind(r#"{"id":1,"method":"x""#), "not json-rpc");
        assert_eq!(kind(r#"{"id":1,"method":7}"#), "not json-rpc");
        assert_eq!(
            kind(r#"{"id":1,"method":"x","params":[tru]}"#),
            "not json-rpc"
        );
        assert_eq!(kind(r#"{"id":{,"result":{}}"#), "not json-rpc");
        // A result is not parsed here: the check that reads it refuses it if it is not JSON.
        assert_eq!(kind(r#"{"id":1,"result":{"n":NaN}}"#), "response 1");
    }

    #[test]
    fn a_repeated_member_is_read_as_its_last_value() {
        // What JSON.parse would hand the client: the second result.
        let line = br#"{"jsonrpc":"2.0","id":1,"result":{"n":1},"result":{"n":"x"}}"#;
        let Parsed::One(Message::Response { id, result }) = parse(line) else {
            panic!("a response")
        };
        assert_eq!(id.map(RawValue::get), Some("1"));
        assert_eq!(result.map(Unread::text), Some(r#"{"n":"x"}"#));
        // An escaped key is the same key.
        let line = br#"{"jsonrpc":"2.0","id":2,"result":{"n":1},"res\u0075lt":{"n":"y"}}"#;
        let Parsed::One(Message::Response { result, .. }) = parse(line) else {
            panic!("a response")
        };
        assert_eq!(result.map(Unread::text), Some(r#"{"n":"y"}"#));
        let [a, b] = members(br#"{"a":1,"b":null,"a":[2]}"#, ["a", "b"]).expect("an object");
        assert_eq!(a.map(Unread::text), Some("[2]"));
        assert!(b.is_none(), "null reads as absent");
        assert!(members(b"[1]", ["a"]).is_none());
    }

    #[test]
    fn the_head_of_a_cut_line_gives_its_id_and_method() {
        let line = br#"{"jsonrpc":"2.0","id":"call-9","method":"tools/call","params":{"arguments":{"blob":"xxxxxxxx"#;
        assert_eq!(
            head(line),
            Head {
                id: Some("\"call-9\"".into()),
                has_method: true
            }
        );
        assert_eq!(
            head(br#"{"jsonrpc":"2.0","result":{"content":[{"type":"text","text":"xx"#),
            Head::default()
        );
        assert_eq!(head(b"garbage").id, None);
    }
}
