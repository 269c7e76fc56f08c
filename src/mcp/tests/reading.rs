//! Messages read as the official clients read them (docs/proxy.md, "How a message is read").

use super::{answer, call, is_replacement, Harness, TOOLS};
use crate::mcp::Direction;

#[tokio::test]
async fn an_answer_with_extra_members_is_judged_as_the_answer_it_is() {
    for line in [
        r#"{"jsonrpc":"2.0","id":1,"method":5,"result":{"content":[],"structuredContent":{"n":"x"}}}"#,
        r#"{"jsonrpc":"2.0","id":1,"params":NaN,"result":{"content":[],"structuredContent":{"n":"x"}}}"#,
        r#"{"jsonrpc":"2.0","id":1,"result":{"content":[],"structuredContent":{"n":1}},"result":{"content":[],"structuredContent":{"n":"x"}}}"#,
    ] {
        let session = Harness::listed(TOOLS).await;
        session.client(&call("1", r#"{"id":7}"#)).await;
        let sent = session.server(line).await;
        assert!(is_replacement(&sent[0]), "{line}: {sent:?}");
    }
}

#[tokio::test]
async fn an_id_a_client_coerces_answers_the_request_it_names() {
    for id in [r#""1""#, r#"" 1""#, "1.0", r#""0x1""#, r#""1e0""#] {
        let session = Harness::listed(TOOLS).await;
        session.client(&call("1", r#"{"id":7}"#)).await;
        let sent = session.server(&answer(id, r#"{"n":"x"}"#)).await;
        assert!(is_replacement(&sent[0]), "{id}: {sent:?}");
        assert_eq!(
            sent[0].json()["id"].to_string(),
            id,
            "the server's spelling kept"
        );
    }
}

#[tokio::test]
async fn what_cannot_be_placed_is_withheld() {
    let session = Harness::listed(TOOLS).await;
    session.client(&call("1", r#"{"id":7}"#)).await;
    // Digits of another script: Python's int() reads them; the rules cannot place them.
    let sent = session.server(&answer("\"\u{661}\"", r#"{"n":1}"#)).await;
    assert_eq!(sent[0].json()["error"]["code"], -32001, "{sent:?}");
    // An id no client can place, carrying a tool result: dropped.
    let sent = session.server(&answer("true", r#"{"n":"x"}"#)).await;
    assert!(sent.is_empty(), "{sent:?}");
}

#[tokio::test]
async fn a_call_whose_params_cannot_be_read_is_answered_not_forwarded() {
    let session = Harness::listed(TOOLS).await;
    let sent = session
        .client(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get","arguments":{"id":NaN}}}"#)
        .await;
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].to, Direction::ToClient);
    assert_eq!(sent[0].json()["error"]["code"], -32602);
}

#[test]
fn revisions_come_from_request_meta() {
    use crate::core::domain::ProtocolVersion;
    use crate::mcp::meta_protocol;
    use serde_json::value::RawValue;
    let raw = |text: &str| RawValue::from_string(text.to_owned()).expect("valid JSON");
    let meta = raw(r#"{"io.modelcontextprotocol/protocolVersion":"2025-11-25"}"#);
    assert_eq!(
        meta_protocol(Some(&meta)),
        Some(ProtocolVersion::V2025_11_25)
    );
    assert_eq!(meta_protocol(Some(&raw("{}"))), None);
    assert_eq!(meta_protocol(None), None);
}
