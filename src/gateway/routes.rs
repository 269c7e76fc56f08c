//! Routes: each names one upstream MCP server (its name is the server's name for the policy, the
//! registry and the metrics) and where it is: the URL of its Streamable HTTP endpoint, or a
//! command that runs it on stdio (`stdio:COMMAND ARGS`, one process per session, see
//! [`super::stdio`]); given as flags, or in a TOML file (`[routes]`, `NAME = "URL"`), which is
//! reloaded when it changes.

use anyhow::Context;
use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;
use std::str::FromStr;
use std::sync::Arc;

/// One upstream MCP server, as `--route NAME=URL` or `--route NAME=stdio:COMMAND ARGS` gives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    /// The server's name: the path `/mcp/NAME` clients use, and the `server` of checks.
    pub name: String,
    /// Where the server is.
    pub target: Target,
}

/// Where a route's server is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// Its Streamable HTTP endpoint (`http` or `https`).
    Http(reqwest::Url),
    /// The command (program and arguments) that runs it on stdio.
    Stdio(Arc<[String]>),
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Http(url) => write!(f, "{url}"),
            Target::Stdio(command) => {
                f.write_str("stdio:")?;
                for (i, word) in command.iter().enumerate() {
                    let quoted = shlex::try_quote(word).unwrap_or_else(|_| word.into());
                    write!(f, "{}{quoted}", if i == 0 { "" } else { " " })?;
                }
                Ok(())
            }
        }
    }
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
        if let Some(command) = url.strip_prefix("stdio:") {
            let words = shlex::split(command).filter(|w| !w.is_empty()).ok_or_else(|| {
                BadRoute(format!(
                    "route {name}: stdio:{command} names no command, or its quotes do not close (write stdio:PROGRAM ARGS, quoted as in a shell)"
                ))
            })?;
            return Ok(Route {
                name: name.to_owned(),
                target: Target::Stdio(words.into()),
            });
        }
        let parsed = reqwest::Url::parse(url).map_err(|e| {
            BadRoute(format!(
                "route {name}: {url:?} is not a URL (nor stdio:COMMAND): {e}"
            ))
        })?;
        if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
            return Err(BadRoute(format!(
                "route {name}: {parsed} is not an http:// or https:// URL with a host, nor stdio:COMMAND"
            )));
        }
        Ok(Route {
            name: name.to_owned(),
            target: Target::Http(parsed),
        })
    }
}

/// Routes as one `--route` value (or `SCHEMAGATE_ROUTES`) gives them: several may be separated
/// by white space, quoted as in a shell. A route begins at each word `NAME=http://...`,
/// `NAME=https://...` or `NAME=stdio:...`; the words after a stdio route's, up to the next route,
/// are its command's arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteList(pub Vec<Route>);

impl FromStr for RouteList {
    type Err = BadRoute;

    fn from_str(text: &str) -> Result<Self, BadRoute> {
        let words = shlex::split(text)
            .ok_or_else(|| BadRoute(format!("{text:?}: a quote does not close")))?;
        let begins_route = |word: &str| {
            word.split_once('=').is_some_and(|(_, target)| {
                let target = target.to_ascii_lowercase();
                ["http://", "https://", "stdio:"]
                    .iter()
                    .any(|scheme| target.starts_with(scheme))
            })
        };
        // Each route's words: its NAME=TARGET, then a stdio command's arguments.
        let mut routes: Vec<Vec<String>> = Vec::new();
        for word in words {
            match routes.last_mut() {
                Some(words) if !begins_route(&word) => {
                    if !words[0].contains("=stdio:") {
                        return Err(BadRoute(format!(
                            "{word:?} follows route {:?}, which is a URL: give each route as NAME=URL or NAME=stdio:COMMAND ARGS",
                            words[0]
                        )));
                    }
                    words.push(word);
                }
                _ => routes.push(vec![word]),
            }
        }
        let routes = routes
            .into_iter()
            .map(|words| match words.split_first() {
                Some((first, args)) if !args.is_empty() => {
                    let args = shlex::try_join(args.iter().map(String::as_str))
                        .map_err(|e| BadRoute(format!("{first}: {e}")))?;
                    format!("{first} {args}").parse()
                }
                _ => words.concat().parse(),
            })
            .collect::<Result<Vec<Route>, BadRoute>>()?;
        Ok(RouteList(routes))
    }
}

/// The routes of a routes file: `[routes]` with one `NAME = "URL"` (or `"stdio:COMMAND ARGS"`)
/// per upstream.
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
    fn a_route_is_a_name_and_a_url_or_a_stdio_command() {
        let route: Route = "crm=https://crm.internal/mcp".parse().expect("a route");
        assert_eq!(route.name, "crm");
        assert_eq!(route.target.to_string(), "https://crm.internal/mcp");
        let route: Route = "files=stdio:npx -y '@acme/files mcp' --root /srv"
            .parse()
            .expect("a stdio route");
        assert_eq!(
            route.target,
            Target::Stdio(
                ["npx", "-y", "@acme/files mcp", "--root", "/srv"]
                    .map(String::from)
                    .into()
            )
        );
        assert_eq!(
            route.target.to_string(),
            "stdio:npx -y '@acme/files mcp' --root /srv"
        );
        let list: RouteList =
            "crm=http://crm/mcp files=stdio:npx -y \"@acme/files mcp\" --root=/srv b=HTTPS://b/mcp"
                .parse()
                .expect("routes");
        let targets: Vec<String> = list
            .0
            .iter()
            .map(|r| format!("{}={}", r.name, r.target))
            .collect();
        assert_eq!(
            targets,
            [
                "crm=http://crm/mcp",
                "files=stdio:npx -y '@acme/files mcp' '--root=/srv'",
                "b=https://b/mcp"
            ]
        );
        assert!("crm=http://crm/mcp extra".parse::<RouteList>().is_err());
        for bad in [
            "crm",
            "=http://x/mcp",
            "c rm=http://x/mcp",
            "crm=x/mcp",
            "crm=ftp://x/mcp",
            "crm=unix:/tmp/s",
            "crm=stdio:",
            "crm=stdio:npx 'unclosed",
        ] {
            let error = bad.parse::<Route>().expect_err(bad);
            assert!(!error.to_string().is_empty());
        }
    }
}
