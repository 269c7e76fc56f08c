//! The floor the gateway is measured against: a bare tokio + hyper relay of Streamable HTTP, with
//! no MCP work at all. Each request goes to the upstream's URL with its method, headers and body
//! as they came (streamed, never read whole), and the upstream's answer comes back the same way,
//! on hyper-util's pooled client. The harness runs it in a process of its own (`--bare-relay
//! URL`), which prints its own URL on its first line, as the test server does.

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use hyper_util::rt::{TokioExecutor, TokioIo};
use std::convert::Infallible;

type Upstream = Client<HttpConnector, Incoming>;

/// Relays every request it accepts to `upstream` until the process is killed.
pub(crate) fn run(upstream: &str) -> anyhow::Result<()> {
    let upstream: http::Uri = upstream.parse()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        println!("http://{}/mcp/bench", listener.local_addr()?);
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        let client: Upstream = Client::builder(TokioExecutor::new()).build(connector);
        loop {
            let (stream, _) = listener.accept().await?;
            stream.set_nodelay(true)?;
            let (client, upstream) = (client.clone(), upstream.clone());
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |request| {
                    relay(client.clone(), upstream.clone(), request)
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    })
}

/// One request relayed: the upstream's answer, or a 502 when it gave none.
async fn relay(
    client: Upstream,
    upstream: http::Uri,
    mut request: http::Request<Incoming>,
) -> Result<http::Response<BoxBody<Bytes, hyper::Error>>, Infallible> {
    *request.uri_mut() = upstream;
    request.headers_mut().remove(http::header::HOST);
    Ok(match client.request(request).await {
        Ok(answer) => answer.map(BodyExt::boxed),
        Err(_) => {
            let empty = http_body_util::Empty::new().map_err(|never| match never {});
            let mut answer = http::Response::new(empty.boxed());
            *answer.status_mut() = http::StatusCode::BAD_GATEWAY;
            answer
        }
    })
}
