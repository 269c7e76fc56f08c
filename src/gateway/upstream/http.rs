//! The HTTP client to the routes' upstreams: one pool for every route (HTTP/1.1, and HTTP/2
//! where TLS offers it), no redirects followed (nor relayed: the client gets 502), bodies never
//! decompressed (the client is asked for none), certificates checked against the system's trust
//! store and any extra CA.

use super::{Failure, UpstreamConfig};
use anyhow::Context;
use bytes::Bytes;
use http::header::HeaderMap;
use http::Method;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use std::sync::Arc;
use std::time::Duration;

/// The pooled client to every upstream.
pub struct HttpClient {
    client: reqwest::Client,
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
