//! Starts a real schemagate on loopback ports and talks to it like a client would.
#![allow(dead_code)]

use schemagate::config::ServeArgs;
use serde_json::Value;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::oneshot;

/// A running server; shuts down when dropped.
pub struct TestApp {
    pub http_addr: SocketAddr,
    pub grpc_addr: SocketAddr,
    pub client: reqwest::Client,
    shutdown: Option<oneshot::Sender<()>>,
    pub task: Option<tokio::task::JoinHandle<anyhow::Result<()>>>,
}

/// Starts schemagate with the default flags plus `extra` (e.g. `["--policy", path]`).
pub async fn spawn_app_with(extra: &[&str]) -> TestApp {
    let mut argv = vec!["serve"];
    if !extra.contains(&"--policy-poll-interval") {
        argv.extend_from_slice(&["--policy-poll-interval", "0"]);
    }
    argv.extend_from_slice(extra);
    let args = <ServeArgs as clap::Parser>::parse_from(argv);
    let http = TcpListener::bind("127.0.0.1:0").await.expect("bind http");
    let grpc = TcpListener::bind("127.0.0.1:0").await.expect("bind grpc");
    let http_addr = http.local_addr().expect("addr");
    let grpc_addr = grpc.local_addr().expect("addr");
    let (tx, rx) = oneshot::channel::<()>();
    let task = tokio::spawn(schemagate::run(
        args,
        schemagate::Listeners { http, grpc },
        async move {
            let _ = rx.await;
        },
    ));
    TestApp {
        http_addr,
        grpc_addr,
        client: reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .build()
            .expect("client"),
        shutdown: Some(tx),
        task: Some(task),
    }
}

pub async fn spawn_app() -> TestApp {
    spawn_app_with(&[]).await
}

impl TestApp {
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.http_addr, path)
    }

    /// POSTs raw bytes; returns status and parsed JSON body.
    pub async fn post_raw(&self, path: &str, body: impl Into<reqwest::Body>) -> (u16, Value) {
        let response = self
            .client
            .post(self.url(path))
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .expect("request");
        let status = response.status().as_u16();
        let text = response.text().await.expect("body");
        let json = serde_json::from_str(&text).unwrap_or(Value::String(text));
        (status, json)
    }

    /// POST /v1/validate.
    pub async fn validate(&self, check: &Value) -> (u16, Value) {
        self.post_raw("/v1/validate", check.to_string()).await
    }

    /// POST /v1/validate/batch with `{"items": items}`.
    pub async fn validate_batch(&self, items: &[Value]) -> (u16, Value) {
        let body = serde_json::json!({ "items": items });
        self.post_raw("/v1/validate/batch", body.to_string()).await
    }

    /// PUT /v1/servers/{server}/tools.
    pub async fn register(&self, server: &str, tools_list: &Value) -> (u16, Value) {
        let response = self
            .client
            .put(self.url(&format!("/v1/servers/{server}/tools")))
            .body(tools_list.to_string())
            .send()
            .await
            .expect("request");
        let status = response.status().as_u16();
        (status, response.json().await.expect("json"))
    }

    pub async fn get(&self, path: &str) -> (u16, String) {
        let response = self
            .client
            .get(self.url(path))
            .send()
            .await
            .expect("request");
        (
            response.status().as_u16(),
            response.text().await.expect("body"),
        )
    }

    /// The value of one series in /metrics (exact label set as rendered), or 0 when absent.
    pub async fn metric(&self, series: &str) -> f64 {
        let (_, text) = self.get("/metrics").await;
        text.lines()
            .find_map(|line| {
                let (name, value) = line.rsplit_once(' ')?;
                (name == series).then(|| value.parse().ok()).flatten()
            })
            .unwrap_or(0.0)
    }

    /// Stops the server and waits for it to finish.
    pub async fn stop(mut self) -> anyhow::Result<()> {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        match self.task.take() {
            Some(task) => task.await.expect("server task"),
            None => Ok(()),
        }
    }
}

impl Drop for TestApp {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }
}
