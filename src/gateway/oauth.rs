//! A client's OAuth flow through the gateway. An MCP server that wants a token answers 401 with
//! `WWW-Authenticate: Bearer resource_metadata="URL"`, and the client reads that protected-resource
//! metadata (RFC 9728), whose `resource` must be the URL the client connected to. Through the
//! gateway that URL is the route's (`https://gateway/mcp/NAME`), so the gateway points
//! `resource_metadata` at a document of its own
//! (`/.well-known/oauth-protected-resource/mcp/NAME`): the upstream's, with `resource` set to the
//! route's URL and everything else (`authorization_servers`, scopes, ...) as the upstream says.

use super::routes::RouteState;
use super::upstream::{next_chunk, Endpoint, RouteUpstream};
use super::Gateway;
use http::header::{self, HeaderMap, HeaderValue};
use http::{Method, StatusCode};

/// The path prefix of the gateway's metadata documents (RFC 9728's well-known URI, with the
/// route's path `/mcp/NAME` after it).
pub const METADATA_PREFIX: &str = "/.well-known/oauth-protected-resource";
/// The largest metadata document read from an upstream.
const MAX_METADATA_BYTES: usize = 64 * 1024;

/// The gateway's own URL for a request with `host` (`--public-url`, or the scheme it is served
/// on and the request's `Host`), with no trailing slash.
pub fn public_base(gateway: &Gateway, host: Option<&HeaderValue>) -> String {
    if let Some(base) = &gateway.public_url {
        return base.clone();
    }
    let host = host.and_then(|v| v.to_str().ok()).unwrap_or("localhost");
    let scheme = if gateway.tls { "https" } else { "http" };
    format!("{scheme}://{host}")
}

/// `WWW-Authenticate` values of an upstream's 401, with each `resource_metadata` pointing at the
/// gateway's document for `route` (a value without one is left as it is).
pub fn rewrite_challenges(headers: &mut HeaderMap, base: &str, route: &str) {
    let values: Vec<HeaderValue> = headers
        .get_all(header::WWW_AUTHENTICATE)
        .iter()
        .map(|value| {
            let Ok(text) = value.to_str() else {
                return value.clone();
            };
            let Some(rewritten) = rewrite_challenge(text, base, route) else {
                return value.clone();
            };
            HeaderValue::from_str(&rewritten).unwrap_or_else(|_| value.clone())
        })
        .collect();
    headers.remove(header::WWW_AUTHENTICATE);
    for value in values {
        headers.append(header::WWW_AUTHENTICATE, value);
    }
}

/// One challenge with its `resource_metadata="..."` parameter replaced, if it has one.
fn rewrite_challenge(text: &str, base: &str, route: &str) -> Option<String> {
    const PARAM: &str = "resource_metadata=";
    let lower = text.to_ascii_lowercase();
    let at = lower.find(PARAM)?;
    let value_start = at + PARAM.len();
    let rest = &text[value_start..];
    let value_len = if let Some(quoted) = rest.strip_prefix('"') {
        quoted.find('"').map(|end| end + 2)?
    } else {
        rest.find([',', ' ']).unwrap_or(rest.len())
    };
    Some(format!(
        "{}\"{base}{METADATA_PREFIX}/mcp/{route}\"{}",
        &text[..value_start],
        &text[value_start + value_len..]
    ))
}

/// Where the upstream's metadata for `url` lives (RFC 9728, section 3.1: the well-known path
/// inserted before the resource's path).
fn upstream_metadata_url(url: &url::Url) -> Option<url::Url> {
    let mut metadata = url.clone();
    let path = url.path().trim_end_matches('/');
    metadata.set_path(&format!("{METADATA_PREFIX}{path}"));
    metadata.set_query(None);
    Some(metadata)
}

/// The gateway's metadata document for `route`: the upstream's, with `resource` the route's URL
/// at `base`. A status and a JSON body either way.
pub async fn metadata(gateway: &Gateway, route: &RouteState, base: &str) -> (StatusCode, String) {
    let failed = |why: String| {
        let body = serde_json::json!({
            "error": "upstream_metadata_unavailable",
            "error_description": format!("schemagate gateway: route {}: {why}", route.route.name),
        });
        (StatusCode::BAD_GATEWAY, body.to_string())
    };
    let RouteUpstream::Http(Endpoint { url: upstream, .. }) = &route.upstream else {
        let body = serde_json::json!({
            "error": "not_found",
            "error_description": format!("schemagate gateway: route {} runs its server on stdio, which publishes no protected-resource metadata", route.route.name),
        });
        return (StatusCode::NOT_FOUND, body.to_string());
    };
    let Some(url) = upstream_metadata_url(upstream) else {
        return failed("the upstream's URL has no metadata location".to_owned());
    };
    // What a client reads names the upstream by scheme and host only: its URL may carry secrets.
    let at = format!(
        "at {}{METADATA_PREFIX}/...",
        super::routes::public_origin(upstream)
    );
    let mut headers = HeaderMap::new();
    headers.insert(header::ACCEPT, HeaderValue::from_static("application/json"));
    let endpoint = match Endpoint::new(&url) {
        Ok(endpoint) => endpoint,
        Err(why) => return failed(format!("its metadata {at}: {why}")),
    };
    let response = match gateway
        .upstream
        .send(Method::GET, &endpoint, &headers, None)
        .await
    {
        Ok(response) => response,
        Err(failure) => return failed(format!("its metadata {at} {failure}")),
    };
    if response.status() == StatusCode::NOT_FOUND {
        return (
            StatusCode::NOT_FOUND,
            serde_json::json!({
                "error": "not_found",
                "error_description": format!("schemagate gateway: route {}: the upstream publishes no protected-resource metadata {at}", route.route.name),
            })
            .to_string(),
        );
    }
    if !response.status().is_success() {
        return failed(format!("its metadata {at} answered {}", response.status()));
    }
    let mut body = Vec::new();
    let mut response = response;
    loop {
        match next_chunk(&mut response).await {
            Ok(Some(chunk)) => {
                if body.len() + chunk.len() > MAX_METADATA_BYTES {
                    return failed(format!(
                        "its metadata {at} is longer than {MAX_METADATA_BYTES} bytes"
                    ));
                }
                body.extend_from_slice(&chunk);
            }
            Ok(None) => break,
            Err(e) => return failed(format!("reading its metadata {at}: {e}")),
        }
    }
    let mut document: serde_json::Map<String, serde_json::Value> =
        match serde_json::from_slice(&body) {
            Ok(document) => document,
            Err(e) => return failed(format!("its metadata {at} is not a JSON object: {e}")),
        };
    document.insert(
        "resource".to_owned(),
        serde_json::Value::String(format!("{base}/mcp/{}", route.route.name)),
    );
    (
        StatusCode::OK,
        serde_json::Value::Object(document).to_string(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_challenge_points_at_the_gateways_metadata() {
        let base = "https://gw.example";
        assert_eq!(
            rewrite_challenge(
                r#"Bearer realm="crm", resource_metadata="https://crm.internal/.well-known/oauth-protected-resource/mcp", scope="read""#,
                base,
                "crm"
            )
            .as_deref(),
            Some(
                r#"Bearer realm="crm", resource_metadata="https://gw.example/.well-known/oauth-protected-resource/mcp/crm", scope="read""#
            )
        );
        assert_eq!(
            rewrite_challenge(
                "Bearer resource_metadata=https://crm.internal/x, error=\"invalid_token\"",
                base,
                "crm"
            )
            .as_deref(),
            Some(
                "Bearer resource_metadata=\"https://gw.example/.well-known/oauth-protected-resource/mcp/crm\", error=\"invalid_token\""
            )
        );
        assert_eq!(rewrite_challenge("Bearer realm=\"crm\"", base, "crm"), None);
        let url = url::Url::parse("https://crm.internal/v1/mcp/").expect("a URL");
        assert_eq!(
            upstream_metadata_url(&url)
                .map(|u| u.to_string())
                .as_deref(),
            Some("https://crm.internal/.well-known/oauth-protected-resource/v1/mcp")
        );
    }
}
