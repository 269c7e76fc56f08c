//! The HTTP client to the routes' upstreams: one pool for every route (HTTP/1.1, and HTTP/2
//! where TLS offers it), no redirects followed (nor relayed: the client gets 502), bodies never
//! decompressed (the client is asked for none), certificates checked against the system's trust
//! store and any extra CA.

use super::{Failure, UpstreamConfig};
use anyhow::Context;
use bytes::Bytes;
use http::header::HeaderMap;
use http::{Method, Request, Uri};
use http_body_util::{BodyExt, Full};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use std::sync::Arc;
use std::time::Duration;

/// An upstream's answer, its body still to read ([`next_chunk`]).
pub type Response = http::Response<AnswerBody>;

/// An answer's body: as it comes from an upstream, or whole (an answer of the gateway's own in
/// a server's place).
pub enum AnswerBody {
    Incoming(hyper::body::Incoming),
    Whole(Option<Bytes>),
}

/// The pooled client to every upstream.
pub struct HttpClient {
    client: Client<HttpsConnector<HttpConnector>, Full<Bytes>>,
    timeout: Duration,
}

impl HttpClient {
    pub fn new(config: &UpstreamConfig) -> anyhow::Result<Self> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut extra = Vec::new();
        if let Some(path) = &config.ca {
            for cert in CertificateDer::pem_file_iter(path)
                .with_context(|| format!("--upstream-ca {}", path.display()))?
            {
                extra.push(cert.with_context(|| {
                    format!("--upstream-ca {}: not a PEM certificate", path.display())
                })?);
            }
            anyhow::ensure!(
                !extra.is_empty(),
                "--upstream-ca {}: no certificate in the file",
                path.display()
            );
        }
        let verifier =
            rustls_platform_verifier::Verifier::new_with_extra_roots(extra, Arc::clone(&provider))
                .context("the system's certificate store")?;
        let tls = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .context("TLS protocol versions")?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(verifier))
            .with_no_client_auth();
        let mut tcp = HttpConnector::new();
        tcp.enforce_http(false);
        tcp.set_nodelay(true);
        tcp.set_connect_timeout(Some(config.connect_timeout));
        // ALPN offers h2 and http/1.1 (set by the builder).
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_http1()
            .enable_http2()
            .wrap_connector(tcp);
        // Redirects are not followed: this client follows none.
        let client = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(90))
            .pool_timer(TokioTimer::new())
            .build(connector);
        Ok(Self {
            client,
            timeout: config.timeout,
        })
    }

    /// Sends `method` to `uri` with `headers` and `body`; the answer once its head has come.
    pub async fn send(
        &self,
        method: Method,
        uri: &Uri,
        headers: HeaderMap,
        body: Option<Bytes>,
    ) -> Result<Response, Failure> {
        let mut request = Request::new(Full::new(body.unwrap_or_default()));
        *request.method_mut() = method;
        *request.uri_mut() = uri.clone();
        *request.headers_mut() = headers;
        match tokio::time::timeout(self.timeout, self.client.request(request)).await {
            Err(_) => Err(Failure::TimedOut(self.timeout)),
            // hyper's errors name no URL (which may hold secrets): the failure reaches the client.
            Ok(Err(e)) => Err(Failure::Unreachable(error_chain(&e))),
            Ok(Ok(response)) => Ok(response.map(AnswerBody::Incoming)),
        }
    }
}

/// The next chunk of `response`'s body, or `None` at its end (trailers are not relayed).
pub async fn next_chunk(response: &mut Response) -> Result<Option<Bytes>, String> {
    let body = match response.body_mut() {
        AnswerBody::Whole(whole) => return Ok(whole.take()),
        AnswerBody::Incoming(body) => body,
    };
    loop {
        match body.frame().await {
            None => return Ok(None),
            Some(Err(e)) => return Err(error_chain(&e)),
            Some(Ok(frame)) => {
                if let Ok(data) = frame.into_data() {
                    return Ok(Some(data));
                }
            }
        }
    }
}

/// An error and its causes, on one line.
fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
