//! Which headers cross the gateway, each way: all of them but those of one hop, and those the
//! gateway sets again itself.

use http::header::{self, HeaderMap, HeaderName, HeaderValue};

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
pub fn for_upstream(mut headers: HeaderMap) -> HeaderMap {
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
pub fn for_client(mut headers: HeaderMap) -> HeaderMap {
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
        let sent = for_upstream(client);
        let mut names: Vec<&str> = sent.keys().map(|n| n.as_str()).collect();
        names.sort_unstable();
        assert_eq!(
            names,
            ["authorization", "mcp-param-region", "mcp-session-id"]
        );
    }
}
