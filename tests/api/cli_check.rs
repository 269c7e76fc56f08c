//! `schemagate check`, the built binary on files made here: its counts and verdicts against the
//! REST API's for the same checks, a recorded MCP session against the proxy's verdicts on the
//! same traffic, JUnit read back with a real XML parser, and the exit codes and input errors.

use crate::helpers::mcp::{free_port, metrics_text, schemagate, test_server, Raw};
use crate::helpers::{metric, TestApp};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

/// Runs `schemagate check` with `args` (and `stdin` on its standard input): exit code, stdout,
/// stderr.
fn check(args: &[&str], stdin: &[u8]) -> (i32, String, String) {
    let mut child = Command::new(schemagate())
        .arg("check")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run schemagate check");
    let mut input = child.stdin.take().expect("stdin");
    input.write_all(stdin).expect("write stdin");
    drop(input);
    let output = child.wait_with_output().expect("schemagate check ends");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write");
    path.to_string_lossy().into_owned()
}

fn jsonl(lines: &[Value]) -> String {
    lines.iter().map(|l| format!("{l}\n")).collect()
}

const POLICY: &str = r#"
default_tier = "untrusted"

[[servers]]
match = "ops"
tier = "semi-trusted"

[[servers]]
match = "internal"
tier = "trusted"
"#;

/// Three servers under three tiers, with input and output schemas and a tool with neither.
fn tools() -> Value {
    let customer = json!({
        "type": "object",
        "properties": {
            "id": {"type": "integer"},
            "email": {"type": "string", "format": "email"},
            "tags": {"type": "array", "items": {"type": "string"}}
        },
        "required": ["id", "email"]
    });
    let list = json!({"tools": [
        {"name": "get_customer",
         "inputSchema": {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]},
         "outputSchema": customer},
        {"name": "ping", "inputSchema": {"type": "object"}}
    ]});
    json!({"servers": {"crm": list, "ops": list, "internal": list}})
}

/// Checks of every kind: valid, invalid (one or several fields), tool errors, arguments, a
/// retry, a tool with no output schema, a bare check with its schema inline.
fn checks() -> Vec<Value> {
    let good = json!({"structuredContent": {"id": 7, "email": "a@example.com"}, "content": []});
    let bad_email = json!({"structuredContent": {"id": 7, "email": "nope"}, "content": []});
    let bad_tags = json!({"structuredContent": {"id": "7", "email": "a@example.com", "tags": [1, "x", 2]}, "content": []});
    let failed = json!({"isError": true, "content": [{"type": "text", "text": "upstream down"}]});
    let mut lines = Vec::new();
    for (i, server) in ["crm", "ops", "internal"].into_iter().enumerate() {
        for (j, result) in [&good, &bad_email, &bad_tags, &failed, &good]
            .into_iter()
            .enumerate()
        {
            lines.push(
                json!({"server": server, "tool": "get_customer", "result": result,
                "call_id": format!("c{i}-{j}")}),
            );
        }
        lines.push(
            json!({"server": server, "tool": "get_customer", "result": &good,
            "attempt": 2, "call_id": format!("c{i}-1")}),
        );
        lines.push(
            json!({"server": server, "tool": "get_customer", "result": &bad_email,
            "attempt": 2}),
        );
        lines.push(json!({"server": server, "tool": "get_customer", "arguments": {"id": 1}}));
        lines.push(json!({"server": server, "tool": "get_customer", "arguments": {"id": "1"}}));
        lines.push(json!({"server": server, "tool": "ping", "result": {"content": []}}));
    }
    lines.push(json!({"schema": {"type": "array", "maxItems": 1}, "instance": [1, 2]}));
    lines.push(json!({"schema": {"type": "array", "maxItems": 2}, "instance": [1, 2]}));
    lines
}

/// Outcome counts of verdicts: `outcome -> n`.
fn outcomes<'a>(verdicts: impl Iterator<Item = &'a Value>) -> BTreeMap<String, u64> {
    let mut counts = BTreeMap::new();
    for v in verdicts {
        *counts
            .entry(v["outcome"].as_str().expect("an outcome").to_owned())
            .or_default() += 1;
    }
    counts
}

#[tokio::test]
async fn counts_and_verdicts_equal_what_the_rest_api_answers_for_the_same_checks() {
    let app = TestApp::with_policy(POLICY, &[]).await;
    let tools = tools();
    for (server, list) in tools["servers"].as_object().expect("servers") {
        let (status, body) = app.register(server, list).await;
        assert_eq!(status, 200, "{body}");
    }
    let items = checks();
    let (status, answer) = app.validate_batch(&items).await;
    assert_eq!(status, 200, "{answer}");
    let rest = answer["results"].as_array().expect("results").clone();
    assert_eq!(rest.len(), items.len());

    let dir = tempfile::tempdir().expect("a directory");
    let tools_file = write(dir.path(), "tools.json", &tools.to_string());
    let policy = write(dir.path(), "policy.toml", POLICY);
    // Two logs, the second on stdin: one run, in order.
    let (first, second) = items.split_at(items.len() / 2);
    let log = write(dir.path(), "first.jsonl", &jsonl(first));
    let verdicts = dir.path().join("verdicts.jsonl");
    let junit = dir.path().join("junit.xml");
    let (code, out, err) = check(
        &[
            "--tools",
            &tools_file,
            "--policy",
            &policy,
            "--output",
            "json",
            "--verdicts",
            verdicts.to_str().expect("UTF-8"),
            "--junit",
            junit.to_str().expect("UTF-8"),
            "--jobs",
            "2",
            &log,
            "-",
        ],
        jsonl(second).as_bytes(),
    );
    // Untrusted crm has invalid results: the policy would reject them.
    assert_eq!(code, 1, "{err}\n{out}");
    let summary: Value = serde_json::from_str(&out).expect("a JSON summary");

    // Every verdict is the REST answer to the same check, in log order.
    let written: Vec<Value> = std::fs::read_to_string(&verdicts)
        .expect("verdicts written")
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    assert_eq!(written.len(), rest.len());
    for (i, (line, answer)) in written.iter().zip(&rest).enumerate() {
        assert_eq!(&line["verdict"], answer, "check {i}");
        let (file, number) = if i < first.len() {
            (log.as_str(), i + 1)
        } else {
            ("-", i + 1 - first.len())
        };
        assert_eq!(line["file"], file);
        assert_eq!(line["line"], number as u64);
    }

    // The summary's counts are the REST verdicts' counts.
    let total = &summary["total"];
    assert_eq!(total["checks"], rest.len() as u64);
    for (outcome, n) in outcomes(rest.iter()) {
        assert_eq!(total[&outcome], n, "{outcome}");
    }
    let rejected = rest.iter().filter(|v| v["action"] == "reject").count() as u64;
    assert!(rejected > 0);
    assert_eq!(total["rejected"], rejected);
    assert_eq!(summary["input_errors"], 0);

    // Per server, tool and payload: the first-attempt compliance and retry resolution the
    // REST verdicts give.
    let row = |server: &str, payload: &str| {
        summary["tools"]
            .as_array()
            .expect("tools")
            .iter()
            .find(|r| {
                r["server"] == server && r["tool"] == "get_customer" && r["payload"] == payload
            })
            .cloned()
            .unwrap_or_else(|| panic!("a row for {server} {payload}"))
    };
    for server in ["crm", "ops"] {
        let judged = |attempt_is_first: bool| {
            let mut counts = (0u64, 0u64);
            for (item, answer) in items.iter().zip(&rest) {
                let first = item.get("attempt").is_none();
                if item["server"] == server
                    && item["tool"] == "get_customer"
                    && item.get("result").is_some()
                    && first == attempt_is_first
                {
                    match answer["outcome"].as_str() {
                        Some("valid") => counts.0 += 1,
                        Some("invalid") => counts.1 += 1,
                        _ => {}
                    }
                }
            }
            counts
        };
        let result = row(server, "result");
        let (valid, invalid) = judged(true);
        assert_eq!(
            result["first_attempt"],
            json!({"valid": valid, "invalid": invalid})
        );
        let compliance = result["first_attempt_compliance"]
            .as_f64()
            .expect("a ratio");
        assert!((compliance - valid as f64 / (valid + invalid) as f64).abs() < 1e-9);
        let (valid, invalid) = judged(false);
        assert_eq!(
            result["retries"],
            json!({"valid": valid, "invalid": invalid})
        );
        let resolution = result["retry_resolution"].as_f64().expect("a ratio");
        assert!((resolution - valid as f64 / (valid + invalid) as f64).abs() < 1e-9);
    }
    // Trusted: skipped, never rejected. Semi-trusted: invalid, logged, passed.
    let skipped = items
        .iter()
        .zip(&rest)
        .filter(|(i, a)| {
            i["server"] == "internal"
                && i["tool"] == "get_customer"
                && i.get("result").is_some()
                && a["outcome"] == "skipped"
        })
        .count();
    assert!(skipped > 0);
    assert_eq!(row("internal", "result")["skipped"], skipped as u64);
    assert_eq!(row("ops", "result")["rejected"], 0);
    assert!(row("ops", "result")["invalid"].as_u64() > Some(0));
    assert_eq!(row("crm", "arguments")["rejected"], 1);

    // The fields that fail most, with indices folded.
    let fields = summary["top_fields"].as_array().expect("top fields");
    assert!(fields.iter().any(|f| f["server"] == "crm"
        && f["path"] == "/tags/*"
        && f["keyword"] == "type"
        && f["count"] == 2));

    // JUnit, read by a real XML parser: a test case per server and tool, failing where the
    // policy would reject a check.
    let xml = std::fs::read_to_string(&junit).expect("JUnit written");
    let doc = roxmltree::Document::parse(&xml).expect("JUnit is well-formed XML");
    let cases: Vec<_> = doc
        .descendants()
        .filter(|n| n.has_tag_name("testcase"))
        .collect();
    let names: Vec<(String, String)> = cases
        .iter()
        .map(|c| {
            (
                c.attribute("classname").unwrap_or("").to_owned(),
                c.attribute("name").unwrap_or("").to_owned(),
            )
        })
        .collect();
    for server in ["crm", "ops", "internal"] {
        for tool in ["get_customer", "ping"] {
            assert!(
                names.contains(&(server.to_owned(), tool.to_owned())),
                "{names:?}"
            );
        }
    }
    let failing: Vec<_> = cases
        .iter()
        .filter_map(|c| {
            let failure = c.children().find(|n| n.has_tag_name("failure"))?;
            Some((c.attribute("classname")?, c.attribute("name")?, failure))
        })
        .collect();
    // crm's tool, and the bare checks (server and tool `-`); ops only logs, internal skips.
    assert_eq!(failing.len(), 2, "{xml}");
    let (_, _, failure) = failing
        .iter()
        .find(|(server, tool, _)| (*server, *tool) == ("crm", "get_customer"))
        .expect("crm's tool fails");
    let on_crm = |item: &Value| item["server"] == "crm" && item["tool"] == "get_customer";
    let crm_checks = items.iter().filter(|i| on_crm(i)).count();
    let crm_rejected = items
        .iter()
        .zip(&rest)
        .filter(|(i, a)| on_crm(i) && a["action"] == "reject")
        .count();
    assert_eq!(
        failure.attribute("message"),
        Some(format!("{crm_rejected} of {crm_checks} checks would be rejected").as_str())
    );
    assert!(failure
        .text()
        .is_some_and(|t| t.contains(&format!("{log}:2: result (attempt 1, call c0-1)"))));
    let suite = doc
        .descendants()
        .find(|n| n.has_tag_name("testsuite"))
        .expect("a test suite");
    assert_eq!(suite.attribute("failures"), Some("2"));
    app.stop().await.expect("stops");
}

#[test]
fn exit_codes_say_pass_reject_or_bad_input_and_errors_name_file_and_line() {
    let dir = tempfile::tempdir().expect("a directory");
    let tools_file = write(dir.path(), "tools.json", &tools().to_string());
    let good = json!({"server": "crm", "tool": "get_customer",
        "result": {"structuredContent": {"id": 1, "email": "a@example.com"}, "content": []}});
    let bad = json!({"server": "crm", "tool": "get_customer",
        "result": {"structuredContent": {"id": 1}, "content": []}});

    // All pass: 0, with the table on stdout.
    let log = write(
        dir.path(),
        "good.jsonl",
        &jsonl(&[good.clone(), good.clone()]),
    );
    let (code, out, err) = check(&["--tools", &tools_file, &log], b"");
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("2 checks from 1 log"), "{out}");
    // stderr is not a terminal: no progress bar drawn on it.
    assert!(!err.contains('\u{1b}') && !err.contains('\r'), "{err:?}");
    assert!(out.contains("crm/get_customer"), "{out}");

    // One the policy would reject: 1.
    let log = write(
        dir.path(),
        "bad.jsonl",
        &jsonl(&[good.clone(), bad.clone()]),
    );
    let (code, out, _) = check(&["--tools", &tools_file, &log], b"");
    assert_eq!(code, 1);
    assert!(out.contains("1 of 2 checks would be rejected"), "{out}");

    // A broken line, a tool the tools file lacks, a missing log: 2, each named with its file
    // and line; every other line is still checked.
    let unknown = json!({"server": "crm", "tool": "refund", "result": {"content": []}});
    let text = format!("{good}\n{{\"server\": \"crm\", oops\n{unknown}\n{bad}\n");
    let log = write(dir.path(), "mixed.jsonl", &text);
    let missing = dir.path().join("missing.jsonl");
    let (code, out, err) = check(
        &[
            "--tools",
            &tools_file,
            "--output",
            "json",
            &log,
            missing.to_str().expect("UTF-8"),
        ],
        b"",
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains(&format!("{log}:2: ")), "{err}");
    assert!(
        err.contains(&format!(
            "{log}:3: tool \"refund\" of server \"crm\" is not in {tools_file}"
        )),
        "{err}"
    );
    assert!(
        err.contains(&format!("{}: cannot read it", missing.display())),
        "{err}"
    );
    let summary: Value = serde_json::from_str(&out).expect("a JSON summary");
    assert_eq!(summary["total"]["checks"], 2);
    assert_eq!(summary["total"]["rejected"], 1);
    assert_eq!(summary["input_errors"], 3);

    // A schema in the tools file that cannot be used: 2, naming the file, server and tool.
    let hostile = json!({"tools": [{"name": "t", "inputSchema": {"type": "object"},
        "outputSchema": {"type": "object", "properties": {"a": {"$ref": "https://example.com/s.json"}}}}]});
    let lone = write(dir.path(), "lone.json", &hostile.to_string());
    let log = write(
        dir.path(),
        "t.jsonl",
        &jsonl(&[
            json!({"server": "x", "tool": "t", "result": {"structuredContent": {}, "content": []}}),
        ]),
    );
    let (code, _, err) = check(&["--tools", &lone, &log], b"");
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("lone.json: holds one server's tools/list result"),
        "{err}"
    );
    let (code, _, err) = check(&["--tools", &lone, "--server", "x", &log], b"");
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains(&format!(
            "{lone}: server \"x\", tool \"t\": its outputSchema cannot be used"
        )),
        "{err}"
    );
    assert!(err.contains(&format!("{log}:1: ")), "{err}");

    // Flags: `-` twice, and a tools file that is not JSON (its line and column named).
    let (code, _, err) = check(&["-", "-"], b"");
    assert_eq!(code, 2);
    assert!(err.contains("standard input"), "{err}");
    let broken = write(dir.path(), "broken.json", "{\"tools\": [\n  {,\n]}");
    let (code, _, err) = check(&["--tools", &broken, "-"], b"");
    assert_eq!(code, 2);
    assert!(err.contains("broken.json: line 2, column"), "{err}");
}

#[tokio::test]
async fn a_recorded_session_gets_the_verdicts_the_proxy_gave() {
    // A client's side of a session; each request is answered with one line.
    let client = [
        r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"big","arguments":{}}}"#,
        r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"wrong","arguments":{}}}"#,
        r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"wrong","arguments":{}}}"#,
        r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"sized","arguments":{"id":"seven"}}}"#,
        r#"{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"sized","arguments":{"id":7}}}"#,
        r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"listing","arguments":{}}}"#,
        r#"{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"asks","arguments":{}}}"#,
    ];
    let answered = |line: &str| line.contains("\"id\"");

    // The session recorded straight from the server: both sides, as relayed.
    let mut server = Raw::spawn(tokio::process::Command::new(test_server()).arg("--raw"));
    let mut transcript = String::new();
    for line in client {
        transcript.push_str(line);
        transcript.push('\n');
        server.send(line).await;
        if answered(line) {
            transcript.push_str(&server.next().await);
            transcript.push('\n');
        }
    }
    drop(server.stdin);
    let _ = server.child.wait().await;

    // The same client through the proxy: which answers it replaced, with what verdict.
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let mut proxy = Raw::spawn(
        tokio::process::Command::new(schemagate())
            .args(["proxy", "--server-name", "crm", "--metrics-listen", &listen])
            .arg("--")
            .arg(test_server())
            .arg("--raw")
            .env("SCHEMAGATE_LOG_LEVEL", "error")
            .env_remove("SCHEMAGATE_POLICY"),
    );
    let mut replaced: BTreeMap<String, Value> = BTreeMap::new();
    for line in client {
        proxy.send(line).await;
        if answered(line) {
            let answer: Value = serde_json::from_str(&proxy.next().await).expect("JSON");
            if answer["result"]["isError"] == true {
                replaced.insert(
                    answer["id"].to_string(),
                    answer["result"]["_meta"]["dev.schemagate/verdict"].clone(),
                );
            }
        }
    }
    let proxy_metrics = metrics_text(port).await;
    drop(proxy.stdin);
    let _ = proxy.child.wait().await;
    assert_eq!(
        replaced.keys().collect::<Vec<_>>(),
        ["3", "4", "5", "7"],
        "{replaced:?}"
    );

    let dir = tempfile::tempdir().expect("a directory");
    let log = write(dir.path(), "session.jsonl", &transcript);
    let verdicts = dir.path().join("verdicts.jsonl");
    let (code, out, err) = check(
        &[
            "--format",
            "jsonrpc",
            "--server",
            "crm",
            "--output",
            "json",
            "--verdicts",
            verdicts.to_str().expect("UTF-8"),
            &log,
        ],
        b"",
    );
    // `listing`'s schema cannot be enforced under 2025-11-25: withheld, as the proxy withheld
    // it, and counted `unchecked` as the proxy counted it; not a fault of the transcript.
    assert_eq!(code, 1, "{err}\n{out}");
    let summary: Value = serde_json::from_str(&out).expect("a JSON summary");
    assert_eq!(summary["input_errors"], 0, "{summary}");
    let written: Vec<Value> = std::fs::read_to_string(&verdicts)
        .expect("verdicts written")
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    // Withheld where the proxy replaced, with the same verdict; passed everywhere else.
    let mut withheld = BTreeMap::new();
    for line in &written {
        let id = line["call_id"].as_str().expect("a call id").to_owned();
        if line["withheld"] == true {
            withheld.insert(id, line.clone());
        }
    }
    assert_eq!(
        withheld.keys().collect::<Vec<_>>(),
        replaced.keys().collect::<Vec<_>>()
    );
    for (id, line) in &withheld {
        let theirs = &replaced[id];
        match line.get("verdict") {
            Some(verdict) => {
                assert_eq!(verdict["errors"], theirs["errors"], "{id}");
                assert_eq!(verdict["outcome"], theirs["outcome"], "{id}");
                assert_eq!(verdict["schema_hash"], theirs["schema_hash"], "{id}");
            }
            None => assert_eq!(line["error"]["code"], theirs["error"]["code"], "{id}"),
        }
    }
    // The second call of `wrong` is a retry, as the proxy counts it.
    let retry = written
        .iter()
        .find(|l| l["call_id"] == "4" && l["payload"] == "result")
        .expect("call 4's result");
    assert_eq!(retry["attempt"], 2);

    // The summary's counts are the proxy's series.
    let summary: Value = serde_json::from_str(&out).expect("a JSON summary");
    let mut compared = 0.0;
    for row in summary["tools"].as_array().expect("tools") {
        for (outcome, attempt, n) in [
            ("valid", "first", &row["first_attempt"]["valid"]),
            ("invalid", "first", &row["first_attempt"]["invalid"]),
            ("valid", "retry", &row["retries"]["valid"]),
            ("invalid", "retry", &row["retries"]["invalid"]),
        ] {
            let series = format!(
                r#"schemagate_validations_total{{server="crm",tool="{}",tier="untrusted",payload="{}",attempt="{attempt}",outcome="{outcome}"}}"#,
                row["tool"].as_str().expect("a tool"),
                row["payload"].as_str().expect("a payload"),
            );
            let n = n.as_f64().expect("a count");
            assert_eq!(metric(&proxy_metrics, &series), n, "{series}");
            compared += n;
        }
    }
    // Results of big, wrong twice, sized; arguments of every call.
    assert!(compared >= 10.0, "{out}");
}

#[test]
fn transcripts_keep_their_own_contracts_and_answers_find_their_requests() {
    let dir = tempfile::tempdir().expect("a directory");
    let schema = |n: &str| {
        json!({"tools": [{"name": "get", "inputSchema": {"type": "object"},
            "outputSchema": {"type": "object", "properties": {"n": {"type": n}}, "required": ["n"]}}]})
    };
    let tools = write(dir.path(), "tools.json", &schema("integer").to_string());
    // The first session lists a contract of its own (`n` a string)...
    let listed = write(
        dir.path(),
        "listed.jsonl",
        &jsonl(&[
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
            json!({"jsonrpc": "2.0", "id": 1, "result": schema("string")}),
            json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "get", "arguments": {}}}),
            json!({"jsonrpc": "2.0", "id": 2, "result": {"content": [], "structuredContent": {"n": "x"}}}),
        ]),
    );
    // ...the second lists none: the tools file's contract judges it. While its call (id 0)
    // runs, the server asks the client's model (its own id 0); the client's answer to that is
    // not the tool's result.
    let clash = write(
        dir.path(),
        "clash.jsonl",
        &jsonl(&[
            json!({"jsonrpc": "2.0", "id": 0, "method": "tools/call", "params": {"name": "get", "arguments": {}}}),
            json!({"jsonrpc": "2.0", "id": 0, "method": "sampling/createMessage",
                "params": {"messages": [], "maxTokens": 10}}),
            json!({"jsonrpc": "2.0", "id": 0, "result": {"role": "assistant",
                "content": {"type": "text", "text": "hi"}, "model": "m"}}),
            json!({"jsonrpc": "2.0", "id": 0, "result": {"content": [], "structuredContent": {"n": 1}}}),
        ]),
    );
    let verdicts = dir.path().join("verdicts.jsonl");
    let (code, out, err) = check(
        &[
            "--format",
            "jsonrpc",
            "--server",
            "s",
            "--tools",
            &tools,
            "--jobs",
            "1",
            "--output",
            "json",
            "--verdicts",
            verdicts.to_str().expect("UTF-8"),
            &listed,
            &clash,
        ],
        b"",
    );
    assert_eq!(code, 0, "{err}\n{out}");
    let written: Vec<Value> = std::fs::read_to_string(&verdicts)
        .expect("verdicts written")
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    let results: Vec<_> = written
        .iter()
        .filter(|l| l["payload"] == "result")
        .collect();
    assert_eq!(results.len(), 2, "{written:?}");
    for (result, (file, line)) in results.iter().zip([(&listed, 4), (&clash, 4)]) {
        assert_eq!(result["file"], file.as_str());
        assert_eq!(result["line"], line);
        assert_eq!(result["verdict"]["outcome"], "valid", "{result}");
    }

    // Results no call is known for (a task never created, an answer to no request followed)
    // are withheld by the proxy under untrusted: reported so, each with its line; the task's
    // counted unchecked, as the proxy counts it.
    let orphans = write(
        dir.path(),
        "orphans.jsonl",
        &jsonl(&[
            json!({"jsonrpc": "2.0", "id": 5, "method": "tasks/result", "params": {"taskId": "nope"}}),
            json!({"jsonrpc": "2.0", "id": 5, "result": {"content": [], "structuredContent": {"n": 1},
                "_meta": {"io.modelcontextprotocol/related-task": {"taskId": "nope"}}}}),
            json!({"jsonrpc": "2.0", "id": 9, "result": {"content": [], "structuredContent": {"n": 1}}}),
        ]),
    );
    let (code, out, err) = check(
        &[
            "--format",
            "jsonrpc",
            "--server",
            "s",
            "--output",
            "json",
            "--verdicts",
            verdicts.to_str().expect("UTF-8"),
            &orphans,
        ],
        b"",
    );
    // Outcomes of the session, not faults of the transcript: exit 1 for what was withheld.
    assert_eq!(code, 1, "{err}");
    let summary: Value = serde_json::from_str(&out).expect("a JSON summary");
    assert_eq!(summary["total"]["unchecked"], 1);
    assert_eq!(summary["total"]["rejected"], 1);
    assert_eq!(summary["input_errors"], 0);
    let written: Vec<Value> = std::fs::read_to_string(&verdicts)
        .expect("verdicts written")
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    let seen: Vec<_> = written
        .iter()
        .map(|l| {
            (
                l["line"].clone(),
                l["error"]["code"].clone(),
                l["withheld"].clone(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            (json!(2), json!("unknown_task"), json!(true)),
            (json!(3), json!("unknown_call"), json!(true)),
        ]
    );

    // Recorded through the proxy: a call refused for its arguments has no answer from the
    // server, and the client sends the call again under the same id. That call's answer is
    // judged.
    let strict = json!({"tools": [{"name": "get",
        "inputSchema": {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]},
        "outputSchema": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}}]});
    let strict = write(dir.path(), "strict.json", &strict.to_string());
    let again = write(
        dir.path(),
        "again.jsonl",
        &jsonl(&[
            json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "get", "arguments": {}}}),
            json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "get", "arguments": {"id": 1}}}),
            json!({"jsonrpc": "2.0", "id": 3, "result": {"content": [], "structuredContent": {"n": "one"}}}),
        ]),
    );
    let (code, out, err) = check(
        &[
            "--format", "jsonrpc", "--server", "s", "--tools", &strict, "--output", "json", &again,
        ],
        b"",
    );
    assert_eq!(code, 1, "{err}");
    let summary: Value = serde_json::from_str(&out).expect("a JSON summary");
    let result = summary["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .find(|r| r["payload"] == "result")
        .cloned()
        .expect("the result judged");
    assert_eq!(result["invalid"], 1, "{result}");
    assert_eq!(result["retries"]["invalid"], 1, "{result}");

    // A line of arrays nested deep, or a banner, is no message: passed over and counted, as the
    // proxy relays it unjudged, and nothing else happens.
    let deep = format!("{}{}", "[".repeat(200_000), "]".repeat(200_000));
    let log = write(
        dir.path(),
        "deep.jsonl",
        &format!("{deep}\nserver v1.2 ready\n"),
    );
    let (code, out, err) = check(
        &[
            "--format", "jsonrpc", "--server", "s", "--output", "json", &log,
        ],
        b"",
    );
    assert_eq!(code, 0, "{err}");
    let summary: Value = serde_json::from_str(&out).expect("a JSON summary");
    assert_eq!(
        (&summary["passed_over"], &summary["input_errors"]),
        (&json!(2), &json!(0)),
        "{summary}"
    );
    let (_, text, _) = check(&["--format", "jsonrpc", "--server", "s", &log], b"");
    assert!(
        text.contains("0 of 0 checks would be rejected under the policy; 0 lines could not be checked; 2 lines passed over"),
        "{text}"
    );

    // The verdicts file may not be a log: it would be emptied before it is read.
    let (code, _, err) = check(
        &["--tools", &tools, "--server", "s", "--verdicts", &log, &log],
        b"",
    );
    assert_eq!(code, 2);
    assert!(err.contains("is also an input"), "{err}");
    assert!(std::fs::metadata(&log).expect("still there").len() > 0);
}

#[test]
fn a_call_to_a_tool_the_server_lacks_is_counted_not_an_error() {
    let dir = tempfile::tempdir().expect("a directory");
    let log = write(
        dir.path(),
        "invented.jsonl",
        &jsonl(&[
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
            json!({"jsonrpc": "2.0", "id": 1, "result": {"tools": [{"name": "get",
                "inputSchema": {"type": "object"},
                "outputSchema": {"type": "object", "properties": {"n": {"type": "integer"}}}}]}}),
            // A model inventing a tool name: ordinary traffic, the server answers it itself.
            json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "get_weather", "arguments": {}}}),
            json!({"jsonrpc": "2.0", "id": 2, "error": {"code": -32602, "message": "Unknown tool: get_weather"}}),
            json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "get", "arguments": {}}}),
            json!({"jsonrpc": "2.0", "id": 3, "result": {"content": [], "structuredContent": {"n": 1}}}),
        ]),
    );
    // Under untrusted, what the session was not offered is not sent on (as the proxy does): a
    // rejection; never an input error.
    let (code, out, err) = check(
        &[
            "--format", "jsonrpc", "--server", "s", "--output", "json", &log,
        ],
        b"",
    );
    assert_eq!(code, 1, "{err}{out}");
    let summary: Value = serde_json::from_str(&out).expect("a JSON summary");
    assert_eq!(summary["input_errors"], 0, "{summary}");
    assert_eq!(summary["unknown_tools"], 1, "{summary}");
    assert_eq!(summary["total"]["rejected"], 1, "{summary}");
    // With `unknown_tools = "pass"`, such a call goes to the server, which answers it: exit 0.
    let policy = write(dir.path(), "policy.toml", "unknown_tools = \"pass\"\n");
    let (code, out, err) = check(
        &[
            "--format", "jsonrpc", "--server", "s", "--policy", &policy, "--output", "json", &log,
        ],
        b"",
    );
    assert_eq!(code, 0, "{err}{out}");
    let summary: Value = serde_json::from_str(&out).expect("a JSON summary");
    assert_eq!(
        (
            &summary["unknown_tools"],
            &summary["total"]["rejected"],
            &summary["total"]["valid"]
        ),
        (&json!(1), &json!(0), &json!(2)),
        "{summary}"
    );
    let (_, text, _) = check(&["--format", "jsonrpc", "--server", "s", &log], b"");
    assert!(
        text.contains("1 payload of tools no listing names (unknown_tool"),
        "{text}"
    );
}

#[test]
fn reports_over_many_transcripts_are_the_same_whatever_the_jobs() {
    let dir = tempfile::tempdir().expect("a directory");
    let listing = json!({"jsonrpc": "2.0", "id": 0, "result": {"tools": [{"name": "get",
        "inputSchema": {"type": "object", "properties": {"id": {"type": "integer"}}},
        "outputSchema": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}}]}});
    // 30 sessions of different lengths (so they finish in another order than given), each with
    // rejections and an input error of its own.
    let logs: Vec<String> = (0..30)
        .map(|i| {
            let mut lines = vec![
                json!({"jsonrpc": "2.0", "id": 0, "method": "tools/list"}),
                listing.clone(),
            ];
            for call in 0..(1 + (i * 37) % 300) {
                let id = call + 1;
                let n = if (call + i) % 3 == 0 {
                    json!("bad")
                } else {
                    json!(call)
                };
                lines.push(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                    "params": {"name": "get", "arguments": {"id": call}}}));
                lines.push(json!({"jsonrpc": "2.0", "id": id,
                    "result": {"content": [], "structuredContent": {"n": n}}}));
            }
            let mut text = jsonl(&lines);
            text.push_str(&"x".repeat(2_000 + i));
            text.push('\n');
            write(dir.path(), &format!("session-{i:02}.jsonl"), &text)
        })
        .collect();
    let run = |jobs: &str| {
        let out = tempfile::tempdir().expect("a directory");
        let (verdicts, junit) = (out.path().join("v.jsonl"), out.path().join("j.xml"));
        let mut args = vec![
            "--format",
            "jsonrpc",
            "--server",
            "s",
            "--output",
            "json",
            "--jobs",
            jobs,
            "--max-message-bytes",
            "1024",
            "--verdicts",
            verdicts.to_str().expect("UTF-8"),
            "--junit",
            junit.to_str().expect("UTF-8"),
        ];
        args.extend(logs.iter().map(String::as_str));
        let (code, out, err) = check(&args, b"");
        assert_eq!(code, 2, "{err}");
        let mut report: Value = serde_json::from_str(&out).expect("a JSON report");
        report["seconds"] = json!(0);
        (
            report.to_string(),
            std::fs::read(&verdicts).expect("verdicts"),
            // The suite's run time aside.
            std::fs::read_to_string(&junit)
                .expect("junit")
                .lines()
                .map(|l| match l.find(" time=\"") {
                    Some(at) if l.contains("<testsuite") => l[..at].to_owned(),
                    _ => l.to_owned(),
                })
                .collect::<Vec<_>>(),
        )
    };
    let one = run("1");
    assert!(one.1.len() > 100_000, "verdicts written");
    for jobs in ["2", "8"] {
        let other = run(jobs);
        assert!(one.0 == other.0, "the JSON report under --jobs {jobs}");
        assert!(one.1 == other.1, "the verdicts under --jobs {jobs}");
        assert!(one.2 == other.2, "the JUnit report under --jobs {jobs}");
    }
}

#[test]
fn one_run_holds_transcripts_of_many_servers_each_named_by_itself() {
    let dir = tempfile::tempdir().expect("a directory");
    let tool = |required: &str| {
        json!({"tools": [{"name": "get", "inputSchema": {"type": "object"},
        "outputSchema": {"type": "object", "properties": {"a": {}, "b": {}}, "required": [required]}}]})
    };
    let tools = write(
        dir.path(),
        "tools.json",
        &json!({"servers": {"alpha": tool("a"), "beta": tool("b")}}).to_string(),
    );
    let session = |initialize: Option<&str>| {
        let mut lines = Vec::new();
        if let Some(name) = initialize {
            lines.push(json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}}}));
            lines.push(
                json!({"jsonrpc": "2.0", "id": 0, "result": {"protocolVersion": "2025-11-25",
                "capabilities": {"tools": {}}, "serverInfo": {"name": name, "version": "1"}}}),
            );
        }
        lines.push(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "get", "arguments": {}}}));
        // Valid for alpha (it has `a`), invalid for beta (it lacks `b`).
        lines.push(json!({"jsonrpc": "2.0", "id": 1, "result": {"content": [], "structuredContent": {"a": 1}}}));
        jsonl(&lines)
    };
    // Named by the recording's file name, and by the initialize answer.
    let alpha = write(
        dir.path(),
        "alpha-20261126T083515.036Z-ac13d81f8ed18152.jsonl",
        &session(None),
    );
    let beta = write(dir.path(), "captured.jsonl", &session(Some("beta")));
    let (code, out, err) = check(
        &[
            "--format", "jsonrpc", "--tools", &tools, "--output", "json", &alpha, &beta,
        ],
        b"",
    );
    assert_eq!(code, 1, "beta's result is rejected: {err}");
    let summary: Value = serde_json::from_str(&out).expect("a JSON summary");
    let result = |server: &str| {
        summary["tools"]
            .as_array()
            .expect("tools")
            .iter()
            .find(|r| r["server"] == server && r["payload"] == "result")
            .cloned()
            .unwrap_or(Value::Null)
    };
    assert_eq!(result("alpha")["valid"], 1, "{summary}");
    assert_eq!(result("beta")["invalid"], 1, "{summary}");
    // A transcript that names no server, with no --server: said so, for that file alone.
    let anonymous = write(dir.path(), "anonymous.jsonl", &session(None));
    let (code, _, err) = check(
        &["--format", "jsonrpc", "--tools", &tools, &alpha, &anonymous],
        b"",
    );
    assert_eq!(code, 2);
    assert!(
        err.contains("anonymous.jsonl: name its server with --server NAME"),
        "{err}"
    );
}

#[test]
fn verdicts_go_to_standard_output_with_a_dash() {
    let dir = tempfile::tempdir().expect("a directory");
    let tools = write(
        dir.path(),
        "tools.json",
        &json!({"tools": [{"name": "get", "outputSchema": {"type": "object", "required": ["n"]}}]})
            .to_string(),
    );
    let log = write(
        dir.path(),
        "checks.jsonl",
        &jsonl(&[
            json!({"server": "s", "tool": "get", "result": {"content": [], "structuredContent": {"n": 1}}}),
        ]),
    );
    let (code, out, err) = check(
        &["--tools", &tools, "--server", "s", "--verdicts", "-", &log],
        b"",
    );
    assert_eq!(code, 0, "{err}");
    let line: Value = serde_json::from_str(out.trim()).expect("one verdict line on stdout");
    assert_eq!(line["verdict"]["valid"], true);
    assert!(
        err.contains("1 check from 1 log"),
        "the summary on stderr: {err}"
    );
    assert!(!dir.path().join("-").exists(), "no file named -");
}

#[test]
fn a_transcript_is_judged_by_the_policys_rules_with_the_roots_it_holds() {
    let dir = tempfile::tempdir().expect("a directory");
    let read = |id: u32, path: &str| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
               "params": {"name": "read_text_file", "arguments": {"path": path}}})
    };
    let answer = |id: u32| json!({"jsonrpc": "2.0", "id": id, "result": {"content": [{"type": "text", "text": "x"}]}});
    let log = write(
        dir.path(),
        "files.jsonl",
        &jsonl(&[
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
            json!({"jsonrpc": "2.0", "id": 1, "result": {"tools": [{"name": "read_text_file",
                "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}}}}]}}),
            // The server asks for the client's roots; the client answers.
            json!({"jsonrpc": "2.0", "id": "r1", "method": "roots/list"}),
            json!({"jsonrpc": "2.0", "id": "r1", "result": {"roots": [{"uri": "file:///srv/shared"}]}}),
            read(2, "/srv/shared/a.txt"),
            answer(2),
            read(3, "/srv/shared/../../etc/passwd"),
            answer(3),
        ]),
    );
    let policy = write(
        dir.path(),
        "policy.toml",
        "[[rules]]\nname = \"in_roots\"\npayload = \"arguments\"\npaths = [\"/path\"]\n",
    );
    let (code, out, err) = check(
        &[
            "--format", "jsonrpc", "--server", "files", "--policy", &policy, "--output", "json",
            &log,
        ],
        b"",
    );
    assert_eq!(
        code, 1,
        "the call outside the roots is rejected: {err}{out}"
    );
    let summary: Value = serde_json::from_str(&out).expect("a JSON summary");
    assert_eq!(summary["total"]["rejected"], 1, "{summary}");
    assert_eq!(
        (
            &summary["top_fields"][0]["path"],
            &summary["top_fields"][0]["keyword"]
        ),
        (&json!("in_roots"), &json!("rule")),
        "{summary}"
    );
}
