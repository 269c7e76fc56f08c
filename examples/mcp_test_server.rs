//! An MCP server (stdio) to put behind `schemagate proxy`, used by the proxy's tests and its
//! benchmark, and a way to try the proxy by hand:
//!
//! ```text
//! cargo build --example mcp_test_server
//! schemagate proxy --server-name crm -- target/debug/examples/mcp_test_server
//! ```
//!
//! By default it is an `rmcp` server (the official Rust SDK) with tools whose results conform
//! or not as their `variant` argument asks, a tool without an outputSchema, a tool whose
//! outputSchema schemagate refuses, one that asks the client's model for a summary (sampling,
//! listed only to clients that declare sampling), one
//! that sends progress notifications before its result, and one that changes the tool list;
//! `tools/list` answers in pages of two.
//!
//! `--http ADDR` serves it on MCP's Streamable HTTP transport instead (rmcp's server, at
//! `http://ADDR/mcp`; ADDR may have port 0: the address bound is the first line written to
//! stdout), for `schemagate gateway`; with `--json`, answers that need no stream come as
//! `application/json` rather than as server-sent events.
//!
//! `--raw --http ADDR [--sse] [--result-bytes N] [--list-once] [--require-auth]` is the gateway
//! benchmark's upstream: every `tools/call` answered with the same pre-built result, as JSON or
//! as one server-sent event (with `--list-once`, only the first `tools/list` is answered; with
//! `--require-auth`, a POST without `Authorization` gets an OAuth challenge, and the
//! protected-resource metadata is served; with `--tools-sequence FILE`, `tools/list` answers the
//! file's tools/list results in turn, the last again and again). Some tools answer otherwise, for the gateway's tests:
//! `asks` (2026-07-28's `input_required`, then a final result on the retry), `shifty` (whose
//! contract changes once a client sends `subscriptions/listen`), `resumable`, `bom` and hostile
//! answers.
//!
//! `--raw` makes it a plain JSON-RPC server that writes exact bytes, for what an SDK server would
//! not send: integers past 2^53, a result that breaks its schema in ways the SDK would refuse to
//! serialise, a line that is not JSON, `resultType: input_required`, an answer sent after the
//! client cancelled its call, tasks in both revisions' shapes (`deferred`: 2025-11-25's
//! `tasks/result`; `deferred26`: a completed `tasks/get`; `announced`: `notifications/tasks`), an
//! answer inside a JSON-RPC batch (`batched`), a `roots/list` asked for as soon as the client is
//! initialized (`--asks-roots`), any line the client spells (`emit`, whose
//! `line` argument is written as the answer), and results of a given size
//! (`--result-bytes N`, the benchmark's); `--tools-sequence FILE` as for `--raw --http`.

// Sampling is deprecated by SEP-2577 (2026-07-28 has no server-to-client requests), yet it is how
// a 2025-06-18 or 2025-11-25 server asks its client for something: what the proxy must relay.
#![allow(deprecated)]

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock as Content,
    CreateMessageRequestParams, CreateTaskResult, DetailedTask, GetTaskParams, GetTaskResult,
    ListToolsResult, PaginatedRequestParams, ProtocolVersion, SamplingMessage, ServerCapabilities,
    ServerConfig, Task, TaskPayload, TaskStatus, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use schemagate_testkit::mcp_test_server::sized_result;
use serde_json::{json, Map, Value};
use std::borrow::Cow;
use std::io::{BufRead, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

fn object(value: Value) -> Arc<Map<String, Value>> {
    match value {
        Value::Object(map) => Arc::new(map),
        _ => Arc::new(Map::new()),
    }
}

#[derive(Clone, Default)]
struct TestServer {
    /// `change_tools` was called: `get_customer` now also requires `name`.
    changed: Arc<AtomicBool>,
}

impl TestServer {
    fn tools(&self) -> Vec<Tool> {
        let mut customer = json!({
            "type": "object",
            "properties": {
                "id": {"type": "integer"},
                "email": {"type": "string", "format": "email"},
                "name": {"type": "string"}
            },
            "required": ["id", "email"]
        });
        if self.changed.load(Ordering::Relaxed) {
            customer["required"] = json!(["id", "email", "name"]);
        }
        let variant_input = json!({
            "type": "object",
            "properties": {
                "id": {"type": "integer"},
                "variant": {"enum": ["valid", "invalid", "is_error", "no_structured", "no_name"]}
            },
            "required": ["id"],
            "additionalProperties": false
        });
        vec![
            Tool::new_with_raw(
                "get_customer",
                Some(Cow::Borrowed("A customer by id; `variant` picks how the result turns out.")),
                object(variant_input),
            )
            .with_raw_output_schema(object(customer)),
            Tool::new_with_raw(
                "echo",
                Some(Cow::Borrowed("Echoes its text; declares no outputSchema.")),
                object(json!({"type": "object", "properties": {"text": {"type": "string"}}})),
            ),
            Tool::new_with_raw(
                "fetch_remote",
                Some(Cow::Borrowed("Declares an outputSchema with a remote $ref, which schemagate refuses.")),
                object(json!({"type": "object"})),
            )
            .with_raw_output_schema(object(json!({
                "type": "object",
                "properties": {"doc": {"$ref": "https://schemas.example/doc.json"}}
            }))),
            Tool::new_with_raw(
                "summarize",
                Some(Cow::Borrowed("Asks the client's model for a summary (sampling: a server-initiated request).")),
                object(json!({
                    "type": "object",
                    "properties": {"words": {"type": "integer", "minimum": 1}}
                })),
            )
            .with_raw_output_schema(object(json!({
                "type": "object",
                "properties": {"summary": {"type": "string", "minLength": 1}, "model": {"type": "string"}},
                "required": ["summary", "model"]
            }))),
            Tool::new_with_raw(
                "report",
                Some(Cow::Borrowed("Builds a report as a task (the tasks extension) when the client supports tasks; `variant` picks whether its result conforms.")),
                object(json!({"type": "object", "properties": {"variant": {"enum": ["valid", "invalid"]}}})),
            )
            .with_raw_output_schema(object(json!({
                "type": "object",
                "properties": {"rows": {"type": "integer"}},
                "required": ["rows"]
            }))),
            Tool::new_with_raw(
                "count",
                Some(Cow::Borrowed("Counts to three, with a progress notification at each step, before its result.")),
                object(json!({"type": "object"})),
            )
            .with_raw_output_schema(object(json!({
                "type": "object",
                "properties": {"counted": {"const": 3}},
                "required": ["counted"]
            }))),
            Tool::new_with_raw(
                "change_tools",
                Some(Cow::Borrowed("Changes get_customer's outputSchema and says so with notifications/tools/list_changed.")),
                object(json!({"type": "object"})),
            ),
        ]
    }
}

impl ServerHandler for TestServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .enable_tasks()
                .build(),
        )
        .with_protocol_version(ProtocolVersion::LATEST)
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        const PAGE: usize = 2;
        let start: usize = request
            .and_then(|r| r.cursor)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        // As servers that list by the client's capabilities do: a tool that needs sampling is
        // offered only to clients that declare it.
        let sampling = context
            .client_capabilities()
            .is_some_and(|c| c.sampling.is_some());
        let mut tools = self.tools();
        tools.retain(|tool| sampling || tool.name != "summarize");
        let end = (start + PAGE).min(tools.len());
        let mut page = ListToolsResult::with_all_items(tools[start.min(end)..end].to_vec());
        page.next_cursor = (end < tools.len()).then(|| end.to_string());
        Ok(page)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = request.arguments.unwrap_or_default();
        let result = match request.name.as_ref() {
            "get_customer" => {
                let id = args.get("id").cloned().unwrap_or(json!(0));
                match args
                    .get("variant")
                    .and_then(Value::as_str)
                    .unwrap_or("valid")
                {
                    "invalid" => {
                        CallToolResult::structured(json!({"id": "seven", "email": "yesterday"}))
                    }
                    "no_name" => {
                        CallToolResult::structured(json!({"id": id, "email": "ada@example.com"}))
                    }
                    "is_error" => CallToolResult::error(vec![Content::text("no such customer")]),
                    "no_structured" => CallToolResult::success(vec![Content::text(
                        json!({"id": id, "email": "ada@example.com"}).to_string(),
                    )]),
                    _ => CallToolResult::structured(
                        json!({"id": id, "email": "ada@example.com", "name": "Ada"}),
                    ),
                }
            }
            "echo" => CallToolResult::success(vec![Content::text(
                args.get("text")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned(),
            )]),
            "fetch_remote" => CallToolResult::structured(json!({"doc": {"anything": true}})),
            "summarize" => {
                let sampled = context
                    .peer
                    .create_message(CreateMessageRequestParams::new(
                        vec![SamplingMessage::user_text(
                            "Summarize: the proxy relays this.",
                        )],
                        50,
                    ))
                    .await
                    .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
                let summary = sampled
                    .message
                    .content
                    .first()
                    .and_then(|c| c.as_text())
                    .map(|t| t.text.clone())
                    .unwrap_or_default();
                CallToolResult::structured(json!({"summary": summary, "model": sampled.model}))
            }
            "report" => {
                let variant = args
                    .get("variant")
                    .and_then(Value::as_str)
                    .unwrap_or("valid");
                let tasks = context
                    .client_capabilities()
                    .is_some_and(|c| c.supports_tasks());
                if tasks {
                    let task =
                        Task::new(format!("report-{variant}"), TaskStatus::Working, NOW, NOW)
                            .with_ttl_ms(60_000);
                    return Ok(CreateTaskResult::new(task).into());
                }
                report(variant)
            }
            "count" => {
                // Three progress notifications (when the call asked for them), then the result.
                if let Some(token) = context.meta.get_progress_token() {
                    for step in 1..=3 {
                        let progress = rmcp::model::ProgressNotificationParam::new(
                            token.clone(),
                            f64::from(step),
                        )
                        .with_total(3.0);
                        let _ = context.peer.notify_progress(progress).await;
                    }
                }
                CallToolResult::structured(json!({"counted": 3}))
            }
            "change_tools" => {
                self.changed.store(true, Ordering::Relaxed);
                let _ = context.peer.notify_tool_list_changed().await;
                CallToolResult::success(vec![Content::text("get_customer now returns a name")])
            }
            other => {
                return Err(ErrorData::invalid_params(
                    format!("unknown tool {other:?}"),
                    None,
                ))
            }
        };
        Ok(result.into())
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        let Some(variant) = request.task_id.strip_prefix("report-") else {
            return Err(ErrorData::invalid_params("no such task", None));
        };
        let result = serde_json::to_value(report(variant))
            .ok()
            .and_then(|v| v.as_object().cloned())
            .unwrap_or_default();
        let task =
            Task::new(request.task_id.clone(), TaskStatus::Completed, NOW, NOW).with_ttl_ms(60_000);
        Ok(GetTaskResult::new(DetailedTask::new(
            task,
            TaskPayload::Completed { result },
        )))
    }
}

/// A fixed time for the tasks' timestamps.
const NOW: &str = "2026-07-28T00:00:00Z";

/// The `report` tool's result: conforming, or (`invalid`) with `rows` of the wrong type.
fn report(variant: &str) -> CallToolResult {
    match variant {
        "invalid" => CallToolResult::structured(json!({"rows": "three"})),
        _ => CallToolResult::structured(json!({"rows": 3})),
    }
}

/// The raw server: one canned answer per request, written as exact bytes.
fn serve_raw(result_bytes: usize, asks_roots: bool, sequence: Vec<String>) -> std::io::Result<()> {
    let mut turn = 0;
    let sized = sized_result(result_bytes);
    let tools = r#"{"tools":[
        {"name":"big","inputSchema":{"type":"object"},"outputSchema":{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}},
        {"name":"wrong","inputSchema":{"type":"object"},"outputSchema":{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}},
        {"name":"sized","inputSchema":{"type":"object","properties":{"id":{"type":"integer"}}},"outputSchema":{"type":"object","properties":{"id":{"type":"integer"},"email":{"type":"string","format":"email"},"note":{"type":"string"}},"required":["id","email"]}},
        {"name":"listing","inputSchema":{"type":"object"},"outputSchema":{"type":"array","items":{"type":"string"}}},
        {"name":"asks","inputSchema":{"type":"object"},"outputSchema":{"type":"object","required":["done"]}},
        {"name":"noisy","inputSchema":{"type":"object"}},
        {"name":"late","inputSchema":{"type":"object"},"outputSchema":{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}},
        {"name":"deferred","inputSchema":{"type":"object"},"execution":{"taskSupport":"optional"},"outputSchema":{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}},
        {"name":"deferred26","inputSchema":{"type":"object"},"outputSchema":{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}},
        {"name":"announced","inputSchema":{"type":"object"},"outputSchema":{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}},
        {"name":"doubled","inputSchema":{"type":"object"},"outputSchema":{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}},
        {"name":"twice","inputSchema":{"type":"object"},"outputSchema":{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}},
        {"name":"sneaky","inputSchema":{"type":"object"},"outputSchema":{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}},
        {"name":"batched","inputSchema":{"type":"object"},"outputSchema":{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}},
        {"name":"lenient","inputSchema":{"type":"object"},"outputSchema":{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}},
        {"name":"emit","inputSchema":{"type":"object","properties":{"line":{"type":"string"}},"required":["line"]},"outputSchema":{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}}
    ]}"#
    .replace(['\n', ' '], "");
    let stdin = std::io::stdin();
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    // A `late` call is answered only once the client cancels it, and then with a result that
    // breaks its schema: a server that ignores cancellation.
    let mut late: Option<String> = None;
    for line in stdin.lock().lines() {
        let line = line?;
        let Ok(request) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        // With --asks-roots: the client's roots asked for as soon as it is initialized (as
        // server-filesystem does), and what the answer was said in a notification.
        if asks_roots && request["method"] == "notifications/initialized" {
            writeln!(
                out,
                r#"{{"jsonrpc":"2.0","id":"roots-1","method":"roots/list"}}"#
            )?;
            out.flush()?;
            continue;
        }
        if asks_roots && request["id"] == "roots-1" && request.get("method").is_none() {
            let answered = if request.get("error").is_some() {
                "error"
            } else {
                "result"
            };
            writeln!(
                out,
                r#"{{"jsonrpc":"2.0","method":"notifications/message","params":{{"level":"info","data":"roots answered: {answered}"}}}}"#
            )?;
            out.flush()?;
            continue;
        }
        if request["method"] == "notifications/cancelled" {
            let cancelled = request["params"]["requestId"].to_string();
            if late.as_deref() == Some(cancelled.as_str()) {
                late = None;
                writeln!(
                    out,
                    r#"{{"jsonrpc":"2.0","id":{cancelled},"result":{{"content":[],"structuredContent":{{"n":"not a number"}}}}}}"#
                )?;
                out.flush()?;
            }
            continue;
        }
        let (Some(id), Some(method)) = (request.get("id"), request["method"].as_str()) else {
            continue;
        };
        let id = id.to_string();
        let variant = request["params"]["arguments"]["variant"]
            .as_str()
            .unwrap_or("bad");
        let task_id = request["params"]["taskId"].as_str().unwrap_or("");
        // A task's result: `{"n":1}` for a task made with variant "good", else one that breaks
        // the schema.
        let task_result = |task_id: &str| {
            let n = if task_id.ends_with("-good") {
                "1"
            } else {
                r#""not a number""#
            };
            format!(
                r#"{{"content":[{{"type":"text","text":"n"}}],"structuredContent":{{"n":{n}}},"_meta":{{"io.modelcontextprotocol/related-task":{{"taskId":"{task_id}"}}}}}}"#
            )
        };
        let result = match method {
            "initialize" => {
                let version = request["params"]["protocolVersion"].as_str().unwrap_or("2025-11-25");
                format!(
                    r#"{{"protocolVersion":"{version}","capabilities":{{"tools":{{}}}},"serverInfo":{{"name":"raw","version":"1"}}}}"#
                )
            }
            "tools/list" if !sequence.is_empty() => {
                turn += 1;
                sequence[(turn - 1).min(sequence.len() - 1)].clone()
            }
            "tools/list" => tools.clone(),
            "tools/call" => match request["params"]["name"].as_str().unwrap_or("") {
                "big" => r#"{"content":[{"type":"text","text":"{\"n\": 9007199254740993}"}],"structuredContent":{"n":9007199254740993}}"#.to_owned(),
                "wrong" => r#"{"content":[],"structuredContent":{"n":1.5}}"#.to_owned(),
                "sized" => sized.clone(),
                "listing" => r#"{"content":[{"type":"text","text":"[\"a\",\"b\"]"}],"structuredContent":["a","b"]}"#.to_owned(),
                "asks" => r#"{"resultType":"input_required","inputRequests":{"r1":{"method":"roots/list"}},"requestState":"s1"}"#.to_owned(),
                "late" => {
                    late = Some(id);
                    continue;
                }
                "noisy" => {
                    writeln!(out, "this line is not JSON")?;
                    r#"{"content":[{"type":"text","text":"after the noise"}]}"#.to_owned()
                }
                // Not final by its resultType, yet carrying a (broken) result an older client reads.
                "sneaky" => r#"{"resultType":"input_required","inputRequests":{},"content":[],"structuredContent":{"n":"not a number"}}"#.to_owned(),
                // 2025-11-25 tasks: the result comes as the answer to tasks/result.
                "deferred" => format!(
                    r#"{{"task":{{"taskId":"t-{variant}","status":"working","createdAt":"{NOW}","lastUpdatedAt":"{NOW}","ttl":60000,"pollInterval":100}}}}"#
                ),
                // The 2026-07-28 tasks extension: the result comes inside a completed tasks/get.
                "deferred26" => format!(
                    r#"{{"resultType":"task","taskId":"t26-{variant}","status":"working","createdAt":"{NOW}","lastUpdatedAt":"{NOW}","ttlMs":60000}}"#
                ),
                // A task created, then at once announced completed, its result in the notification.
                "announced" => {
                    writeln!(
                        out,
                        r#"{{"jsonrpc":"2.0","id":{id},"result":{{"resultType":"task","taskId":"t26-announced","status":"working","createdAt":"{NOW}","lastUpdatedAt":"{NOW}","ttlMs":60000}}}}"#
                    )?;
                    writeln!(
                        out,
                        r#"{{"jsonrpc":"2.0","method":"notifications/tasks","params":{{"taskId":"t26-announced","status":"completed","createdAt":"{NOW}","lastUpdatedAt":"{NOW}","ttlMs":60000,"result":{}}}}}"#,
                        task_result("t26-announced")
                    )?;
                    out.flush()?;
                    continue;
                }
                // The same (broken) answer sent twice.
                "doubled" => {
                    for _ in 0..2 {
                        writeln!(
                            out,
                            r#"{{"jsonrpc":"2.0","id":{id},"result":{}}}"#,
                            task_result("doubled")
                        )?;
                    }
                    out.flush()?;
                    continue;
                }
                // `result` twice: a conforming one first, then the one JSON.parse keeps.
                "twice" => {
                    writeln!(
                        out,
                        r#"{{"jsonrpc":"2.0","id":{id},"result":{},"result":{}}}"#,
                        task_result("twice-good"),
                        task_result("twice")
                    )?;
                    out.flush()?;
                    continue;
                }
                // `NaN`, which is not JSON, yet Python's `json` reads it (as a float, which
                // breaks the schema).
                "lenient" => {
                    writeln!(
                        out,
                        r#"{{"jsonrpc":"2.0","id":{id},"result":{{"content":[{{"type":"text","text":"{{\"n\": NaN}}"}}],"structuredContent":{{"n":NaN}}}}}}"#
                    )?;
                    out.flush()?;
                    continue;
                }
                // Whatever line the client asks for, as its answer: the envelope tests' hostile
                // answers, spelled by the test.
                "emit" => {
                    let line = request["params"]["arguments"]["line"].as_str().unwrap_or("");
                    writeln!(out, "{line}")?;
                    out.flush()?;
                    continue;
                }
                // The answer inside a JSON-RPC batch.
                "batched" => {
                    writeln!(
                        out,
                        r#"[{{"jsonrpc":"2.0","id":{id},"result":{}}}]"#,
                        task_result("batched")
                    )?;
                    out.flush()?;
                    continue;
                }
                _ => r#"{"content":[{"type":"text","text":"unknown tool"}],"isError":true}"#.to_owned(),
            },
            "tasks/result" => task_result(task_id),
            "tasks/get" if task_id.starts_with("t26-") => format!(
                r#"{{"resultType":"complete","taskId":"{task_id}","status":"completed","createdAt":"{NOW}","lastUpdatedAt":"{NOW}","ttlMs":60000,"result":{}}}"#,
                task_result(task_id)
            ),
            "tasks/get" => format!(
                r#"{{"taskId":"{task_id}","status":"completed","createdAt":"{NOW}","lastUpdatedAt":"{NOW}","ttl":60000}}"#
            ),
            _ => {
                writeln!(
                    out,
                    r#"{{"jsonrpc":"2.0","id":{id},"error":{{"code":-32601,"message":"method not found"}}}}"#
                )?;
                out.flush()?;
                continue;
            }
        };
        writeln!(out, r#"{{"jsonrpc":"2.0","id":{id},"result":{result}}}"#)?;
        out.flush()?;
    }
    Ok(())
}

/// The raw server on Streamable HTTP at `http://ADDR/mcp` (the gateway's benchmark): no sessions;
/// `initialize` and `tools/list` (the `sized` and `headers` tools) answered, each call of `sized`
/// with the same pre-built result of about `result_bytes`, as JSON or (`sse`) as one
/// server-sent event; `headers` answers with the credentials headers it got; `plain`, `compressed`,
/// `garbage` and `bom` answer as a broken or hostile server might (text/plain, a
/// Content-Encoding, a cut-off body, a byte order mark before a result that breaks its schema);
/// `resumable` answers with a priming event only, and its answer (which breaks its schema) comes
/// on a GET with `Last-Event-ID: r1`; `initialize` issues session `raw-session`;
/// notifications and answers get 202.
/// How the raw server on Streamable HTTP answers.
#[derive(Clone)]
struct RawHttp {
    result_bytes: usize,
    sse: bool,
    /// Only the first `tools/list` is answered.
    list_once: bool,
    /// A POST without `Authorization` gets 401 with a `resource_metadata` challenge, and the
    /// protected-resource metadata is served at its well-known place.
    require_auth: bool,
    /// `tools/list` results (a JSON array of them) answered in turn, the last again and again,
    /// in place of the tools above.
    tools_sequence: Option<Vec<String>>,
}

async fn serve_raw_http(addr: &str, options: RawHttp) -> anyhow::Result<()> {
    use axum::http::{header, StatusCode};
    use axum::response::IntoResponse;
    let RawHttp {
        result_bytes,
        sse,
        list_once,
        require_auth,
        tools_sequence,
    } = options;
    let sequence: Arc<(Vec<String>, std::sync::atomic::AtomicUsize)> =
        Arc::new((tools_sequence.unwrap_or_default(), Default::default()));
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let origin = format!("http://{}", listener.local_addr()?);
    let challenge = format!(
        r#"Bearer realm="raw", resource_metadata="{origin}/.well-known/oauth-protected-resource/mcp""#
    );
    let sized: Arc<str> = sized_result(result_bytes).into();
    let tools: Arc<str> = format!(r#"{{"tools":[{{"name":"sized","inputSchema":{{"type":"object","properties":{{"id":{{"type":"integer"}}}}}},"outputSchema":{{"type":"object","properties":{{"id":{{"type":"integer"}},"email":{{"type":"string","format":"email"}},"note":{{"type":"string"}}}},"required":["id","email"]}}}},{{"name":"headers","inputSchema":{{"type":"object"}},"outputSchema":{{"type":"object"}}}},{{"name":"plain","inputSchema":{{"type":"object"}},"outputSchema":{{"type":"object","required":["n"]}}}},{{"name":"compressed","inputSchema":{{"type":"object"}},"outputSchema":{{"type":"object","required":["n"]}}}},{{"name":"garbage","inputSchema":{{"type":"object"}},"outputSchema":{{"type":"object","required":["n"]}}}},{{"name":"bom","inputSchema":{{"type":"object"}},"outputSchema":{{"type":"object","required":["n"]}}}},{{"name":"resumable","inputSchema":{{"type":"object"}},"outputSchema":{{"type":"object","required":["n"]}}}},{{"name":"asks","inputSchema":{{"type":"object"}},"outputSchema":{{"type":"object","required":["n"]}}}},{SHIFTY}]}}"#).into();
    let listed = Arc::new(AtomicBool::new(false));
    // Once a client has listened (subscriptions/listen), `shifty`'s contract changes: its
    // outputSchema requires `n`, which its result lacks, where it required `m` before.
    let changed = Arc::new(AtomicBool::new(false));
    // The id of the last `resumable` call: its answer comes only on a stream resumed after it.
    let resumable: Arc<std::sync::Mutex<Option<String>>> = Arc::default();
    let awaiting = Arc::clone(&resumable);
    let answer = move |headers: axum::http::HeaderMap, body: axum::body::Bytes| {
        let (sized, tools, listed) = (Arc::clone(&sized), Arc::clone(&tools), Arc::clone(&listed));
        let changed = Arc::clone(&changed);
        let sequence = Arc::clone(&sequence);
        let resumable = Arc::clone(&resumable);
        let challenge = challenge.clone();
        async move {
            if require_auth && !headers.contains_key(header::AUTHORIZATION) {
                return (
                    StatusCode::UNAUTHORIZED,
                    [(header::WWW_AUTHENTICATE, challenge)],
                )
                    .into_response();
            }
            let Ok(request) = serde_json::from_slice::<Value>(&body) else {
                return StatusCode::BAD_REQUEST.into_response();
            };
            let id = request["id"].to_string();
            if request.get("id").is_none() || request.get("method").is_none() {
                return StatusCode::ACCEPTED.into_response();
            }
            let result = match request["method"].as_str().unwrap_or("") {
                "initialize" => {
                    let message = format!(
                        r#"{{"jsonrpc":"2.0","id":{id},"result":{{"protocolVersion":"2025-11-25","capabilities":{{"tools":{{}}}},"serverInfo":{{"name":"raw","version":"1"}}}}}}"#
                    );
                    return (
                        [
                            (header::CONTENT_TYPE, "application/json"),
                            (
                                header::HeaderName::from_static("mcp-session-id"),
                                "raw-session",
                            ),
                        ],
                        message,
                    )
                        .into_response();
                }
                // A priming event, then nothing: the answer comes on a stream resumed after it.
                "tools/call" if request["params"]["name"] == "resumable" => {
                    use futures_util::StreamExt as _;
                    *resumable.lock().unwrap_or_else(|e| e.into_inner()) = Some(id);
                    let events = futures_util::stream::once(async {
                        Ok::<_, std::convert::Infallible>("id: r1\ndata: \n\n")
                    })
                    .chain(futures_util::stream::pending());
                    return (
                        [(header::CONTENT_TYPE, "text/event-stream")],
                        axum::body::Body::from_stream(events),
                    )
                        .into_response();
                }
                "tools/list" if list_once && listed.swap(true, Ordering::SeqCst) => {
                    let refusal = format!(
                        r#"{{"jsonrpc":"2.0","id":{id},"error":{{"code":-32603,"message":"listed once already"}}}}"#
                    );
                    return ([(header::CONTENT_TYPE, "application/json")], refusal).into_response();
                }
                "tools/list" if !sequence.0.is_empty() => {
                    let turn = sequence.1.fetch_add(1, Ordering::SeqCst);
                    sequence.0[turn.min(sequence.0.len() - 1)].clone()
                }
                "tools/list" if changed.load(Ordering::SeqCst) => {
                    tools.replace(SHIFTY, &SHIFTY.replace(r#"["m"]"#, r#"["n"]"#))
                }
                "tools/list" => tools.to_string(),
                // 2026-07-28: the server's notifications come on the stream answering the
                // client's subscriptions/listen; this one says the tools changed, then ends.
                "subscriptions/listen" => {
                    changed.store(true, Ordering::SeqCst);
                    return (
                        [(header::CONTENT_TYPE, "text/event-stream")],
                        "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}\n\n",
                    )
                        .into_response();
                }
                "tools/call" if request["params"]["name"] == "shifty" => {
                    r#"{"content":[],"structuredContent":{"m":1}}"#.to_owned()
                }
                // 2026-07-28's multi-round-trip: the first call asks for input; its retry, with
                // the request state, is final (and lacks `n`).
                "tools/call" if request["params"]["name"] == "asks" => {
                    if request["params"]["requestState"] == "s1" {
                        r#"{"content":[],"structuredContent":{"m":1}}"#.to_owned()
                    } else {
                        r#"{"resultType":"input_required","inputRequests":{"r1":{"method":"roots/list"}},"requestState":"s1"}"#.to_owned()
                    }
                }
                "tools/call" if request["params"]["name"] == "headers" => {
                    let seen = |name: &str| {
                        headers
                            .get(name)
                            .and_then(|v| v.to_str().ok())
                            .map_or(Value::Null, |v| json!(v))
                    };
                    let seen = json!({
                        "authorization": seen("authorization"),
                        "proxy_authorization": seen("proxy-authorization"),
                        "mcp_name": seen("mcp-name"),
                        "host": seen("host"),
                    });
                    json!({"content": [{"type": "text", "text": seen.to_string()}], "structuredContent": seen}).to_string()
                }
                // What a hostile or broken server might answer a call with.
                "tools/call" if request["params"]["name"] == "plain" => {
                    return ([(header::CONTENT_TYPE, "text/plain")], "done").into_response();
                }
                "tools/call" if request["params"]["name"] == "compressed" => {
                    let message = format!(
                        r#"{{"jsonrpc":"2.0","id":{id},"result":{{"content":[],"structuredContent":{{"m":1}}}}}}"#
                    );
                    return (
                        [
                            (header::CONTENT_TYPE, "application/json"),
                            (header::CONTENT_ENCODING, "br"),
                        ],
                        message,
                    )
                        .into_response();
                }
                "tools/call" if request["params"]["name"] == "garbage" => {
                    return (
                        [(header::CONTENT_TYPE, "application/json")],
                        "{\"jsonrpc\":",
                    )
                        .into_response();
                }
                "tools/call" if request["params"]["name"] == "bom" => {
                    let message = format!("\u{feff}{{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{{\"content\":[],\"structuredContent\":{{\"m\":1}}}}}}");
                    return ([(header::CONTENT_TYPE, "application/json")], message).into_response();
                }
                "tools/call" => sized.to_string(),
                _ => return StatusCode::NOT_FOUND.into_response(),
            };
            let message = format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{result}}}"#);
            if sse {
                (
                    [(header::CONTENT_TYPE, "text/event-stream")],
                    format!("event: message\ndata: {message}\n\n"),
                )
                    .into_response()
            } else {
                ([(header::CONTENT_TYPE, "application/json")], message).into_response()
            }
        }
    };
    let metadata = json!({
        "resource": format!("{origin}/mcp"),
        "authorization_servers": ["https://auth.example"],
        "scopes_supported": ["crm.read"],
    })
    .to_string();
    let mut out = std::io::stdout();
    writeln!(out, "{origin}/mcp")?;
    out.flush()?;
    // GET with Last-Event-ID r1 resumes the `resumable` call's stream: its answer, whose
    // structuredContent breaks the tool's outputSchema.
    let resume = move |headers: axum::http::HeaderMap| {
        let awaiting = Arc::clone(&awaiting);
        async move {
            let after = headers.get("last-event-id").and_then(|v| v.to_str().ok());
            let id = awaiting.lock().unwrap_or_else(|e| e.into_inner()).take();
            match (after, id) {
                (Some("r1"), Some(id)) => (
                    [(header::CONTENT_TYPE, "text/event-stream")],
                    format!("id: r2\ndata: {{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{{\"content\":[],\"structuredContent\":{{\"m\":1}}}}}}\n\n"),
                )
                    .into_response(),
                _ => StatusCode::METHOD_NOT_ALLOWED.into_response(),
            }
        }
    };
    let router = axum::Router::new()
        .route("/mcp", axum::routing::post(answer).get(resume))
        .route(
            "/.well-known/oauth-protected-resource/mcp",
            axum::routing::get(move || {
                let metadata = metadata.clone();
                async move { ([(header::CONTENT_TYPE, "application/json")], metadata) }
            }),
        );
    axum::serve(listener, router).await?;
    Ok(())
}

/// The raw HTTP server's tool whose contract changes (see `subscriptions/listen` there).
const SHIFTY: &str = r#"{"name":"shifty","inputSchema":{"type":"object"},"outputSchema":{"type":"object","required":["m"]}}"#;

/// The rmcp server on Streamable HTTP at `http://ADDR/mcp`, until killed.
async fn serve_http(addr: &str, json: bool) -> anyhow::Result<()> {
    use rmcp::transport::streamable_http_server::{
        session::local::LocalSessionManager, StreamableHttpServerConfig, StreamableHttpService,
    };
    let mut config = StreamableHttpServerConfig::default();
    config.json_response = json;
    let server = TestServer::default();
    let service: StreamableHttpService<TestServer, LocalSessionManager> =
        StreamableHttpService::new(move || Ok(server.clone()), Default::default(), config);
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let mut out = std::io::stdout();
    writeln!(out, "http://{}/mcp", listener.local_addr()?)?;
    out.flush()?;
    let router = axum::Router::new().nest_service("/mcp", service);
    axum::serve(listener, router).await?;
    Ok(())
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let (true, Some(addr)) = (
        args.iter().any(|a| a == "--raw"),
        args.iter()
            .position(|a| a == "--http")
            .and_then(|i| args.get(i + 1)),
    ) {
        let result_bytes = args
            .iter()
            .position(|a| a == "--result-bytes")
            .and_then(|i| args.get(i + 1))
            .and_then(|n| n.parse().ok())
            .unwrap_or(1024);
        let flag = |name: &str| args.iter().any(|a| a == name);
        let options = RawHttp {
            result_bytes,
            sse: flag("--sse"),
            list_once: flag("--list-once"),
            require_auth: flag("--require-auth"),
            tools_sequence: tools_sequence(&args)?,
        };
        return serve_raw_http(addr, options).await;
    }
    if args.iter().any(|a| a == "--raw") {
        let result_bytes = args
            .iter()
            .position(|a| a == "--result-bytes")
            .and_then(|i| args.get(i + 1))
            .and_then(|n| n.parse().ok())
            .unwrap_or(1024);
        let sequence = tools_sequence(&args)?.unwrap_or_default();
        return match serve_raw(
            result_bytes,
            args.iter().any(|a| a == "--asks-roots"),
            sequence,
        ) {
            // The client went away mid-answer: the session is over.
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
            other => Ok(other?),
        };
    }
    if let Some(addr) = args
        .iter()
        .position(|a| a == "--http")
        .and_then(|i| args.get(i + 1))
    {
        return serve_http(addr, args.iter().any(|a| a == "--json")).await;
    }
    let service = TestServer::default()
        .serve(rmcp::transport::stdio())
        .await?;
    service.waiting().await?;
    Ok(())
}

/// `--tools-sequence FILE`: the file's tools/list results, each as one JSON text, in turn.
fn tools_sequence(args: &[String]) -> anyhow::Result<Option<Vec<String>>> {
    args.iter()
        .position(|a| a == "--tools-sequence")
        .and_then(|i| args.get(i + 1))
        .map(|path| -> anyhow::Result<Vec<String>> {
            let lists: Vec<Value> = serde_json::from_slice(&std::fs::read(path)?)?;
            Ok(lists.iter().map(Value::to_string).collect())
        })
        .transpose()
}
