//! The client to the upstream MCP servers: one pool for every route (HTTP/1.1, and HTTP/2 where
//! TLS offers it), no redirects followed (nor relayed: the client gets 502), bodies
//! never decompressed (the client is asked for none), certificates checked against the system's
//! trust store and any extra CA. Which headers cross in each direction is decided here.

use anyhow::Context;
use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::Method;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// How the gateway reaches its upstreams.
#[derive(Debug, Clone)]
pub struct UpstreamConfig {
    /// Longest wait for an upstream's answer to begin (its status and headers).
    pub timeout: Duration,
    /// Longest wait for a connection to an upstream.
    pub connect_timeout: Duration,
    /// Extra certificate authorities (PEM) trusted for `https` upstreams.
    pub ca: Option<PathBuf>,
}

/// Why an upstream gave no answer.
#[derive(Debug)]
pub enum Failure {
    /// It could not be reached, or the connection failed before an answer began.
    Unreachable(String),
    /// Its answer did not begin within the timeout.
    TimedOut(Duration),
    /// Its answer cannot be relayed as one (why).
    BadAnswer(String),
}

impl Failure {
    /// The HTTP status the client gets for it.
    pub fn status(&self) -> http::StatusCode {
        match self {
            Failure::Unreachable(_) | Failure::BadAnswer(_) => http::StatusCode::BAD_GATEWAY,
            Failure::TimedOut(_) => http::StatusCode::GATEWAY_TIMEOUT,
        }
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Unreachable(why) => write!(f, "could not be reached ({why})"),
            Failure::TimedOut(after) => write!(
                f,
                "did not begin its answer within {} s (--upstream-timeout-secs)",
                after.as_secs_f64()
            ),
            Failure::BadAnswer(why) => f.write_str(why),
        }
    }
}

/// The pooled client to every upstream.
pub struct Upstream {
    client: reqwest::Client,
    timeout: Duration,
}

impl Upstream {
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
        let mut tls = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .context("TLS protocol versions")?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(verifier))
            .with_no_client_auth();
        tls.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        let client = reqwest::Client::builder()
            .tls_backend_preconfigured(tls)
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(config.connect_timeout)
            .pool_idle_timeout(Duration::from_secs(90))
            .tcp_nodelay(true)
            .build()
            .context("the upstream client")?;
        Ok(Self {
            client,
            timeout: config.timeout,
        })
    }

    /// Sends `method` to `url` with `headers` and `body`; the answer once its head has come.
    pub async fn send(
        &self,
        method: Method,
        url: &reqwest::Url,
        headers: HeaderMap,
        body: Option<Bytes>,
    ) -> Result<reqwest::Response, Failure> {
        let mut request = self.client.request(method, url.clone()).headers(headers);
        if let Some(body) = body {
            request = request.body(body);
        }
        match tokio::time::timeout(self.timeout, request.send()).await {
            Err(_) => Err(Failure::TimedOut(self.timeout)),
            // Without the URL, which may hold secrets: the failure reaches the client.
            Ok(Err(e)) => Err(Failure::Unreachable(error_chain(&e.without_url()))),
            Ok(Ok(response)) => Ok(response),
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

/// The MCP session header.
pub const MCP_SESSION_ID: &str = "mcp-session-id";

/// Headers of one hop only (RFC 9110, 7.6.1), never relayed in either direction.
const HOP_BY_HOP: [HeaderName; 8] = [
    header::CONNECTION,
    header::PROXY_AUTHENTICATE,
    header::PROXY_AUTHORIZATION,
    header::TE,
    header::TRAILER,
    header::TRANSFER_ENCODING,
    header::UPGRADE,
    HeaderName::from_static("keep-alive"),
];

/// The client's headers as the upstream gets them: all of them (`Authorization`,
/// `Mcp-Session-Id`, `MCP-Protocol-Version`, `Last-Event-ID`, `Mcp-Method`, `Mcp-Name`,
/// `Mcp-Param-*` and any other), less those of one hop, `Host` and `Content-Length` (the
/// client to the upstream sets them) and `Accept-Encoding` (the gateway reads what it relays,
/// so it asks for no compression).
pub fn to_upstream(client: &HeaderMap) -> HeaderMap {
    let mut headers = client.clone();
    strip_hop_by_hop(&mut headers);
    for name in [
        header::HOST,
        header::CONTENT_LENGTH,
        header::ACCEPT_ENCODING,
    ] {
        headers.remove(name);
    }
    headers
}

/// The upstream's headers as the client gets them: all of them less those of one hop and
/// `Content-Length` (the answer may be rewritten).
pub fn to_client(upstream: &HeaderMap) -> HeaderMap {
    let mut headers = upstream.clone();
    strip_hop_by_hop(&mut headers);
    headers.remove(header::CONTENT_LENGTH);
    headers
}

fn strip_hop_by_hop(headers: &mut HeaderMap) {
    // Headers the Connection header names are of one hop too.
    let named: Vec<HeaderName> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|name| HeaderName::from_bytes(name.trim().as_bytes()).ok())
        .collect();
    for name in named.iter().chain(HOP_BY_HOP.iter()) {
        headers.remove(name);
    }
}

/// The headers of a request the rules wrote (a listing they ask for, an error answer), from the
/// client's: a plain MCP POST, with the headers that describe a request's body (2026-07-28's
/// `Mcp-Method`, `Mcp-Name`, `Mcp-Param-*`) describing this one, not the client's.
pub fn own_request_headers(headers: &mut HeaderMap, body: &[u8]) {
    let described = headers.contains_key("mcp-method");
    let about_body: Vec<HeaderName> = headers
        .keys()
        .filter(|name| {
            let name = name.as_str();
            name == "mcp-method" || name == "mcp-name" || name.starts_with("mcp-param-")
        })
        .cloned()
        .collect();
    for name in about_body {
        headers.remove(name);
    }
    if described {
        if let crate::mcp::Framing::Request { method, .. } = crate::mcp::framing(body) {
            if let Ok(method) = HeaderValue::from_str(&method) {
                headers.insert(HeaderName::from_static("mcp-method"), method);
            }
        }
    }
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    headers.insert(
        header::ACCEPT,
        HeaderValue::from_static("application/json, text/event-stream"),
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    #[test]
    fn headers_of_one_hop_stay_and_the_rest_cross() {
        let mut client = HeaderMap::new();
        for (name, value) in [
            ("authorization", "Bearer t"),
            ("mcp-session-id", "s1"),
            ("mcp-param-region", "eu"),
            ("connection", "keep-alive, x-hop"),
            ("x-hop", "1"),
            ("keep-alive", "timeout=5"),
            ("host", "gateway:8090"),
            ("accept-encoding", "gzip"),
            ("content-length", "12"),
        ] {
            client.insert(
                HeaderName::from_static(name),
                HeaderValue::from_static(value),
            );
        }
        let sent = to_upstream(&client);
        let mut names: Vec<&str> = sent.keys().map(|n| n.as_str()).collect();
        names.sort_unstable();
        assert_eq!(
            names,
            ["authorization", "mcp-param-region", "mcp-session-id"]
        );
    }
}
