//! Hostile and careless clients: slow headers, silent bodies, unread answers, too many
//! connections, abandoned work, more work than the workers take. Each test runs schemagate with
//! small limits so that it finishes in seconds; the bounds used below (a few seconds) only stop a
//! test from hanging, they are not performance figures.

use crate::helpers::{client, grpc_check, spawn_app_with, TestApp};
use serde_json::{json, Value};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A batch whose every item brings a schema of its own, so each costs a compile: slow enough on
/// one worker (a few seconds for 10,000) to be abandoned, shed around, or shared.
fn compile_storm(n: usize) -> Value {
    let items: Vec<Value> = (0..n)
        .map(|i| {
            json!({
                "schema": {
                    "type": "object",
                    "properties": { format!("f{i}"): { "type": "string", "pattern": format!("^x{i}[a-z]{{2,40}}$") } }
                },
                "instance": { format!("f{i}"): format!("x{i}abc") }
            })
        })
        .collect();
    json!({ "items": items })
}

/// Reads until the server closes the connection (or errors); what was read.
async fn read_to_close(tcp: &mut TcpStream, within: Duration) -> Option<Vec<u8>> {
    let mut seen = Vec::new();
    let read = tokio::time::timeout(within, async {
        let mut buf = [0u8; 4096];
        loop {
            match tcp.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => seen.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await;
    read.ok().map(|()| seen)
}

/// Polls a metric until it reaches `at_least` (or gives up after twenty seconds); its last value.
async fn await_metric(app: &TestApp, series: &str, at_least: f64) -> f64 {
    let mut value = 0.0;
    for _ in 0..400 {
        value = app.metric(series).await;
        if value >= at_least {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    value
}

/// Calls `path` over a bare HTTP/2 connection with `grpc-timeout: deadline`; the grpc-status and
/// grpc-message the server answered with.
async fn raw_grpc_call(
    app: &TestApp,
    path: &str,
    message: &impl prost::Message,
    deadline: &str,
) -> (String, String) {
    let tcp = TcpStream::connect(app.grpc_addr).await.expect("connect");
    let (mut h2, connection) = h2::client::handshake(tcp).await.expect("handshake");
    tokio::spawn(connection);
    let request = http::Request::post(format!("http://{}{path}", app.grpc_addr))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .header("grpc-timeout", deadline)
        .body(())
        .expect("request");
    let (response, mut send) = h2.send_request(request, false).expect("send");
    let encoded = message.encode_to_vec();
    let mut frame = vec![0u8];
    frame.extend_from_slice(&u32::try_from(encoded.len()).expect("small").to_be_bytes());
    frame.extend_from_slice(&encoded);
    send.send_data(frame.into(), true).expect("data");
    let response = response.await.expect("response");
    let header =
        |h: &http::HeaderMap, k: &str| h.get(k).and_then(|v| v.to_str().ok()).map(str::to_owned);
    if let Some(status) = header(response.headers(), "grpc-status") {
        let message = header(response.headers(), "grpc-message").unwrap_or_default();
        return (status, message);
    }
    let mut body = response.into_body();
    while let Some(data) = body.data().await {
        data.expect("data");
    }
    let trailers = body.trailers().await.expect("trailers").unwrap_or_default();
    (
        header(&trailers, "grpc-status").unwrap_or_default(),
        header(&trailers, "grpc-message").unwrap_or_default(),
    )
}

/// Sends a request on a raw connection and leaves without reading the answer.
async fn send_and_leave(app: &TestApp, path: &str, body: &[u8]) -> TcpStream {
    let mut tcp = TcpStream::connect(app.http_addr).await.expect("connect");
    let head = format!(
        "POST {path} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
        body.len()
    );
    tcp.write_all(head.as_bytes()).await.expect("head");
    tcp.write_all(body).await.expect("body");
    tcp
}

#[tokio::test]
async fn a_slow_header_client_is_closed_at_the_timeout_while_others_are_answered() {
    let app = spawn_app_with(&["--header-read-timeout-secs", "1"]).await;
    let mut slow = TcpStream::connect(app.http_addr).await.expect("connect");
    let dripping = tokio::spawn(async move {
        // One header byte at a time, never the end of the headers.
        for b in b"POST /v1/validate HTTP/1.1\r\nhost: 127.0.0.1\r\nx-slow: " {
            if slow.write_all(&[*b]).await.is_err() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        read_to_close(&mut slow, Duration::from_secs(10)).await
    });
    let (status, verdict) = app
        .validate(&json!({"schema": {"type": "integer"}, "instance": 1}))
        .await;
    assert_eq!(status, 200, "{verdict}");
    let closed = dripping.await.expect("joined");
    assert!(
        closed.is_some(),
        "the slow client was still connected ten seconds after a one-second header timeout"
    );
}

#[tokio::test]
async fn a_body_that_stops_arriving_is_answered_408_at_the_body_timeout() {
    let app = spawn_app_with(&["--body-read-timeout-secs", "1"]).await;
    let mut tcp = TcpStream::connect(app.http_addr).await.expect("connect");
    tcp.write_all(
        b"POST /v1/validate HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-length: 1000\r\n\r\n{\"schema\":",
    )
    .await
    .expect("send");
    let answer = read_to_close(&mut tcp, Duration::from_secs(10))
        .await
        .expect("answered and closed");
    let text = String::from_utf8_lossy(&answer);
    assert!(text.starts_with("HTTP/1.1 408"), "{text}");
    assert!(text.contains("body_timeout"), "{text}");
}

#[tokio::test]
async fn a_declared_length_over_the_limit_is_413_before_any_body_arrives() {
    let app = spawn_app_with(&[]).await;
    let mut tcp = TcpStream::connect(app.http_addr).await.expect("connect");
    tcp.write_all(
        b"POST /v1/validate HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-length: 10000000000\r\n\r\n0123456789",
    )
    .await
    .expect("send");
    let mut buf = vec![0u8; 4096];
    let n = tokio::time::timeout(Duration::from_secs(5), tcp.read(&mut buf))
        .await
        .expect("answered without waiting for the body")
        .expect("read");
    let text = String::from_utf8_lossy(&buf[..n]);
    assert!(text.starts_with("HTTP/1.1 413"), "{text}");
    assert!(text.contains("body_too_large"), "{text}");
}

#[tokio::test]
async fn an_oversized_body_over_h2c_is_413() {
    let app = spawn_app_with(&["--max-body-bytes", "1000"]).await;
    let h2c = crate::http_client::builder()
        .http2_prior_knowledge()
        .build()
        .expect("client");
    let body = json!({"schema": {}, "instance": "x".repeat(100_000)}).to_string();
    let response = h2c
        .post(app.url("/v1/validate"))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .expect("an answer, not a reset stream");
    assert_eq!(response.version(), reqwest::Version::HTTP_2);
    assert_eq!(response.status().as_u16(), 413);
    let error: Value = response.json().await.expect("json");
    assert_eq!(error["error"]["code"], "body_too_large", "{error}");
}

#[tokio::test]
async fn the_connection_cap_refuses_new_connections_and_recovers() {
    let app = spawn_app_with(&["--max-connections", "3"]).await;
    let held: Vec<TcpStream> =
        futures_util::future::join_all((0..3).map(|_| TcpStream::connect(app.http_addr)))
            .await
            .into_iter()
            .map(|c| c.expect("connect"))
            .collect();
    tokio::time::sleep(Duration::from_millis(200)).await;
    // A fourth is closed as soon as it is accepted.
    let mut fourth = TcpStream::connect(app.http_addr)
        .await
        .expect("tcp connect");
    let _ = fourth
        .write_all(b"GET /healthz HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n")
        .await;
    let answer = read_to_close(&mut fourth, Duration::from_secs(5))
        .await
        .expect("closed promptly");
    assert!(answer.is_empty(), "{}", String::from_utf8_lossy(&answer));
    drop(held);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let refused = app
        .metric(r#"schemagate_connections_refused_total{transport="rest"}"#)
        .await;
    assert!(refused >= 1.0, "refused: {refused}");
    let (status, _) = app.get("/healthz").await;
    assert_eq!(
        status, 200,
        "connections are accepted again once some close"
    );
}

#[tokio::test]
async fn an_answer_the_client_does_not_read_is_dropped_at_the_write_timeout() {
    let app = spawn_app_with(&["--write-timeout-secs", "1"]).await;
    // Every item fails on many fields: a 10,000-item answer of tens of megabytes.
    let item = json!({
        "schema": {"type": "array", "items": {"type": "string"}},
        "instance": (0..20).collect::<Vec<u32>>()
    });
    let body = json!({ "items": vec![item; 10_000] }).to_string();
    let _tcp = send_and_leave(&app, "/v1/validate/batch", body.as_bytes()).await;
    let closed = await_metric(
        &app,
        r#"schemagate_connections_closed_total{transport="rest",reason="write_timeout"}"#,
        1.0,
    )
    .await;
    assert_eq!(closed, 1.0, "the unread answer's connection was closed");
}

#[tokio::test]
async fn a_batch_whose_client_leaves_stops() {
    let app = spawn_app_with(&["--worker-threads", "1"]).await;
    let body = compile_storm(10_000).to_string();
    let tcp = send_and_leave(&app, "/v1/validate/batch", body.as_bytes()).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    drop(tcp);
    let cancelled =
        await_metric(&app, r#"schemagate_cancelled_total{transport="rest"}"#, 1.0).await;
    let checked = app
        .metric(r#"schemagate_validation_duration_seconds_count{transport="rest"}"#)
        .await;
    assert!(
        cancelled >= 1.0,
        "nothing was cancelled ({checked} checked)"
    );
    assert_eq!(
        checked + cancelled,
        10_000.0,
        "every item is either checked or counted as cancelled"
    );
}

#[tokio::test]
async fn a_grpc_deadline_stops_the_work_and_answers_deadline_exceeded() {
    let app = spawn_app_with(&["--worker-threads", "1"]).await;
    let items: Vec<_> = compile_storm(10_000)["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(grpc_check)
        .collect();
    // A raw HTTP/2 call, so that only the server keeps the deadline (a tonic client would give
    // up at the same moment on its own).
    let request = schemagate::grpc::proto::ValidateBatchRequest { items };
    let (status, message) = raw_grpc_call(
        &app,
        "/schemagate.v1.Validator/ValidateBatch",
        &request,
        "300m",
    )
    .await;
    assert_eq!(status, "4", "DEADLINE_EXCEEDED: {message}");
    assert!(message.contains("deadline"), "{message}");
    let cancelled =
        await_metric(&app, r#"schemagate_cancelled_total{transport="grpc"}"#, 1.0).await;
    assert!(cancelled >= 1.0, "the batch ran on after its deadline");
}

#[tokio::test]
async fn past_the_queue_bound_new_work_is_shed_with_retry_after() {
    let app = spawn_app_with(&[
        "--worker-threads",
        "1",
        "--max-batch-items",
        "10000",
        "--max-queued-checks",
        "10000",
    ])
    .await;
    let body = compile_storm(10_000).to_string();
    let first = send_and_leave(&app, "/v1/validate/batch", body.as_bytes()).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    // One more check that needs a worker does not fit: refused at once.
    let response = app
        .client
        .post(app.url("/v1/validate/batch"))
        .json(&json!({"items": [{"schema": {"type": "string"}, "instance": "x"}]}))
        .send()
        .await
        .expect("answered");
    assert_eq!(response.status().as_u16(), 503);
    assert_eq!(
        response
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok()),
        Some("1")
    );
    let error: Value = response.json().await.expect("json");
    assert_eq!(error["error"]["code"], "overloaded", "{error}");
    let mut grpc = client(&app).await;
    let status = grpc
        .validate_batch(schemagate::grpc::proto::ValidateBatchRequest {
            items: vec![grpc_check(
                &json!({"schema": {"type": "integer"}, "instance": 1}),
            )],
        })
        .await
        .expect_err("shed");
    assert_eq!(status.code(), tonic::Code::ResourceExhausted, "{status:?}");
    assert_eq!(
        app.metric(r#"schemagate_shed_total{transport="rest"}"#)
            .await,
        1.0
    );
    assert_eq!(
        app.metric(r#"schemagate_shed_total{transport="grpc"}"#)
            .await,
        1.0
    );
    // Once the big batch is gone, work is admitted again.
    drop(first);
    await_metric(&app, r#"schemagate_cancelled_total{transport="rest"}"#, 1.0).await;
    let (status, body) = app
        .validate_batch(&[json!({"schema": {"type": "string"}, "instance": "x"})])
        .await;
    assert_eq!(status, 200, "{body}");
}

#[tokio::test]
async fn a_stream_keeps_its_connection_and_is_answered_while_the_workers_are_busy() {
    use schemagate::grpc::proto::StreamCheck;
    let app = spawn_app_with(&["--worker-threads", "1"]).await;
    let body = compile_storm(10_000).to_string();
    let busy = send_and_leave(&app, "/v1/validate/batch", body.as_bytes()).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut grpc = client(&app).await;
    let checks: Vec<StreamCheck> = (0..3_000)
        .map(|i| StreamCheck {
            id: i.to_string(),
            check: Some(grpc_check(
                &json!({"schema": {"type": "integer"}, "instance": i}),
            )),
        })
        .collect();
    let mut answers = grpc
        .validate_stream(futures_util::stream::iter(checks))
        .await
        .expect("stream opened")
        .into_inner();
    let mut answered = 0;
    while let Some(answer) = answers.message().await.expect("the stream is not broken") {
        assert!(answer.answer.is_some());
        answered += 1;
    }
    assert_eq!(answered, 3_000);
    drop(busy);
}

#[tokio::test]
async fn an_idle_connection_is_closed_at_the_idle_timeout() {
    let app = spawn_app_with(&["--idle-timeout-secs", "1"]).await;
    let mut grpc = client(&app).await;
    grpc.validate(grpc_check(&json!({"schema": {}, "instance": 1})))
        .await
        .expect("answered");
    let closed = await_metric(
        &app,
        r#"schemagate_connections_closed_total{transport="grpc",reason="idle"}"#,
        1.0,
    )
    .await;
    assert_eq!(closed, 1.0);
    // The client reconnects on its next call.
    grpc.validate(grpc_check(&json!({"schema": {}, "instance": 1})))
        .await
        .expect("answered after a reconnect");
}

#[tokio::test]
async fn both_ports_advertise_max_concurrent_streams() {
    let app = spawn_app_with(&["--http2-max-concurrent-streams", "7"]).await;
    for addr in [app.http_addr, app.grpc_addr] {
        let tcp = TcpStream::connect(addr).await.expect("connect");
        let (h2, connection) = h2::client::handshake(tcp).await.expect("handshake");
        tokio::spawn(connection);
        // The server's SETTINGS arrive with its first frames.
        let mut ready = h2.ready().await.expect("ready");
        let request = http::Request::get(format!("http://{addr}/healthz"))
            .body(())
            .expect("request");
        let _ = ready.send_request(request, true);
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(ready.current_max_send_streams(), 7, "{addr}");
    }
}

#[tokio::test]
async fn a_grpc_answer_held_back_by_flow_control_is_dropped_at_the_write_timeout() {
    let app = spawn_app_with(&["--write-timeout-secs", "1"]).await;
    let item = json!({
        "schema": {"type": "array", "items": {"type": "string"}},
        "instance": (0..20).collect::<Vec<u32>>()
    });
    let request = schemagate::grpc::proto::ValidateBatchRequest {
        items: vec![grpc_check(&item); 2_000],
    };
    let tcp = TcpStream::connect(app.grpc_addr).await.expect("connect");
    // A client that reads frames but never gives the server more window than HTTP/2's first.
    let (mut h2, connection) = h2::client::Builder::new()
        .initial_window_size(65_535)
        .handshake::<_, bytes::Bytes>(tcp)
        .await
        .expect("handshake");
    tokio::spawn(connection);
    let call = http::Request::post(format!(
        "http://{}/schemagate.v1.Validator/ValidateBatch",
        app.grpc_addr
    ))
    .header("content-type", "application/grpc")
    .header("te", "trailers")
    .body(())
    .expect("request");
    let (response, mut send) = h2.send_request(call, false).expect("send");
    let encoded = prost::Message::encode_to_vec(&request);
    let mut frame = vec![0u8];
    frame.extend_from_slice(&u32::try_from(encoded.len()).expect("small").to_be_bytes());
    frame.extend_from_slice(&encoded);
    send.send_data(frame.into(), true).expect("data");
    let response = response.await.expect("headers");
    assert_eq!(response.status(), 200);
    // The answer's body is never read, so its window is never released.
    let closed = await_metric(
        &app,
        r#"schemagate_connections_closed_total{transport="grpc",reason="write_timeout"}"#,
        1.0,
    )
    .await;
    assert_eq!(closed, 1.0, "the held-back answer's connection was closed");
    drop(response);
}

/// Small enough bounds that two partial bodies fill the receiving budget.
const RECEIVING: [&str; 8] = [
    "--max-body-bytes",
    "65536",
    "--grpc-max-message-bytes",
    "65536",
    "--max-receiving-bytes",
    "131072",
    "--body-read-timeout-secs",
    "3",
];

/// A check whose body is about `bytes` long.
fn check_of_size(bytes: usize) -> Value {
    json!({"schema": {"type": "string"}, "instance": "x".repeat(bytes)})
}

#[tokio::test]
async fn rest_bodies_still_arriving_share_a_bounded_budget() {
    let app = spawn_app_with(&RECEIVING).await;
    // Two bodies that declare 60,000 bytes and send a few: their declared lengths are held.
    let mut partial = Vec::new();
    for _ in 0..2 {
        let mut tcp = TcpStream::connect(app.http_addr).await.expect("connect");
        tcp.write_all(
            b"POST /v1/validate HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-length: 60000\r\n\r\n{\"schema\":",
        )
        .await
        .expect("send");
        partial.push(tcp);
    }
    let big = check_of_size(20_000);
    let mut refused = None;
    for _ in 0..100 {
        let response = app
            .client
            .post(app.url("/v1/validate"))
            .json(&big)
            .send()
            .await
            .expect("answered");
        if response.status() == 503 {
            refused = Some(response);
            break;
        }
        // The partial bodies may not have been read yet.
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let refused = refused.expect("a body past the receiving budget is refused");
    assert_eq!(
        refused
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok()),
        Some("1")
    );
    let error: Value = refused.json().await.expect("json");
    assert_eq!(error["error"]["code"], "overloaded", "{error}");
    let message = error["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("--max-receiving-bytes"), "{message}");
    // A small check still fits beside them.
    let (status, body) = app.validate(&check_of_size(100)).await;
    assert_eq!(status, 200, "{body}");
    // Once the partial bodies' clients leave, the budget is theirs no more.
    drop(partial);
    let mut status = 0;
    for _ in 0..100 {
        (status, _) = app.validate(&big).await;
        if status == 200 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(status, 200, "the budget was given back");
    assert!(
        app.metric(r#"schemagate_shed_total{transport="rest"}"#)
            .await
            >= 1.0
    );
}

/// Opens a `ValidateStream` on `h2` and sends the first 50,000 bytes of a 60,000-byte message.
async fn stream_with_a_partial_message(
    h2: &mut h2::client::SendRequest<bytes::Bytes>,
    addr: std::net::SocketAddr,
) -> (h2::client::ResponseFuture, h2::SendStream<bytes::Bytes>) {
    let request = http::Request::post(format!(
        "http://{addr}/schemagate.v1.Validator/ValidateStream"
    ))
    .header("content-type", "application/grpc")
    .header("te", "trailers")
    .body(())
    .expect("request");
    let (response, mut send) = h2.send_request(request, false).expect("send");
    let mut partial = vec![0u8];
    partial.extend_from_slice(&60_000u32.to_be_bytes());
    partial.resize(50_005, 0x0a);
    send.send_data(partial.into(), false).expect("data");
    (response, send)
}

#[tokio::test]
async fn grpc_messages_still_arriving_share_a_bounded_budget_and_each_has_the_body_timeout() {
    let app = spawn_app_with(&RECEIVING).await;
    let tcp = TcpStream::connect(app.grpc_addr).await.expect("connect");
    let (mut h2, connection) = h2::client::handshake(tcp).await.expect("handshake");
    tokio::spawn(connection);
    let mut streams = Vec::new();
    for _ in 0..2 {
        streams.push(stream_with_a_partial_message(&mut h2, app.grpc_addr).await);
    }
    let mut grpc = client(&app).await;
    let big = grpc_check(&check_of_size(40_000));
    let mut refusal = None;
    for _ in 0..50 {
        match grpc.validate(big.clone()).await {
            Err(status) => {
                refusal = Some(status);
                break;
            }
            // The partial messages may not have been read yet.
            Ok(_) => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    }
    let refusal = refusal.expect("a message past the receiving budget is refused");
    assert_eq!(
        refusal.code(),
        tonic::Code::ResourceExhausted,
        "{refusal:?}"
    );
    assert!(
        refusal.message().contains("--max-receiving-bytes"),
        "{refusal:?}"
    );
    // Each unfinished message ends its stream at the body-read timeout (3 s), giving its bytes
    // back; the stream had waited idle before it began, which does not count.
    for (response, _send) in streams {
        let response = tokio::time::timeout(Duration::from_secs(20), response)
            .await
            .expect("the stream ended")
            .expect("response");
        let header = |h: &http::HeaderMap| {
            h.get("grpc-status")
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        let status = match header(response.headers()) {
            Some(status) => status,
            None => {
                let mut body = response.into_body();
                while let Some(data) = body.data().await {
                    data.expect("data");
                }
                let trailers = body.trailers().await.expect("trailers").unwrap_or_default();
                header(&trailers).unwrap_or_default()
            }
        };
        assert_eq!(status, "4", "DEADLINE_EXCEEDED");
    }
    let verdict = grpc
        .validate(big)
        .await
        .expect("the budget was given back")
        .into_inner();
    assert_eq!(verdict.valid, Some(true), "{verdict:?}");
}

#[tokio::test]
async fn a_stream_of_small_frames_is_not_disconnected_while_the_workers_are_busy() {
    use prost::Message;
    use schemagate::grpc::proto::{StreamAnswer, StreamCheck};
    let app = spawn_app_with(&["--worker-threads", "1"]).await;
    let body = compile_storm(10_000).to_string();
    let busy = send_and_leave(&app, "/v1/validate/batch", body.as_bytes()).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let tcp = TcpStream::connect(app.grpc_addr).await.expect("connect");
    let (mut h2, connection) = h2::client::handshake(tcp).await.expect("handshake");
    let connection = tokio::spawn(connection);
    let request = http::Request::post(format!(
        "http://{}/schemagate.v1.Validator/ValidateStream",
        app.grpc_addr
    ))
    .header("content-type", "application/grpc")
    .header("te", "trailers")
    .body(())
    .expect("request");
    let (response, mut send) = h2.send_request(request, false).expect("send");
    // Each check in a DATA frame of its own, as a client sending one at a time does; each needs
    // a compile, so they wait for the busy worker.
    const N: usize = 4_000;
    for i in 0..N {
        let check = StreamCheck {
            id: i.to_string(),
            check: Some(grpc_check(
                &json!({"schema": {"type": "integer", "minimum": -(i as i64)}, "instance": i}),
            )),
        };
        let encoded = check.encode_to_vec();
        let mut frame = vec![0u8];
        frame.extend_from_slice(&u32::try_from(encoded.len()).expect("small").to_be_bytes());
        frame.extend_from_slice(&encoded);
        send.reserve_capacity(frame.len());
        send.send_data(frame.into(), i + 1 == N)
            .expect("the stream is still open");
        if i % 100 == 0 {
            tokio::task::yield_now().await;
        }
    }
    let response = response.await.expect("response headers");
    let mut body = response.into_body();
    let mut buffered = Vec::new();
    let mut answered = 0;
    while let Some(data) = body.data().await {
        let data = data.expect("the stream is not broken");
        let _ = body.flow_control().release_capacity(data.len());
        buffered.extend_from_slice(&data);
        while buffered.len() >= 5 {
            let len = u32::from_be_bytes(buffered[1..5].try_into().expect("4")) as usize;
            if buffered.len() < 5 + len {
                break;
            }
            let answer = StreamAnswer::decode(&buffered[5..5 + len]).expect("answer");
            assert!(answer.answer.is_some());
            answered += 1;
            buffered.drain(..5 + len);
        }
    }
    let trailers = body.trailers().await.expect("trailers").unwrap_or_default();
    assert_eq!(
        trailers.get("grpc-status").and_then(|v| v.to_str().ok()),
        Some("0"),
        "{trailers:?}"
    );
    assert_eq!(answered, N);
    drop(busy);
    drop(connection);
}
