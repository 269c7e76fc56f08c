//! The official MCP conformance suite (`@modelcontextprotocol/conformance`, on PATH) and its
//! reference server (`tests/data/conformance-server`, its dependencies installed by `.ci/run`):
//! every server scenario of the suite ends through the gateway as it ends directly, on an HTTP
//! route to the reference server and on a stdio route running it.

use crate::helpers::gateway::InProcess;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// Runs of the suite through the HTTP route, and through the stdio route (each of whose sessions
/// starts a server process: a run takes some 15 s).
const HTTP_RUNS: usize = 2;
const STDIO_RUNS: usize = 1;
/// Runs of a scenario alone, each way, when its outcome differed. The suite's client opens its GET
/// stream and posts its call at the same moment, and the reference server drops a sampling or
/// elicitation request it sends while no GET stream is open: such a scenario fails now and then,
/// directly as well as through the gateway. A difference counts when it holds run after run.
const RETRIES: usize = 3;

/// The reference server's folder, when its dependencies are installed and the suite is on PATH;
/// else `None` (the test skips), or a panic under `SCHEMAGATE_REQUIRE_CONFORMANCE=1`.
fn reference_server() -> Option<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/conformance-server");
    let suite = std::process::Command::new("conformance")
        .arg("--help")
        .output()
        .is_ok();
    let tsx = dir.join(LOADER).exists();
    if suite && tsx {
        return Some(dir);
    }
    let missing = "the conformance suite (npm install -g @modelcontextprotocol/conformance@0.1.13) and the reference server's dependencies (npm ci in tests/data/conformance-server)";
    if std::env::var("SCHEMAGATE_REQUIRE_CONFORMANCE").as_deref() == Ok("1") {
        panic!("SCHEMAGATE_REQUIRE_CONFORMANCE=1 but {missing} are not installed");
    }
    eprintln!("skipped: needs {missing}");
    None
}

/// tsx's loader, which lets Node.js run the reference server's TypeScript in one process (tsx's
/// own command starts a second, which outlives a kill of the first).
const LOADER: &str = "node_modules/tsx/dist/loader.mjs";

/// The command that runs the reference server in `dir`, then `args`.
fn reference_command(dir: &std::path::Path) -> Vec<String> {
    vec![
        "node".to_owned(),
        "--import".to_owned(),
        format!("file://{}", dir.join(LOADER).display()),
        dir.join("everything-server.ts").display().to_string(),
    ]
}

/// The reference server on Streamable HTTP, and its MCP endpoint.
async fn serve_http(dir: &PathBuf) -> (Child, String) {
    let command = reference_command(dir);
    let mut server = Command::new(&command[0])
        .args(&command[1..])
        .current_dir(dir)
        // A port of its own choosing, none probed and raced for: it prints the one it bound.
        .env("PORT", "0")
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start the reference server");
    let mut lines = BufReader::new(server.stdout.take().expect("stdout")).lines();
    let started = tokio::time::timeout(Duration::from_secs(30), async {
        while let Ok(Some(line)) = lines.next_line().await {
            if let Some((_, url)) = line.split_once("running on ") {
                return Some(url.trim().to_owned());
            }
        }
        None
    })
    .await;
    let Ok(Some(base)) = started else {
        panic!("the reference server did not start");
    };
    // Its later lines (one per session) are read and dropped, so it never blocks on stdout.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    (server, format!("{base}/mcp"))
}

/// Each scenario of the suite (or `scenario` alone) run against `url`, and whether it passed;
/// with what the suite printed.
async fn run_suite(url: &str, scenario: Option<&str>) -> (BTreeMap<String, bool>, String) {
    let results = tempfile::tempdir().expect("a directory");
    let output = tokio::time::timeout(
        Duration::from_secs(240),
        Command::new("conformance")
            .args(["server", "--url", url])
            .args(scenario.map(|s| ["--scenario", s]).into_iter().flatten())
            .current_dir(results.path())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .unwrap_or_else(|_| panic!("the suite against {url} did not end within 240 s"))
    .expect("run the suite");
    let printed = String::from_utf8_lossy(&output.stdout).into_owned();
    let outcomes: BTreeMap<String, bool> = printed
        .lines()
        .skip_while(|line| !line.contains("=== SUMMARY ==="))
        .filter_map(|line| {
            let (mark, rest) = line.split_once(' ')?;
            let (scenario, _) = rest.split_once(':')?;
            let passed = match mark {
                "✓" => true,
                "✗" => false,
                _ => return None,
            };
            Some((scenario.to_owned(), passed))
        })
        .collect();
    // A scenario run alone prints no summary of scenarios, only its checks' count:
    // "Passed: 5/5, 0 failed, 0 warnings".
    let mut outcomes = outcomes;
    if let (Some(scenario), true) = (scenario, outcomes.is_empty()) {
        let failed = printed
            .lines()
            .find_map(|line| line.strip_prefix("Passed: "))
            .and_then(|rest| rest.split(", ").nth(1))
            .and_then(|failed| failed.strip_suffix(" failed"))
            .and_then(|n| n.trim().parse::<u32>().ok());
        if let Some(failed) = failed {
            outcomes.insert(scenario.to_owned(), failed == 0);
        }
    }
    assert!(
        outcomes.len() > if scenario.is_some() { 0 } else { 20 },
        "the suite's summary against {url}: {printed}"
    );
    (outcomes, printed)
}

/// Whether `scenario` ends the same directly (`direct`) and through the gateway (`through`) in
/// one of [`RETRIES`] runs of it alone, each way.
async fn same_once_alone(scenario: &str, direct: &str, through: &str) -> bool {
    for _ in 0..RETRIES {
        let (a, _) = run_suite(direct, Some(scenario)).await;
        let (b, _) = run_suite(through, Some(scenario)).await;
        if a.get(scenario) == b.get(scenario) {
            return true;
        }
    }
    false
}

#[tokio::test]
async fn the_suites_server_scenarios_pass_through_the_gateway_as_they_pass_directly() {
    let Some(dir) = reference_server() else {
        return;
    };
    let (_server, upstream) = serve_http(&dir).await;
    let (direct, printed) = run_suite(&upstream, None).await;
    assert!(
        direct.values().filter(|passed| **passed).count() > 20,
        "the reference server passes the suite directly: {printed}"
    );
    let mut stdio = reference_command(&dir);
    stdio.push("--stdio".to_owned());
    let stdio =
        shlex::try_join(stdio.iter().map(String::as_str)).expect("a command a shell can quote");
    let gateway = InProcess::start(
        &[format!("http={upstream}"), format!("files=stdio:{stdio}")],
        &[],
    )
    .await;
    for (route, runs) in [("http", HTTP_RUNS), ("files", STDIO_RUNS)] {
        let url = gateway.url(route);
        for run in 1..=runs {
            let (through, printed) = run_suite(&url, None).await;
            let mut differ = Vec::new();
            for (scenario, passed) in &direct {
                if through.get(scenario) != Some(passed)
                    && !same_once_alone(scenario, &upstream, &url).await
                {
                    differ.push(format!("{scenario} (directly: {passed})"));
                }
            }
            assert!(
                differ.is_empty(),
                "route {route}, run {run}: {differ:?} differ through the gateway, run after run\n{printed}"
            );
        }
    }
}
