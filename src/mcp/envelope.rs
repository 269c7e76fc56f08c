//! The JSON-RPC envelope of a message, found without parsing what it carries: its `params`,
//! `result` and `error` are found by structure ([`scan`]) and stay slices of the line, so
//! traffic the boundary does not act on is never parsed, and a tool result is parsed once, by
//! the check.
//!
//! A message is classed as the official clients class it (see docs/proxy.md, "How a message is
//! read"): members are read as JSON.parse and pydantic read them (a repeated member is its last
//! value; members the envelope does not know are ignored), and a message from the server with an
//! `id` and a `result` or `error` is an answer whatever else it carries (a `method` of any type,
//! `params` that are not JSON), because the Python SDK ignores the rest and takes it as one. From
//! the client, a message with a string `method` and an `id` is a request whatever else it
//! carries, because that is the reading under which a server would run a tool.

use super::scan::{self, Unread};
use super::Direction;
use crate::core::check::ToolResult;
use bytes::Bytes;
use bytestring::ByteString;
use serde::de::{DeserializeSeed, IgnoredAny, MapAccess, Visitor};
use serde_json::value::RawValue;
use std::borrow::Cow;
use std::fmt;

/// A JSON-RPC 2.0 message, as far as the boundary reads it: `id` and `method` are parsed, the
/// rest is left unread for whoever acts on it (a request's `params` that are not JSON are a
/// request whose params cannot be read, not a message that is not one).
#[derive(Debug)]
pub enum Message<'a> {
    Request {
        id: &'a RawValue,
        method: Cow<'a, str>,
        params: Option<Unread<'a>>,
    },
    Notification {
        method: Cow<'a, str>,
        params: Option<Unread<'a>>,
    },
    Response {
        /// `None` for `"id": null` (an error about a request that could not be read), and
        /// for an id that is neither a string nor a number (see `unreadable_id`).
        id: Option<&'a RawValue>,
        result: Option<Unread<'a>>,
        /// An `id` member was there but is not a JSON string or number: no answer a client
        /// could place, though one that carries a tool result is withheld all the same.
        unreadable_id: bool,
        /// `result`, read as a tool result in the pass that found the members, where the
        /// message was read with a [`ReadAhead`] and the result reads as one. Boxed: the
        /// futures that relay a message hold it across their waits, and move it as they go.
        read: Option<Box<ToolResult>>,
    },
}

/// What a server's message is read with so that its `result` is read as a tool result in the
/// pass that finds the message's members ([`ToolResult::read_ahead`]), not scanned past there
/// and read again by the check: the check's depth limit.
#[derive(Clone, Copy)]
pub struct ReadAhead {
    pub depth_limit: usize,
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
    members_reading(text, names, |_, _| None)
}

/// As [`members`], with `read` asked first for the end of each value (see
/// [`scan::object`]).
fn members_reading<'a, const N: usize>(
    text: &'a [u8],
    names: [&'static str; N],
    read: impl FnMut(&[u8], usize) -> Option<usize>,
) -> Option<[Option<Unread<'a>>; N]> {
    let mut found = [None; N];
    scan::object(
        text,
        |key, value| {
            if let Some(i) = names.iter().position(|name| name.as_bytes() == key) {
                found[i] = (!value.is_null()).then_some(value);
            }
        },
        read,
    )?;
    Some(found)
}

/// What a line holds.
pub enum Parsed<'a> {
    One(Message<'a>),
    /// A JSON array (a JSON-RPC batch, which MCP has not allowed since 2025-06-18): its elements.
    Batch(Vec<&'a RawValue>),
    /// Not JSON, or JSON that no client reads as a JSON-RPC message.
    NotJsonRpc,
}

/// Reads one line's envelope, sent in `direction`.
pub fn parse(line: &[u8], direction: Direction) -> Parsed<'_> {
    parsed(line, direction, None)
}

/// As [`parse`], a server's `result` read with `ahead` where given (see [`ReadAhead`]).
pub fn parse_reading(line: &Bytes, direction: Direction, ahead: Option<ReadAhead>) -> Parsed<'_> {
    parsed(line, direction, ahead.map(|ahead| (line, ahead)))
}

/// Where the envelope's members of one line lie in it: the line scanned once, by a transport
/// that must know what a client's message is before the rules see it (the gateway's POST), and
/// handed with the line to the rules, which read the message from it with no second scan.
#[derive(Clone, Debug)]
pub struct Envelope {
    /// The line scanned, held: while the envelope is, its bytes stay where they are and never
    /// change (a `Bytes` and its clones share them), so a line at the same place of the same
    /// length is this line.
    line: Bytes,
    /// Each member's text, as a range of the line; `None` when the line is no JSON object
    /// (a batch, or not JSON), which is read whole where it is read.
    members: Option<[Option<(usize, usize)>; 5]>,
}

impl Envelope {
    /// Scans `line` once.
    pub fn scan(line: &Bytes) -> Self {
        let text = trim(line);
        let base = line.as_ptr() as usize;
        let members = match text.first() {
            Some(b'{') => members(text, ENVELOPE).map(|found| {
                found.map(|member| {
                    member.map(|m| {
                        let start = m.bytes().as_ptr() as usize - base;
                        (start, start + m.bytes().len())
                    })
                })
            }),
            _ => None,
        };
        Envelope {
            line: line.clone(),
            members,
        }
    }

    /// The line scanned.
    pub fn line(&self) -> &Bytes {
        &self.line
    }

    /// What `line` holds, read in `direction` as [`parse`] reads it: from the members found
    /// when `line` is the line scanned, read anew otherwise.
    pub fn parsed<'a>(&self, line: &'a [u8], direction: Direction) -> Parsed<'a> {
        let scanned =
            std::ptr::eq(line.as_ptr(), self.line.as_ptr()) && line.len() == self.line.len();
        let Some(members) = self.members.filter(|_| scanned) else {
            return parse(line, direction);
        };
        let found = members.map(|member| {
            member
                .and_then(|(start, end)| line.get(start..end))
                .map(Unread::new)
        });
        match message_of(found, None, direction) {
            Some(message) => Parsed::One(message),
            None => Parsed::NotJsonRpc,
        }
    }
}

fn parsed<'a>(
    line: &'a [u8],
    direction: Direction,
    ahead: Option<(&Bytes, ReadAhead)>,
) -> Parsed<'a> {
    let text = trim(line);
    match text.first() {
        Some(b'{') => match message_reading(text, direction, ahead) {
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

/// Reads one JSON object, sent in `direction`, as a JSON-RPC message (see the module's header for
/// the reading).
pub fn message(text: &[u8], direction: Direction) -> Option<Message<'_>> {
    message_reading(text, direction, None)
}

/// As [`message`], a server's `result` read with `ahead` where given (see [`ReadAhead`]):
/// `text` is `line` trimmed.
fn message_reading<'a>(
    text: &'a [u8],
    direction: Direction,
    ahead: Option<(&Bytes, ReadAhead)>,
) -> Option<Message<'a>> {
    let mut read = None;
    let found = match ahead.filter(|_| direction == Direction::ToClient) {
        Some((line, ahead)) => {
            let offset = line.len() - line.trim_ascii_start().len();
            let mut results = 0;
            members_reading(text, ENVELOPE, |key, at| {
                if key != b"result" {
                    return None;
                }
                // The last `result` is the one a client reads (as for every member). A message
                // with more than one is left to the check's own reading: the line is checked as
                // UTF-8 and a result read ahead once at most, whatever the line holds.
                read = None;
                results += 1;
                if results > 1 {
                    return None;
                }
                let line = ByteString::try_from(line.clone()).ok()?;
                let (result, end) = ToolResult::read_ahead(&line, offset + at, ahead.depth_limit)?;
                let end = end.checked_sub(offset).filter(|&end| end <= text.len())?;
                read = Some(Box::new(result));
                Some(end)
            })
        }
        None => members(text, ENVELOPE),
    };
    message_of(found?, read, direction)
}

/// The message whose envelope members are `found` (in [`ENVELOPE`] order), sent in `direction`,
/// with its `result` read ahead as `read` where it was.
fn message_of<'a>(
    found: [Option<Unread<'a>>; 5],
    read: Option<Box<ToolResult>>,
    direction: Direction,
) -> Option<Message<'a>> {
    let [id, method, params, result, error] = found;
    // A `method` that is not a string makes no request or notification for any client.
    let method = method.and_then(Unread::string);
    let answer = result.is_some() || error.is_some();
    let request_first = direction == Direction::ToServer;
    match (id, method) {
        (Some(id), Some(method)) if !answer || request_first => Some(Message::Request {
            id: request_id(id)?,
            method,
            params,
        }),
        (None, Some(method)) => Some(Message::Notification { method, params }),
        (id, _) if answer => {
            let readable = id.and_then(request_id);
            Some(Message::Response {
                unreadable_id: id.is_some() && readable.is_none(),
                id: readable,
                read: read.filter(|_| result.is_some()),
                result,
            })
        }
        _ => None,
    }
}

/// An id as a client accepts one: a JSON string or number.
fn request_id(id: Unread<'_>) -> Option<&RawValue> {
    let id: &RawValue = id.parse()?;
    matches!(id.get().as_bytes().first(), Some(b'"' | b'-' | b'0'..=b'9')).then_some(id)
}

/// The line without its line ending and surrounding white space.
pub fn trim(line: &[u8]) -> &[u8] {
    line.trim_ascii()
}

/// What the first bytes of a line too long to read say: its `id` (JSON text) and whether it has
/// a `method`, a `result` or an `error`, when they come before the part cut off.
#[derive(Debug, Default, PartialEq)]
pub struct Head {
    pub id: Option<String>,
    pub has_method: bool,
    /// It has a `result` or an `error` member.
    pub has_answer: bool,
}

impl Head {
    /// Whether a message sent in `direction` with this head is a request, as [`message`]
    /// reads it: from the client, one with a `method`; from the server, one with a `method` and
    /// no `result` or `error`.
    pub fn is_request(&self, direction: Direction) -> bool {
        self.id.is_some()
            && self.has_method
            && (direction == Direction::ToServer || !self.has_answer)
    }

    /// Whether a message sent in `direction` with this head answers a request.
    pub fn is_answer(&self, direction: Direction) -> bool {
        self.id.is_some() && !self.is_request(direction)
    }
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
                "result" | "error" => {
                    self.0.has_answer = true;
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

    fn kind_from(direction: Direction, line: &str) -> String {
        match parse(line.as_bytes(), direction) {
            Parsed::One(Message::Request { method, .. }) => format!("request {method}"),
            Parsed::One(Message::Notification { method, .. }) => format!("notification {method}"),
            Parsed::One(Message::Response {
                id, unreadable_id, ..
            }) => match (id, unreadable_id) {
                (Some(id), _) => format!("response {}", id.get()),
                (None, true) => "response to an unreadable id".into(),
                (None, false) => "response -".into(),
            },
            Parsed::Batch(items) => format!("batch of {}", items.len()),
            Parsed::NotJsonRpc => "not json-rpc".into(),
        }
    }

    #[test]
    fn envelopes_are_told_apart() {
        let kind = |line: &str| kind_from(Direction::ToClient, line);
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
        assert_eq!(kind(r#"{"id":{,"result":{}}"#), "not json-rpc");
        // Params are not read here: a request whose params are not JSON is still a request.
        assert_eq!(kind(r#"{"id":1,"method":"x","params":[tru]}"#), "request x");
        // A result is not parsed here: the check that reads it refuses it if it is not JSON.
        assert_eq!(kind(r#"{"id":1,"result":{"n":NaN}}"#), "response 1");
    }

    #[test]
    fn an_id_with_a_result_or_error_is_an_answer_whatever_else_it_carries() {
        let kind = |line: &str| kind_from(Direction::ToClient, line);
        for line in [
            r#"{"jsonrpc":"2.0","id":11,"method":5,"result":{}}"#,
            r#"{"jsonrpc":"2.0","id":11,"method":[],"result":{}}"#,
            r#"{"jsonrpc":"2.0","id":11,"params":NaN,"result":{}}"#,
            r#"{"jsonrpc":"2.0","result":{},"method":"tools/call","id":11}"#,
            r#"{"jsonrpc":"2.0","id":11,"method":"x","error":{"code":1,"message":"m"}}"#,
            r#"{"id":11,"result":{},"extra":{"deep":[1,2]}}"#,
        ] {
            assert_eq!(kind(line), "response 11", "{line}");
        }
        assert_eq!(
            kind(r#"{"jsonrpc":"2.0","id":true,"result":{}}"#),
            "response to an unreadable id"
        );
        assert_eq!(
            kind(r#"{"jsonrpc":"2.0","id":NaN,"result":{}}"#),
            "response to an unreadable id"
        );
        // From the client, a string method with an id is a request: the reading under which a
        // server would run a tool.
        assert_eq!(
            kind_from(
                Direction::ToServer,
                r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{},"result":{}}"#
            ),
            "request tools/call"
        );
        assert_eq!(
            kind_from(
                Direction::ToServer,
                r#"{"jsonrpc":"2.0","id":3,"method":5,"result":{}}"#
            ),
            "response 3"
        );
    }

    /// All a reading says of a line: the message's members as read, or what else it is.
    fn reading(parsed: Parsed<'_>) -> String {
        match parsed {
            Parsed::One(message) => format!("{message:?}"),
            Parsed::Batch(items) => format!("batch {items:?}"),
            Parsed::NotJsonRpc => "not json-rpc".into(),
        }
    }

    #[test]
    fn a_scanned_envelope_reads_its_line_as_a_first_reading_does() {
        let lines = [
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","arguments":{}}}"#,
            "  {\"jsonrpc\":\"2.0\",\"id\":\"x\",\"method\":\"tools/\\u0063all\"}\r\n",
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{},"result":{}}"#,
            r#"{"jsonrpc":"2.0","id":3,"method":5,"result":{}}"#,
            r#"{"jsonrpc":"2.0","id":true,"result":{}}"#,
            r#"{"id":1,"method":"x","method":"y","params":[tru]}"#,
            r#"{"jsonrpc":"2.0","error":{"code":-32700,"message":"x"}}"#,
            r#"[{"id":1,"method":"a"},{"id":2,"method":"b"}]"#,
            r#"{"id":1,"method":"x""#,
            r#"{"hello":"world"}"#,
            "not json",
            "",
        ];
        for line in lines {
            for direction in [Direction::ToServer, Direction::ToClient] {
                let line = Bytes::copy_from_slice(line.as_bytes());
                let scanned = Envelope::scan(&line);
                // The rules read it from a second handle on the same bytes.
                let handed = line.clone();
                assert_eq!(
                    reading(scanned.parsed(&handed, direction)),
                    reading(parse(&line, direction)),
                    "{line:?}"
                );
            }
        }
        // An envelope handed another line (of the same length) reads that line, not its own.
        let first = Bytes::from_static(br#"{"id":1,"method":"a"}"#);
        let other = Bytes::copy_from_slice(br#"{"id":2,"method":"b"}"#);
        assert_eq!(first.len(), other.len());
        assert_eq!(
            reading(Envelope::scan(&first).parsed(&other, Direction::ToServer)),
            reading(parse(&other, Direction::ToServer))
        );
    }

    #[test]
    fn a_repeated_member_is_read_as_its_last_value() {
        // What JSON.parse would hand the client: the second result.
        let line = br#"{"jsonrpc":"2.0","id":1,"result":{"n":1},"result":{"n":"x"}}"#;
        let Parsed::One(Message::Response { id, result, .. }) = parse(line, Direction::ToClient)
        else {
            panic!("a response")
        };
        assert_eq!(id.map(RawValue::get), Some("1"));
        assert_eq!(result.map(Unread::text), Some(r#"{"n":"x"}"#));
        // An escaped key is the same key.
        let line = br#"{"jsonrpc":"2.0","id":2,"result":{"n":1},"res\u0075lt":{"n":"y"}}"#;
        let Parsed::One(Message::Response { result, .. }) = parse(line, Direction::ToClient) else {
            panic!("a response")
        };
        assert_eq!(result.map(Unread::text), Some(r#"{"n":"y"}"#));
        let [a, b] = members(br#"{"a":1,"b":null,"a":[2]}"#, ["a", "b"]).expect("an object");
        assert_eq!(a.map(Unread::text), Some("[2]"));
        assert!(b.is_none(), "null reads as absent");
        assert!(members(b"[1]", ["a"]).is_none());
    }

    #[test]
    fn a_result_read_ahead_is_the_result_the_message_carries() {
        let read = |line: &str, direction: Direction| {
            let line = Bytes::copy_from_slice(line.as_bytes());
            let ahead = ReadAhead { depth_limit: 64 };
            match parse_reading(&line, direction, Some(ahead)) {
                Parsed::One(Message::Response { result, read, .. }) => (
                    result.map(|r| r.text().to_owned()),
                    read.map(|r| r.structured_content.map(|d| d.to_value())),
                ),
                _ => panic!("a response: {}", String::from_utf8_lossy(&line)),
            }
        };
        // The id after the result, as the TypeScript SDK writes it; white space around.
        let (result, ahead) = read(
            " {\"result\": {\"structuredContent\":{\"n\":1}} ,\"jsonrpc\":\"2.0\",\"id\":4}\r\n",
            Direction::ToClient,
        );
        assert_eq!(result.as_deref(), Some(r#"{"structuredContent":{"n":1}}"#));
        assert_eq!(ahead, Some(Some(serde_json::json!({"n": 1}))));
        // A repeated `result`: the last is the one a client reads, left to the check's own
        // reading (none is read ahead), however many there are.
        let (result, ahead) = read(
            r#"{"id":1,"result":{"structuredContent":{"n":1}},"result":{"structuredContent":{"n":2}}}"#,
            Direction::ToClient,
        );
        assert_eq!(result.as_deref(), Some(r#"{"structuredContent":{"n":2}}"#));
        assert_eq!(ahead, None);
        let many = format!(
            r#"{{"id":1,{}"result":{{"structuredContent":{{"n":3}}}}}}"#,
            r#""result":{"structuredContent":0},"#.repeat(10_000)
        );
        let (result, ahead) = read(&many, Direction::ToClient);
        assert_eq!(result.as_deref(), Some(r#"{"structuredContent":{"n":3}}"#));
        assert_eq!(ahead, None);
        // A last `result` not read ahead leaves none read, though an earlier one was.
        let (result, ahead) = read(
            r#"{"id":1,"result":{"structuredContent":{"n":1}},"result":{"tools":[]}}"#,
            Direction::ToClient,
        );
        assert_eq!(result.as_deref(), Some(r#"{"tools":[]}"#));
        assert_eq!(ahead, None);
        // Nothing is read ahead from the client, nor from an answer that is not a tool result.
        let (_, ahead) = read(
            r#"{"id":1,"method":5,"result":{"structuredContent":{}}}"#,
            Direction::ToServer,
        );
        assert_eq!(ahead, None);
        let (_, ahead) = read(
            r#"{"id":1,"result":{"content":[],"resultType":"input_required"}}"#,
            Direction::ToClient,
        );
        assert_eq!(ahead, None);
    }

    #[test]
    fn the_head_of_a_cut_line_gives_its_id_and_method() {
        let line = br#"{"jsonrpc":"2.0","id":"call-9","method":"tools/call","params":{"arguments":{"blob":"xxxxxxxx"#;
        let cut = head(line);
        assert_eq!(
            cut,
            Head {
                id: Some("\"call-9\"".into()),
                has_method: true,
                has_answer: false,
            }
        );
        assert!(cut.is_request(Direction::ToClient) && cut.is_request(Direction::ToServer));
        let answer = head(
            br#"{"jsonrpc":"2.0","id":4,"method":5,"result":{"content":[{"type":"text","text":"xx"#,
        );
        assert!(answer.is_answer(Direction::ToClient));
        assert!(!answer.is_answer(Direction::ToServer));
        assert_eq!(
            head(br#"{"jsonrpc":"2.0","result":{"content":[{"type":"text","text":"xx"#).id,
            None
        );
        assert_eq!(head(b"garbage").id, None);
    }
}
