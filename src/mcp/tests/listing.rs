//! Contracts learned from `tools/list`: pages, the rules' own listing before a call, and
//! `list_changed`.

use super::{answer, call, is_replacement, relayed, Harness, TOOLS};
use crate::mcp::Direction;

#[tokio::test]
async fn pages_of_a_listing_make_one_contract() {
    let session = Harness::new();
    session
        .client(r#"{"jsonrpc":"2.0","id":"l1","method":"tools/list"}"#)
        .await;
    session
        .server(r#"{"jsonrpc":"2.0","id":"l1","result":{"tools":[],"nextCursor":"p2"}}"#)
        .await;
    session
        .client(r#"{"jsonrpc":"2.0","id":"l2","method":"tools/list","params":{"cursor":"p2"}}"#)
        .await;
    session
        .server(&format!(
            r#"{{"jsonrpc":"2.0","id":"l2","result":{{"tools":{TOOLS}}}}}"#
        ))
        .await;
    session.client(&call("1", r#"{"id":7}"#)).await;
    let sent = session.server(&answer("1", r#"{"n":"x"}"#)).await;
    assert!(
        is_replacement(&sent[0]),
        "the second page's tool is enforced: {sent:?}"
    );
}

#[tokio::test]
async fn a_call_before_any_listing_waits_for_the_rules_own() {
    let session = Harness::new();
    let request = call("1", r#"{"id":7}"#);
    let asked = async {
        // The call waits while the rules ask the server for its tools; the server answers.
        loop {
            let sent = session
                .wire
                .sent
                .lock()
                .map(|s| s.clone())
                .unwrap_or_default();
            if let Some(listing) = sent.iter().find(|s| s.own && s.to == Direction::ToServer) {
                let id = listing.json()["id"].to_string();
                let listed =
                    format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{"tools":{TOOLS}}}}}"#);
                let relayed = session.server(&listed).await;
                assert!(
                    relayed.is_empty(),
                    "the rules' own listing goes to no client"
                );
                return;
            }
            tokio::task::yield_now().await;
        }
    };
    let (sent, ()) = tokio::join!(session.client(&request), asked);
    let forwarded: Vec<_> = sent.iter().filter(|s| !s.own).cloned().collect();
    assert_eq!(forwarded, [relayed(Direction::ToServer, &request)]);
    let sent = session.server(&answer("1", r#"{"n":"x"}"#)).await;
    assert!(
        is_replacement(&sent[0]),
        "judged by the contract it asked for: {sent:?}"
    );
}

#[tokio::test]
async fn list_changed_makes_the_contract_stale_until_it_is_listed_again() {
    let session = Harness::listed(TOOLS).await;
    let changed = r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#;
    assert_eq!(
        session.server(changed).await,
        [relayed(Direction::ToClient, changed)]
    );
    // The client lists again: the tool is gone, so its calls are no tool's.
    session
        .client(r#"{"jsonrpc":"2.0","id":"l2","method":"tools/list"}"#)
        .await;
    session
        .server(r#"{"jsonrpc":"2.0","id":"l2","result":{"tools":[]}}"#)
        .await;
    session.client(&call("1", r#"{"id":7}"#)).await;
    assert_eq!(
        session.judged().last().map(|j| j.3.clone()),
        Some("unknown_tool".into())
    );
}
