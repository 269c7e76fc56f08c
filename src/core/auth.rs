//! Who may do what: bearer tokens with scopes, optionally limited to some servers.
//!
//! Tokens are never stored: the token file names each by the hex SHA-256 of its text, and a
//! request's token is hashed and looked up by that digest (so no comparison ever runs over the
//! token itself). Each token has a name (what logs and metrics show), scopes (`check`,
//! `register`, `admin`, `metrics`) and, optionally, globs of the servers it may check and
//! register for: a tenant's orchestrator then cannot claim a trusted server's name to pick its
//! tier. The adapters ask [`Auth::authenticate`] once per request (a stream: once) for the
//! scope its route needs; the gate asks the [`Caller`] about each check's server.
//!
//! With no tokens configured, every caller is [`Caller::open`], allowed everything.

use crate::core::error::{CheckError, Denied, Unauthenticated};
use arc_swap::ArcSwap;
use globset::{Glob, GlobSet, GlobSetBuilder};
use serde::Deserialize;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

/// What a request asks to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// The validate endpoints and RPCs.
    Check,
    /// Registering tools.
    Register,
    /// Operator endpoints (policy and token reload).
    Admin,
    /// `/metrics`, when --metrics-require-token is set.
    Metrics,
}

impl Scope {
    pub const ALL: [Scope; 4] = [Scope::Check, Scope::Register, Scope::Admin, Scope::Metrics];

    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Check => "check",
            Scope::Register => "register",
            Scope::Admin => "admin",
            Scope::Metrics => "metrics",
        }
    }

    fn bit(self) -> u8 {
        1 << (self as u8)
    }

    fn parse(text: &str) -> Option<Scope> {
        Scope::ALL.into_iter().find(|s| s.as_str() == text)
    }
}

/// Who is asking: a token's name and what it may do.
#[derive(Debug)]
pub struct Caller {
    name: Arc<str>,
    scopes: u8,
    /// The servers it may name, when limited: the globs and how they read.
    servers: Option<(GlobSet, String)>,
}

impl Caller {
    /// The caller when no tokens are configured: anyone, allowed everything.
    pub fn open() -> Arc<Caller> {
        static OPEN: OnceLock<Arc<Caller>> = OnceLock::new();
        Arc::clone(OPEN.get_or_init(|| {
            Arc::new(Caller {
                name: Arc::from("-"),
                scopes: u8::MAX,
                servers: None,
            })
        }))
    }

    /// The token's name (`-` for an open caller).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The names of the scopes it holds.
    pub fn scopes(&self) -> Vec<&'static str> {
        Scope::ALL
            .into_iter()
            .filter(|s| self.scopes & s.bit() != 0)
            .map(Scope::as_str)
            .collect()
    }

    /// The token's name, or `None` for an open caller (no tokens configured).
    pub fn token_name(&self) -> Option<&str> {
        (&*self.name != "-").then_some(&*self.name)
    }

    /// Whether it may do what `scope` covers.
    pub fn may(&self, scope: Scope) -> Result<(), CheckError> {
        if self.scopes & scope.bit() != 0 {
            return Ok(());
        }
        Err(CheckError::Forbidden {
            token: self.name.to_string(),
            denied: Denied::Scope(scope.as_str()),
        })
    }

    /// Whether it may name `server` (a check that names none, under the default tier, always
    /// may).
    pub fn may_name(&self, server: Option<&str>) -> Result<(), CheckError> {
        match (&self.servers, server) {
            (Some((globs, allowed)), Some(server)) if !globs.is_match(server) => {
                Err(CheckError::Forbidden {
                    token: self.name.to_string(),
                    denied: Denied::Server {
                        server: server.to_owned(),
                        allowed: allowed.clone(),
                    },
                })
            }
            _ => Ok(()),
        }
    }
}

/// The DNS names of the client certificate a connection presented (mutual TLS), verified against
/// `--tls-client-ca`: a token whose name is one of them is the caller when no bearer token is
/// sent.
#[derive(Debug, Clone)]
pub struct PeerNames(pub Arc<[String]>);

/// Why a token file (or an inline token) cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    #[error("cannot read the token file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("token file {path}: {message}")]
    Invalid { path: String, message: String },
}

/// One `[[tokens]]` entry of the token file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenSpec {
    pub name: String,
    /// Hex SHA-256 of the token; absent, the entry is for a client certificate naming `name`.
    pub sha256: Option<String>,
    pub scopes: Vec<String>,
    /// Globs of the servers it may check and register for; absent: any.
    pub servers: Option<Vec<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TokenFile {
    #[serde(default)]
    tokens: Vec<TokenSpec>,
}

impl TokenSpec {
    /// Reads an inline token, `NAME:SHA256:SCOPE[,SCOPE...][:GLOB[,GLOB...]]`.
    pub fn parse_inline(text: &str) -> Result<TokenSpec, String> {
        let mut parts = text.split(':');
        let (Some(name), Some(sha256), Some(scopes)) = (parts.next(), parts.next(), parts.next())
        else {
            return Err(format!(
                "{text:?} is not NAME:SHA256:SCOPES[:SERVERS] (for example orchestrator:9f86d0...:check:crm,partner-*)"
            ));
        };
        let servers = parts
            .next()
            .map(|globs| globs.split(',').map(str::to_owned).collect());
        if parts.next().is_some() {
            return Err(format!("{text:?} has more than four ':'-separated parts"));
        }
        Ok(TokenSpec {
            name: name.to_owned(),
            sha256: Some(sha256.to_owned()),
            scopes: scopes.split(',').map(str::to_owned).collect(),
            servers,
        })
    }
}

/// The tokens in force, by the SHA-256 of their text.
#[derive(Debug, Default)]
struct Tokens {
    by_digest: HashMap<[u8; 32], Arc<Caller>>,
    /// Every entry, by name: a client certificate's DNS name finds its entry here.
    by_name: HashMap<String, Arc<Caller>>,
}

impl Tokens {
    fn build(specs: &[TokenSpec], source: &str) -> Result<Tokens, AuthError> {
        let invalid = |message: String| AuthError::Invalid {
            path: source.to_owned(),
            message,
        };
        let mut by_digest = HashMap::new();
        let mut by_name = HashMap::new();
        for spec in specs {
            if spec.name.is_empty() || by_name.contains_key(&spec.name) {
                return Err(invalid(format!(
                    "token name {:?} is empty or used twice: give each token its own name",
                    spec.name
                )));
            }
            let digest = match &spec.sha256 {
                None => None,
                Some(hex) => Some(parse_digest(hex).ok_or_else(|| {
                    invalid(format!(
                        "token {:?}: sha256 must be 64 hex digits (sha256sum of the token), not {hex:?}",
                        spec.name
                    ))
                })?),
            };
            let mut scopes = 0u8;
            for scope in &spec.scopes {
                let scope = Scope::parse(scope).ok_or_else(|| {
                    invalid(format!(
                        "token {:?}: unknown scope {scope:?} (scopes: check, register, admin, metrics)",
                        spec.name
                    ))
                })?;
                scopes |= scope.bit();
            }
            let servers = match &spec.servers {
                None => None,
                Some(globs) => {
                    let mut set = GlobSetBuilder::new();
                    for glob in globs {
                        set.add(Glob::new(glob).map_err(|e| {
                            invalid(format!("token {:?}: server glob {glob:?}: {e}", spec.name))
                        })?);
                    }
                    let set = set
                        .build()
                        .map_err(|e| invalid(format!("token {:?}: {e}", spec.name)))?;
                    Some((set, globs.join(", ")))
                }
            };
            let caller = Arc::new(Caller {
                name: Arc::from(spec.name.as_str()),
                scopes,
                servers,
            });
            by_name.insert(spec.name.clone(), Arc::clone(&caller));
            if let Some(digest) = digest {
                if by_digest.insert(digest, caller).is_some() {
                    return Err(invalid(format!(
                        "token {:?} has the same sha256 as another token",
                        spec.name
                    )));
                }
            }
        }
        Ok(Tokens { by_digest, by_name })
    }
}

fn parse_digest(hex: &str) -> Option<[u8; 32]> {
    let hex = hex.trim().as_bytes();
    if hex.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (byte, pair) in out.iter_mut().zip(hex.chunks_exact(2)) {
        let pair = std::str::from_utf8(pair).ok()?;
        *byte = u8::from_str_radix(pair, 16).ok()?;
    }
    Some(out)
}

/// The token file and inline tokens, reloaded whole; reads take no lock.
#[derive(Debug)]
pub struct Auth {
    path: Option<PathBuf>,
    inline: Vec<TokenSpec>,
    current: ArcSwap<Tokens>,
    enabled: bool,
    metrics_need_token: bool,
}

impl Auth {
    /// Loads the token file (if any) and the inline tokens. With neither, authentication is off.
    pub fn new(path: Option<PathBuf>, inline: Vec<TokenSpec>) -> Result<Auth, AuthError> {
        let enabled = path.is_some() || !inline.is_empty();
        let tokens = load(path.as_deref(), &inline)?;
        Ok(Auth {
            path,
            inline,
            current: ArcSwap::from_pointee(tokens),
            enabled,
            metrics_need_token: false,
        })
    }

    /// Requires the `metrics` scope for `/metrics` (when tokens are configured).
    pub fn with_metrics_token(mut self, required: bool) -> Self {
        self.metrics_need_token = required && self.enabled;
        self
    }

    /// Whether `/metrics` needs a token with the `metrics` scope.
    pub fn metrics_need_token(&self) -> bool {
        self.metrics_need_token
    }

    /// Whether requests must carry a token.
    pub fn is_enabled(&self) -> bool {
        self.enabled
    }

    /// The token file, when one is configured.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// How many tokens (and certificate names) are in force.
    pub fn count(&self) -> usize {
        self.current.load().by_name.len()
    }

    /// Re-reads the token file. A bad file keeps the tokens in force and says why.
    pub fn reload(&self) -> Result<usize, AuthError> {
        match load(self.path.as_deref(), &self.inline) {
            Ok(tokens) => {
                let n = tokens.by_name.len();
                self.current.store(Arc::new(tokens));
                tracing::info!(tokens = n, "tokens reloaded");
                Ok(n)
            }
            Err(e) => {
                tracing::error!(error = %e, "token reload failed; the previous tokens stay in force");
                Err(e)
            }
        }
    }

    /// Who sent `authorization` (the header's or metadata's value) or, without one, presented a
    /// client certificate naming a token, if it may do `scope`.
    pub fn authenticate(
        &self,
        authorization: Option<&[u8]>,
        peer: Option<&PeerNames>,
        scope: Scope,
    ) -> Result<Arc<Caller>, CheckError> {
        if !self.enabled {
            return Ok(Caller::open());
        }
        let tokens = self.current.load();
        let caller = match (authorization, peer) {
            (Some(authorization), _) => {
                let token = bearer(authorization)
                    .ok_or(CheckError::Unauthenticated(Unauthenticated::Missing))?;
                let digest: [u8; 32] = Sha256::digest(token).into();
                tokens.by_digest.get(&digest).cloned()
            }
            (None, Some(PeerNames(names))) => {
                names.iter().find_map(|n| tokens.by_name.get(n).cloned())
            }
            (None, None) => return Err(CheckError::Unauthenticated(Unauthenticated::Missing)),
        }
        .ok_or(CheckError::Unauthenticated(Unauthenticated::Unknown))?;
        caller.may(scope)?;
        Ok(caller)
    }
}

/// The token of a `Bearer` credential (the scheme in any case).
fn bearer(value: &[u8]) -> Option<&[u8]> {
    let (scheme, token) = value.split_at_checked(7)?;
    if !scheme.eq_ignore_ascii_case(b"bearer ") {
        return None;
    }
    let token = token.trim_ascii();
    (!token.is_empty()).then_some(token)
}

fn load(path: Option<&Path>, inline: &[TokenSpec]) -> Result<Tokens, AuthError> {
    let mut specs = inline.to_vec();
    let source = match path {
        Some(path) => {
            let text = std::fs::read_to_string(path).map_err(|source| AuthError::Read {
                path: path.to_path_buf(),
                source,
            })?;
            let file: TokenFile = toml::from_str(&text).map_err(|e| AuthError::Invalid {
                path: path.display().to_string(),
                message: e.to_string(),
            })?;
            specs.extend(file.tokens);
            path.display().to_string()
        }
        None => "--auth-token".to_owned(),
    };
    Tokens::build(&specs, &source)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sha(token: &str) -> String {
        Sha256::digest(token.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    fn auth(specs: Vec<TokenSpec>) -> Auth {
        Auth::new(None, specs).expect("valid tokens")
    }

    #[test]
    fn a_token_is_known_by_its_digest_and_held_to_its_scopes_and_servers() {
        let auth = auth(vec![TokenSpec::parse_inline(&format!(
            "crm-bot:{}:check:crm,partner-*",
            sha("s3cret")
        ))
        .expect("inline")]);
        let caller = auth
            .authenticate(Some(b"Bearer s3cret"), None, Scope::Check)
            .expect("known");
        assert_eq!(caller.name(), "crm-bot");
        assert!(caller.may_name(Some("partner-eu")).is_ok());
        assert!(
            caller.may_name(None).is_ok(),
            "a bare check names no server"
        );
        assert!(matches!(
            caller.may_name(Some("internal-billing")),
            Err(CheckError::Forbidden {
                denied: Denied::Server { .. },
                ..
            })
        ));
        assert!(matches!(
            auth.authenticate(Some(b"bearer s3cret"), None, Scope::Register),
            Err(CheckError::Forbidden {
                denied: Denied::Scope("register"),
                ..
            })
        ));
        for (header, want) in [
            (None, Unauthenticated::Missing),
            (Some(&b"Basic czNjcmV0"[..]), Unauthenticated::Missing),
            (Some(&b"Bearer "[..]), Unauthenticated::Missing),
            (Some(&b"Bearer s3cret2"[..]), Unauthenticated::Unknown),
        ] {
            assert!(
                matches!(auth.authenticate(header, None, Scope::Check), Err(CheckError::Unauthenticated(got)) if got == want),
                "{header:?}"
            );
        }
    }

    #[test]
    fn a_client_certificate_name_stands_for_its_token_when_no_bearer_is_sent() {
        let cert_only = TokenSpec {
            name: "orch.clients".into(),
            sha256: None,
            scopes: vec!["check".into()],
            servers: None,
        };
        let auth = auth(vec![cert_only]);
        let peer = PeerNames(vec!["other.clients".to_owned(), "orch.clients".to_owned()].into());
        let caller = auth
            .authenticate(None, Some(&peer), Scope::Check)
            .expect("named by the certificate");
        assert_eq!(caller.name(), "orch.clients");
        let nobody = PeerNames(vec!["nobody.clients".to_owned()].into());
        assert!(matches!(
            auth.authenticate(None, Some(&nobody), Scope::Check),
            Err(CheckError::Unauthenticated(Unauthenticated::Unknown))
        ));
        // A bearer token, when sent, is what counts.
        assert!(matches!(
            auth.authenticate(Some(b"Bearer x"), Some(&peer), Scope::Check),
            Err(CheckError::Unauthenticated(Unauthenticated::Unknown))
        ));
    }

    #[test]
    fn without_tokens_everyone_may_do_everything() {
        let auth = auth(Vec::new());
        assert!(!auth.is_enabled());
        let caller = auth.authenticate(None, None, Scope::Admin).expect("open");
        assert!(caller.may_name(Some("anything")).is_ok());
    }

    #[test]
    fn bad_entries_are_refused_with_what_to_fix() {
        for (inline, says) in [
            ("a:abc:check", "64 hex digits"),
            (&*format!("a:{}:write", sha("x")), "unknown scope"),
            (&*format!("a:{}:check:[", sha("x")), "server glob"),
        ] {
            let spec = TokenSpec::parse_inline(inline).expect("shape");
            let err = Auth::new(None, vec![spec]).expect_err("refused");
            assert!(err.to_string().contains(says), "{err}");
        }
        let twice = vec![
            TokenSpec::parse_inline(&format!("a:{}:check", sha("x"))).expect("shape"),
            TokenSpec::parse_inline(&format!("a:{}:check", sha("y"))).expect("shape"),
        ];
        assert!(Auth::new(None, twice).is_err(), "a name used twice");
        assert!(TokenSpec::parse_inline("just-a-name").is_err());
    }
}
