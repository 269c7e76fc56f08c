//! Real release histories: the `tools/list` of consecutive published releases of six MCP servers
//! (three TypeScript from npm, three Python from PyPI: tests/data/releases/), each change judged
//! by hand (tests/data/release_changes.json). REST registration, the gateway's and the stdio
//! proxy's learning from the wire and `schemagate diff` must each class every change as judged: the tools changed, how, and
//! each part's class; and every breaking schema change shows its counterexample.

use crate::cli_diff::diff;
use crate::gateway::request_26;
use crate::helpers::mcp::{
    free_port, metrics_text, post, proxy_command, raw_upstream_with, Gateway, Raw,
};
use crate::helpers::{metric, spawn_app_with};
use serde::Deserialize;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

#[derive(Deserialize)]
struct Index {
    servers: Vec<Server>,
}

#[derive(Deserialize)]
struct Server {
    slug: String,
    versions: Vec<String>,
}

#[derive(Deserialize)]
struct Judged {
    changes: Vec<Judgement>,
}

/// One tool's change between two releases, as judged.
#[derive(Deserialize)]
struct Judgement {
    server: String,
    from: String,
    to: String,
    tool: String,
    change: String,
    /// Each part's class (a part left out: unchanged or identical).
    parts: BTreeMap<String, String>,
    /// For a tool removed or added beside another with the same schemas: the other's name.
    #[serde(default)]
    likely_rename: Option<String>,
}

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/releases")
}

fn index() -> Index {
    serde_json::from_slice(&std::fs::read(dir().join("index.json")).expect("the index"))
        .expect("the index reads")
}

fn judged() -> Vec<Judgement> {
    serde_json::from_str::<Judged>(include_str!("../data/release_changes.json"))
        .expect("the judgements read")
        .changes
}

fn listing(slug: &str, version: &str) -> PathBuf {
    dir().join(slug).join(format!("{version}.json"))
}

/// A tool's change as the service gave it: its kind and its parts' classes, leaving out parts
/// rewritten with the same meaning (`identical`), as the judgements do.
fn seen(change: &Value) -> Seen {
    let parts = change["schemas"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| p["class"] != "identical")
        .map(|p| {
            (
                p["schema"].as_str().unwrap_or("").to_owned(),
                p["class"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect();
    (
        change["change"].as_str().unwrap_or("").to_owned(),
        parts,
        change["likely_rename"].as_str().map(str::to_owned),
    )
}

/// A tool's change: its kind, its parts' classes (identical ones left out), a likely rename.
type Seen = (String, BTreeMap<String, String>, Option<String>);

/// The judged changes of one pair, by tool, without identical parts.
fn expected<'a>(
    judged: &'a [Judgement],
    server: &str,
    from: &str,
    to: &str,
) -> BTreeMap<&'a str, Seen> {
    judged
        .iter()
        .filter(|j| j.server == server && j.from == from && j.to == to)
        // A tool rewritten with the same meaning is not a change to list.
        .filter(|j| j.change != "changed" || j.parts.values().any(|c| c != "identical"))
        .map(|j| {
            let parts = j
                .parts
                .iter()
                .filter(|(_, class)| *class != "identical")
                .map(|(part, class)| (part.clone(), class.clone()))
                .collect();
            (
                j.tool.as_str(),
                (j.change.clone(), parts, j.likely_rename.clone()),
            )
        })
        .collect()
}

/// What differs between the changes `changes` (as the API or diff gives them) and the judged ones
/// for the pair; also each breaking schema part that shows no counterexample.
fn compare(label: &str, changes: &[Value], expected: &BTreeMap<&str, Seen>) -> Vec<String> {
    let mut wrong = Vec::new();
    let mut listed = BTreeSet::new();
    for change in changes {
        let tool = change["tool"].as_str().unwrap_or("");
        let seen = seen(change);
        if seen.0 == "changed" && seen.1.is_empty() {
            continue; // rewritten with the same meaning
        }
        listed.insert(tool);
        match expected.get(tool) {
            None => wrong.push(format!("{label} {tool}: {seen:?}, judged unchanged")),
            Some(judged) if *judged != seen => {
                wrong.push(format!("{label} {tool}: {seen:?}, judged {judged:?}"))
            }
            Some(_) => {}
        }
        for part in change["schemas"].as_array().into_iter().flatten() {
            let schema = part["schema"].as_str().unwrap_or("");
            let shown = part["reasons"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .any(|r| r.starts_with("(for example"));
            if part["class"] == "breaking" && ["input", "output"].contains(&schema) && !shown {
                wrong.push(format!(
                    "{label} {tool}: {schema} breaking without a counterexample"
                ));
            }
        }
    }
    for tool in expected.keys().filter(|t| !listed.contains(*t)) {
        wrong.push(format!(
            "{label} {tool}: not listed, judged {:?}",
            expected[tool]
        ));
    }
    wrong
}

fn read(path: &PathBuf) -> Value {
    serde_json::from_slice(&std::fs::read(path).expect("a listing")).expect("JSON")
}

#[test]
fn the_histories_cover_three_typescript_and_python_servers() {
    let index = index();
    assert!(index.servers.len() >= 6);
    let judged = judged();
    let mut pairs = 0;
    for server in &index.servers {
        assert!(server.versions.len() >= 3, "{}", server.slug);
        let changed = server
            .versions
            .windows(2)
            .filter(|pair| {
                judged
                    .iter()
                    .any(|j| j.server == server.slug && j.from == pair[0] && j.to == pair[1])
            })
            .count();
        assert!(
            changed >= 2,
            "{}: {changed} pairs with changes",
            server.slug
        );
        pairs += changed;
    }
    assert!(pairs >= 20, "{pairs} pairs with changes");
    // Every kind of change is among them.
    let classes: BTreeSet<(&str, &str)> = judged
        .iter()
        .flat_map(|j| j.parts.iter().map(|(p, c)| (p.as_str(), c.as_str())))
        .collect();
    for kind in [
        ("input", "breaking"),
        ("input", "compatible"),
        ("output", "breaking"),
        ("output", "compatible"),
        ("annotations", "breaking"),
        ("annotations", "compatible"),
        ("description", "review"),
    ] {
        assert!(classes.contains(&kind), "{kind:?}");
    }
}

#[tokio::test]
async fn each_release_registered_over_rest_is_classed_as_judged() {
    let app = spawn_app_with(&[]).await;
    let judged = judged();
    let mut wrong = Vec::new();
    for server in index().servers {
        let mut before: Option<&str> = None;
        for version in &server.versions {
            let (status, answer) = app
                .register(&server.slug, &read(&listing(&server.slug, version)))
                .await;
            assert_eq!(status, 200, "{} {version}: {answer}", server.slug);
            if let Some(from) = before {
                let changes = answer["changes"].as_array().cloned().unwrap_or_default();
                let label = format!("{} {from} -> {version}", server.slug);
                wrong.extend(compare(
                    &label,
                    &changes,
                    &expected(&judged, &server.slug, from, version),
                ));
            }
            before = Some(version);
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn schemagate_diff_classes_each_release_as_judged() {
    let judged = judged();
    let mut wrong = Vec::new();
    for server in index().servers {
        for pair in server.versions.windows(2) {
            let (old, new) = (
                listing(&server.slug, &pair[0]),
                listing(&server.slug, &pair[1]),
            );
            let (code, out, err) = diff(&[
                old.to_str().expect("UTF-8"),
                new.to_str().expect("UTF-8"),
                "--output",
                "json",
                "--fail-on",
                "never",
            ]);
            assert_eq!(code, 0, "{err}");
            let report: Value = serde_json::from_str(&out).expect("a JSON report");
            let changes = report["changes"].as_array().cloned().unwrap_or_default();
            let label = format!("{} {} -> {}", server.slug, pair[0], pair[1]);
            wrong.extend(compare(
                &label,
                &changes,
                &expected(&judged, &server.slug, &pair[0], &pair[1]),
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[tokio::test]
async fn each_release_learned_through_the_gateway_is_classed_as_judged() {
    let judged = judged();
    for server in index().servers {
        // The upstream answers each release's listing in turn; the client lists once per release.
        let dir = tempfile::tempdir().expect("a directory");
        let file = sequence_file(dir.path(), &server);
        let (_upstream, url) = raw_upstream_with(&["--tools-sequence", &file]).await;
        let gateway = Gateway::start(&[format!("{}={url}", server.slug)], &[]).await;
        for id in 0..server.versions.len() {
            let (status, _, body) = post(
                &gateway.url(&server.slug),
                &request_26(id as u32 + 1, "tools/list", json!({})),
            )
            .await;
            assert_eq!(status, 200, "{body}");
        }
        let text = metrics_text(gateway.metrics_port).await;
        let wrong = counted_as_judged(&text, &server.slug, &server.slug, &judged);
        assert!(wrong.is_empty(), "{}: {}", server.slug, wrong.join("\n"));
    }
}

/// What differs between the changes counted in `text` (Prometheus, for the server labelled
/// `label`) and the judged changes of `slug`'s releases, learned one after another: each changed
/// part counted under its class as many times as judged, and nothing else but `identical`.
fn counted_as_judged(text: &str, label: &str, slug: &str, judged: &[Judgement]) -> Vec<String> {
    let mut counts: BTreeMap<(String, String, String), f64> = BTreeMap::new();
    for j in judged.iter().filter(|j| j.server == slug) {
        for (part, class) in j.parts.iter().filter(|(_, c)| *c != "identical") {
            *counts
                .entry((j.tool.clone(), part.clone(), class.clone()))
                .or_default() += 1.0;
        }
    }
    let mut wrong = Vec::new();
    for ((tool, part, class), count) in &counts {
        let series = format!(
            r#"schemagate_contract_changes_total{{server="{label}",tool="{tool}",schema="{part}",class="{class}"}}"#
        );
        if metric(text, &series) != *count {
            wrong.push(format!("{series}: {} != {count}", metric(text, &series)));
        }
    }
    let prefix = format!(r#"schemagate_contract_changes_total{{server="{label}","#);
    for line in text.lines().filter(|l| l.starts_with(&prefix)) {
        if line.contains(r#"class="identical""#) {
            continue;
        }
        let known = counts.keys().any(|(tool, part, class)| {
            line.contains(&format!(r#"tool="{tool}",schema="{part}",class="{class}""#))
        });
        if !known {
            wrong.push(format!("not judged: {line}"));
        }
    }
    wrong
}

/// One release list per turn, as the test server's `--tools-sequence` answers them.
fn sequence_file(dir: &std::path::Path, server: &Server) -> String {
    let lists: Vec<Value> = server
        .versions
        .iter()
        .map(|v| read(&listing(&server.slug, v)))
        .collect();
    let file = dir.join("lists.json");
    std::fs::write(&file, Value::Array(lists).to_string()).expect("write");
    file.to_str().expect("UTF-8").to_owned()
}

#[tokio::test]
async fn each_release_learned_through_the_stdio_proxy_is_classed_as_judged() {
    let judged = judged();
    for server in index().servers {
        let dir = tempfile::tempdir().expect("a directory");
        let file = sequence_file(dir.path(), &server);
        let port = free_port();
        let listen = format!("127.0.0.1:{port}");
        let mut proxy = Raw::spawn(&mut proxy_command(
            &["--metrics-listen", &listen],
            &["--raw", "--tools-sequence", &file],
        ));
        let initialize = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "releases", "version": "1"}}});
        let answer = proxy.ask(&initialize.to_string()).await;
        assert!(answer.contains("serverInfo"), "{answer}");
        proxy
            .send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
            .await;
        for id in 1..=server.versions.len() {
            let list = json!({"jsonrpc": "2.0", "id": id, "method": "tools/list", "params": {}});
            let answer = proxy.ask(&list.to_string()).await;
            assert!(answer.contains("\"tools\""), "{answer}");
        }
        let text = metrics_text(port).await;
        // proxy_command names the server `crm`.
        let wrong = counted_as_judged(&text, "crm", &server.slug, &judged);
        assert!(wrong.is_empty(), "{}: {}", server.slug, wrong.join("\n"));
    }
}
