//! `schemagate diff`, the built binary on files made here: the classes of the table of
//! contract changes (the same a registration gives), the report's shapes, and exit codes.

use crate::contracts::{changes_anything, table, tools_lists};
use crate::helpers::mcp::schemagate;
use serde_json::{json, Value};
use std::path::Path;
use std::process::Command;

/// Runs `schemagate diff` with `args`: exit code, stdout, stderr.
pub(crate) fn diff(args: &[&str]) -> (i32, String, String) {
    let output = Command::new(schemagate())
        .arg("diff")
        .args(args)
        .output()
        .expect("run schemagate diff");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

fn write(dir: &Path, name: &str, value: &Value) -> String {
    let path = dir.join(name);
    std::fs::write(&path, value.to_string()).expect("write");
    path.to_string_lossy().into_owned()
}

#[test]
fn the_table_of_changes_is_classed_as_a_registration_classes_it() {
    let dir = tempfile::tempdir().expect("a directory");
    let table = table();
    let (old, new) = tools_lists(&table);
    let (old, new) = (
        write(dir.path(), "old.json", &old),
        write(dir.path(), "new.json", &new),
    );
    let (code, out, err) = diff(&[&old, &new, "--output", "json", "--fail-on", "never"]);
    assert_eq!(code, 0, "{err}");
    let report: Value = serde_json::from_str(&out).expect("a JSON report");
    let changes = report["changes"].as_array().expect("changes");
    let mut wrong = Vec::new();
    for (i, case) in table.iter().enumerate() {
        let tool = format!("t{i}");
        let change = changes.iter().find(|c| c["tool"] == tool.as_str());
        match (changes_anything(case), change) {
            (false, None) => {}
            (true, Some(change)) if change["class"] == case.class.as_str() => {
                assert_eq!(
                    change["server"],
                    Value::Null,
                    "a lone listing names no server"
                );
                let parts = change["schemas"].as_array().expect("parts");
                assert!(
                    parts.iter().any(|p| p["schema"] == case.part.as_str()),
                    "{}: {parts:?}",
                    case.name
                );
            }
            (_, change) => wrong.push(format!(
                "{}: expected {}, got {change:?}",
                case.name, case.class
            )),
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    let breaking = table
        .iter()
        .filter(|c| changes_anything(c) && c.class == "breaking")
        .count();
    assert_eq!(report["summary"]["breaking"], breaking);
    let review = table
        .iter()
        .filter(|c| changes_anything(c) && c.class == "review")
        .count();
    assert!(review >= 3, "the table has texts changed");
    assert_eq!(report["summary"]["review"], review);
    // Texts to review fail the run only when asked.
    assert_eq!(diff(&[&old, &new, "--fail-on", "review"]).0, 1);
}

#[test]
fn exit_codes_say_whether_ci_should_stop() {
    let dir = tempfile::tempdir().expect("a directory");
    let tool = |required: &[&str]| json!({"name": "get_customer", "outputSchema": {"type": "object", "properties": {"email": {"type": "string"}}, "required": required}});
    let servers = |tools: Value| json!({"servers": {"crm": {"tools": tools}}});
    let strict = write(
        dir.path(),
        "strict.json",
        &servers(json!([tool(&["email"])])),
    );
    let loose = write(dir.path(), "loose.json", &servers(json!([tool(&[])])));
    let more = write(
        dir.path(),
        "more.json",
        &servers(json!([tool(&["email"]), {"name": "ping"}])),
    );

    // A field no longer promised: breaking, exit 1, the reason in the text report.
    let (code, out, _) = diff(&[&strict, &loose]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("crm/get_customer: changed, breaking"), "{out}");
    assert!(
        out.contains("/properties/email: removed from required"),
        "{out}"
    );
    assert_eq!(diff(&[&strict, &loose, "--fail-on", "never"]).0, 0);
    // The reverse is compatible: exit 0, unless any change fails.
    assert_eq!(diff(&[&loose, &strict]).0, 0);
    assert_eq!(diff(&[&loose, &strict, "--fail-on", "any"]).0, 1);
    // A tool added is compatible; removed, breaking.
    let (code, out, _) = diff(&[&strict, &more]);
    assert_eq!(
        (code, out.contains("crm/ping: added, compatible")),
        (0, true),
        "{out}"
    );
    let (code, out, _) = diff(&[&more, &strict]);
    assert_eq!(
        (code, out.contains("crm/ping: removed, breaking")),
        (1, true),
        "{out}"
    );
    // Nothing changed.
    let (code, out, _) = diff(&[&strict, &strict]);
    assert_eq!(code, 0);
    assert!(out.contains("0 tools changed"), "{out}");

    // Input a person can act on: the file, and the line of broken JSON; exit 2.
    let broken = dir.path().join("broken.json");
    std::fs::write(&broken, "{\"tools\": [\n  {\"name\": }\n]}").expect("write");
    let (code, _, err) = diff(&[&strict, broken.to_str().expect("UTF-8")]);
    assert_eq!(code, 2);
    assert!(err.contains("broken.json: line 2"), "{err}");
    let (code, _, err) = diff(&[&strict, "/nonexistent/new.json"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("/nonexistent/new.json: cannot read it"),
        "{err}"
    );
    let odd = write(dir.path(), "odd.json", &json!({"servers": []}));
    let (code, _, err) = diff(&[&strict, &odd]);
    assert_eq!(code, 2);
    assert!(err.contains("odd.json: `servers` must map"), "{err}");
    let bad_name = write(
        dir.path(),
        "bad_name.json",
        &json!({"tools": [{"name": ""}]}),
    );
    let (code, _, err) = diff(&[&strict, &bad_name]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("bad_name.json"), "{err}");
}

#[test]
fn the_report_serves_a_ci_job_as_it_is() {
    let dir = tempfile::tempdir().expect("a directory");
    let tool = |required: &[&str]| json!({"name": "get_customer", "outputSchema": {"type": "object", "properties": {"email": {"type": "string"}}, "required": required}});
    // A JSON-RPC answer to tools/list, as captured from the wire, is read as its result.
    let strict = write(
        dir.path(),
        "strict.json",
        &json!({"jsonrpc": "2.0", "id": 2, "result": {"tools": [tool(&["email"])]}}),
    );
    let loose = write(dir.path(), "loose.json", &json!({"tools": [tool(&[])]}));
    let (code, out, err) = diff(&[&strict, &loose, "--output", "json"]);
    assert_eq!(code, 1, "{err}");
    let report: Value = serde_json::from_str(&out).expect("a JSON report");
    assert_eq!(report["changes"][0]["server"], Value::Null);
    let summary = &report["summary"];
    assert_eq!(
        (
            &summary["identical"],
            &summary["compatible"],
            &summary["breaking"],
            &summary["unknown"]
        ),
        (&json!(0), &json!(0), &json!(1), &json!(0))
    );
    assert_eq!(summary["failed_on"], json!(["breaking"]), "{summary}");
    let (_, text, _) = diff(&[&strict, &loose]);
    assert!(text.contains("failed on: breaking"), "{text}");

    // Key order and a schema's title rewritten: identical, not a changed tool, even for `any`.
    let reordered = write(
        dir.path(),
        "reordered.json",
        &json!({"tools": [{"outputSchema": {"required": ["email"], "properties": {"email": {"title": "Email", "type": "string"}}, "type": "object"}, "name": "get_customer"}]}),
    );
    let (code, out, err) = diff(&[&strict, &reordered, "--fail-on", "any", "--output", "json"]);
    assert_eq!(code, 0, "{out}{err}");
    let report: Value = serde_json::from_str(&out).expect("a JSON report");
    assert_eq!(
        (
            &report["summary"]["changed"],
            &report["summary"]["identical"]
        ),
        (&json!(0), &json!(1)),
        "{report}"
    );
    let (code, text, _) = diff(&[&strict, &reordered, "--fail-on", "any"]);
    assert_eq!(code, 0);
    assert!(text.starts_with("0 tools changed"), "{text}");

    // A description the model reads, edited: a change to review, shown as a word diff. It fails
    // the run only when review is asked for.
    let described = write(
        dir.path(),
        "described.json",
        &json!({"tools": [{"name": "get_customer", "outputSchema": {"type": "object", "properties": {"email": {"type": "string", "description": "where to write"}}, "required": ["email"]}}]}),
    );
    let (code, text, _) = diff(&[&strict, &described]);
    assert_eq!(code, 0, "{text}");
    assert!(
        text.contains("get_customer: changed, review\n    description: review\n        [review] /outputSchema/properties/email/description: added \"where to write\"\n"),
        "{text}"
    );
    assert!(text.contains("1 to review"), "{text}");
    let (code, out, _) = diff(&[
        &strict,
        &described,
        "--fail-on",
        "review",
        "--output",
        "json",
    ]);
    assert_eq!(code, 1, "{out}");
    let report: Value = serde_json::from_str(&out).expect("a JSON report");
    assert_eq!(report["summary"]["failed_on"], json!(["review"]));
    assert_eq!(report["summary"]["review"], 1);

    // Each reason under its own class: a field no longer promised is breaking, one now promised
    // compatible, though the part as a whole is breaking.
    let swapped = write(
        dir.path(),
        "swapped.json",
        &json!({"tools": [{"name": "get_customer", "outputSchema": {"type": "object", "properties": {"email": {"type": "string"}, "id": {"type": "integer"}}, "required": ["id"]}}]}),
    );
    let (code, text, _) = diff(&[&strict, &swapped]);
    assert_eq!(code, 1, "{text}");
    for line in [
        "    output: breaking\n",
        "        [compatible] /properties/id: added to required\n",
        "        [breaking] /properties/email: removed from required\n",
    ] {
        assert!(text.contains(line), "{line:?} in {text}");
    }
    let (_, out, _) = diff(&[&strict, &swapped, "--output", "json"]);
    let report: Value = serde_json::from_str(&out).expect("a JSON report");
    let part = &report["changes"][0]["schemas"][0];
    let reasons = part["reasons"].as_array().expect("reasons");
    let classes = part["reason_classes"].as_array().expect("reason_classes");
    assert_eq!(reasons.len(), classes.len(), "{part}");
    let at = reasons
        .iter()
        .position(|r| r == "/properties/id: added to required")
        .expect("the reason");
    assert_eq!(classes[at], "compatible", "{part}");

    // --fail-on takes a list of classes: a breaking change passes a run that fails on unknown.
    let (code, out, _) = diff(&[&strict, &loose, "--fail-on", "unknown", "--output", "json"]);
    assert_eq!(code, 0, "{out}");
    let report: Value = serde_json::from_str(&out).expect("a JSON report");
    assert_eq!(report["summary"]["failed_on"], json!([]));
    assert_eq!(
        diff(&[&strict, &loose, "--fail-on", "unknown,breaking"]).0,
        1
    );
    let (code, out, err) = diff(&[
        &strict,
        &loose,
        "--fail-on",
        "any,never",
        "--output",
        "json",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--fail-on"), "{err}");
    let refusal: Value = serde_json::from_str(&out).expect("a JSON document for wrong flags");
    assert_eq!(refusal["exit_code"], 2);

    // Every exit writes a JSON document with --output json, the refusal too.
    let (code, out, err) = diff(&[&strict, "/nonexistent/new.json", "--output", "json"]);
    assert_eq!(code, 2, "{err}");
    let refusal: Value = serde_json::from_str(&out).expect("a JSON document on exit 2");
    assert_eq!(refusal["exit_code"], 2);
    assert!(
        refusal["error"]
            .as_str()
            .is_some_and(|e| e.contains("/nonexistent/new.json: cannot read it")),
        "{refusal}"
    );
}
