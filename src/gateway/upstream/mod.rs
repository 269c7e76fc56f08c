//! The routes' upstreams: how a route's server is reached ([`RouteUpstream`]: over HTTP at a
//! URL, or on stdio, one process per session), what every upstream answers with
//! ([`Upstreamed`]) or why it gave no answer ([`Failure`]), and which headers cross
//! ([`headers`]). Callers see the enum; each variant has its room: [`http`] (one pooled client
//! for every route) and [`stdio`].

pub mod headers;
mod http;
pub mod stdio;

pub use self::http::{next_chunk, HttpClient, Response};

use crate::ops::lines::Line;
use ::http::header::{HeaderMap, HeaderValue};
use ::http::{Method, StatusCode};
use bytes::Bytes;
use std::path::PathBuf;
use std::time::Duration;
use stdio::Servers;
use tokio::sync::mpsc;

/// How the gateway reaches its upstreams.
#[derive(Debug, Clone)]
pub struct UpstreamConfig {
    /// Longest wait for an upstream's answer to begin (its status and headers).
    pub timeout: Duration,
    /// Longest wait for a connection to an upstream (name lookup, TCP and TLS).
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
    pub fn status(&self) -> StatusCode {
        match self {
            Failure::Unreachable(_) | Failure::BadAnswer(_) => StatusCode::BAD_GATEWAY,
            Failure::TimedOut(_) => StatusCode::GATEWAY_TIMEOUT,
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

/// An upstream's answer: an HTTP response, or the messages a stdio server writes for a request.
pub enum Upstreamed {
    Http(Response),
    /// An event stream of the stdio server's messages, each a line as written.
    Lines {
        status: StatusCode,
        headers: HeaderMap,
        lines: mpsc::Receiver<Line>,
        /// Gives a message the stream took but could not deliver (its client had gone) back to
        /// the session, held for the client's next stream.
        give_back: GiveBack,
    },
}

/// Gives a stdio server's message back to its session (see [`Upstreamed::Lines`]).
pub type GiveBack = std::sync::Arc<dyn Fn(Line) + Send + Sync>;

impl Upstreamed {
    pub fn status(&self) -> StatusCode {
        match self {
            Upstreamed::Http(response) => response.status(),
            Upstreamed::Lines { status, .. } => *status,
        }
    }

    pub fn headers(&self) -> &HeaderMap {
        match self {
            Upstreamed::Http(response) => response.headers(),
            Upstreamed::Lines { headers, .. } => headers,
        }
    }

    /// The headers, taken: what is left has none.
    pub fn take_headers(&mut self) -> HeaderMap {
        match self {
            Upstreamed::Http(response) => std::mem::take(response.headers_mut()),
            Upstreamed::Lines { headers, .. } => std::mem::take(headers),
        }
    }
}

/// Whose request goes to the upstream (or whose request an answer answers): the client's own,
/// or one the MCP rules wrote (a listing they ask for), whose answer no client awaits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Requester {
    Client,
    Rules,
}

/// One request to a route's upstream.
pub struct UpstreamRequest<'a> {
    pub method: Method,
    pub headers: &'a HeaderMap,
    /// A POST's message.
    pub body: Option<Bytes>,
    /// The envelope of the client's message: a body that is that message is read through it
    /// (see [`mcp::Envelope`](crate::mcp::Envelope)).
    pub scanned: &'a crate::mcp::Envelope,
    /// Who sent it (a stdio route's processes are kept per caller and session).
    pub caller: &'a str,
    /// The session it names, if any.
    pub session: Option<&'a str>,
    pub requester: Requester,
}

/// An HTTP upstream's URL, and what a request to it carries (built once): its URI without user
/// information, the URL's user and password, if any, as HTTP Basic credentials, and the `Host`
/// header of an `http://` upstream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub url: url::Url,
    pub uri: ::http::Uri,
    pub credentials: Option<HeaderValue>,
    /// An `http://` upstream is spoken to in HTTP/1.1 (HTTP/2 is offered only by TLS's ALPN),
    /// where a request names its host: the name and any port but the scheme's own, as the
    /// client would write it for each request. An `https://` upstream's is left to the client,
    /// which sends one only on an HTTP/1.1 connection.
    pub host: Option<HeaderValue>,
}

impl Endpoint {
    /// `url` as an endpoint, or why it cannot be one (without the URL, which may hold secrets).
    pub fn new(url: &url::Url) -> Result<Self, String> {
        let mut bare = url.clone();
        let credentials = basic_credentials(url);
        if credentials.is_some() {
            // Infallible for an http(s) URL with a host, which every endpoint is.
            let _ = bare.set_username("");
            let _ = bare.set_password(None);
        }
        let uri = ::http::Uri::try_from(bare.as_str())
            .map_err(|e| format!("the URL cannot be a request's URI: {e}"))?;
        Ok(Endpoint {
            url: url.clone(),
            host: http1_host(&uri),
            uri,
            credentials,
        })
    }
}

/// The `Host` header of a request to `uri`, when it is an `http://` URI.
fn http1_host(uri: &::http::Uri) -> Option<HeaderValue> {
    if uri.scheme() != Some(&::http::uri::Scheme::HTTP) {
        return None;
    }
    let host = uri.host()?;
    // The URI is a `url::Url`'s, which names no port that is its scheme's own.
    let value = match uri.port_u16() {
        Some(port) => HeaderValue::try_from(format!("{host}:{port}")),
        None => HeaderValue::try_from(host),
    };
    value.ok()
}

/// The `Authorization` value for the user and password in `url`, percent-decoded, if it has
/// either (as reqwest sent them).
fn basic_credentials(url: &url::Url) -> Option<HeaderValue> {
    use base64::Engine;
    let decode = |text: &str| {
        percent_encoding::percent_decode_str(text)
            .decode_utf8_lossy()
            .into_owned()
    };
    let password = url.password().map(decode);
    if url.username().is_empty() && password.is_none() {
        return None;
    }
    let pair = format!(
        "{}:{}",
        decode(url.username()),
        password.unwrap_or_default()
    );
    let encoded = base64::engine::general_purpose::STANDARD.encode(pair);
    let mut value = HeaderValue::try_from(format!("Basic {encoded}")).ok()?;
    value.set_sensitive(true);
    Some(value)
}

/// How a route's server is reached.
pub enum RouteUpstream {
    /// Over HTTP, at this URL.
    Http(Endpoint),
    /// On stdio: its processes, one per session.
    Stdio(Servers),
}

impl RouteUpstream {
    /// Sends `request` to the route's server (through `client` when it is reached over HTTP):
    /// its answer once its head has come, or why none came.
    pub async fn send(
        &self,
        client: &HttpClient,
        request: UpstreamRequest<'_>,
    ) -> Result<Upstreamed, Failure> {
        match self {
            RouteUpstream::Http(endpoint) => client
                .send(request.method, endpoint, request.headers, request.body)
                .await
                .map(Upstreamed::Http),
            RouteUpstream::Stdio(servers) => servers.send(&request).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Endpoint;

    #[test]
    fn an_http_upstream_is_named_by_its_host_and_any_port_but_its_schemes() {
        let host = |url: &str| {
            let endpoint =
                Endpoint::new(&url::Url::parse(url).expect("a URL")).expect("an endpoint");
            endpoint.host.map(|h| h.to_str().expect("text").to_owned())
        };
        assert_eq!(
            host("http://127.0.0.1:8080/mcp").as_deref(),
            Some("127.0.0.1:8080")
        );
        assert_eq!(
            host("http://tools.internal/mcp").as_deref(),
            Some("tools.internal")
        );
        assert_eq!(
            host("http://tools.internal:80/mcp").as_deref(),
            Some("tools.internal")
        );
        assert_eq!(host("http://[::1]:9000/mcp").as_deref(), Some("[::1]:9000"));
        assert_eq!(
            host("http://user:secret@tools.internal:81/mcp").as_deref(),
            Some("tools.internal:81"),
            "credentials are not part of the host"
        );
        assert_eq!(
            host("https://tools.internal/mcp"),
            None,
            "left to the client"
        );
    }
}
