//! A REST client as wrk is: pre-built requests on keep-alive HTTP/1.1 connections.

use super::*;

/// A keep-alive HTTP/1.1 connection that sends pre-built requests and reads each answer whole by
/// its Content-Length, as wrk does: no pool and no header map, so the client stays cheap.
pub(crate) struct HttpConnection {
    pub(crate) stream: tokio::net::TcpStream,
    pub(crate) buf: BytesMut,
}

impl HttpConnection {
    pub(crate) async fn connect(addr: SocketAddr) -> anyhow::Result<Self> {
        let stream = tokio::net::TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        Ok(Self {
            stream,
            buf: BytesMut::with_capacity(64 * 1024),
        })
    }

    /// Sends `request` and reads the answer; returns its status.
    pub(crate) async fn round_trip(&mut self, request: &[u8]) -> anyhow::Result<u16> {
        self.stream.write_all(request).await?;
        self.buf.clear();
        loop {
            self.buf.reserve(64 * 1024);
            if self.stream.read_buf(&mut self.buf).await? == 0 {
                anyhow::bail!("the server closed the connection");
            }
            let mut headers = [httparse::EMPTY_HEADER; 16];
            let mut response = httparse::Response::new(&mut headers);
            let httparse::Status::Complete(head) = response.parse(&self.buf)? else {
                continue;
            };
            let status = response.code.unwrap_or(0);
            let length: usize = response
                .headers
                .iter()
                .find(|h| h.name.eq_ignore_ascii_case("content-length"))
                .and_then(|h| std::str::from_utf8(h.value).ok()?.parse().ok())
                .ok_or_else(|| anyhow::anyhow!("an answer without Content-Length"))?;
            while self.buf.len() < head + length {
                self.buf.reserve(head + length - self.buf.len());
                if self.stream.read_buf(&mut self.buf).await? == 0 {
                    anyhow::bail!("the server closed the connection mid-answer");
                }
            }
            return Ok(status);
        }
    }
}

/// A pre-built HTTP request and what it carries.
pub(crate) struct Request {
    pub(crate) http: Bytes,
    pub(crate) checks: u64,
    /// The check JSON in the body (not the HTTP head).
    pub(crate) bytes: u64,
}

impl Request {
    /// A whole HTTP/1.1 GET of `path`. It carries no check, but counts as one in the table so
    /// that its row reads as requests per second.
    pub(crate) fn get(path: &str) -> Request {
        Request {
            http: Bytes::from(format!("GET {path} HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n")),
            checks: 1,
            bytes: 0,
        }
    }

    /// A whole HTTP/1.1 POST of `body` to `path`.
    pub(crate) fn post(path: &str, body: &Body) -> Request {
        Request {
            http: Bytes::from(http_post(path, &body.json)),
            checks: body.checks,
            bytes: body.json.len() as u64,
        }
    }
}

/// The bearer token every request carries, when the harness runs with `--with-token`.
pub(crate) static TOKEN: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// The bytes of a whole HTTP/1.1 POST of the JSON `body` to `path`.
pub(crate) fn http_post(path: &str, body: &[u8]) -> Vec<u8> {
    let authorization = TOKEN
        .get()
        .map(|t| format!("authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    let mut http = format!(
        "POST {path} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n{authorization}content-length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    http.extend_from_slice(body);
    http
}

/// A REST leg: `connections` keep-alive connections, each sending the pre-built requests in turn.
pub(crate) async fn rest_leg(
    name: String,
    server: &ServerProcess,
    connections: usize,
    seconds: f64,
    requests: Vec<Request>,
) -> anyhow::Result<Leg> {
    let requests = Arc::new(requests);
    let mut states = Vec::with_capacity(connections);
    for _ in 0..connections {
        states.push(HttpConnection::connect(server.http).await?);
    }
    Ok(
        drive(name, (states, server), seconds, move |mut conn, task, i| {
            let requests = Arc::clone(&requests);
            async move {
                let request = &requests[(task * 7919 + i as usize) % requests.len()];
                let status = conn.round_trip(&request.http).await.expect("answer");
                assert_eq!(status, 200, "a request was refused");
                (conn, request.checks, request.bytes)
            }
        })
        .await,
    )
}
