//! The MCP rules' work per relayed call, in process, as `schemagate proxy` does it on its
//! defaults: a session initialized and listed, then `PASSES` `tools/call`s of the load
//! harness's `sized` tool (its arguments checked), each answered with a result of about
//! `BYTES` bytes (records in `structuredContent`, their JSON copy in a text block: the harness's
//! result, checked against the tool's schema). No pipes and no process: what is left is the
//! rules' own work, the envelopes and the checks. For instruction counts, which do not move with
//! the machine:
//!
//! ```sh
//! cargo build --release --example relay_passes
//! valgrind --tool=callgrind target/release/examples/relay_passes 1000 1024
//! valgrind --tool=callgrind target/release/examples/relay_passes 3000 1024
//! ```
//!
//! (instructions of the second − the first) / 2000 = instructions per relayed call. As for
//! `core_passes`, leave out `quanta::Calibration::calibrate` and `clock_gettime`. The first
//! call compiles the tool's schemas: start from a run of some calls, not of none.

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use bytes::Bytes;
use clap::Parser;
use schemagate::config::Cli;
use schemagate::config::Command;
use schemagate::core::auth::Caller;
use schemagate::core::gate::Gate;
use schemagate::mcp::{Boundary, Direction, Judged, Link, Observer, Outgoing};
use schemagate_testkit::mcp_test_server::sized_result;
use serde_json::json;
use std::io;
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// A wire that drops what the rules send.
struct Dropped;

impl Link for Dropped {
    async fn send(&self, _: Direction, _: Outgoing<'_>) -> io::Result<()> {
        Ok(())
    }
}

/// Counts the results judged valid, so that a run that judged nothing is not read as cheap.
#[derive(Default)]
struct Valid(AtomicUsize);

impl Observer for Valid {
    fn judged(&self, judged: &Judged<'_>) {
        let valid = judged.verdict.is_ok_and(|v| v.valid == Some(true));
        if valid && judged.payload.as_str() == "result" {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }
}

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let (Some(passes), Some(bytes)) = (
        args.next().and_then(|p| p.parse::<usize>().ok()),
        args.next().and_then(|b| b.parse::<usize>().ok()),
    ) else {
        eprintln!("usage: relay_passes PASSES RESULT_BYTES");
        return ExitCode::from(2);
    };
    let cli = Cli::parse_from([
        "schemagate",
        "proxy",
        "--server-name",
        "bench",
        "--",
        "true",
    ]);
    let Command::Proxy(proxy) = cli.command else {
        unreachable!("parsed as proxy")
    };
    let config = proxy.proxy_config().expect("the proxy's defaults");
    let gate = Gate::new(config.gate).expect("a core");
    let valid = Arc::new(Valid::default());
    let boundary = Boundary::new(gate, Caller::open(), config.boundary)
        .observed(Arc::clone(&valid) as Arc<dyn Observer>);
    let tools = json!({"tools": [{
        "name": "sized",
        "inputSchema": {"type": "object", "properties": {"id": {"type": "integer"}}},
        "outputSchema": {"type": "object", "properties": {"id": {"type": "integer"},
            "email": {"type": "string", "format": "email"}, "note": {"type": "string"}},
            "required": ["id", "email"]}
    }]});
    let opening = [
        (
            Direction::ToServer,
            r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}"#.to_owned(),
        ),
        (
            Direction::ToClient,
            r#"{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"raw","version":"1"}}}"#.to_owned(),
        ),
        (
            Direction::ToServer,
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.to_owned(),
        ),
        (
            Direction::ToServer,
            r#"{"jsonrpc":"2.0","id":"l","method":"tools/list"}"#.to_owned(),
        ),
        (
            Direction::ToClient,
            format!(r#"{{"jsonrpc":"2.0","id":"l","result":{tools}}}"#),
        ),
    ];
    let result = sized_result(bytes);
    // Each line as the proxy reads it: its own bytes, with its newline.
    let calls: Vec<(Bytes, Bytes)> = (1..=passes)
        .map(|id| {
            let call = format!(
                "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"tools/call\",\"params\":{{\"name\":\"sized\",\"arguments\":{{\"id\":7}}}}}}\n"
            );
            let answer = format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{result}}}\n");
            (Bytes::from(call), Bytes::from(answer))
        })
        .collect();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        for (direction, line) in opening {
            let line = Bytes::from(line + "\n");
            boundary
                .relay(&Dropped, direction, &line)
                .await
                .expect("relayed");
        }
        for (call, answer) in &calls {
            boundary
                .relay(&Dropped, Direction::ToServer, call)
                .await
                .expect("relayed");
            boundary
                .relay(&Dropped, Direction::ToClient, answer)
                .await
                .expect("relayed");
        }
    });
    let judged = valid.0.load(Ordering::Relaxed);
    if judged != passes {
        eprintln!("{judged} of {passes} results judged valid");
        return ExitCode::FAILURE;
    }
    println!(
        "{passes} calls relayed, each result ({} bytes) judged valid",
        result.len()
    );
    ExitCode::SUCCESS
}
