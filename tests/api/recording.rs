//! `--record DIR`: sessions through `schemagate proxy` and `schemagate gateway` (an HTTP route
//! and a stdio route), driven by the official Rust SDK (`rmcp`) as client and server, recorded,
//! then replayed by `schemagate check --format jsonrpc`: the replay judges every payload as the
//! live relay did, counted alike.

use crate::helpers::mcp::*;
use crate::helpers::metric;
use crate::proxy::sdk_client;
use rmcp::service::RunningService;
use rmcp::RoleClient;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The calls every recorded session makes, before it lists the tools itself: the first makes
/// the relay ask the server for its tools (its own request, recorded marked).
async fn traffic(client: &RunningService<RoleClient, Host>) {
    for (tool, arguments) in [
        ("get_customer", json!({"id": 7})),
        ("get_customer", json!({"id": 7, "variant": "invalid"})),
        ("get_customer", json!({"id": 7, "variant": "is_error"})),
        ("get_customer", json!({"id": 7, "variant": "no_structured"})),
        ("get_customer", json!({"id": "seven"})),
        ("get_customer", json!({"id": 8})),
        ("echo", json!({"text": "hi"})),
        ("fetch_remote", json!({})),
    ] {
        call(client, tool, arguments).await;
    }
    client
        .list_all_tools()
        .await
        .expect("tools/list through the relay");
}

/// The recordings in `dir`, once their bytes stop changing.
async fn recordings(dir: &Path) -> Vec<PathBuf> {
    let size = |dir: &Path| -> u64 {
        std::fs::read_dir(dir)
            .map(|entries| {
                entries
                    .filter_map(Result::ok)
                    .filter_map(|e| e.metadata().ok())
                    .map(|m| m.len())
                    .sum()
            })
            .unwrap_or(0)
    };
    let mut last = (0, 0);
    for _ in 0..100 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let now = size(dir);
        last = if now > 0 && now == last.0 {
            (now, last.1 + 1)
        } else {
            (now, 0)
        };
        if last.1 >= 3 {
            break;
        }
    }
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("the recording directory")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .collect();
    files.sort();
    files
}

/// `schemagate_validations_total` of `server`, by its labels but the server's.
fn live_counts(metrics: &str, server: &str) -> BTreeMap<String, f64> {
    let prefix = format!("schemagate_validations_total{{server=\"{server}\",");
    metrics
        .lines()
        .filter(|l| l.starts_with(&prefix))
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            let labels = series.strip_prefix(&prefix)?.trim_end_matches('}');
            let value: f64 = value.parse().ok()?;
            // The tier is the policy's, the same in the replay: left out of the key.
            let key: Vec<&str> = labels
                .split(',')
                .filter(|l| !l.starts_with("tier="))
                .collect();
            (value > 0.0).then(|| (key.join(","), value))
        })
        .collect()
}

/// The replay's verdicts, counted as `schemagate_validations_total` counts them.
fn replayed_counts(verdicts: &str) -> BTreeMap<String, f64> {
    let mut counts = BTreeMap::new();
    for line in verdicts.lines() {
        let v: Value = serde_json::from_str(line).expect("a verdict line");
        let outcome = v["verdict"]["outcome"]
            .as_str()
            .map(str::to_owned)
            .unwrap_or_else(|| "unchecked".to_owned());
        let attempt = if v["attempt"].as_u64() == Some(1) {
            "first"
        } else {
            "retry"
        };
        let key = format!(
            "tool=\"{}\",payload=\"{}\",attempt=\"{attempt}\",outcome=\"{outcome}\"",
            v["tool"].as_str().unwrap_or(""),
            v["payload"].as_str().unwrap_or("")
        );
        *counts.entry(key).or_insert(0.0) += 1.0;
    }
    counts
}

/// Replays `file` with `schemagate check --format jsonrpc` as server `server`: its exit code,
/// JSON report and verdict lines.
fn replay(file: &Path, server: &str) -> (i32, Value, String) {
    let out = tempfile::tempdir().expect("a directory");
    let verdicts = out.path().join("verdicts.jsonl");
    let output = std::process::Command::new(schemagate())
        .args([
            "check", "--format", "jsonrpc", "--server", server, "--output", "json",
        ])
        .arg("--verdicts")
        .arg(&verdicts)
        .arg(file)
        .output()
        .expect("run schemagate check");
    let report: Value = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|_| panic!("a JSON report: {}", String::from_utf8_lossy(&output.stderr)));
    let lines = std::fs::read_to_string(&verdicts).unwrap_or_default();
    (output.status.code().unwrap_or(-1), report, lines)
}

/// The recording of one session, replayed, judges as the relay judged live.
fn assert_replayed_as_live(file: &Path, server: &str, live: &BTreeMap<String, f64>) {
    let (code, report, verdicts) = replay(file, server);
    assert_eq!(report["input_errors"], 0, "{report}");
    assert_eq!(report["passed_over"], 0, "{report}");
    assert_eq!(
        code, 1,
        "the relay withheld some results, so the replay fails: {report}"
    );
    let replayed = replayed_counts(&verdicts);
    assert_eq!(&replayed, live, "replayed (left) and live (right) counts");
    // Each verdict says whether the client got schemagate's answer in the payload's place.
    assert!(
        verdicts.lines().all(|l| l.contains("\"withheld\":")),
        "{verdicts}"
    );
    assert!(verdicts.contains("\"withheld\":true") && verdicts.contains("\"withheld\":false"));
}

/// A session through `schemagate proxy` recording into a directory of its own, with `flags`
/// besides: the directory (kept while it lives), where the recordings go, the metrics port and
/// the client.
async fn recorded_proxy(
    flags: &[&str],
) -> (
    tempfile::TempDir,
    PathBuf,
    u16,
    RunningService<RoleClient, Host>,
) {
    let dir = tempfile::tempdir().expect("a directory");
    let record = dir.path().join("recordings");
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let record_flag = record.to_str().expect("UTF-8");
    let mut all = vec!["--metrics-listen", &listen, "--record", record_flag];
    all.extend_from_slice(flags);
    let client = sdk_client(&all, None).await;
    (dir, record, port, client)
}

#[tokio::test]
async fn a_proxy_session_recorded_replays_to_the_live_verdicts() {
    let (_dir, record, port, client) =
        recorded_proxy(&["--record-redact", "/arguments/text"]).await;
    traffic(&client).await;
    let live = live_counts(&metrics_text(port).await, "crm");
    assert!(live.len() >= 6, "{live:?}");
    client.cancel().await.expect("close the session");

    let files = recordings(&record).await;
    assert_eq!(files.len(), 1, "one session, one file: {files:?}");
    let name = files[0].file_name().and_then(|n| n.to_str()).unwrap_or("");
    assert!(
        name.starts_with("crm-") && name.ends_with(".jsonl"),
        "{name}"
    );
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&files[0])
        .expect("meta")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600, "a recording is its owner's alone");
    let text = std::fs::read_to_string(&files[0]).expect("read");
    // Both directions, the relay's own listing and replies marked, a redacted value left out.
    assert!(text.contains(r#""method":"initialize""#), "{text}");
    assert!(
        text.contains(r#"{"schemagate_wrote":"to_server","message":"#),
        "{text}"
    );
    assert!(
        text.contains(r#"{"schemagate_wrote":"to_client","message":"#),
        "{text}"
    );
    assert!(
        text.contains(r#""arguments":{"text":"[redacted]"}"#)
            && !text.contains(r#""arguments":{"text":"hi"}"#),
        "{text}"
    );
    assert_replayed_as_live(&files[0], "crm", &live);
}

#[tokio::test]
async fn gateway_sessions_recorded_replay_to_the_live_verdicts() {
    let (_server, url) = upstream(false).await;
    let dir = tempfile::tempdir().expect("a directory");
    let record = dir.path().join("recordings");
    let record_flag = record.to_str().expect("UTF-8").to_owned();
    let gateway = Gateway::start(
        &[format!("crm={url}"), stdio_route("files", "")],
        &["--record", &record_flag],
    )
    .await;
    for route in ["crm", "files"] {
        let client = client(&gateway.url(route), None).await;
        traffic(&client).await;
        client.cancel().await.expect("close the session");
    }
    let metrics = metrics_text(gateway.metrics_port).await;
    let files = recordings(&record).await;
    for route in ["crm", "files"] {
        let mine: Vec<&PathBuf> = files
            .iter()
            .filter(|f| schemagate::ops::record::server_of(f).as_deref() == Some(route))
            .collect();
        assert_eq!(mine.len(), 1, "{route}: one session, one file: {files:?}");
        let live = live_counts(&metrics, route);
        assert!(live.len() >= 6, "{route}: {live:?}");
        assert_replayed_as_live(mine[0], route, &live);
    }
}

#[tokio::test]
async fn a_route_of_the_routes_file_records_as_its_own_settings_say() {
    let (_server, url) = upstream(false).await;
    let dir = tempfile::tempdir().expect("a directory");
    let record = dir.path().join("recordings");
    let routes = dir.path().join("routes.toml");
    let files = stdio_route("files", "");
    let (_, files_command) = files.split_once('=').expect("NAME=COMMAND");
    let write_routes = |files_record: &str| {
        std::fs::write(
            &routes,
            format!(
                "[routes]\ncrm = {{ url = \"{url}\", record = {{ redact = [\"/arguments/text\"] }} }}\nfiles = {{ url = '{files_command}', record = {files_record} }}\n"
            ),
        )
        .expect("write the routes file")
    };
    write_routes("false");
    let record_flag = record.to_str().expect("UTF-8").to_owned();
    let routes_flag = routes.to_str().expect("UTF-8").to_owned();
    let gateway = Gateway::start(
        &[],
        &[
            "--routes",
            &routes_flag,
            "--policy-poll-interval",
            "1",
            "--record",
            &record_flag,
        ],
    )
    .await;
    for route in ["crm", "files"] {
        let client = client(&gateway.url(route), None).await;
        traffic(&client).await;
        client.cancel().await.expect("close the session");
    }
    let servers = |files: &[PathBuf]| -> Vec<String> {
        let mut names: Vec<String> = files
            .iter()
            .filter_map(|f| schemagate::ops::record::server_of(f))
            .collect();
        names.sort();
        names
    };
    let recorded = recordings(&record).await;
    assert_eq!(servers(&recorded), ["crm"], "files is not recorded");
    let text = std::fs::read_to_string(&recorded[0]).expect("read the recording");
    let echo = text
        .lines()
        .find(|l| l.contains(r#""method":"tools/call""#) && l.contains(r#""name":"echo""#))
        .expect("the echo call is recorded");
    assert!(echo.contains(r#""text":"[redacted]""#), "{echo}");

    // The route's settings change with the file: its next session is recorded.
    write_routes("{ sample = 1.0 }");
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let client = client(&gateway.url("files"), None).await;
    traffic(&client).await;
    client.cancel().await.expect("close the session");
    assert_eq!(servers(&recordings(&record).await), ["crm", "files"]);
}

#[tokio::test]
async fn a_recording_under_a_flood_stays_within_its_bounds() {
    let (_dir, record, port, client) = recorded_proxy(&[
        "--record-max-bytes",
        "4096",
        "--record-max-total-bytes",
        "4096",
    ])
    .await;
    for id in 0..200 {
        let answer = call(&client, "get_customer", json!({"id": id})).await;
        assert_eq!(answer.is_error, Some(false), "every call is relayed");
    }
    let text = metrics_text(port).await;
    client.cancel().await.expect("close the session");
    let files = recordings(&record).await;
    let bytes: u64 = files
        .iter()
        .map(|f| std::fs::metadata(f).map(|m| m.len()).unwrap_or(0))
        .sum();
    assert!(bytes <= 4096 && bytes > 0, "{bytes} bytes");
    let series = |outcome: &str| {
        metric(
            &text,
            &format!(r#"schemagate_record_lines_total{{transport="proxy",outcome="{outcome}"}}"#),
        )
    };
    assert!(series("written") > 0.0);
    assert!(
        series("file_full") > 100.0,
        "the rest is counted, not written"
    );
}

#[test]
fn recording_flags_out_of_range_are_refused_with_what_to_fix() {
    for (flags, says) in [
        (
            vec!["--record-sample", "2"],
            "--record-sample must be from 0 to 1",
        ),
        (vec!["--record-redact", "arguments/x"], "starts with `/`"),
        (
            vec!["--record-max-bytes", "10"],
            "--record-max-bytes must be at least 1024",
        ),
    ] {
        let output = std::process::Command::new(schemagate())
            .args([
                "proxy",
                "--server-name",
                "crm",
                "--record",
                "/tmp/unused-recordings",
            ])
            .args(&flags)
            .args(["--", "true"])
            .output()
            .expect("run schemagate proxy");
        assert!(!output.status.success(), "{flags:?}");
        let err = String::from_utf8_lossy(&output.stderr);
        assert!(err.contains(says), "{flags:?}: {err}");
    }
}
