//! Routes: each names one upstream MCP server (its name is the server's name for the policy, the
//! registry and the metrics) and the URL of its Streamable HTTP endpoint; given as flags, or in a
//! TOML file (`[routes]`, `NAME = "URL"`), which is reloaded when it changes.

use anyhow::Context;
use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;
use std::str::FromStr;

/// One upstream MCP server, as `--route NAME=URL` gives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    /// The server's name: the path `/mcp/NAME` clients use, and the `server` of checks.
    pub name: String,
    /// The upstream's MCP endpoint (`http` or `https`).
    pub url: reqwest::Url,
}

/// Why `NAME=URL` is not a route.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadRoute(String);

impl fmt::Display for BadRoute {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BadRoute {}

impl FromStr for Route {
    type Err = BadRoute;

    fn from_str(text: &str) -> Result<Self, BadRoute> {
        let Some((name, url)) = text.split_once('=') else {
            return Err(BadRoute(format!(
                "{text:?} is not NAME=URL (for example crm=http://crm.internal:8000/mcp)"
            )));
        };
        let name_ok = !name.is_empty()
            && name.len() <= 128
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
        if !name_ok {
            return Err(BadRoute(format!(
                "route name {name:?}: use 1 to 128 letters, digits, '-', '_' or '.' (it is a URL path segment and the server's name)"
            )));
        }
        let url = reqwest::Url::parse(url)
            .map_err(|e| BadRoute(format!("route {name}: {url:?} is not a URL: {e}")))?;
        if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
            return Err(BadRoute(format!(
                "route {name}: {url} is not an http:// or https:// URL with a host"
            )));
        }
        Ok(Route {
            name: name.to_owned(),
            url,
        })
    }
}

/// The routes of a routes file: `[routes]` with one `NAME = "URL"` per upstream.
pub fn read_file(path: &Path) -> anyhow::Result<Vec<Route>> {
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct RoutesFile {
        routes: BTreeMap<String, String>,
    }
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("--routes {}: cannot read it", path.display()))?;
    let file: RoutesFile = toml::from_str(&text).with_context(|| {
        format!(
            "--routes {}: expected [routes] with NAME = \"URL\" lines",
            path.display()
        )
    })?;
    file.routes
        .into_iter()
        .map(|(name, url)| {
            format!("{name}={url}")
                .parse::<Route>()
                .with_context(|| format!("--routes {}", path.display()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_routes_file_names_each_upstream_once() {
        let dir = tempfile::tempdir().expect("a directory");
        let path = dir.path().join("routes.toml");
        std::fs::write(
            &path,
            "[routes]\ncrm = \"http://crm.internal:8000/mcp\"\nbilling = \"https://billing.example/mcp\"\n",
        )
        .expect("write");
        let routes = read_file(&path).expect("routes");
        let names: Vec<&str> = routes.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["billing", "crm"]);
        std::fs::write(&path, "[routes]\ncrm = \"ftp://x\"\n").expect("write");
        let error = format!("{:#}", read_file(&path).expect_err("a bad URL"));
        assert!(
            error.contains("routes.toml") && error.contains("crm"),
            "{error}"
        );
        std::fs::write(&path, "crm = \"http://x/mcp\"\n").expect("write");
        assert!(read_file(&path).is_err(), "routes outside [routes]");
    }

    #[test]
    fn a_route_is_a_name_and_an_http_url() {
        let route: Route = "crm=https://crm.internal/mcp".parse().expect("a route");
        assert_eq!(route.name, "crm");
        assert_eq!(route.url.as_str(), "https://crm.internal/mcp");
        for bad in [
            "crm",
            "=http://x/mcp",
            "c rm=http://x/mcp",
            "crm=x/mcp",
            "crm=ftp://x/mcp",
            "crm=unix:/tmp/s",
        ] {
            let error = bad.parse::<Route>().expect_err(bad);
            assert!(!error.to_string().is_empty());
        }
    }
}
