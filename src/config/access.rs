//! Who may use a listening command, and over what: tokens and TLS, flags `serve` and `gateway`
//! share.

use super::*;
use crate::core::auth::{Auth, TokenSpec};
use crate::net::origins::AllowedPeers;
use crate::net::tls::TlsFiles;
use std::net::SocketAddr;
use std::path::PathBuf;

/// Tokens and TLS.
#[derive(Debug, Clone, clap::Args)]
pub struct AccessArgs {
    /// Token file (TOML, `[[tokens]]` with name, sha256, scopes, servers): requests then need a
    /// bearer token (REST: `Authorization`; gRPC: `authorization` metadata; the gateway:
    /// `Proxy-Authorization`) with the scope of what they ask. Reloaded like the policy (SIGHUP,
    /// content changes, POST /v1/admin/reload-tokens).
    #[arg(long, env = "SCHEMAGATE_AUTH_TOKENS")]
    pub auth_tokens: Option<PathBuf>,
    /// A token given inline, `NAME:SHA256:SCOPES[:SERVERS]` (scopes and server globs
    /// comma-separated); repeat the flag, or separate them by spaces in the variable.
    #[arg(long = "auth-token", env = "SCHEMAGATE_AUTH_TOKEN", value_delimiter = ' ', value_parser = TokenSpec::parse_inline)]
    pub auth_token: Vec<TokenSpec>,
    /// Serve without tokens on a non-loopback address (anyone who can reach the port may then
    /// use it).
    #[arg(long, env = "SCHEMAGATE_ALLOW_UNAUTHENTICATED")]
    pub allow_unauthenticated: bool,
    /// TLS certificate chain (PEM) for every port; with --tls-key. Reloaded when the file
    /// changes (every --policy-poll-interval seconds) and on SIGHUP.
    #[arg(long, env = "SCHEMAGATE_TLS_CERT", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// TLS private key (PEM) for --tls-cert.
    #[arg(long, env = "SCHEMAGATE_TLS_KEY", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// CA certificates (PEM) that client certificates must chain to: clients must then present
    /// one (mutual TLS). A certificate whose DNS name is a token's name authenticates as that
    /// token when the request carries no bearer token.
    #[arg(long, env = "SCHEMAGATE_TLS_CLIENT_CA", requires = "tls_cert")]
    pub tls_client_ca: Option<PathBuf>,
    /// Host names the listener answers to besides its own (comma-separated; the port is not
    /// compared). A request whose `Host` names another gets 403 (DNS-rebinding protection). By
    /// default: `localhost`, `127.0.0.1` and `[::1]` on a loopback address; the address itself
    /// on one other address; any host on a wildcard address (`0.0.0.0`, `[::]`), until this
    /// flag names some (then those, any IP address and the loopback names).
    #[arg(
        long,
        env = "SCHEMAGATE_ALLOWED_HOSTS",
        value_delimiter = ',',
        value_name = "HOSTS"
    )]
    pub allowed_hosts: Vec<String>,
    /// Origins allowed to send requests from a browser (comma-separated, as browsers send them:
    /// `https://app.example.com`). A request whose `Origin` is neither listed nor one of the
    /// allowed hosts (nor a loopback name) gets 403.
    #[arg(
        long,
        env = "SCHEMAGATE_ALLOWED_ORIGINS",
        value_delimiter = ',',
        value_name = "ORIGINS"
    )]
    pub allowed_origins: Vec<String>,
}

impl AccessArgs {
    /// The hosts and origins the flags allow besides the listener's own.
    pub fn allowed_peers(&self) -> anyhow::Result<AllowedPeers> {
        let trimmed = |list: &[String]| -> Vec<String> {
            list.iter()
                .map(|s| s.trim().to_owned())
                .filter(|s| !s.is_empty())
                .collect()
        };
        let peers = AllowedPeers {
            hosts: trimmed(&self.allowed_hosts),
            origins: trimmed(&self.allowed_origins),
        };
        peers.validate().map_err(anyhow::Error::msg)?;
        Ok(peers)
    }

    /// TLS for every port, when --tls-cert is given.
    pub fn tls_files(&self) -> Option<TlsFiles> {
        let (Some(cert), Some(key)) = (&self.tls_cert, &self.tls_key) else {
            return None;
        };
        Some(TlsFiles {
            cert: cert.clone(),
            key: key.clone(),
            client_ca: self.tls_client_ca.clone(),
        })
    }

    /// The tokens, and whether serving on `listens` without them is allowed: with no tokens,
    /// only on loopback addresses unless --allow-unauthenticated (`open_to` says what anyone
    /// could then do, for the message).
    pub fn auth(&self, listens: &[SocketAddr], open_to: &str) -> anyhow::Result<Auth> {
        let auth = Auth::new(self.auth_tokens.clone(), self.auth_token.clone())
            .context("loading --auth-tokens / --auth-token")?;
        if !auth.is_enabled() {
            let public: Vec<String> = listens
                .iter()
                .filter(|a| !a.ip().is_loopback())
                .map(ToString::to_string)
                .collect();
            if !public.is_empty() && !self.allow_unauthenticated {
                anyhow::bail!(
                    "refusing to serve without authentication on {} (not loopback): give tokens with --auth-tokens FILE (or --auth-token), or pass --allow-unauthenticated to accept that anyone who reaches the port may {open_to}",
                    public.join(" and ")
                );
            }
            tracing::warn!("no tokens configured (--auth-tokens): any client that reaches the port may {open_to}");
        }
        Ok(auth)
    }
}
