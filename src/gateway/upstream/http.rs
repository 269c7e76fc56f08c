//! The HTTP client to the routes' upstreams: one pool for every route (HTTP/1.1, and HTTP/2
//! where TLS offers it), no redirects followed (nor relayed: the client gets 502), bodies never
//! decompressed (the client is asked for none), certificates checked against the system's trust
//! store and any extra CA. A connection (name lookup, TCP and TLS) is bounded by the connect
//! timeout and kept alive by TCP keepalive, so an upstream host that vanishes is noticed; a
//! request an HTTP/2 upstream refused unprocessed (REFUSED_STREAM, a graceful GOAWAY) is sent
//! again, at most twice. Proxies (`HTTPS_PROXY` and the like) are not used: upstreams are
//! reached directly.

use super::{Endpoint, Failure, UpstreamConfig};
use anyhow::Context;
use bytes::Bytes;
use http::header::{self, HeaderMap};
use http::{Method, Request, Uri};
use http_body_util::{BodyExt, Either, Full};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll};
use std::time::Duration;

/// How often a request refused unprocessed by an HTTP/2 upstream is sent again.
const RETRIES: usize = 2;

/// An upstream's answer, its body still to read ([`next_chunk`]).
pub type Response = http::Response<AnswerBody>;

/// An answer's body: as it comes from an upstream, or whole (an answer of the gateway's own in
/// a server's place).
pub type AnswerBody = Either<hyper::body::Incoming, Full<Bytes>>;

/// The pooled client to every upstream.
pub struct HttpClient {
    client: Client<Bounded, Full<Bytes>>,
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
        // A peer that vanishes without a reset is noticed within about a minute, on a pooled
        // connection and in the middle of an answer alike.
        tcp.set_keepalive(Some(Duration::from_secs(15)));
        tcp.set_keepalive_interval(Some(Duration::from_secs(15)));
        tcp.set_keepalive_retries(Some(3));
        #[cfg(any(target_os = "android", target_os = "fuchsia", target_os = "linux"))]
        tcp.set_tcp_user_timeout(Some(Duration::from_secs(30)));
        // ALPN offers h2 and http/1.1 (set by the builder).
        let tls = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_http1()
            .enable_http2()
            .wrap_connector(tcp);
        let connector = Bounded {
            inner: tls,
            timeout: config.connect_timeout,
        };
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

    /// Sends `method` to `endpoint` with `headers` and `body`; the answer once its head has
    /// come. The endpoint's credentials, if its URL has any, go as HTTP Basic credentials unless
    /// `headers` carry an `Authorization` of their own.
    pub async fn send(
        &self,
        method: Method,
        endpoint: &Endpoint,
        headers: &HeaderMap,
        body: Option<Bytes>,
    ) -> Result<Response, Failure> {
        let body = body.unwrap_or_default();
        let sent = async {
            let mut attempt = 0;
            loop {
                let request = request(&method, endpoint, headers, &body);
                match self.client.request(request).await {
                    Err(e) if attempt < RETRIES && refused_unprocessed(&e) => attempt += 1,
                    sent => return sent,
                }
            }
        };
        match tokio::time::timeout(self.timeout, sent).await {
            Err(_) => Err(Failure::TimedOut(self.timeout)),
            // hyper's errors name no URL (which may hold secrets): the failure reaches the client.
            Ok(Err(e)) => Err(Failure::Unreachable(error_chain(&e))),
            Ok(Ok(response)) => Ok(response.map(Either::Left)),
        }
    }
}

/// One request of [`HttpClient::send`].
fn request(
    method: &Method,
    endpoint: &Endpoint,
    headers: &HeaderMap,
    body: &Bytes,
) -> Request<Full<Bytes>> {
    let mut request = Request::new(Full::new(body.clone()));
    *request.method_mut() = method.clone();
    *request.uri_mut() = endpoint.uri.clone();
    *request.headers_mut() = headers.clone();
    if let Some(host) = &endpoint.host {
        request
            .headers_mut()
            .entry(header::HOST)
            .or_insert_with(|| host.clone());
    }
    if let Some(credentials) = &endpoint.credentials {
        request
            .headers_mut()
            .entry(header::AUTHORIZATION)
            .or_insert_with(|| credentials.clone());
    }
    request
}

/// Whether an HTTP/2 upstream refused the request before processing it, so that sending it again
/// is safe (RFC 9113, 8.7): a stream refused, or a graceful GOAWAY.
fn refused_unprocessed(error: &hyper_util::client::legacy::Error) -> bool {
    causes(error)
        .find_map(|cause| cause.downcast_ref::<h2::Error>())
        .is_some_and(|h2| {
            h2.is_remote()
                && ((h2.is_go_away() && h2.reason() == Some(h2::Reason::NO_ERROR))
                    || (h2.is_reset() && h2.reason() == Some(h2::Reason::REFUSED_STREAM)))
        })
}

/// `error` and its causes, outermost first.
fn causes<'e>(
    error: &'e (dyn std::error::Error + 'static),
) -> impl Iterator<Item = &'e (dyn std::error::Error + 'static)> {
    std::iter::successors(Some(error), |e| e.source())
}

/// The next chunk of `response`'s body, or `None` at its end (trailers are not relayed).
pub async fn next_chunk(response: &mut Response) -> Result<Option<Bytes>, String> {
    loop {
        match response.body_mut().frame().await {
            None => return Ok(None),
            Some(Err(e)) => return Err(error_chain(&*e)),
            Some(Ok(frame)) => {
                if let Ok(data) = frame.into_data() {
                    return Ok(Some(data));
                }
            }
        }
    }
}

/// The connector, a whole connection (name lookup, TCP, TLS) bounded by the connect timeout: the
/// TCP connector's own timeout covers the TCP connect alone.
#[derive(Clone)]
struct Bounded {
    inner: HttpsConnector<HttpConnector>,
    timeout: Duration,
}

type Connecting<T> = Pin<Box<dyn Future<Output = Result<T, BoxError>> + Send>>;
type BoxError = Box<dyn std::error::Error + Send + Sync>;
type Connection = <HttpsConnector<HttpConnector> as tower::Service<Uri>>::Response;

impl tower::Service<Uri> for Bounded {
    type Response = Connection;
    type Error = BoxError;
    type Future = Connecting<Connection>;

    fn poll_ready(&mut self, cx: &mut TaskContext<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let connecting = self.inner.call(uri);
        let timeout = self.timeout;
        Box::pin(async move {
            tokio::time::timeout(timeout, connecting)
                .await
                .unwrap_or_else(|_| {
                    Err(format!(
                        "no connection within {} s (--upstream-connect-timeout-secs)",
                        timeout.as_secs_f64()
                    )
                    .into())
                })
        })
    }
}

/// An error and its causes, on one line.
fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    causes(error)
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(": ")
}
