//! The real binary on SIGTERM: stops taking work, finishes what is in flight, exits cleanly.

use serde_json::json;
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test]
async fn sigterm_drains_checks_in_flight() {
    let (http, grpc) = (free_port(), free_port());
    let child = Command::new(env!("CARGO_BIN_EXE_schemagate"))
        .args(["serve", "--listen", &format!("127.0.0.1:{http}")])
        .args(["--grpc-listen", &format!("127.0.0.1:{grpc}")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start schemagate");
    let mut server = Server(child);
    let client = crate::http_client::client();
    let base = format!("http://127.0.0.1:{http}");
    let started = Instant::now();
    while client.get(format!("{base}/healthz")).send().await.is_err() {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "server did not start"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // A batch big enough to still be running when the signal arrives.
    let schema = json!({"type": "object", "properties": {"rows": {"type": "array",
        "items": {"type": "object", "properties": {"id": {"type": "string", "format": "uuid"}}}}}});
    let rows: Vec<_> = (0..100)
        .map(|i| json!({"id": format!("not-a-uuid-{i}")}))
        .collect();
    let items: Vec<_> = (0..1000)
        .map(|_| json!({"schema": schema, "instance": {"rows": rows}}))
        .collect();
    let body = json!({"items": items}).to_string();
    let in_flight = tokio::spawn({
        let client = client.clone();
        let url = format!("{base}/v1/validate/batch");
        async move { client.post(url).body(body).send().await }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let pid = server.0.id().to_string();
    let status = Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("kill");
    assert!(status.success());

    let response = in_flight
        .await
        .expect("task")
        .expect("the in-flight batch is answered");
    assert_eq!(response.status().as_u16(), 200);
    let answer: serde_json::Value = response.json().await.expect("json");
    assert_eq!(answer["results"].as_array().map(Vec::len), Some(1000));

    let exit = tokio::task::spawn_blocking(move || {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = server.0.try_wait().expect("wait") {
                return Some(status);
            }
            if Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    })
    .await
    .expect("join");
    let exit = exit.expect("exits after draining");
    assert!(exit.success(), "clean exit: {exit:?}");
    assert!(
        client.get(format!("{base}/healthz")).send().await.is_err(),
        "no longer listening"
    );
}
