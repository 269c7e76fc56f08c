//! Who may send a request from a browser: the `Host` and `Origin` checks that stop DNS
//! rebinding and cross-site requests, as MCP's Streamable HTTP transport requires of a server
//! ("servers MUST validate the Origin header"; a server on a local address should accept only
//! its own host names).
//!
//! A web page the user visits can make the browser send requests to a port on the user's own
//! machine: by a cross-origin "simple" POST (`Content-Type: text/plain`, no preflight), or by
//! rebinding its own host name to 127.0.0.1 (then the browser sends `Host: evil.example` and
//! `Origin: http://evil.example`). So:
//!
//! - `Host` must name the listener: on a loopback listener `localhost`, `127.0.0.1`, `[::1]` (any
//!   port, as the MCP SDKs allow); on a listener bound to one address, that address; on a
//!   wildcard listener (`0.0.0.0`, `[::]`) any host, unless `--allowed-hosts` is given (then
//!   those, any IP address, and the loopback names). `--allowed-hosts` adds names everywhere.
//!   An IP address cannot be rebound, so for a wildcard listener it is always a host.
//! - `Origin`, when a request carries one (browsers do), must be one `--allowed-origins` names,
//!   or one whose host is a loopback name or a listed host; a wildcard listener without
//!   `--allowed-hosts` admits only loopback and listed origins. `Origin: null` is never allowed
//!   unless listed.
//!
//! Requests without `Origin` (what MCP clients other than browsers send) are judged by `Host`
//! alone. Nothing here knows HTTP frameworks: the check takes the two header values.

use std::borrow::Cow;
use std::fmt;
use std::net::{IpAddr, SocketAddr};

/// The names `--allowed-hosts` and `--allowed-origins` add to a listener's own.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AllowedPeers {
    /// Host names (or addresses), compared without their port and case.
    pub hosts: Vec<String>,
    /// Origins (`scheme://host[:port]`), compared without case.
    pub origins: Vec<String>,
}

impl AllowedPeers {
    /// `self` with `more` added.
    pub fn with(&self, more: &AllowedPeers) -> AllowedPeers {
        let mut all = self.clone();
        all.hosts.extend(more.hosts.iter().cloned());
        all.origins.extend(more.origins.iter().cloned());
        all
    }

    /// Refuses an entry that cannot match anything: an empty host, an origin that is not
    /// `scheme://host[:port]`.
    pub fn validate(&self) -> Result<(), String> {
        for host in &self.hosts {
            if host.trim().is_empty() || host.contains('/') {
                return Err(format!(
                    "--allowed-hosts {host:?}: give a host name or address (mcp.example.com, 10.0.0.5), without a scheme or path"
                ));
            }
        }
        for origin in &self.origins {
            let trimmed = origin.trim_end_matches('/');
            let well_formed = trimmed == "null"
                || trimmed.split_once("://").is_some_and(|(scheme, rest)| {
                    !scheme.is_empty() && !rest.is_empty() && !rest.contains('/')
                });
            if !well_formed {
                return Err(format!(
                    "--allowed-origins {origin:?}: give an origin as a browser sends it (https://app.example.com, http://localhost:6274)"
                ));
            }
        }
        Ok(())
    }
}

/// The `Host` and `Origin` checks of one listener.
#[derive(Debug, Clone)]
pub struct Origins {
    /// Host names allowed, lower case, without port (IPv6 addresses in brackets); `None`: any.
    hosts: Option<Vec<String>>,
    /// Any IP address is a host too.
    any_address: bool,
    /// Origins allowed outright, lower case.
    origins: Vec<String>,
    /// Host names an origin may have (besides the listed origins).
    origin_hosts: Vec<String>,
}

/// Why a request was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    /// Its `Host` names no host this listener answers to.
    Host(String),
    /// Its `Origin` is not one allowed.
    Origin(String),
}

impl Refused {
    /// The header refused.
    pub fn header(&self) -> &'static str {
        match self {
            Refused::Host(_) => "Host",
            Refused::Origin(_) => "Origin",
        }
    }
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refused::Host(host) => write!(
                f,
                "the Host header {host:?} is not a name this server answers to (DNS-rebinding protection); connect by one of its own names, or have the operator add this one with --allowed-hosts"
            ),
            Refused::Origin(origin) => write!(
                f,
                "requests from the origin {origin:?} are not allowed (a web page may not drive this server); have the operator add it with --allowed-origins if it is yours"
            ),
        }
    }
}

const LOOPBACK_NAMES: [&str; 3] = ["localhost", "127.0.0.1", "[::1]"];

impl Origins {
    /// The checks of a listener on `addr`, with `allowed` added.
    pub fn for_listener(addr: SocketAddr, allowed: &AllowedPeers) -> Origins {
        let listed: Vec<String> = allowed
            .hosts
            .iter()
            .map(|h| host_name(h).into_owned())
            .collect();
        let loopback = LOOPBACK_NAMES.map(String::from);
        let own = host_of_ip(addr.ip());
        let (hosts, any_address) = if addr.ip().is_loopback() {
            let mut hosts: Vec<String> = loopback.to_vec();
            hosts.push(own);
            hosts.extend(listed.iter().cloned());
            (Some(hosts), false)
        } else if addr.ip().is_unspecified() {
            if listed.is_empty() {
                (None, true)
            } else {
                let mut hosts: Vec<String> = loopback.to_vec();
                hosts.extend(listed.iter().cloned());
                (Some(hosts), true)
            }
        } else {
            let mut hosts = vec![own];
            hosts.extend(listed.iter().cloned());
            (Some(hosts), false)
        };
        let mut origin_hosts: Vec<String> = loopback.to_vec();
        if let Some(hosts) = &hosts {
            origin_hosts.extend(hosts.iter().cloned());
        }
        Origins {
            hosts,
            any_address,
            origins: allowed
                .origins
                .iter()
                .map(|o| o.trim_end_matches('/').to_ascii_lowercase())
                .collect(),
            origin_hosts,
        }
    }

    /// Whether `request` may be served, by its `Host` (or, in HTTP/2, its authority) and its
    /// `Origin`.
    pub fn check_request<B>(&self, request: &http::Request<B>) -> Result<(), Refused> {
        let headers = request.headers();
        let host = headers
            .get(http::header::HOST)
            .map(http::HeaderValue::as_bytes)
            .or_else(|| request.uri().authority().map(|a| a.as_str().as_bytes()));
        let origin = headers
            .get(http::header::ORIGIN)
            .map(http::HeaderValue::as_bytes);
        self.check(host, origin)
    }

    /// Whether a request with these `Host` and `Origin` header values may be served.
    pub fn check(&self, host: Option<&[u8]>, origin: Option<&[u8]>) -> Result<(), Refused> {
        if let (Some(allowed), Some(host)) = (&self.hosts, host) {
            let text = String::from_utf8_lossy(host);
            let name = host_name(&text);
            let admitted =
                allowed.iter().any(|a| *a == name) || (self.any_address && is_address(&name));
            if !admitted {
                return Err(Refused::Host(text.into_owned()));
            }
        }
        if let Some(origin) = origin {
            let text = String::from_utf8_lossy(origin);
            let lower = text.trim_end_matches('/').to_ascii_lowercase();
            let allowed = self.origins.contains(&lower)
                || lower.split_once("://").is_some_and(|(scheme, rest)| {
                    matches!(scheme, "http" | "https") && {
                        let name = host_name(rest);
                        self.origin_hosts.iter().any(|h| *h == name)
                    }
                });
            if !allowed {
                return Err(Refused::Origin(text.into_owned()));
            }
        }
        Ok(())
    }
}

/// A `Host` value's name: lower case, without its port; an IPv6 address in brackets, written
/// canonically (`[0:0::1]` is `[::1]`). Text that is no host name stays as it is, and matches
/// nothing. Borrowed from `host` unless it had to be rewritten (every request's `Host` is read).
fn host_name(host: &str) -> Cow<'_, str> {
    let host = host.trim();
    // Addresses are read whatever the case of their hex digits, and written canonically.
    let ipv6 = |text: &str| {
        text.parse::<std::net::Ipv6Addr>()
            .ok()
            .map(|ip| Cow::Owned(format!("[{ip}]")))
    };
    if let Some(rest) = host.strip_prefix('[') {
        let Some((inside, after)) = rest.split_once(']') else {
            return lower_case(host);
        };
        // After the brackets, only a port.
        let port_only = after.is_empty()
            || after
                .strip_prefix(':')
                .is_some_and(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
        return match (port_only, ipv6(inside)) {
            (true, Some(canonical)) => canonical,
            _ => lower_case(host),
        };
    }
    // An IPv6 address without brackets (as a flag may give it): two colons at least, which no
    // name with a port has (so the usual `name:port` is not parsed as an address first).
    let colons = host.bytes().filter(|&b| b == b':').count();
    if let Some(canonical) = (colons >= 2).then(|| ipv6(host)).flatten() {
        return canonical;
    }
    match host.rsplit_once(':') {
        Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => lower_case(name),
        _ => lower_case(host),
    }
}

/// `text` in ASCII lower case, borrowed when it is already.
fn lower_case(text: &str) -> Cow<'_, str> {
    match text.bytes().any(|b| b.is_ascii_uppercase()) {
        true => Cow::Owned(text.to_ascii_lowercase()),
        false => Cow::Borrowed(text),
    }
}

/// How a `Host` header names an address.
fn host_of_ip(ip: IpAddr) -> String {
    match ip {
        IpAddr::V4(v4) => v4.to_string(),
        IpAddr::V6(v6) => format!("[{v6}]"),
    }
}

/// Whether a host name is an IP address (which no DNS can rebind).
fn is_address(name: &str) -> bool {
    let bare = name.trim_start_matches('[').trim_end_matches(']');
    bare.parse::<IpAddr>().is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn origins(listen: &str, hosts: &[&str], listed: &[&str]) -> Origins {
        Origins::for_listener(
            listen.parse().expect("an address"),
            &AllowedPeers {
                hosts: hosts.iter().map(|s| s.to_string()).collect(),
                origins: listed.iter().map(|s| s.to_string()).collect(),
            },
        )
    }

    fn ok(o: &Origins, host: &str, origin: Option<&str>) -> bool {
        o.check(Some(host.as_bytes()), origin.map(str::as_bytes))
            .is_ok()
    }

    #[test]
    fn a_loopback_listener_answers_to_loopback_names_only() {
        let o = origins("127.0.0.1:8090", &[], &[]);
        for host in [
            "127.0.0.1:8090",
            "localhost:8090",
            "LOCALHOST",
            "LocalHost:8090",
            " localhost:8090 ",
            "[::1]:8090",
            "127.0.0.1",
        ] {
            assert!(ok(&o, host, None), "{host}");
        }
        for host in [
            "evil.example:8090",
            "Evil.Example:8090",
            "evil.example",
            "10.0.0.5:8090",
            "127.0.0.1.evil.example",
        ] {
            assert_eq!(
                o.check(Some(host.as_bytes()), None),
                Err(Refused::Host(host.into())),
                "{host}"
            );
        }
        assert!(
            ok(&o, "[0:0::1]:8090", None),
            "an IPv6 address however written"
        );
        assert!(!ok(&o, "[::1]evil.example", None));
        // The rebinding attack: the attacker's name in both headers.
        assert!(!ok(
            &o,
            "evil.example:8090",
            Some("http://evil.example:8090")
        ));
        // A cross-origin page on a real host name, to the right Host.
        assert_eq!(
            o.check(Some(b"127.0.0.1:8090"), Some(b"https://evil.example")),
            Err(Refused::Origin("https://evil.example".into()))
        );
        assert!(!ok(&o, "127.0.0.1:8090", Some("null")));
        // A local tool's page (an inspector on another port) is a loopback origin.
        assert!(ok(&o, "127.0.0.1:8090", Some("http://localhost:6274")));
        assert!(ok(&o, "127.0.0.1:8090", Some("http://127.0.0.1:8090")));
    }

    #[test]
    fn listed_hosts_and_origins_are_added() {
        let o = origins(
            "127.0.0.1:8090",
            &["mcp.internal", "gw.example:443"],
            &["https://app.example.com/"],
        );
        assert!(ok(&o, "mcp.internal:8090", None));
        assert!(ok(&o, "gw.example", Some("https://gw.example")));
        assert!(ok(&o, "localhost", Some("https://APP.example.com")));
        assert!(!ok(&o, "localhost", Some("https://other.example.com")));
    }

    #[test]
    fn a_wildcard_listener_checks_origins_and_listed_hosts() {
        let open = origins("0.0.0.0:8090", &[], &[]);
        assert!(ok(&open, "crm-gateway.svc.cluster.local:8090", None));
        assert!(ok(&open, "anything", Some("http://localhost:3000")));
        assert!(!ok(&open, "evil.example", Some("http://evil.example")));
        let listed = origins("[::]:8090", &["gateway.example"], &[]);
        assert!(ok(
            &listed,
            "gateway.example",
            Some("https://gateway.example")
        ));
        assert!(ok(&listed, "10.1.2.3:8090", None), "an address is a host");
        assert!(ok(&listed, "[fd00::5]:8090", None));
        assert!(
            ok(&listed, "[FD00::5]:8090", None),
            "hex digits in either case"
        );
        assert!(!ok(&listed, "evil.example", None));
        let bare = origins("[::1]:8090", &["::1", "fd00::7"], &[]);
        assert!(ok(&bare, "[fd00:0::7]:8090", None));
        let one = origins("10.0.0.5:8090", &[], &[]);
        assert!(ok(&one, "10.0.0.5:8090", None));
        assert!(!ok(&one, "localhost", None));
        assert!(!ok(&one, "10.0.0.6", None));
    }

    #[test]
    fn entries_that_match_nothing_are_refused() {
        let bad = |hosts: &[&str], listed: &[&str]| {
            AllowedPeers {
                hosts: hosts.iter().map(|s| s.to_string()).collect(),
                origins: listed.iter().map(|s| s.to_string()).collect(),
            }
            .validate()
            .is_err()
        };
        assert!(bad(&["http://x"], &[]));
        assert!(bad(&[""], &[]));
        assert!(bad(&[], &["app.example.com"]));
        assert!(bad(&[], &["https://app.example.com/path"]));
        assert!(!bad(
            &["x.example", "10.0.0.5"],
            &["https://app.example.com", "null"]
        ));
    }
}
