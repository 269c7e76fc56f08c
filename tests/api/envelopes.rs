//! Messages read as the official clients read them: hostile servers answer a followed call with
//! envelopes of every spelling (ids a client coerces, members of every JSON type beside the
//! answer, repeated and escaped members, text that is not JSON), and whatever a client would
//! take for the call's answer must have been judged: through `schemagate proxy` (stdio) and
//! `schemagate gateway` (JSON answers and server-sent events).
//!
//! The clients' reading is modelled here on its own, from the SDKs' code: the Python SDK (2.3)
//! validates a line with pydantic (which reads `NaN`; a repeated member is its last value;
//! members it does not know are ignored; an id is a strict `int` or a `str`, matched through
//! `int()`), the TypeScript SDK (1.32) with zod's strict objects after `JSON.parse`, matched
//! through `Number()`.

use crate::helpers::gateway::InProcess;
use crate::helpers::mcp::Gateway;
use crate::helpers::mcp::Raw;
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::TestRunner;
use serde_json::{json, Value};

/// A result the tool's contract (`{"n": integer}`, required) refuses, and one it admits.
const BROKEN: [&str; 4] = [
    r#"{"content":[],"structuredContent":{"n":"x"}}"#,
    r#"{"content":[{"type":"text","text":"{\"n\":1.5}"}],"structuredContent":{"n":1.5}}"#,
    // A text-only answer, from a tool that declares an outputSchema.
    r#"{"content":[{"type":"text","text":"1.5"}]}"#,
    r#"{"content":[],"structuredContent":{"n":NaN}}"#,
];
const VALID: &str =
    r#"{"content":[{"type":"text","text":"{\"n\":1}"}],"structuredContent":{"n":1}}"#;
/// The tool's own error: not a result an orchestrator acts on.
const TOOL_ERROR: &str = r#"{"content":[{"type":"text","text":"failed"}],"isError":true}"#;

/// Ways to spell an id, for the request `n`: some that a client takes for `n`, some not.
fn id_spellings(n: u64) -> Vec<String> {
    let arabic: String = n
        .to_string()
        .chars()
        .map(|d| char::from_u32(0x660 + d.to_digit(10).unwrap_or(0)).unwrap_or('0'))
        .collect();
    vec![
        format!("{n}"),
        format!("{n}.0"),
        format!("{n}e0"),
        format!("\"{n}\""),
        format!("\" {n}\""),
        format!("\"+{n}\""),
        format!("\"0{n}\""),
        format!("\"{n}.0\""),
        format!("\"0x{n:x}\""),
        format!("\"\\u00a0{n}\""),
        format!("\"{arabic}\""),
        format!("\"{n}\\n\""),
        format!("{}", n + 1000),
        format!("\"x{n}\""),
        format!("\"{n}_0\""),
        "true".into(),
        "null".into(),
        format!("[{n}]"),
        "NaN".into(),
    ]
}

/// Values of every JSON type (and some that are not JSON) for `method`, `params` and extra
/// members.
const ODD_VALUES: [&str; 11] = [
    "5",
    "[]",
    "null",
    "{}",
    "true",
    r#""tools/call""#,
    r#""notifications/message""#,
    "NaN",
    r#""x""#,
    r#"{"a":NaN}"#,
    "-1.5e3",
];

/// One generated envelope: indices into the tables above, and how its members are laid out.
#[derive(Debug, Clone)]
struct Envelope {
    id: usize,
    /// `None`: no result; `Some(i)`: `BROKEN[i]`, or `VALID` / `TOOL_ERROR` past them.
    result: Option<usize>,
    jsonrpc: usize,
    method: Option<usize>,
    params: Option<usize>,
    error: bool,
    extras: Vec<(usize, usize)>,
    /// A result before the real one, of the other kind.
    decoy_result: bool,
    /// An id before the real one.
    decoy_id: bool,
    /// `result` spelled with an escape.
    escaped_key: bool,
    order: Vec<u8>,
    /// A plain answer to the same call follows (one a client that dropped the first reads).
    second: bool,
}

fn envelopes() -> impl Strategy<Value = Envelope> {
    (
        (
            0..id_spellings(1).len(),
            prop::option::weighted(0.9, 0..BROKEN.len() + 2),
            prop_oneof![8 => Just(0usize), 1 => Just(1), 1 => Just(2)],
            prop::option::weighted(0.5, 0..ODD_VALUES.len()),
            prop::option::weighted(0.4, 0..ODD_VALUES.len()),
            prop::bool::weighted(0.15),
        ),
        (
            prop::collection::vec((0..3usize, 0..ODD_VALUES.len()), 0..3),
            prop::bool::weighted(0.2),
            prop::bool::weighted(0.1),
            prop::bool::weighted(0.2),
            prop::collection::vec(any::<u8>(), 8),
            prop::bool::weighted(0.25),
        ),
    )
        .prop_map(
            |(
                (id, result, jsonrpc, method, params, error),
                (extras, decoy_result, decoy_id, escaped_key, order, second),
            )| Envelope {
                id,
                result,
                jsonrpc,
                method,
                params,
                error,
                extras,
                decoy_result,
                decoy_id,
                escaped_key,
                order,
                second,
            },
        )
}

impl Envelope {
    fn result_text(&self) -> Option<&'static str> {
        self.result.map(|i| match i {
            i if i < BROKEN.len() => BROKEN[i],
            i if i == BROKEN.len() => VALID,
            _ => TOOL_ERROR,
        })
    }

    /// The line, for the request `n`.
    fn spell(&self, n: u64) -> String {
        let mut members: Vec<(String, String)> = Vec::new();
        match self.jsonrpc {
            0 => members.push(("\"jsonrpc\"".into(), "\"2.0\"".into())),
            1 => members.push(("\"jsonrpc\"".into(), "\"1.0\"".into())),
            _ => {}
        }
        members.push(("\"id\"".into(), id_spellings(n)[self.id].clone()));
        if let Some(result) = self.result_text() {
            let key = if self.escaped_key {
                "\"res\\u0075lt\""
            } else {
                "\"result\""
            };
            members.push((key.into(), result.into()));
        }
        if let Some(m) = self.method {
            members.push(("\"method\"".into(), ODD_VALUES[m].into()));
        }
        if let Some(p) = self.params {
            members.push(("\"params\"".into(), ODD_VALUES[p].into()));
        }
        if self.error {
            members.push((
                "\"error\"".into(),
                r#"{"code":-32000,"message":"m"}"#.into(),
            ));
        }
        for (name, value) in &self.extras {
            let name = ["\"extra\"", "\"_meta\"", "\"x\\\"q\""][*name];
            members.push((name.into(), ODD_VALUES[*value].into()));
        }
        // Shuffled by the generated order, then decoys first: a repeated member is its last.
        let mut keyed: Vec<(u8, (String, String))> = members
            .into_iter()
            .enumerate()
            .map(|(i, m)| (self.order[i % self.order.len()].wrapping_add(i as u8), m))
            .collect();
        keyed.sort_by_key(|(k, _)| *k);
        let mut members: Vec<(String, String)> = keyed.into_iter().map(|(_, m)| m).collect();
        if self.decoy_result && self.result.is_some() {
            let decoy = match self.result_text() {
                Some(VALID) => BROKEN[0],
                _ => VALID,
            };
            members.insert(0, ("\"result\"".into(), decoy.into()));
        }
        if self.decoy_id {
            members.insert(0, ("\"id\"".into(), format!("{n}")));
        }
        let body: Vec<String> = members.iter().map(|(k, v)| format!("{k}:{v}")).collect();
        let mut line = format!("{{{}}}", body.join(","));
        if self.second {
            // A text-only answer that breaks the contract, on a line of its own.
            line.push_str(&format!(
                "\n{{\"jsonrpc\":\"2.0\",\"id\":{n},\"result\":{}}}",
                BROKEN[2]
            ));
        }
        line
    }
}

/// The result a client reads in `line` as the answer to its request `n`, if any client (the
/// Python or the TypeScript SDK) would take it for that.
fn client_reads_answer(line: &str, n: u64) -> Option<Value> {
    python_reads_answer(line, n).or_else(|| typescript_reads_answer(line, n))
}

/// pydantic's reading: `NaN` and the infinities are numbers, unknown members are ignored, the
/// id is a strict int or a str, coerced with `int()`. (A message that is also a request by its
/// `method` may be read either way: it counts as an answer here.)
fn python_reads_answer(line: &str, n: u64) -> Option<Value> {
    let message: Value = serde_json::from_str(&lenient(line)).ok()?;
    if message.get("jsonrpc")? != "2.0" {
        return None;
    }
    let id = match message.get("id")? {
        Value::Number(number) if number.is_i64() || number.is_u64() => {
            number.as_i64().map(i128::from)
        }
        Value::String(text) => python_int(text),
        _ => None,
    }?;
    let result = message.get("result")?;
    (id == i128::from(n) && result.is_object()).then(|| result.clone())
}

/// zod's strict reading after `JSON.parse`: exactly `jsonrpc`, `id` (a string or an integer)
/// and `result` (an object), the id looked up through `Number()`.
fn typescript_reads_answer(line: &str, n: u64) -> Option<Value> {
    let message: Value = serde_json::from_str(line).ok()?;
    let object = message.as_object()?;
    if object.len() != 3 || object.get("jsonrpc")? != "2.0" {
        return None;
    }
    let id = match object.get("id")? {
        Value::Number(number) => number.as_f64().filter(|f| f.fract() == 0.0)?,
        Value::String(text) => js_number(text)?,
        _ => return None,
    };
    let result = object.get("result")?;
    (id == n as f64 && result.is_object()).then(|| result.clone())
}

/// `line` with `NaN`, `Infinity` and `-Infinity` outside strings replaced by a string (so that
/// serde_json reads it as pydantic would read the line: a value that is not an integer).
fn lenient(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut in_string = false;
    let mut escaped = false;
    let mut rest = line;
    while let Some(c) = rest.chars().next() {
        if in_string {
            out.push(c);
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_string = false,
                _ => {}
            }
            rest = &rest[c.len_utf8()..];
            continue;
        }
        if let Some(token) = ["-Infinity", "Infinity", "NaN"]
            .into_iter()
            .find(|t| rest.starts_with(t))
        {
            out.push_str("\"not a number\"");
            rest = &rest[token.len()..];
            continue;
        }
        in_string = c == '"';
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    out
}

/// Python's `int(text)`: white space around, a sign, decimal digits of any script (here ASCII
/// and Arabic-Indic) with single underscores between them.
fn python_int(text: &str) -> Option<i128> {
    let text = text.trim_matches(char::is_whitespace);
    let (sign, digits) = match text.strip_prefix('-') {
        Some(rest) => (-1, rest),
        None => (1, text.strip_prefix('+').unwrap_or(text)),
    };
    if digits.starts_with('_') || digits.ends_with('_') || digits.contains("__") {
        return None;
    }
    let mut value: i128 = 0;
    let mut any = false;
    for c in digits.chars().filter(|c| *c != '_') {
        let digit = match c {
            '0'..='9' => c as u32 - '0' as u32,
            '\u{660}'..='\u{669}' => c as u32 - 0x660,
            _ => return None,
        };
        value = value.checked_mul(10)?.checked_add(i128::from(digit))?;
        any = true;
    }
    any.then_some(sign * value)
}

/// JavaScript's `Number(text)`, for decimal and hexadecimal spellings.
fn js_number(text: &str) -> Option<f64> {
    let text = text.trim_matches(|c: char| c.is_whitespace() && c != '\u{85}' || c == '\u{feff}');
    if text.is_empty() {
        return Some(0.0);
    }
    if let Some(hex) = text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        return u64::from_str_radix(hex, 16).ok().map(|v| v as f64);
    }
    let plain = text
        .bytes()
        .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'+' | b'-'));
    plain.then(|| text.parse::<f64>().ok()).flatten()
}

/// Whether an orchestrator would act on `result` as a conforming one though it is not.
fn is_broken(result: &Value) -> bool {
    if result["isError"] == true {
        return false;
    }
    !(result["structuredContent"]["n"].is_i64() || result["structuredContent"]["n"].is_u64())
}

/// `count` envelopes drawn afresh.
fn draw(count: usize) -> Vec<Envelope> {
    let mut runner = TestRunner::default();
    let strategy = envelopes();
    (0..count)
        .map(|_| {
            strategy
                .new_tree(&mut runner)
                .expect("an envelope")
                .current()
        })
        .collect()
}

/// What the clients read in the messages that came back for the call `n` answered with
/// `line`: no broken result taken for the answer, and a plain conforming answer relayed as sent.
fn judge_what_came_back(envelope: &Envelope, line: &str, n: u64, came_back: &[String]) {
    for message in came_back {
        if let Some(result) = client_reads_answer(message, n) {
            assert!(
                !is_broken(&result),
                "a client takes a broken result for the answer to call {n}:\n  the server sent {line}\n  the client got {message}\n  ({envelope:?})"
            );
        }
    }
    let plain = format!(r#"{{"jsonrpc":"2.0","id":{n},"result":{VALID}}}"#);
    if line == plain {
        assert_eq!(came_back, [plain], "a conforming answer passes as sent");
    }
}

fn emit_call(n: u64, line: &str, sse: bool) -> String {
    json!({"jsonrpc": "2.0", "id": n, "method": "tools/call",
           "params": {"name": "emit", "arguments": {"line": line, "sse": sse}}})
    .to_string()
}

#[tokio::test]
async fn no_answer_a_client_would_take_passes_the_proxy_unjudged() {
    let mut raw = Raw::start(&[]);
    raw.send(r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#)
        .await;
    raw.next().await;
    let mut plain = envelopes_with_plain(draw(300));
    for (k, envelope) in plain.drain(..).enumerate() {
        let n = 100 + k as u64;
        let line = envelope.spell(n);
        raw.send(&emit_call(n, &line, false)).await;
        // A request the server answers after the call's answer: what comes back before its
        // answer is all that came back for the call.
        raw.send(&format!(
            r#"{{"jsonrpc":"2.0","id":"sentinel-{k}","method":"ping"}}"#
        ))
        .await;
        let mut came_back = Vec::new();
        loop {
            let message = raw.next().await;
            if message.contains(&format!("\"sentinel-{k}\"")) {
                break;
            }
            came_back.push(message);
        }
        judge_what_came_back(&envelope, &line, n, &came_back);
    }
    drop(raw.stdin);
    let _ = raw.child.wait().await;
}

/// `envelopes` with, every tenth, the plain conforming answer (so that passing unchanged is
/// tested too).
fn envelopes_with_plain(mut envelopes: Vec<Envelope>) -> Vec<Envelope> {
    for envelope in envelopes.iter_mut().step_by(10) {
        *envelope = Envelope {
            id: 0,
            result: Some(BROKEN.len()),
            jsonrpc: 0,
            method: None,
            params: None,
            error: false,
            extras: Vec::new(),
            decoy_result: false,
            decoy_id: false,
            escaped_key: false,
            order: vec![0, 1, 2],
            second: false,
        };
    }
    envelopes
}

/// A hostile Streamable HTTP upstream: `initialize` and `tools/list` answered as a plain server
/// answers them, and each call of `emit` with the line its arguments spell, as the body of a
/// JSON answer or (`sse`) as the one event of a stream. Its URL.
pub(crate) async fn spelling_upstream() -> String {
    use axum::http::header;
    use axum::response::IntoResponse;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}/mcp", listener.local_addr().expect("address"));
    let answer = |body: axum::body::Bytes| async move {
        let Ok(request) = serde_json::from_slice::<Value>(&body) else {
            return axum::http::StatusCode::BAD_REQUEST.into_response();
        };
        let id = request["id"].to_string();
        let json = |text: String| ([(header::CONTENT_TYPE, "application/json")], text);
        match request["method"].as_str() {
            Some("initialize") => json(format!(
                r#"{{"jsonrpc":"2.0","id":{id},"result":{{"protocolVersion":"2025-11-25","capabilities":{{"tools":{{}}}},"serverInfo":{{"name":"spelling","version":"1"}}}}}}"#
            ))
            .into_response(),
            Some("tools/list") => json(format!(
                r#"{{"jsonrpc":"2.0","id":{id},"result":{{"tools":[{{"name":"emit","inputSchema":{{"type":"object"}},"outputSchema":{{"type":"object","properties":{{"n":{{"type":"integer"}}}},"required":["n"]}}}}]}}}}"#
            ))
            .into_response(),
            Some("tools/call") => {
                let arguments = &request["params"]["arguments"];
                let line = arguments["line"].as_str().unwrap_or("");
                if arguments["sse"] == true {
                    // One event per line.
                    let events: String = line
                        .split('\n')
                        .map(|message| format!("event: message\ndata: {message}\n\n"))
                        .collect();
                    ([(header::CONTENT_TYPE, "text/event-stream")], events).into_response()
                } else {
                    json(line.to_owned()).into_response()
                }
            }
            _ => axum::http::StatusCode::ACCEPTED.into_response(),
        }
    };
    let router = axum::Router::new().route("/mcp", axum::routing::post(answer));
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    url
}

/// The messages of an answer: a JSON body is one; an event stream's events' data.
fn messages_of(content_type: &str, body: &str) -> Vec<String> {
    if content_type.starts_with("text/event-stream") {
        crate::helpers::mcp::messages(body)
    } else if body.trim().is_empty() {
        Vec::new()
    } else {
        vec![body.to_owned()]
    }
}

#[tokio::test]
async fn no_answer_a_client_would_take_passes_the_gateway_unjudged() {
    let upstream = spelling_upstream().await;
    let gateway = InProcess::start(&[format!("crm={upstream}")], &[]).await;
    let url = gateway.url("crm");
    let client = crate::http_client::client();
    let plain = envelopes_with_plain(draw(300));
    for (k, envelope) in plain.iter().enumerate() {
        let n = 100 + k as u64;
        let sse = k % 2 == 1;
        // A JSON answer holds one message: a second answer needs a stream.
        let envelope = &Envelope {
            second: envelope.second && sse,
            ..envelope.clone()
        };
        let line = envelope.spell(n);
        let response = client
            .post(&url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(emit_call(n, &line, sse))
            .send()
            .await
            .expect("POST through the gateway");
        let content_type = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned();
        let body = response.text().await.expect("the answer");
        let came_back = messages_of(&content_type, &body);
        judge_what_came_back(envelope, &line, n, &came_back);
    }
}

#[test]
fn the_model_of_the_clients_reads_what_the_sdks_read() {
    // Both SDKs: the plain answer, and a numeric string.
    let plain = format!(r#"{{"jsonrpc":"2.0","id":7,"result":{VALID}}}"#);
    assert!(python_reads_answer(&plain, 7).is_some());
    assert!(typescript_reads_answer(&plain, 7).is_some());
    let string = format!(r#"{{"jsonrpc":"2.0","id":"7","result":{VALID}}}"#);
    assert!(python_reads_answer(&string, 7).is_some());
    assert!(typescript_reads_answer(&string, 7).is_some());
    // An extra member: the Python SDK ignores it, zod's strict object refuses it.
    let extra = format!(r#"{{"jsonrpc":"2.0","id":7,"method":5,"result":{VALID}}}"#);
    assert!(python_reads_answer(&extra, 7).is_some());
    assert!(typescript_reads_answer(&extra, 7).is_none());
    // 7.0: Python's strict int refuses it; JavaScript has no other 7.
    let float = format!(r#"{{"jsonrpc":"2.0","id":7.0,"result":{VALID}}}"#);
    assert!(python_reads_answer(&float, 7).is_none());
    assert!(typescript_reads_answer(&float, 7).is_some());
    // NaN: only Python reads the line.
    let nan = r#"{"jsonrpc":"2.0","id":7,"result":{"structuredContent":{"n":NaN}}}"#;
    assert!(python_reads_answer(nan, 7).is_some_and(|r| is_broken(&r)));
    assert!(typescript_reads_answer(nan, 7).is_none());
    assert_eq!(python_int("\u{667}"), Some(7));
    assert_eq!(python_int("7_0"), Some(70));
    assert_eq!(js_number("0x7"), Some(7.0));
    assert_eq!(js_number(" "), Some(0.0));
    assert!(!is_broken(&serde_json::from_str(VALID).expect("JSON")));
    for broken in BROKEN {
        assert!(is_broken(
            &serde_json::from_str(&lenient(broken)).expect("JSON")
        ));
    }
}

#[tokio::test]
async fn a_stdio_route_takes_an_answer_for_the_request_a_client_would() {
    let route = crate::helpers::mcp::stdio_route("raw", " --raw");
    let gateway = Gateway::start(&[route], &[]).await;
    let url = gateway.url("raw");
    let session = crate::helpers::mcp::initialize(&url).await;
    // Request 7 answered as "7": both SDKs take it for request 7's answer.
    let line =
        r#"{"jsonrpc":"2.0","id":"7","result":{"content":[],"structuredContent":{"n":"x"}}}"#;
    let answer = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        crate::helpers::mcp::post_in(&url, Some(&session), &emit_call(7, line, false)),
    )
    .await
    .expect("the stream ends with the answer to the call");
    let (status, _, body) = answer;
    assert_eq!(status, 200);
    let messages = crate::helpers::mcp::messages(&body);
    assert_eq!(messages.len(), 1, "{body}");
    let message: Value = serde_json::from_str(&messages[0]).expect("JSON");
    assert_eq!(message["id"], "7", "the answer keeps the server's spelling");
    assert_eq!(
        message["result"]["isError"], true,
        "judged and replaced: {body}"
    );
}
