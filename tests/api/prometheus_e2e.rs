//! schemagate and a real Prometheus on loopback: Prometheus scrapes a known sequence of checks,
//! evaluates deploy/prometheus/rules.yml, and every dashboard query parses and runs. Needs the
//! `prometheus` binary (Debian package `prometheus`); skipped with a message when it is missing,
//! unless SCHEMAGATE_REQUIRE_PROMETHEUS=1 (as in CI).

use serde_json::{json, Value};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

struct Prometheus {
    child: Child,
    base: String,
    _dir: tempfile::TempDir,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

fn prometheus_binary() -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join("prometheus"))
            .find(|p| p.is_file())
    })
}

async fn start_prometheus(target: std::net::SocketAddr) -> Option<Prometheus> {
    let Some(binary) = prometheus_binary() else {
        if std::env::var("SCHEMAGATE_REQUIRE_PROMETHEUS").as_deref() == Ok("1") {
            panic!("SCHEMAGATE_REQUIRE_PROMETHEUS=1 but no prometheus on PATH (apt-get install prometheus)");
        }
        eprintln!("skipping: no prometheus on PATH (apt-get install prometheus to run this test)");
        return None;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let rules = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("deploy/prometheus/rules.yml");
    let config = format!(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nrule_files:\n  - {}\nscrape_configs:\n  - job_name: schemagate\n    static_configs:\n      - targets: ['{target}']\n",
        rules.display()
    );
    let config_path = dir.path().join("prometheus.yml");
    std::fs::write(&config_path, config).expect("write config");
    let port = free_port();
    let child = Command::new(binary)
        .arg(format!("--config.file={}", config_path.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.path().join("data").display()
        ))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start prometheus");
    let prometheus = Prometheus {
        child,
        base: format!("http://127.0.0.1:{port}"),
        _dir: dir,
    };
    let client = crate::http_client::client();
    let started = Instant::now();
    loop {
        if let Ok(r) = client
            .get(format!("{}/-/ready", prometheus.base))
            .send()
            .await
        {
            if r.status().is_success() {
                return Some(prometheus);
            }
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "prometheus did not become ready"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

impl Prometheus {
    /// Runs an instant query; returns the API's whole answer.
    async fn query(&self, promql: &str) -> Value {
        crate::http_client::client()
            .get(format!("{}/api/v1/query", self.base))
            .query(&[("query", promql)])
            .send()
            .await
            .expect("query")
            .json()
            .await
            .expect("json")
    }

    /// The value of each series of a query, by the given label.
    async fn values_by(&self, promql: &str, label: &str) -> Vec<(String, f64)> {
        let answer = self.query(promql).await;
        answer["data"]["result"]
            .as_array()
            .map(|series| {
                series
                    .iter()
                    .map(|s| {
                        let key = s["metric"][label].as_str().unwrap_or_default().to_owned();
                        let value = s["value"][1]
                            .as_str()
                            .and_then(|v| v.parse().ok())
                            .unwrap_or(f64::NAN);
                        (key, value)
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Waits until `promql` answers the expected value per `label` (within 1e-9); `expected` in
    /// order of the label's values.
    async fn expect(&self, promql: &str, label: &str, expected: &[(&str, f64)]) {
        let started = Instant::now();
        loop {
            let mut got = self.values_by(promql, label).await;
            got.sort_by(|a, b| a.0.cmp(&b.0));
            let matches = got.len() == expected.len()
                && got
                    .iter()
                    .zip(expected)
                    .all(|((k, v), (ek, ev))| k == ek && (v - ev).abs() < 1e-9);
            if matches {
                return;
            }
            assert!(
                started.elapsed() < Duration::from_secs(40),
                "{promql}: expected {expected:?}, got {got:?}"
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
}

const POLICY: &str = "[[servers]]\nmatch = \"internal-*\"\ntier = \"trusted\"\n\n[[servers]]\nmatch = \"partner\"\ntier = \"semi-trusted\"\n";

#[tokio::test]
async fn rules_and_dashboard_queries_match_a_known_sequence() {
    let app = crate::helpers::TestApp::with_policy(POLICY, &[]).await;
    let Some(prometheus) = start_prometheus(app.http_addr).await else {
        return;
    };
    let targets = [
        ("crm", "get"),
        ("partner", "list"),
        ("internal-db", "query"),
    ];
    // Make every series exist at zero first, so rates count the whole sequence: a check without a
    // schema is refused, but its server and tool get their series. (The trusted server skips it,
    // which counts one skipped check.)
    for (server, tool) in targets {
        let (status, _) = app
            .validate(&json!({"server": server, "tool": tool, "instance": 1}))
            .await;
        assert_eq!(status, if server == "internal-db" { 200 } else { 404 });
    }
    // Scraped: each target's series exist for every tier and payload (3 targets x 3 tiers x 3
    // payloads).
    prometheus
        .expect(
            r#"count(schemagate_validations_total{outcome="valid",attempt="first"})"#,
            "",
            &[("", 27.0)],
        )
        .await;
    tokio::time::sleep(Duration::from_millis(2500)).await;

    let schema =
        json!({"type": "object", "required": ["id"], "properties": {"id": {"type": "integer"}}});
    let good = json!({"structuredContent": {"id": 1}});
    let bad = json!({"structuredContent": {"id": "one"}});
    // crm/get (untrusted): first 3 valid + 1 invalid; retries 1 valid + 1 invalid.
    // partner/list (semi-trusted): first 1 valid + 3 invalid; retries 2 valid.
    // internal-db/query (trusted): 2 skipped (3 with the warm-up).
    let sequence = [
        ("crm", "get", &good, 1, 3),
        ("crm", "get", &bad, 1, 1),
        ("crm", "get", &good, 2, 1),
        ("crm", "get", &bad, 2, 1),
        ("partner", "list", &good, 1, 1),
        ("partner", "list", &bad, 1, 3),
        ("partner", "list", &good, 3, 2),
        ("internal-db", "query", &bad, 1, 2),
    ];
    for (server, tool, result, attempt, times) in sequence {
        for _ in 0..times {
            let check = json!({"server": server, "tool": tool, "schema": schema, "result": result, "attempt": attempt});
            assert_eq!(app.validate(&check).await.0, 200);
        }
    }
    // The model's arguments to crm/get, first attempts: 1 valid + 3 invalid. Blended with the
    // results, crm's first attempts would conform 50%; apart, results 75% and arguments 25%.
    for (arguments, times) in [(json!({"id": 1}), 1), (json!({"id": "one"}), 3)] {
        for _ in 0..times {
            let check =
                json!({"server": "crm", "tool": "get", "schema": schema, "arguments": arguments});
            assert_eq!(app.validate(&check).await.0, 200);
        }
    }

    prometheus
        .expect(
            r#"schemagate:first_attempt_compliance:ratio_rate5m{payload="result"}"#,
            "server",
            &[("crm", 0.75), ("partner", 0.25)],
        )
        .await;
    prometheus
        .expect(
            r#"schemagate:first_attempt_compliance:ratio_rate5m{payload="arguments"}"#,
            "server",
            &[("crm", 0.25)],
        )
        .await;
    prometheus
        .expect(
            r#"schemagate:retry_resolution:ratio_rate5m{payload="result"}"#,
            "server",
            &[("crm", 0.5), ("partner", 1.0)],
        )
        .await;
    prometheus
        .expect(
            "schemagate:first_attempt_compliance_all:ratio_rate5m",
            "payload",
            &[("arguments", 0.25), ("result", 0.5)],
        )
        .await;
    prometheus
        .expect(
            r#"sum by (tier) (schemagate_validations_total{outcome="skipped"}) > 0"#,
            "tier",
            &[("trusted", 3.0)],
        )
        .await;
    let p99 = prometheus
        .values_by(
            "schemagate:validation_duration_seconds:p99_rate5m",
            "transport",
        )
        .await;
    assert!(
        p99.iter()
            .any(|(t, v)| t == "rest" && v.is_finite() && *v > 0.0),
        "{p99:?}"
    );

    // Every dashboard query parses and runs.
    let dashboard: Value = serde_json::from_str(
        &std::fs::read_to_string(
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("deploy/grafana/schemagate.json"),
        )
        .expect("dashboard"),
    )
    .expect("json");
    let mut ran = 0;
    for panel in dashboard["panels"].as_array().expect("panels") {
        for target in panel["targets"].as_array().expect("targets") {
            let expr = target["expr"]
                .as_str()
                .expect("expr")
                .replace("$__rate_interval", "1m")
                .replace("$__range", "5m")
                .replace("$server", ".*")
                .replace("$tool", ".*");
            let answer = prometheus.query(&expr).await;
            assert_eq!(
                answer["status"], "success",
                "{}: {expr}: {answer}",
                panel["title"]
            );
            ran += 1;
        }
    }
    assert!(ran >= 12);
    // The dashboard's compliance panel gives the same figures as the recording rule, results and
    // arguments apart.
    let compliance = dashboard["panels"]
        .as_array()
        .expect("panels")
        .iter()
        .find(|p| p["title"] == "First-attempt compliance by server and tool")
        .expect("compliance panel");
    let expr = compliance["targets"][0]["expr"]
        .as_str()
        .expect("expr")
        .replace("$__rate_interval", "5m")
        .replace("$server", "crm")
        .replace("$tool", ".*");
    prometheus
        .expect(&expr, "payload", &[("arguments", 0.25), ("result", 0.75)])
        .await;
}
