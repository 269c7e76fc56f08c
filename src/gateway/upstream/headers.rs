//! Which headers cross the gateway, each way: all of them but those of one hop, and those the
//! gateway sets again itself.

use http::header::{self, HeaderMap, HeaderName, HeaderValue};

/// The MCP session header. Header names are constants, not text: a look-up by text parses the
/// name first, at each request.
pub const MCP_SESSION_ID: HeaderName = HeaderName::from_static("mcp-session-id");
/// 2026-07-28's header naming the body's method.
pub const MCP_METHOD: HeaderName = HeaderName::from_static("mcp-method");
/// 2026-07-28's header naming a `tools/call`'s tool.
pub const MCP_NAME: HeaderName = HeaderName::from_static("mcp-name");

/// Whether `name` is of one hop only (RFC 9110, 7.6.1), never relayed in either direction.
/// By its text: one comparison of lengths and bytes, where a `HeaderName` compared with each of
/// eight would take eight.
fn is_hop_by_hop(name: &HeaderName) -> bool {
    matches!(
        name.as_str(),
        "connection"
            | "proxy-authenticate"
            | "proxy-authorization"
            | "te"
            | "trailer"
            | "transfer-encoding"
            | "upgrade"
            | "keep-alive"
    )
}

/// The client's headers as the upstream gets them: all of them (`Authorization`,
/// `Mcp-Session-Id`, `MCP-Protocol-Version`, `Last-Event-ID`, `Mcp-Method`, `Mcp-Name`,
/// `Mcp-Param-*` and any other), less those of one hop, `Host` and `Content-Length` (the
/// client to the upstream sets them) and `Accept-Encoding` (the gateway reads what it relays,
/// so it asks for no compression).
pub fn for_upstream(mut headers: HeaderMap) -> HeaderMap {
    strip(
        &mut headers,
        [
            header::HOST,
            header::CONTENT_LENGTH,
            header::ACCEPT_ENCODING,
        ],
    );
    headers
}

/// The upstream's headers as the client gets them: all of them less those of one hop and
/// `Content-Length` (the answer may be rewritten).
pub fn for_client(mut headers: HeaderMap) -> HeaderMap {
    strip(&mut headers, [header::CONTENT_LENGTH]);
    headers
}

/// Removes the headers of one hop, those the `Connection` header names, and `also`. The names
/// are looked through once, and only those present are removed: a message carries a handful
/// of headers and seldom more than one of these, where a removal per name that might be there
/// hashes each of them. Without a header of one hop (the usual message) nothing
/// is gathered: which of `also` are present is a flag each.
fn strip<const N: usize>(headers: &mut HeaderMap, also: [HeaderName; N]) {
    let mut present = [false; N];
    let mut of_one_hop = false;
    for name in headers.keys() {
        if let Some(i) = also.iter().position(|a| a == name) {
            present[i] = true;
        } else if is_hop_by_hop(name) {
            of_one_hop = true;
        }
    }
    for (name, present) in also.into_iter().zip(present) {
        if present {
            headers.remove(name);
        }
    }
    if !of_one_hop {
        return;
    }
    let mut named: Vec<HeaderName> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|name| HeaderName::from_bytes(name.trim().as_bytes()).ok())
        .collect();
    // The headers `Connection` names are of one hop too.
    named.extend(headers.keys().filter(|name| is_hop_by_hop(name)).cloned());
    for name in named {
        headers.remove(name);
    }
}

/// The headers of a request the rules wrote (a listing they ask for, an error answer), from the
/// client's: a plain MCP POST, with the headers that describe a request's body (2026-07-28's
/// `Mcp-Method`, `Mcp-Name`, `Mcp-Param-*`) describing this one, not the client's.
pub fn own_request_headers(headers: &mut HeaderMap, body: &[u8]) {
    let described = headers.contains_key(MCP_METHOD);
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
                headers.insert(MCP_METHOD, method);
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

    fn names(headers: &HeaderMap) -> Vec<&str> {
        let mut names: Vec<&str> = headers.keys().map(|n| n.as_str()).collect();
        names.sort_unstable();
        names
    }

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for &(name, value) in pairs {
            map.append(
                HeaderName::from_static(name),
                HeaderValue::from_static(value),
            );
        }
        map
    }

    #[test]
    fn an_answer_loses_its_length_and_its_hop_and_keeps_the_rest() {
        let upstream = headers(&[
            ("content-type", "text/event-stream"),
            ("content-length", "1200"),
            ("transfer-encoding", "chunked"),
            ("te", "trailers"),
            ("trailer", "x-sum"),
            ("upgrade", "h2c"),
            ("proxy-authenticate", "Basic"),
            ("proxy-authorization", "Basic e30="),
            ("keep-alive", "timeout=5"),
            ("mcp-session-id", "s1"),
            ("set-cookie", "a=1"),
            ("set-cookie", "b=2"),
        ]);
        let sent = for_client(upstream);
        assert_eq!(
            names(&sent),
            ["content-type", "mcp-session-id", "set-cookie"]
        );
        assert_eq!(
            sent.get_all("set-cookie").iter().count(),
            2,
            "every value of a kept name stays"
        );
    }

    #[test]
    fn headers_with_nothing_to_strip_cross_whole_and_host_alone_goes() {
        let plain = [
            ("content-type", "application/json"),
            ("accept", "application/json, text/event-stream"),
            ("mcp-protocol-version", "2025-11-25"),
        ];
        assert_eq!(
            names(&for_upstream(headers(&plain))),
            ["accept", "content-type", "mcp-protocol-version"]
        );
        let mut with_host = plain.to_vec();
        with_host.push(("host", "gateway:8090"));
        assert_eq!(
            names(&for_upstream(headers(&with_host))),
            ["accept", "content-type", "mcp-protocol-version"]
        );
        // A header the Connection header names goes with it, whatever its case there.
        let mut named = plain.to_vec();
        named.extend([("connection", "X-Trace"), ("x-trace", "1")]);
        assert_eq!(
            names(&for_client(headers(&named))),
            ["accept", "content-type", "mcp-protocol-version"]
        );
    }
}
