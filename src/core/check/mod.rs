//! A check as the core receives it, and how one is read from JSON.
//!
//! REST bodies and batches arrive as JSON text and are read in one pass by [`Check::from_json`]
//! and [`batch_from_json`] (see `read`); the gRPC adapter builds a [`Check`] from its message
//! fields with the same document readers, so both transports read documents the same way.

mod read;

pub use read::ONE_PASS_MAX_BYTES;

use crate::core::domain::{ProtocolVersion, SchemaHash};
use crate::core::error::CheckError;
use crate::core::text_copy::TextCopy;
use bytes::Bytes;
use bytestring::ByteString;
use serde_json::Value;
use std::sync::Arc;

/// Where the schema of a check comes from.
#[derive(Debug, Clone)]
pub enum SchemaSource {
    /// The schema's JSON text, exactly as sent (its hash is taken over these bytes).
    Inline(Bytes),
    /// A `schema_hash` returned by an earlier answer or registration.
    Hash(String),
    /// The schema registered for the check's server and tool.
    Registered,
    /// The schemas one MCP session's own `tools/list` gave the check's tool, where they are not
    /// the registered ones (a server that lists its tools by the client's capabilities): judged
    /// as a registered tool's are, the input schema for arguments and the output schema for
    /// results.
    Listed(std::sync::Arc<ListedSchemas>),
}

/// A tool's schemas as one MCP session's own `tools/list` gave them: each its hash and text.
#[derive(Debug)]
pub struct ListedSchemas {
    pub input: Option<(SchemaHash, Bytes)>,
    pub output: Option<(SchemaHash, Bytes)>,
    /// The MCP revision the session speaks: checks that name none follow it.
    pub protocol: ProtocolVersion,
}

/// A payload document from a request, in the core's own representation.
pub use crate::core::document::Document;

/// An MCP `CallToolResult`, reduced to what a check looks at.
#[derive(Debug, Clone, Default)]
pub struct ToolResult {
    /// `None` when the field is absent; a `null` document when it is `null`.
    pub structured_content: Option<Document>,
    /// The text of each text block of `content` that may hold a JSON value (it starts as one
    /// does), as sent: the copies compared with `structuredContent` for drift. Other blocks are
    /// not kept.
    pub json_texts: TextCopies,
    /// `content` holds at least one text block (MCP 2026-07-28 asks for one beside a
    /// `structuredContent` that is not an object).
    pub has_text_block: bool,
    pub is_error: bool,
}

/// A result's text copies: most results have one, held without a list of its own (no allocation).
#[derive(Debug, Clone, Default)]
pub struct TextCopies {
    first: Option<TextCopy>,
    more: Vec<TextCopy>,
}

impl TextCopies {
    pub fn push(&mut self, copy: TextCopy) {
        match self.first {
            None => self.first = Some(copy),
            Some(_) => self.more.push(copy),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.first.is_none()
    }

    pub fn iter(&self) -> impl Iterator<Item = &TextCopy> {
        self.first.iter().chain(&self.more)
    }
}

/// What is being checked.
#[derive(Debug, Clone)]
pub enum Payload {
    /// Any JSON document, checked against the schema (the output schema for a registered tool).
    Instance(Document),
    /// An MCP tool result, checked with MCP's rules against the output schema.
    Result(ToolResult),
    /// Tool-call arguments, checked against the tool's input schema.
    Arguments(Document),
}

/// Which payload a check judges: the `payload` label of the validation series. A tool's
/// contract is judged on its results; the model, on the arguments it sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PayloadKind {
    /// A tool's result (`result`).
    Result,
    /// A tool call's arguments (`arguments`).
    Arguments,
    /// Any JSON document (`instance`).
    Instance,
}

impl PayloadKind {
    pub const ALL: [PayloadKind; 3] = [
        PayloadKind::Result,
        PayloadKind::Arguments,
        PayloadKind::Instance,
    ];

    /// Its place in [`PayloadKind::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }

    pub fn as_str(self) -> &'static str {
        match self {
            PayloadKind::Result => "result",
            PayloadKind::Arguments => "arguments",
            PayloadKind::Instance => "instance",
        }
    }
}

impl Payload {
    pub fn kind(&self) -> PayloadKind {
        match self {
            Payload::Instance(_) => PayloadKind::Instance,
            Payload::Result(_) => PayloadKind::Result,
            Payload::Arguments(_) => PayloadKind::Arguments,
        }
    }

    /// The noun that starts a feedback line.
    pub fn subject(&self) -> &'static str {
        match self {
            Payload::Arguments(_) => "Arguments",
            Payload::Instance(_) | Payload::Result(_) => "Output",
        }
    }

    /// Reads a document payload (`instance` or `arguments`, named by `field`) from JSON text.
    pub fn document_from_json(
        field: &str,
        text: &Bytes,
        depth_limit: usize,
    ) -> Result<Document, CheckError> {
        read::read_document(field, text, depth_limit)
    }

    /// Reads an MCP tool result from JSON text.
    pub fn result_from_json(text: &Bytes, depth_limit: usize) -> Result<ToolResult, CheckError> {
        read::read_result(text, depth_limit)
    }
}

impl ToolResult {
    /// The tool result whose JSON text starts at `at` in `line` (the message that carries it,
    /// checked as UTF-8), and the offset one past its end, read in the same pass that finds the
    /// message's members. `None` leaves it to [`Payload::result_from_json`] once the message is
    /// placed: a result this reads only as tools send one (`structuredContent`, `content`,
    /// `isError`, `_meta`; a task, a `resultType` or any other member is not read here), one
    /// that is not JSON, one nested past `depth_limit` (counted from the result). What it reads
    /// is what `result_from_json` reads of the same text.
    pub fn read_ahead(
        line: &ByteString,
        at: usize,
        depth_limit: usize,
    ) -> Option<(ToolResult, usize)> {
        read::read_result_ahead(line, at, depth_limit)
    }
}

/// One check, owned, ready to run on any thread.
#[derive(Debug, Clone)]
pub struct Check {
    pub server: Option<Arc<str>>,
    pub tool: Option<Arc<str>>,
    pub schema: SchemaSource,
    pub payload: Payload,
    /// 1 for a first attempt; 2 and above are retries.
    pub attempt: u32,
    pub call_id: Option<Arc<str>>,
    /// The MCP revision the payload follows, when the check names one.
    pub protocol_version: Option<ProtocolVersion>,
    /// The client's roots (URIs), when the MCP session knows them: what rules on paths read.
    pub roots: Option<Arc<[String]>>,
    /// The size of the tool result as sent, where it is known (the MCP wire, gRPC's `result`
    /// bytes): what `max_result_bytes` weighs.
    pub result_bytes: Option<usize>,
}

impl Check {
    /// Reads one check from the JSON text in `body` (a REST body).
    pub fn from_json(body: &Bytes, depth_limit: usize) -> Result<Check, CheckError> {
        read::read_check(body, depth_limit)
    }
}

/// One item of a batch: read already, or still JSON text to read when it is checked.
#[derive(Debug)]
// Not boxed: a batch's items are all read or all unread, and a box would cost an allocation per
// item on the hot path.
#[allow(clippy::large_enum_variant)]
pub enum BatchItem {
    Read(Result<Check, CheckError>),
    Unread(Bytes),
}

impl BatchItem {
    /// The item's check, or its own error.
    pub fn into_check(self, depth_limit: usize) -> Result<Check, CheckError> {
        match self {
            BatchItem::Read(check) => check,
            BatchItem::Unread(text) => Check::from_json(&text, depth_limit),
        }
    }
}

/// Reads a batch body `{"items": [...]}`: each item's check or that item's own error, in order.
/// Only broken JSON, a body that is not a batch, or more than `max_items` items fail the whole
/// batch, and that is known before any item is checked. A body up to
/// [`ONE_PASS_MAX_BYTES`] is read whole in one pass; a larger one is split into its items,
/// each read when it is checked, so its documents are not all in memory at once.
pub fn batch_from_json(
    body: &Bytes,
    depth_limit: usize,
    max_items: usize,
) -> Result<Vec<BatchItem>, CheckError> {
    read::read_batch(body, depth_limit, max_items)
}

/// Validates an `attempt` number (1-based; absent means 1).
pub fn attempt(value: Option<u32>) -> Result<u32, CheckError> {
    match value {
        None => Ok(1),
        Some(0) => Err(CheckError::InvalidField(
            "`attempt` is 1-based: send 1 for a first attempt, 2 or more for a retry".into(),
        )),
        Some(n) => Ok(n),
    }
}

/// Depth and node count of a document: the depth is checked against the limit, the node count
/// bounds the work of validating it.
pub fn measure(value: &Value) -> (usize, u64) {
    let mut max_depth = 0;
    let mut nodes = 0u64;
    let mut stack: Vec<(&Value, usize)> = vec![(value, 1)];
    while let Some((v, depth)) = stack.pop() {
        nodes += 1;
        max_depth = max_depth.max(depth);
        match v {
            Value::Array(items) => stack.extend(items.iter().map(|c| (c, depth + 1))),
            Value::Object(map) => stack.extend(map.values().map(|c| (c, depth + 1))),
            _ => {}
        }
    }
    (max_depth, nodes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Check, CheckError> {
        Check::from_json(&Bytes::copy_from_slice(text.as_bytes()), 64)
    }

    #[test]
    fn inline_schema_keeps_its_bytes_as_sent() {
        let check = parse(r#"{"schema": {"type" : "object"}, "instance": {}}"#).expect("parses");
        match check.schema {
            SchemaSource::Inline(bytes) => assert_eq!(&bytes[..], br#"{"type" : "object"}"#),
            other => panic!("expected inline, got {other:?}"),
        }
        assert_eq!(check.attempt, 1);
    }

    #[test]
    fn structured_content_absent_and_null_differ() {
        let absent = parse(r#"{"schema": {}, "result": {"content": []}}"#).expect("parses");
        let null = parse(r#"{"schema": {}, "result": {"structuredContent": null}}"#).expect("ok");
        match (absent.payload, null.payload) {
            (Payload::Result(a), Payload::Result(n)) => {
                assert_eq!(a.structured_content, None);
                assert_eq!(
                    n.structured_content,
                    Some(Document::from_value(&Value::Null))
                );
            }
            other => panic!("unexpected payloads {other:?}"),
        }
    }

    #[test]
    fn null_instance_is_a_document() {
        let check = parse(r#"{"schema": {}, "instance": null}"#).expect("parses");
        match check.payload {
            Payload::Instance(doc) => assert_eq!(doc, Document::from_value(&Value::Null)),
            other => panic!("expected an instance, got {other:?}"),
        }
    }

    #[test]
    fn bad_checks_say_what_to_fix() {
        assert_eq!(
            parse(r#"{"schema": {}}"#).unwrap_err().code(),
            "missing_payload"
        );
        assert_eq!(
            parse(r#"{"schema": {}, "instance": 1, "arguments": {}}"#)
                .unwrap_err()
                .code(),
            "conflicting_payloads"
        );
        assert_eq!(
            parse(r#"{"schema": {"#).unwrap_err().code(),
            "malformed_json"
        );
        let unknown = parse(r#"{"schema": {}, "instanse": 1}"#).unwrap_err();
        assert_eq!(unknown.code(), "invalid_field");
        assert!(unknown.to_string().contains("instanse"), "{unknown}");
        assert_eq!(
            parse(r#"{"schema": {}, "instance": 1, "attempt": 0}"#)
                .unwrap_err()
                .code(),
            "invalid_field"
        );
        let deep = format!(
            "{{\"schema\": {{}}, \"instance\": {}{}}}",
            "[".repeat(200),
            "]".repeat(200)
        );
        assert_eq!(parse(&deep).unwrap_err().code(), "nesting_too_deep");
    }

    #[test]
    fn measure_counts_depth_and_nodes() {
        let v: Value = serde_json::from_str(r#"{"a": [1, 2, {"b": null}]}"#).expect("json");
        assert_eq!(measure(&v), (4, 6));
    }

    #[test]
    fn documents_are_measured_as_they_are_read() {
        let check = parse(r#"{"schema": {}, "instance": {"a": [1, 2, {"b": null}], "c": "x"}}"#)
            .expect("parses");
        match check.payload {
            Payload::Instance(doc) => {
                assert_eq!((doc.depth, doc.nodes), measure(&doc.to_value()));
                assert_eq!((doc.depth, doc.nodes), (4, 7));
            }
            other => panic!("expected an instance, got {other:?}"),
        }
        let deep = format!(
            r#"{{"schema": {{}}, "instance": {}1{}}}"#,
            "[".repeat(10),
            "]".repeat(10)
        );
        let err = Check::from_json(&Bytes::from(deep.clone()), 8).unwrap_err();
        assert_eq!(err.code(), "nesting_too_deep");
        assert!(Check::from_json(&Bytes::from(deep), 11).is_ok());
    }

    #[test]
    fn results_keep_only_json_looking_text_blocks() {
        let check = parse(
            r#"{"schema": {}, "result": {"structuredContent": {"a": 1}, "_meta": {"x": [1]},
                "content": [{"type": "text", "text": "done"}, {"text": " {\"a\": 1}", "type": "text"},
                            {"type": "image", "data": "[...]", "text": "[1]"}, {"type": "text", "text": "[2]"}],
                "isError": null}}"#,
        )
        .expect("parses");
        match check.payload {
            Payload::Result(r) => {
                assert_eq!(
                    r.json_texts.iter().map(|t| t.decoded()).collect::<Vec<_>>(),
                    vec![r#" {"a": 1}"#.to_owned(), "[2]".to_owned()]
                );
                assert!(!r.is_error);
                assert_eq!(
                    r.structured_content.map(|d| d.to_value()),
                    Some(serde_json::json!({"a": 1}))
                );
            }
            other => panic!("expected a result, got {other:?}"),
        }
        for (bad, says) in [
            (r#"{"isError": "yes"}"#, "isError"),
            (r#"{"content": {"type": "text"}}"#, "content"),
            (r#"{"content": [{"type": "text", "text": 7}]}"#, "text"),
            (r#"[]"#, "CallToolResult"),
        ] {
            let err = parse(&format!(r#"{{"schema": {{}}, "result": {bad}}}"#)).unwrap_err();
            assert_eq!(err.code(), "invalid_field", "{bad}");
            assert!(err.to_string().contains(says), "{bad}: {err}");
        }
    }

    /// Items of every kind of problem, and the code each gets.
    const MIXED_ITEMS: &str = r#"
        {"schema": {"type": "integer"}, "instance": 3},
        {"schema": {}, "instanse": 1},
        7,
        {"schema": {}, "instance": [[[[1]]]]},
        {"schema": {}, "attempt": "2", "instance": 1},
        {"schema": {}, "server": ["x"], "instance": 1},
        {"schema": {}, "instance": 1, "instance": 2},
        {"schema_hash": "ab", "arguments": {}}"#;
    const MIXED_CODES: [&str; 8] = [
        "ok",
        "invalid_field",
        "invalid_field",
        "nesting_too_deep",
        "invalid_field",
        "invalid_field",
        "invalid_field",
        "ok",
    ];

    fn checks_of(body: &Bytes) -> Vec<Result<Check, CheckError>> {
        batch_from_json(body, 4, 100)
            .expect("a batch")
            .into_iter()
            .map(|item| item.into_check(4))
            .collect()
    }

    fn codes(checks: &[Result<Check, CheckError>]) -> Vec<&'static str> {
        checks
            .iter()
            .map(|c| c.as_ref().map_or_else(|e| e.code(), |_| "ok"))
            .collect()
    }

    #[test]
    fn a_batch_is_read_in_one_pass_with_an_error_per_bad_item() {
        let body = Bytes::from(format!(r#"{{"items": [{MIXED_ITEMS}]}}"#));
        let items = batch_from_json(&body, 4, 100).expect("a batch");
        assert!(items.iter().all(|i| matches!(i, BatchItem::Read(_))));
        let checks = checks_of(&body);
        assert_eq!(codes(&checks), MIXED_CODES);
        match &checks[0] {
            Ok(Check {
                schema: SchemaSource::Inline(text),
                ..
            }) => assert_eq!(&text[..], br#"{"type": "integer"}"#),
            other => panic!("{other:?}"),
        }
        let message = |i: usize| checks[i].as_ref().map_err(|e| e.to_string()).unwrap_err();
        assert!(message(1).contains("unknown field `instanse`"));
        assert!(message(2).contains("a check must be a JSON object"));
        assert!(message(6).contains("duplicate field `instance`"));
    }

    #[test]
    fn a_large_batch_is_split_and_its_items_read_one_by_one_with_the_same_answers() {
        let padding = "x".repeat(ONE_PASS_MAX_BYTES);
        let body = Bytes::from(format!(
            r#"{{"items": [{MIXED_ITEMS}, {{"schema": {{}}, "instance": "{padding}"}}]}}"#
        ));
        let items = batch_from_json(&body, 4, 100).expect("a batch");
        assert!(items.iter().all(|i| matches!(i, BatchItem::Unread(_))));
        let checks = checks_of(&body);
        assert_eq!(codes(&checks[..8]), MIXED_CODES);
        assert!(checks[8].is_ok());
        // Problems of the whole batch are still found before any item is read.
        let too_many = Bytes::from(format!(r#"{{"items": [1, 2, 3, "{padding}"]}}"#));
        assert_eq!(
            batch_from_json(&too_many, 4, 3).unwrap_err().code(),
            "batch_too_large"
        );
        let broken = Bytes::from(format!(r#"{{"items": [{{}}, "{padding}"]"#));
        assert_eq!(
            batch_from_json(&broken, 4, 3).unwrap_err().code(),
            "malformed_json"
        );
    }

    #[test]
    fn whole_batches_fail_only_when_they_cannot_be_read() {
        let batch =
            |text: &'static str| batch_from_json(&Bytes::from_static(text.as_bytes()), 64, 2);
        assert_eq!(
            batch(r#"{"items": [{}, "#).unwrap_err().code(),
            "malformed_json"
        );
        assert_eq!(
            batch(r#"{"items": []} x"#).unwrap_err().code(),
            "malformed_json"
        );
        assert_eq!(
            batch(r#"{"itemz": []}"#).unwrap_err().code(),
            "invalid_field"
        );
        assert_eq!(batch(r#"{}"#).unwrap_err().code(), "invalid_field");
        assert_eq!(
            batch(r#"{"items": {}}"#).unwrap_err().code(),
            "invalid_field"
        );
        assert_eq!(batch(r#"[]"#).unwrap_err().code(), "invalid_field");
        match batch(r#"{"items": [1, 2, 3, 4]}"#) {
            Err(CheckError::BatchTooLarge { len: 4, limit: 2 }) => {}
            other => panic!("{other:?}"),
        }
        assert_eq!(batch(r#"{"items": [1, 2]}"#).expect("two items").len(), 2);
    }
}
