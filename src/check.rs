//! A check as the core receives it, and how one is read from JSON.
//!
//! REST bodies and batch items arrive as JSON text and go through [`Check::from_json`]; the gRPC
//! adapter builds a [`Check`] from its message fields with the same payload parsers, so both
//! transports read documents the same way.

use crate::error::{from_json_error, CheckError};
use bytes::Bytes;
use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;
use serde_json::Value;
use std::borrow::Cow;

/// Where the schema of a check comes from.
#[derive(Debug, Clone)]
pub enum SchemaSource {
    /// The schema's JSON text, exactly as sent (its hash is taken over these bytes).
    Inline(Bytes),
    /// A `schema_hash` returned by an earlier answer or registration.
    Hash(String),
    /// The schema registered for the check's server and tool.
    Registered,
}

/// An MCP `CallToolResult`, reduced to what a check looks at.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ToolResult {
    /// `None` when the field is absent; `Some(Value::Null)` when it is `null`.
    #[serde(rename = "structuredContent", default, deserialize_with = "present")]
    pub structured_content: Option<Value>,
    #[serde(default, deserialize_with = "null_as_empty")]
    pub content: Vec<ContentBlock>,
    #[serde(rename = "isError", default, deserialize_with = "null_as_default")]
    pub is_error: bool,
}

/// One block of a result's `content`; only text blocks matter to a check.
#[derive(Debug, Clone, Deserialize)]
pub struct ContentBlock {
    #[serde(rename = "type", default)]
    pub kind: String,
    #[serde(default)]
    pub text: Option<String>,
}

/// What is being checked.
#[derive(Debug, Clone)]
pub enum Payload {
    /// Any JSON document, checked against the schema (the output schema for a registered tool).
    Instance(Value),
    /// An MCP tool result, checked with MCP's rules against the output schema.
    Result(ToolResult),
    /// Tool-call arguments, checked against the tool's input schema.
    Arguments(Value),
}

impl Payload {
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
        text: &[u8],
        depth_limit: usize,
    ) -> Result<Value, CheckError> {
        serde_json::from_slice(text).map_err(|e| payload_error(field, &e, depth_limit))
    }

    /// Reads an MCP tool result from JSON text.
    pub fn result_from_json(text: &[u8], depth_limit: usize) -> Result<ToolResult, CheckError> {
        serde_json::from_slice(text).map_err(|e| payload_error("result", &e, depth_limit))
    }
}

fn payload_error(field: &str, err: &serde_json::Error, depth_limit: usize) -> CheckError {
    match from_json_error(err, depth_limit) {
        CheckError::MalformedJson(_) => {
            CheckError::MalformedJson(format!("`{field}` is not valid JSON: {err}"))
        }
        CheckError::InvalidField(m) => CheckError::InvalidField(format!("`{field}`: {m}")),
        other => other,
    }
}

/// One check, owned, ready to run on any thread.
#[derive(Debug, Clone)]
pub struct Check {
    pub server: Option<String>,
    pub tool: Option<String>,
    pub schema: SchemaSource,
    pub payload: Payload,
    /// 1 for a first attempt; 2 and above are retries.
    pub attempt: u32,
    pub call_id: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WireCheck<'a> {
    #[serde(borrow, default)]
    server: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    tool: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "present_raw")]
    schema: Option<&'a RawValue>,
    #[serde(borrow, default)]
    schema_hash: Option<Cow<'a, str>>,
    #[serde(default, deserialize_with = "present")]
    instance: Option<Value>,
    #[serde(default)]
    result: Option<ToolResult>,
    #[serde(default, deserialize_with = "present")]
    arguments: Option<Value>,
    #[serde(default)]
    attempt: Option<u32>,
    #[serde(borrow, default)]
    call_id: Option<Cow<'a, str>>,
}

impl Check {
    /// Reads one check from the JSON text in `body` (a REST body or one batch item).
    pub fn from_json(body: &Bytes, depth_limit: usize) -> Result<Check, CheckError> {
        let wire: WireCheck<'_> =
            serde_json::from_slice(body).map_err(|e| from_json_error(&e, depth_limit))?;
        let schema = match (wire.schema, wire.schema_hash) {
            (Some(_), Some(_)) => return Err(CheckError::ConflictingSchemas),
            (Some(raw), None) => SchemaSource::Inline(body.slice_ref(raw.get().as_bytes())),
            (None, Some(hash)) => SchemaSource::Hash(hash.into_owned()),
            (None, None) => SchemaSource::Registered,
        };
        let payload = match (wire.instance, wire.result, wire.arguments) {
            (Some(v), None, None) => Payload::Instance(v),
            (None, Some(r), None) => Payload::Result(r),
            (None, None, Some(v)) => Payload::Arguments(v),
            (None, None, None) => return Err(CheckError::MissingPayload),
            _ => return Err(CheckError::ConflictingPayloads),
        };
        Ok(Check {
            server: wire.server.map(Cow::into_owned),
            tool: wire.tool.map(Cow::into_owned),
            schema,
            payload,
            attempt: attempt(wire.attempt)?,
            call_id: wire.call_id.map(Cow::into_owned),
        })
    }
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

/// Splits a batch body `{"items": [...]}` into the JSON text of each item, without parsing them.
pub fn batch_items(body: &Bytes, depth_limit: usize) -> Result<Vec<Bytes>, CheckError> {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct WireBatch<'a> {
        #[serde(borrow)]
        items: Vec<&'a RawValue>,
    }
    let batch: WireBatch<'_> =
        serde_json::from_slice(body).map_err(|e| from_json_error(&e, depth_limit))?;
    Ok(batch
        .items
        .into_iter()
        .map(|raw| body.slice_ref(raw.get().as_bytes()))
        .collect())
}

/// Keeps an explicit `null` apart from an absent field: absent stays `None` through `default`.
fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

fn present_raw<'de, D: Deserializer<'de>>(d: D) -> Result<Option<&'de RawValue>, D::Error> {
    <&'de RawValue>::deserialize(d).map(Some)
}

fn null_as_empty<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<ContentBlock>, D::Error> {
    Ok(Option::<Vec<ContentBlock>>::deserialize(d)?.unwrap_or_default())
}

fn null_as_default<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    Ok(Option::<bool>::deserialize(d)?.unwrap_or_default())
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
                assert_eq!(n.structured_content, Some(Value::Null));
            }
            other => panic!("unexpected payloads {other:?}"),
        }
    }

    #[test]
    fn null_instance_is_a_document() {
        let check = parse(r#"{"schema": {}, "instance": null}"#).expect("parses");
        assert!(matches!(check.payload, Payload::Instance(Value::Null)));
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
}
