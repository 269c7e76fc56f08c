//! The benchmark corpus: MCP tool definitions and tool results, either generated here
//! (deterministic, seeded) or read from a directory holding `tools.json` and `results.jsonl`
//! (the reference corpus's format).

use serde_json::{json, Value};
use std::path::Path;

/// One tool result to check, with the outcome it should get.
#[derive(Clone)]
pub struct Item {
    pub server: String,
    pub tool: String,
    pub result: Value,
    /// The result's JSON text as it is sent: as it stands in `results.jsonl` (so its key order and
    /// spacing are the producer's), or as serialised when generated.
    pub result_text: String,
    /// `valid`, `invalid` or `tool_error`.
    pub expect: String,
}

pub struct Corpus {
    /// `{"servers": {server: {"tools": [...]}}}`
    pub tools: Value,
    pub items: Vec<Item>,
    pub source: String,
}

impl Corpus {
    /// Reads `tools.json` and `results.jsonl` from `dir`.
    pub fn load(dir: &Path) -> std::io::Result<Corpus> {
        let tools: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("tools.json"))?)?;
        #[derive(serde::Deserialize)]
        struct Line<'a> {
            server: String,
            tool: String,
            #[serde(borrow)]
            result: &'a serde_json::value::RawValue,
            expect: String,
        }
        let mut items = Vec::new();
        for line in std::fs::read_to_string(dir.join("results.jsonl"))?.lines() {
            let line: Line<'_> = serde_json::from_str(line)?;
            items.push(Item {
                server: line.server,
                tool: line.tool,
                result: serde_json::from_str(line.result.get())?,
                result_text: line.result.get().to_owned(),
                expect: line.expect,
            });
        }
        Ok(Corpus {
            tools,
            items,
            source: dir.display().to_string(),
        })
    }

    /// `n` results over six tools: about 0.4 to 85 KB, about a fifth invalid, a few isError.
    pub fn generate(n: usize, seed: u64) -> Corpus {
        let mut rng = Rng(seed | 1);
        let mut items = Vec::with_capacity(n);
        for i in 0..n {
            let (server, tool) = TOOLS[i % TOOLS.len()];
            let roll = rng.below(100);
            let (result, expect) = if roll < 4 {
                (
                    json!({"isError": true, "content": [{"type": "text", "text": format!(
                        "{tool} failed: the upstream service did not answer within 30 s ({}); retry later or ask the operator to check its health",
                        rng.words(40))}]}),
                    "tool_error",
                )
            } else {
                let rows = rng.size_rows();
                let mut sc = structured(tool, rows, &mut rng);
                let invalid = roll < 24;
                if invalid {
                    break_one(tool, &mut sc, &mut rng);
                }
                let text = sc.to_string();
                (
                    json!({"structuredContent": sc, "content": [{"type": "text", "text": text}]}),
                    if invalid { "invalid" } else { "valid" },
                )
            };
            items.push(Item {
                server: server.into(),
                tool: tool.into(),
                result_text: result.to_string(),
                result,
                expect: expect.into(),
            });
        }
        Corpus {
            tools: tools(),
            items,
            source: format!("generated ({n} results, seed {seed})"),
        }
    }

    /// Only the invalid results.
    pub fn invalid_only(&self) -> Vec<Item> {
        self.items
            .iter()
            .filter(|i| i.expect == "invalid")
            .cloned()
            .collect()
    }

    /// The REST check body for an item (server and tool name a registered schema), with the
    /// result's text as sent.
    pub fn check_text(item: &Item) -> String {
        format!(
            r#"{{"server":{},"tool":{},"result":{}}}"#,
            Value::from(item.server.as_str()),
            Value::from(item.tool.as_str()),
            item.result_text
        )
    }

    /// A batch body of `items`.
    pub fn batch_text(items: &[Item]) -> String {
        let checks: Vec<String> = items.iter().map(Corpus::check_text).collect();
        format!(r#"{{"items":[{}]}}"#, checks.join(","))
    }
}

const TOOLS: [(&str, &str); 6] = [
    ("crm", "get_customer"),
    ("crm", "list_customers"),
    ("shop", "create_order"),
    ("docs", "search"),
    ("deploys", "deploy"),
    ("data", "query"),
];

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn hex(&mut self, len: usize) -> String {
        (0..len)
            .map(|_| char::from(b"0123456789abcdef"[self.below(16) as usize]))
            .collect()
    }
    fn words(&mut self, n: usize) -> String {
        const W: [&str; 12] = [
            "alpha", "beta", "gamma", "delta", "omega", "sigma", "kappa", "theta", "zeta", "iota",
            "lambda", "tau",
        ];
        (0..n)
            .map(|_| W[self.below(12) as usize])
            .collect::<Vec<_>>()
            .join(" ")
    }
    /// Rows for a result: mostly small, a long tail up to ~85 KB.
    fn size_rows(&mut self) -> usize {
        match self.below(100) {
            0..=59 => 1 + self.below(3) as usize,
            60..=89 => 4 + self.below(20) as usize,
            _ => 40 + self.below(130) as usize,
        }
    }
    fn date(&mut self) -> String {
        format!(
            "2026-{:02}-{:02}T{:02}:{:02}:00Z",
            1 + self.below(12),
            1 + self.below(28),
            self.below(24),
            self.below(60)
        )
    }
}

fn id_schema() -> Value {
    json!({"type": "string", "pattern": "^[a-z]{2,6}_[0-9a-f]{8,32}$"})
}

fn tool(name: &str, input: Value, output: Value) -> Value {
    json!({"name": name, "description": format!("{name} tool"), "inputSchema": input, "outputSchema": output})
}

/// The tool definitions, as `tools.json`.
pub fn tools() -> Value {
    let iso = json!({"type": "string", "format": "date-time"});
    let money = json!({"type": "integer", "minimum": 0});
    let customer = json!({"type": "object", "properties": {
        "id": id_schema(), "name": {"type": "string", "minLength": 1, "maxLength": 200},
        "email": {"type": "string", "format": "email"},
        "plan": {"type": "string", "enum": ["free", "pro", "enterprise"]},
        "created_at": iso, "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": true},
        "address": {"$ref": "#/$defs/address"}},
        "required": ["id", "name", "email", "plan"],
        "$defs": {"address": {"type": "object", "properties": {"city": {"type": "string"},
            "country": {"type": "string", "pattern": "^[A-Z]{2}$"}}, "required": ["city", "country"]}}});
    let list = json!({"type": "object", "properties": {
        "items": {"type": "array", "items": {"$ref": "#/$defs/row"}},
        "total": {"type": "integer", "minimum": 0}, "has_more": {"type": "boolean"}},
        "required": ["items", "total", "has_more"],
        "$defs": {"row": {"type": "object", "properties": {"id": id_schema(), "name": {"type": "string"},
            "plan": {"type": "string", "enum": ["free", "pro", "enterprise"]}, "mrr_cents": money, "last_seen": iso},
            "required": ["id", "name", "plan"]}}});
    let order = json!({"type": "object", "properties": {
        "order_id": id_schema(),
        "lines": {"type": "array", "minItems": 1, "items": {"type": "object", "properties": {
            "sku": {"type": "string"}, "quantity": {"type": "integer", "minimum": 1}, "price_cents": money},
            "required": ["sku", "quantity", "price_cents"], "additionalProperties": false}},
        "total_cents": money, "currency": {"type": "string", "enum": ["EUR", "USD", "GBP"]},
        "placed_at": iso, "status": {"type": "string", "enum": ["placed", "paid", "shipped"]}},
        "required": ["order_id", "lines", "total_cents", "status"]});
    let search = json!({"type": "object", "properties": {
        "query": {"type": "string"},
        "results": {"type": "array", "items": {"type": "object", "properties": {
            "title": {"type": "string"}, "url": {"type": "string", "format": "uri"},
            "snippet": {"type": "string", "maxLength": 2000}, "score": {"type": "number", "minimum": 0, "maximum": 1},
            "highlights": {"type": "array", "items": {"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 2}}},
            "required": ["title", "url", "score"]}}},
        "required": ["query", "results"]});
    let deploy = json!({"type": "object", "properties": {
        "status": {"type": "string", "enum": ["queued", "running", "succeeded", "failed"]},
        "deploy_id": id_schema(), "commit_sha": {"type": "string", "pattern": "^[0-9a-f]{40}$"},
        "started_at": iso, "log": {"type": "array", "items": {"type": "string"}}},
        "required": ["status", "deploy_id", "commit_sha"],
        "if": {"properties": {"status": {"const": "failed"}}}, "then": {"required": ["log"]}});
    let query = json!({"type": "object", "properties": {
        "columns": {"type": "array", "items": {"type": "string"}},
        "rows": {"type": "array", "items": {"type": "array", "items": {"type": ["string", "number", "null"]}}},
        "elapsed_ms": {"type": "number", "minimum": 0}},
        "required": ["columns", "rows"]});
    let input = json!({"type": "object", "properties": {"id": {"type": "string"}}});
    json!({"servers": {
        "crm": {"tools": [tool("get_customer", input.clone(), customer), tool("list_customers", input.clone(), list)]},
        "shop": {"tools": [tool("create_order", input.clone(), order)]},
        "docs": {"tools": [tool("search", input.clone(), search)]},
        "deploys": {"tools": [tool("deploy", input.clone(), deploy)]},
        "data": {"tools": [tool("query", input, query)]}
    }})
}

fn structured(tool: &str, rows: usize, rng: &mut Rng) -> Value {
    let id = |rng: &mut Rng| format!("cus_{}", rng.hex(16));
    match tool {
        "get_customer" => json!({"id": id(rng), "name": rng.words(3), "email": "ana@example.com",
            "plan": "pro", "created_at": rng.date(), "tags": (0..rows).map(|i| format!("t{i}")).collect::<Vec<_>>(),
            "address": {"city": "Lisbon", "country": "PT"}}),
        "list_customers" => {
            json!({"items": (0..rows).map(|_| json!({"id": id(rng), "name": rng.words(2),
            "plan": "free", "mrr_cents": rng.below(100_000), "last_seen": rng.date()})).collect::<Vec<_>>(),
            "total": rows, "has_more": false})
        }
        "create_order" => {
            json!({"order_id": format!("ord_{}", rng.hex(16)), "lines": (0..rows).map(|_| json!({
            "sku": rng.words(1), "quantity": 1 + rng.below(9), "price_cents": rng.below(10_000)})).collect::<Vec<_>>(),
            "total_cents": rng.below(1_000_000), "currency": "EUR", "placed_at": rng.date(), "status": "placed"})
        }
        "search" => {
            json!({"query": rng.words(2), "results": (0..rows).map(|i| json!({"title": rng.words(4),
            "url": format!("https://docs.example.com/page/{i}"), "snippet": rng.words(20),
            "score": 0.5, "highlights": [[0, 5], [10, 15]]})).collect::<Vec<_>>()})
        }
        "deploy" => json!({"status": "succeeded", "deploy_id": format!("dep_{}", rng.hex(12)),
            "commit_sha": rng.hex(40), "started_at": rng.date(),
            "log": (0..rows).map(|_| rng.words(8)).collect::<Vec<_>>()}),
        _ => {
            json!({"columns": ["name", "n", "note", "at"], "rows": (0..rows + 2).map(|i| json!([rng.words(2), i, null, rng.date()])).collect::<Vec<_>>(),
            "elapsed_ms": 12.5})
        }
    }
}

/// Breaks one field the way real drift does: a wrong type, a bad enum or format, a missing field.
fn break_one(tool: &str, sc: &mut Value, rng: &mut Rng) {
    let kind = rng.below(4);
    let obj = sc.as_object_mut().expect("object");
    match (tool, kind) {
        ("get_customer", 0) => {
            obj.insert("email".into(), json!("not-an-email"));
        }
        ("get_customer", _) => {
            obj.remove("plan");
        }
        ("list_customers", 0) => {
            obj.insert("total".into(), json!("many"));
        }
        ("list_customers", _) => {
            if let Some(row) = obj.get_mut("items").and_then(|i| i.get_mut(0)) {
                row["plan"] = json!("gold");
            } else {
                obj.remove("has_more");
            }
        }
        ("create_order", 0) => {
            obj.insert("status".into(), json!("lost"));
        }
        ("create_order", _) => {
            if let Some(line) = obj.get_mut("lines").and_then(|i| i.get_mut(0)) {
                line["quantity"] = json!(0);
            }
        }
        ("search", _) => {
            if let Some(r) = obj.get_mut("results").and_then(|i| i.get_mut(0)) {
                r["score"] = json!(7);
            } else {
                obj.remove("query");
            }
        }
        ("deploy", 0) => {
            obj.insert("commit_sha".into(), json!("HEAD"));
        }
        ("deploy", _) => {
            obj.insert("started_at".into(), json!("yesterday"));
        }
        _ => {
            obj.insert("rows".into(), json!({"not": "an array"}));
        }
    }
}
