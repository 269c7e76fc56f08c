//! The only messages schemagate writes on the MCP wire: a tool execution error in place of a
//! rejected call or result (`isError: true`, the feedback as text, the verdict under
//! [`VERDICT_META_KEY`] in `_meta`), and JSON-RPC errors for what cannot be relayed.

use crate::core::domain::{ProtocolVersion, Tier};
use crate::core::error::CheckError;
use crate::core::verdict::{policy_only, Verdict};
use serde::Serialize;
use serde_json::value::RawValue;

/// The `_meta` key a replaced result carries the verdict under.
pub const VERDICT_META_KEY: &str = "dev.schemagate/verdict";

/// JSON-RPC's "Invalid Request": a message too long to relay.
pub const INVALID_REQUEST: i64 = -32600;
/// JSON-RPC's "Invalid params": a `tools/call` without a readable `name`.
pub const INVALID_PARAMS: i64 = -32602;
/// An implementation-defined server error: more calls in flight than the boundary follows.
pub const TOO_MANY_IN_FLIGHT: i64 = -32000;
/// An implementation-defined server error: an answer carrying a tool result that no followed
/// call awaits, withheld under untrusted.
pub const WITHHELD: i64 = -32001;
/// An implementation-defined server error: the upstream server could not be reached, or did not
/// answer in time (Streamable HTTP).
pub const UPSTREAM_FAILED: i64 = -32002;
/// MCP 2026-07-28's HeaderMismatch: a Streamable HTTP header (`Mcp-Method`, `Mcp-Name`) that
/// disagrees with the message's body.
pub const HEADER_MISMATCH: i64 = -32020;
/// JSON-RPC's "Parse error": a message that is not JSON.
pub const PARSE_ERROR: i64 = -32700;

#[derive(Serialize)]
struct ToolError<'a, V: Serialize> {
    #[serde(rename = "resultType", skip_serializing_if = "Option::is_none")]
    result_type: Option<&'static str>,
    content: [TextBlock<'a>; 1],
    #[serde(rename = "isError")]
    is_error: bool,
    #[serde(rename = "_meta")]
    meta: Meta<V>,
}

#[derive(Serialize)]
struct TextBlock<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    text: &'a str,
}

#[derive(Serialize)]
struct Meta<V: Serialize> {
    #[serde(rename = "dev.schemagate/verdict")]
    verdict: V,
}

/// What a result or call that could not be checked is answered with, under the verdict key.
#[derive(Serialize)]
struct Unchecked<'a> {
    outcome: &'static str,
    action: &'static str,
    tier: Tier,
    error: ErrorBody<'a>,
}

#[derive(Serialize)]
struct ErrorBody<'a> {
    code: &'a str,
    message: &'a str,
}

/// A tool execution error (a `CallToolResult`) carrying `text` for the model and `verdict` for
/// the client. Under 2026-07-28 the result says `resultType: "complete"`.
fn tool_error<V: Serialize>(text: &str, verdict: V, protocol: Option<ProtocolVersion>) -> Vec<u8> {
    let result = ToolError {
        result_type: protocol
            .is_some_and(|p| p >= ProtocolVersion::V2026_07_28)
            .then_some("complete"),
        content: [TextBlock { kind: "text", text }],
        is_error: true,
        meta: Meta { verdict },
    };
    serde_json::to_vec(&result).unwrap_or_else(|_| FALLBACK_RESULT.to_vec())
}

/// `result` (JSON text) as the answer to request `id`, a line of its own.
pub fn answer(id: &RawValue, result: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(result.len() + id.get().len() + 40);
    out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
    out.extend_from_slice(id.get().as_bytes());
    out.extend_from_slice(b",\"result\":");
    out.extend_from_slice(result);
    out.extend_from_slice(b"}\n");
    out
}

/// The result that replaces a call whose arguments (`arguments`) or result were rejected.
pub fn rejected(
    tool: &str,
    arguments: bool,
    verdict: &Verdict,
    protocol: Option<ProtocolVersion>,
) -> Vec<u8> {
    // Rules and the result budget are the policy's, not the schema's.
    let text = match (arguments, policy_only(&verdict.errors)) {
        (true, false) => format!(
            "schemagate did not send this call to the server: its arguments do not match the inputSchema of tool {tool:?}. {}",
            verdict.feedback
        ),
        (true, true) => format!(
            "schemagate did not send this call to the server: its arguments break the policy's rules for tool {tool:?}. {}",
            verdict.feedback
        ),
        (false, false) => format!(
            "schemagate withheld the result of tool {tool:?}: it does not match the tool's outputSchema, so it must not be used. {}",
            verdict.feedback
        ),
        (false, true) => format!(
            "schemagate withheld the result of tool {tool:?}: it breaks the policy's rules for the tool, so it must not be used. {}",
            verdict.feedback
        ),
    };
    tool_error(&text, verdict, protocol)
}

/// The result that replaces what could not be checked at all (`withheld`: "the result of tool
/// \"get\"", say), where the tier allows nothing unchecked through; `code` and `message` say why.
pub fn unchecked(
    withheld: &str,
    tier: Tier,
    code: &str,
    message: &str,
    protocol: Option<ProtocolVersion>,
) -> Vec<u8> {
    let text = format!(
        "schemagate withheld {withheld}: it could not be checked against the tool's declared schema ({message}), so it must not be used."
    );
    let verdict = Unchecked {
        outcome: "unchecked",
        action: "reject",
        tier,
        error: ErrorBody { code, message },
    };
    tool_error(&text, verdict, protocol)
}

/// The result that replaces a call's `subject` that could not be checked because of `error`.
pub fn unchecked_by(
    tool: &str,
    subject: &str,
    tier: Tier,
    error: &CheckError,
    protocol: Option<ProtocolVersion>,
) -> Vec<u8> {
    unchecked(
        &format!("the {subject} of tool {tool:?}"),
        tier,
        error.code(),
        &error.to_string(),
        protocol,
    )
}

/// The result that replaces a call's `subject` (`call` or `result`) to a tool the session's own
/// `tools/list` did not offer, withheld under `tier`.
pub fn not_offered(
    tool: &str,
    subject: &str,
    tier: Tier,
    protocol: Option<ProtocolVersion>,
) -> Vec<u8> {
    let message = format!(
        "tool {tool:?} is not among the tools the server listed for this session: call one that tools/list names, or list the tools again if they changed"
    );
    unchecked(
        &format!("the {subject} of tool {tool:?}"),
        tier,
        "unknown_tool",
        &message,
        protocol,
    )
}

#[derive(Serialize)]
struct ErrorReply<'a> {
    jsonrpc: &'static str,
    id: Option<&'a RawValue>,
    error: RpcError<'a>,
}

#[derive(Serialize)]
struct RpcError<'a> {
    code: i64,
    message: &'a str,
}

/// A JSON-RPC error answering request `id` (`null` when it is not known).
pub fn error(id: Option<&RawValue>, code: i64, message: &str) -> Vec<u8> {
    let reply = ErrorReply {
        jsonrpc: "2.0",
        id,
        error: RpcError { code, message },
    };
    let mut out = serde_json::to_vec(&reply).unwrap_or_else(|_| fallback(id));
    out.push(b'\n');
    out
}

/// What a tool error is should serialising it fail: still an error result, never nothing.
const FALLBACK_RESULT: &[u8] = br#"{"content":[{"type":"text","text":"schemagate withheld this result but could not write why"}],"isError":true}"#;

/// Serialising these types cannot fail (no maps with non-string keys, no failing `Serialize`);
/// should it, the answer is still a JSON-RPC error rather than nothing.
fn fallback(id: Option<&RawValue>) -> Vec<u8> {
    format!(
        r#"{{"jsonrpc":"2.0","id":{},"error":{{"code":-32603,"message":"schemagate could not write its answer"}}}}"#,
        id.map_or("null", RawValue::get)
    )
    .into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(text: &str) -> Box<RawValue> {
        RawValue::from_string(text.to_owned()).expect("valid JSON")
    }

    #[test]
    fn a_replaced_result_is_a_tool_error_with_the_verdict_in_meta() {
        let error = CheckError::UnknownSchemaHash("ab".into());
        let out = answer(
            &id("\"c-1\""),
            &unchecked_by(
                "get",
                "result",
                Tier::Untrusted,
                &error,
                Some(ProtocolVersion::V2026_07_28),
            ),
        );
        assert_eq!(out.last(), Some(&b'\n'));
        let v: serde_json::Value = serde_json::from_slice(&out).expect("JSON");
        assert_eq!(v["id"], "c-1");
        assert_eq!(v["result"]["isError"], true);
        assert_eq!(v["result"]["resultType"], "complete");
        assert_eq!(v["result"]["content"][0]["type"], "text");
        let meta = &v["result"]["_meta"][VERDICT_META_KEY];
        assert_eq!(meta["outcome"], "unchecked");
        assert_eq!(meta["error"]["code"], error.code());

        let older = answer(
            &id("3"),
            &unchecked_by(
                "get",
                "result",
                Tier::Untrusted,
                &error,
                Some(ProtocolVersion::V2025_11_25),
            ),
        );
        let v: serde_json::Value = serde_json::from_slice(&older).expect("JSON");
        assert_eq!(v["id"], 3);
        assert!(v["result"].get("resultType").is_none());
    }

    #[test]
    fn json_rpc_errors_keep_the_id_as_sent() {
        let out = error(Some(&id("\"x\"")), INVALID_REQUEST, "too long");
        assert_eq!(
            out,
            b"{\"jsonrpc\":\"2.0\",\"id\":\"x\",\"error\":{\"code\":-32600,\"message\":\"too long\"}}\n"
        );
        let out = error(None, INVALID_REQUEST, "m");
        assert!(out.starts_with(b"{\"jsonrpc\":\"2.0\",\"id\":null,"));
    }
}
