//! The call and result rules: arguments checked before the server sees them, results before
//! the client does, replacements, attempts, cancellations and tasks.

use super::{answer, call, is_replacement, relayed, Harness, TOOLS};
use crate::mcp::Direction;

#[tokio::test]
async fn a_conforming_call_and_result_pass_exactly_as_sent() {
    let session = Harness::listed(TOOLS).await;
    let request = call("1", r#"{"id":7}"#);
    assert_eq!(
        session.client(&request).await,
        [relayed(Direction::ToServer, &request)]
    );
    let result = answer("1", r#"{"n":3}"#);
    assert_eq!(
        session.server(&result).await,
        [relayed(Direction::ToClient, &result)]
    );
    assert_eq!(
        session.judged(),
        [
            ("get".into(), "arguments", 1, "valid".into(), false),
            ("get".into(), "result", 1, "valid".into(), false),
        ]
    );
}

#[tokio::test]
async fn arguments_that_break_the_input_schema_never_reach_the_server() {
    let session = Harness::listed(TOOLS).await;
    let sent = session.client(&call("1", r#"{"id":"seven"}"#)).await;
    assert_eq!(sent.len(), 1);
    assert_eq!(
        sent[0].to,
        Direction::ToClient,
        "answered in the server's place"
    );
    assert!(is_replacement(&sent[0]), "{sent:?}");
    assert_eq!(sent[0].json()["id"], 1);
}

#[tokio::test]
async fn a_broken_result_is_replaced_and_the_next_call_of_the_tool_is_a_retry() {
    let session = Harness::listed(TOOLS).await;
    session.client(&call("1", r#"{"id":7}"#)).await;
    let sent = session.server(&answer("1", r#"{"n":"three"}"#)).await;
    assert_eq!(sent.len(), 1);
    assert!(is_replacement(&sent[0]), "{sent:?}");
    session.client(&call("2", r#"{"id":7}"#)).await;
    session.server(&answer("2", r#"{"n":3}"#)).await;
    session.client(&call("3", r#"{"id":7}"#)).await;
    let attempts: Vec<(u32, String)> = session
        .judged()
        .into_iter()
        .filter(|j| j.1 == "result")
        .map(|j| (j.2, j.3))
        .collect();
    assert_eq!(
        attempts,
        [(1, "invalid".into()), (2, "valid".into())],
        "a retry until one conforms"
    );
    assert_eq!(
        session.judged().last().map(|j| j.2),
        Some(1),
        "then a first attempt again"
    );
}

#[tokio::test]
async fn a_result_without_structured_content_fails_a_tool_that_declares_a_schema() {
    let session = Harness::listed(TOOLS).await;
    session.client(&call("1", r#"{"id":7}"#)).await;
    let sent = session
        .server(
            r#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"{\"n\":3}"}]}}"#,
        )
        .await;
    assert!(
        is_replacement(&sent[0]),
        "the text copy is not evidence: {sent:?}"
    );
}

#[tokio::test]
async fn a_tool_error_passes_unvalidated() {
    let session = Harness::listed(TOOLS).await;
    session.client(&call("1", r#"{"id":7}"#)).await;
    let error = r#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"no such id"}],"isError":true}}"#;
    assert_eq!(
        session.server(error).await,
        [relayed(Direction::ToClient, error)]
    );
    assert_eq!(session.judged()[1].3, "tool_error");
}

#[tokio::test]
async fn a_cancelled_calls_late_answer_is_still_judged() {
    let session = Harness::listed(TOOLS).await;
    session.client(&call("1", r#"{"id":7}"#)).await;
    session
        .client(r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}"#)
        .await;
    let sent = session.server(&answer("1", r#"{"n":"late"}"#)).await;
    assert!(is_replacement(&sent[0]), "{sent:?}");
}

#[tokio::test]
async fn a_second_answer_to_a_call_is_judged_as_the_first() {
    let session = Harness::listed(TOOLS).await;
    session.client(&call("1", r#"{"id":7}"#)).await;
    // A first answer a client drops (zod refuses its extra member), then one it reads.
    let first =
        r#"{"jsonrpc":"2.0","id":1,"result":{"content":[],"structuredContent":{"n":3}},"x":1}"#;
    assert_eq!(
        session.server(first).await,
        [relayed(Direction::ToClient, first)]
    );
    let sent = session
        .server(r#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"3"}]}}"#)
        .await;
    assert!(is_replacement(&sent[0]), "{sent:?}");
}

#[tokio::test]
async fn a_tasks_result_is_judged_against_the_call_that_created_it() {
    let session = Harness::listed(TOOLS).await;
    session
        .client(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get","arguments":{"id":7},"task":{"ttl":60000}}}"#)
        .await;
    let created = r#"{"jsonrpc":"2.0","id":1,"result":{"task":{"taskId":"t1","status":"working","createdAt":"2026-01-01T00:00:00Z","lastUpdatedAt":"2026-01-01T00:00:00Z","ttl":60000}}}"#;
    assert_eq!(
        session.server(created).await,
        [relayed(Direction::ToClient, created)]
    );
    session
        .client(r#"{"jsonrpc":"2.0","id":2,"method":"tasks/result","params":{"taskId":"t1"}}"#)
        .await;
    let sent = session
        .server(r#"{"jsonrpc":"2.0","id":2,"result":{"content":[],"structuredContent":{"n":"x"}}}"#)
        .await;
    assert!(is_replacement(&sent[0]), "{sent:?}");
    // A task this session never saw created: withheld, its tool unknown.
    session
        .client(r#"{"jsonrpc":"2.0","id":3,"method":"tasks/result","params":{"taskId":"t9"}}"#)
        .await;
    let sent = session.server(&answer("3", r#"{"n":1}"#)).await;
    assert!(sent[0].own, "{sent:?}");
}

#[tokio::test]
async fn a_request_id_in_flight_cannot_be_used_again() {
    let session = Harness::listed(TOOLS).await;
    session.client(&call("1", r#"{"id":7}"#)).await;
    let sent = session.client(&call("1", r#"{"id":8}"#)).await;
    assert_eq!(sent[0].to, Direction::ToClient);
    assert_eq!(sent[0].json()["error"]["code"], -32600);
    // The Python SDK's "1" is request 1: the same id.
    let sent = session.client(&call("\"1\"", r#"{"id":8}"#)).await;
    assert_eq!(sent[0].json()["error"]["code"], -32600);
}
