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

/// `get`, and `sample`, which the server offers only to clients that declare sampling.
const WITH_SAMPLING: &str = r#"[{"name":"get","inputSchema":{"type":"object","properties":{"id":{"type":"integer"}},"required":["id"]},"outputSchema":{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}},{"name":"sample","inputSchema":{"type":"object","properties":{"words":{"type":"integer"}},"required":["words"]},"outputSchema":{"type":"object","properties":{"summary":{"type":"string"}},"required":["summary"]}}]"#;

/// A call of `sample` with id `id` (JSON text) and `arguments`.
fn sample(id: &str, arguments: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"sample","arguments":{arguments}}}}}"#
    )
}

#[tokio::test]
async fn sessions_offered_different_tools_are_each_judged_by_their_own_listing() {
    let [with, without] = <[Harness; 2]>::try_from(Harness::sessions_of_one_route(2))
        .unwrap_or_else(|_| panic!("two sessions"));
    with.lists(WITH_SAMPLING).await;
    // The second session's listing replaces the route's contract: `sample` is not in it.
    without.lists(TOOLS).await;

    // The first session's call to `sample` is judged by what its listing gave: bad arguments
    // never reach the server.
    let sent = with.client(&sample("1", r#"{"words":"many"}"#)).await;
    assert!(is_replacement(&sent[0]), "refused in its place: {sent:?}");
    assert_eq!(sent.len(), 1, "nothing forwarded: {sent:?}");
    let good = sample("2", r#"{"words":5}"#);
    assert_eq!(
        with.client(&good).await,
        [relayed(Direction::ToServer, &good)]
    );
    let sent = with
        .server(r#"{"jsonrpc":"2.0","id":"2","result":{"content":[],"structuredContent":{"summary":7}}}"#)
        .await;
    assert!(
        is_replacement(&sent[0]),
        "its result too, by its own listing: {sent:?}"
    );

    // The other session was not offered `sample`: under untrusted, its call is withheld, checked
    // against nothing and forwarded to nothing.
    let sent = without.client(&sample("1", r#"{"words":5}"#)).await;
    assert!(sent[0].own && sent.len() == 1, "{sent:?}");
    let verdict = &sent[0].json()["result"]["_meta"][crate::mcp::VERDICT_META_KEY];
    assert_eq!(verdict["outcome"], "unchecked");
    assert_eq!(verdict["error"]["code"], "unknown_tool");
    assert_eq!(
        without.judged().last().map(|j| (j.3.as_str(), j.4)),
        Some(("unknown_tool", true))
    );
    // Both judge `get` by the same schema.
    for session in [&with, &without] {
        let sent = session.client(&call("9", r#"{"id":"x"}"#)).await;
        assert!(is_replacement(&sent[0]), "{sent:?}");
    }
}

#[tokio::test]
async fn a_list_changed_makes_only_its_own_sessions_view_stale() {
    let [first, second] = <[Harness; 2]>::try_from(Harness::sessions_of_one_route(2))
        .unwrap_or_else(|_| panic!("two sessions"));
    first.lists(TOOLS).await;
    second.lists(TOOLS).await;
    second
        .server(r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#)
        .await;
    // The first session calls at once: nothing of its own changed, so nothing is asked.
    let request = call("1", r#"{"id":7}"#);
    assert_eq!(
        first.client(&request).await,
        [relayed(Direction::ToServer, &request)]
    );
    // The second asks its own server for the tools before its call is checked.
    let asked = async {
        loop {
            let listing = second
                .wire
                .sent
                .lock()
                .map(|s| {
                    s.iter()
                        .find(|s| s.own && s.to == Direction::ToServer)
                        .cloned()
                })
                .unwrap_or_default();
            if let Some(listing) = listing {
                let id = listing.json()["id"].to_string();
                second
                    .server(&format!(
                        r#"{{"jsonrpc":"2.0","id":{id},"result":{{"tools":{WITH_SAMPLING}}}}}"#
                    ))
                    .await;
                return;
            }
            tokio::task::yield_now().await;
        }
    };
    let request = sample("2", r#"{"words":1}"#);
    let (sent, ()) = tokio::join!(second.client(&request), asked);
    let forwarded: Vec<_> = sent.iter().filter(|s| !s.own).collect();
    assert_eq!(
        forwarded.len(),
        1,
        "the call, checked by the new listing: {sent:?}"
    );
    // The first session's view is unchanged: `sample` was never offered to it.
    let sent = first.client(&sample("3", r#"{"words":1}"#)).await;
    assert!(sent[0].own && sent.len() == 1, "withheld: {sent:?}");
}
