//! TLS on both ports (rustls, with ring; no OpenSSL): the server's certificate and key from PEM
//! files, reloaded when they change, and, with a client CA, client certificates required
//! (mutual TLS), whose DNS names can stand for a token's name ([`crate::core::auth`]).

use crate::core::auth::PeerNames;
use crate::net::Protocols;
use anyhow::Context;
use arc_swap::ArcSwap;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};
use std::io;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;

/// Where the certificate, its key and the client CA (for mutual TLS) are.
#[derive(Debug, Clone)]
pub struct TlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
    pub client_ca: Option<PathBuf>,
}

/// The acceptors in force (one per port: they offer different ALPN protocols), swapped whole on
/// a reload.
pub struct Tls {
    files: TlsFiles,
    rest: ArcSwap<TlsAcceptor>,
    grpc: ArcSwap<TlsAcceptor>,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tls").field("files", &self.files).finish()
    }
}

impl Tls {
    /// Reads the files; a bad file stops start-up with what to fix.
    pub fn load(files: TlsFiles) -> anyhow::Result<Arc<Tls>> {
        let (rest, grpc) = acceptors(&files)?;
        Ok(Arc::new(Tls {
            files,
            rest: ArcSwap::from_pointee(rest),
            grpc: ArcSwap::from_pointee(grpc),
        }))
    }

    /// The certificate file (watched for changes).
    pub fn cert_path(&self) -> &std::path::Path {
        &self.files.cert
    }

    /// Reloads the files when the certificate's content changes (polled every `poll_secs`; 0:
    /// never) and on SIGHUP, until `stop`.
    pub fn watch(self: &Arc<Self>, poll_secs: u64, stop: &tokio_util::sync::CancellationToken) {
        let watched = Arc::clone(self);
        crate::ops::reload::watch(
            "tls",
            self.files.cert.clone(),
            poll_secs,
            true,
            stop.clone(),
            move || watched.reload(),
        );
    }

    /// Re-reads the files; new connections use them, open ones keep theirs. A bad file keeps the
    /// certificate in force.
    pub fn reload(&self) {
        match acceptors(&self.files) {
            Ok((rest, grpc)) => {
                self.rest.store(Arc::new(rest));
                self.grpc.store(Arc::new(grpc));
                tracing::info!(cert = %self.files.cert.display(), "TLS certificate reloaded");
            }
            Err(e) => tracing::error!(
                error = format!("{e:#}"),
                "TLS reload failed; the certificate in force stays"
            ),
        }
    }

    /// The acceptor for a port speaking `protocols`.
    pub fn acceptor(&self, protocols: Protocols) -> Arc<TlsAcceptor> {
        match protocols {
            Protocols::Http1AndHttp2 => self.rest.load_full(),
            Protocols::Http2 => self.grpc.load_full(),
        }
    }
}

fn acceptors(files: &TlsFiles) -> anyhow::Result<(TlsAcceptor, TlsAcceptor)> {
    let rest = config(files, vec![b"h2".to_vec(), b"http/1.1".to_vec()])?;
    let grpc = config(files, vec![b"h2".to_vec()])?;
    Ok((
        TlsAcceptor::from(Arc::new(rest)),
        TlsAcceptor::from(Arc::new(grpc)),
    ))
}

fn config(files: &TlsFiles, alpn: Vec<Vec<u8>>) -> anyhow::Result<ServerConfig> {
    let certs = CertificateDer::pem_file_iter(&files.cert)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .with_context(|| {
            format!(
                "--tls-cert {}: not a PEM certificate chain",
                files.cert.display()
            )
        })?;
    anyhow::ensure!(
        !certs.is_empty(),
        "--tls-cert {}: no certificate in the file",
        files.cert.display()
    );
    let key = PrivateKeyDer::from_pem_file(&files.key)
        .with_context(|| format!("--tls-key {}: not a PEM private key", files.key.display()))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .context("TLS protocol versions")?;
    let builder = match &files.client_ca {
        None => builder.with_no_client_auth(),
        Some(path) => {
            let mut roots = RootCertStore::empty();
            for ca in CertificateDer::pem_file_iter(path)
                .with_context(|| format!("--tls-client-ca {}", path.display()))?
            {
                roots
                    .add(ca.with_context(|| format!("--tls-client-ca {}", path.display()))?)
                    .with_context(|| {
                        format!("--tls-client-ca {}: not a CA certificate", path.display())
                    })?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .with_context(|| format!("--tls-client-ca {}", path.display()))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let mut config = builder
        .with_single_cert(certs, key)
        .context("--tls-cert and --tls-key do not make a usable pair")?;
    config.alpn_protocols = alpn;
    Ok(config)
}

/// Completes the TLS handshake on `io` within `timeout` (the header-read timeout: a client that
/// stalls in it is closed like one that stalls in its headers); the stream and the DNS names of
/// the client's verified certificate, when it presented one.
pub async fn handshake<I>(
    acceptor: &TlsAcceptor,
    io: I,
    timeout: Duration,
) -> io::Result<(TlsStream<I>, Option<PeerNames>)>
where
    I: AsyncRead + AsyncWrite + Unpin,
{
    let stream = tokio::time::timeout(timeout, acceptor.accept(io))
        .await
        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "TLS handshake timed out"))??;
    let names = peer_names(stream.get_ref().1.peer_certificates());
    Ok((stream, names))
}

/// The DNS names of a verified client certificate (its subject alternative names).
fn peer_names(certs: Option<&[CertificateDer<'_>]>) -> Option<PeerNames> {
    let leaf = certs?.first()?;
    let cert = webpki::EndEntityCert::try_from(leaf).ok()?;
    let names: Vec<String> = cert.valid_dns_names().map(str::to_owned).collect();
    (!names.is_empty()).then(|| PeerNames(names.into()))
}
