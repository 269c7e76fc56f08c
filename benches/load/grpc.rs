//! A gRPC client with pre-encoded calls on a bare HTTP/2 connection, answers counted undecoded.

use super::*;

pub(crate) fn grpc_check(item: &corpus::Item) -> proto::Check {
    proto::Check {
        server: item.server.clone(),
        tool: item.tool.clone(),
        payload: Some(proto::check::Payload::Result(
            item.result_text.clone().into(),
        )),
        attempt: 1,
        ..Default::default()
    }
}

/// A pre-encoded gRPC call: its path, its request messages framed as on the wire, and what it
/// carries.
pub(crate) struct GrpcCall {
    pub(crate) path: String,
    pub(crate) frames: Bytes,
    /// Answer messages expected: one per check for a stream, else one.
    pub(crate) answers: u64,
    pub(crate) checks: u64,
    pub(crate) bytes: u64,
}

impl GrpcCall {
    pub(crate) fn new<'m, M: prost::Message + 'm>(
        method: &str,
        messages: impl IntoIterator<Item = &'m M>,
        checks: u64,
        bytes: u64,
    ) -> GrpcCall {
        let mut frames = BytesMut::new();
        let mut count = 0;
        for message in messages {
            let encoded = message.encode_to_vec();
            frames.extend_from_slice(&[0]);
            frames.extend_from_slice(&(encoded.len() as u32).to_be_bytes());
            frames.extend_from_slice(&encoded);
            count += 1;
        }
        GrpcCall {
            path: format!("/schemagate.v1.Validator/{method}"),
            frames: frames.freeze(),
            answers: if method == "ValidateStream" { count } else { 1 },
            checks,
            bytes,
        }
    }
}

/// One HTTP/2 connection that sends pre-encoded gRPC calls and counts the answer messages
/// without decoding them: the gRPC twin of [`HttpConnection`], so the client stays cheap.
#[derive(Clone)]
pub(crate) struct GrpcConnection {
    pub(crate) h2: h2::client::SendRequest<Bytes>,
    pub(crate) authority: String,
}

impl GrpcConnection {
    pub(crate) async fn connect(addr: SocketAddr) -> anyhow::Result<Self> {
        let tcp = tokio::net::TcpStream::connect(addr).await?;
        tcp.set_nodelay(true)?;
        let (h2, connection) = h2::client::Builder::new()
            .initial_window_size(4 << 20)
            .initial_connection_window_size(16 << 20)
            .handshake(tcp)
            .await?;
        tokio::spawn(async move {
            let _ = connection.await;
        });
        Ok(Self {
            h2,
            authority: addr.to_string(),
        })
    }

    /// Makes `call`; returns how many answer messages came back, after checking grpc-status.
    pub(crate) async fn call(&mut self, call: &GrpcCall) -> anyhow::Result<u64> {
        let mut request = http::Request::builder()
            .method("POST")
            .uri(format!("http://{}{}", self.authority, call.path))
            .header("content-type", "application/grpc")
            .header("te", "trailers");
        if let Some(token) = crate::http1::TOKEN.get() {
            request = request.header("authorization", format!("Bearer {token}"));
        }
        let request = request.body(())?;
        let mut h2 = self.h2.clone().ready().await?;
        let (response, mut send) = h2.send_request(request, false)?;
        send.send_data(call.frames.clone(), true)?;
        let mut body = response.await?.into_body();
        let mut frames = FrameCounter::default();
        while let Some(chunk) = body.data().await {
            let chunk = chunk?;
            body.flow_control().release_capacity(chunk.len())?;
            frames.feed(&chunk);
        }
        let status = body
            .trailers()
            .await?
            .and_then(|t| t.get("grpc-status").cloned());
        anyhow::ensure!(
            status.as_ref().is_some_and(|s| s == "0"),
            "a call ended with grpc-status {status:?}"
        );
        Ok(frames.messages)
    }
}

/// Counts length-prefixed gRPC messages across the chunks of a body.
#[derive(Default)]
pub(crate) struct FrameCounter {
    pub(crate) messages: u64,
    /// Bytes of the current message's 5-byte prefix seen so far, and the prefix itself.
    pub(crate) head: Vec<u8>,
    /// Bytes of the current message's body still to come.
    pub(crate) remaining: usize,
}

impl FrameCounter {
    pub(crate) fn feed(&mut self, mut chunk: &[u8]) {
        while !chunk.is_empty() {
            if self.remaining > 0 {
                let take = self.remaining.min(chunk.len());
                self.remaining -= take;
                chunk = &chunk[take..];
                continue;
            }
            let take = (5 - self.head.len()).min(chunk.len());
            self.head.extend_from_slice(&chunk[..take]);
            chunk = &chunk[take..];
            if self.head.len() == 5 {
                self.remaining =
                    u32::from_be_bytes([self.head[1], self.head[2], self.head[3], self.head[4]])
                        as usize;
                self.head.clear();
                self.messages += 1;
            }
        }
    }
}

/// A gRPC leg: `in_flight` calls at once on one connection, each making the pre-encoded calls
/// in turn.
pub(crate) async fn grpc_leg(
    name: String,
    (connection, server): (&GrpcConnection, &ServerProcess),
    in_flight: usize,
    seconds: f64,
    calls: Vec<GrpcCall>,
) -> Leg {
    let calls = Arc::new(calls);
    drive(
        name,
        (vec![connection.clone(); in_flight], server),
        seconds,
        move |mut grpc, task, i| {
            let calls = Arc::clone(&calls);
            async move {
                let call = &calls[(task * 7919 + i as usize) % calls.len()];
                let answers = grpc.call(call).await.expect("a gRPC answer");
                assert_eq!(answers, call.answers, "every check answered");
                (grpc, call.checks, call.bytes)
            }
        },
    )
    .await
}
