//! Routes: each names one upstream MCP server (its name is the server's name for the policy, the
//! registry and the metrics) and where it is: the URL of its Streamable HTTP endpoint, or a
//! command that runs it on stdio (`stdio:COMMAND ARGS`, one process per session, see
//! [`super::upstream::stdio`]); given as flags, or in a TOML file (`[routes]`, `NAME = "URL"`), which is
//! reloaded when it changes.

use super::upstream::stdio::{Servers, StdioLimits};
use super::upstream::{Endpoint, RouteUpstream};
use crate::core::gate::Gate;
use crate::core::metrics::Transport;
use crate::mcp::record::{check_settings, RecordOverride, SettingNames};
use crate::mcp::{BoundaryConfig, Shared};
use crate::net::origins::{AllowedPeers, Origins};
use anyhow::Context;
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::Path;
use std::str::FromStr;
use std::sync::Arc;

/// One upstream MCP server, as `--route NAME=URL` or `--route NAME=stdio:COMMAND ARGS` gives it.
#[derive(Debug, Clone, PartialEq)]
pub struct Route {
    /// The server's name: the path `/mcp/NAME` clients use, and the `server` of checks.
    pub name: String,
    /// Where the server is.
    pub target: Target,
    /// Its own recording settings (the routes file's `record`), over `--record`'s.
    pub record: RecordOverride,
}

/// Where a route's server is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// Its Streamable HTTP endpoint (`http` or `https`), boxed: most of a route's size.
    Http(Box<Endpoint>),
    /// The command (program and arguments) that runs it on stdio.
    Stdio(Arc<[String]>),
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Http(endpoint) => write!(f, "{}", endpoint.url),
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

impl Target {
    /// How the target appears in what a client reads: an upstream by its scheme and host (its
    /// path and query may hold secrets, such as `?token=`), a stdio server as such (its
    /// arguments may hold secrets).
    pub fn public(&self) -> String {
        match self {
            Target::Http(endpoint) => public_origin(&endpoint.url),
            Target::Stdio(_) => "(its stdio server)".to_owned(),
        }
    }

    /// How the target appears in the gateway's debug log: a URL with its password and its
    /// query's values hidden, a command in full.
    pub fn redacted(&self) -> String {
        match self {
            Target::Http(endpoint) => {
                let mut url = endpoint.url.clone();
                let _ = url.set_password(None);
                if url.query().is_some() {
                    let pairs: Vec<String> = url
                        .query_pairs()
                        .map(|(name, _)| format!("{name}=REDACTED"))
                        .collect();
                    url.set_query(Some(&pairs.join("&")));
                }
                url.to_string()
            }
            Target::Stdio(_) => self.to_string(),
        }
    }
}

/// A URL's scheme, host and port (`https://crm.internal:8443`).
pub fn public_origin(url: &url::Url) -> String {
    url.origin().ascii_serialization()
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
        check_name(name)?;
        if let Some(command) = url.strip_prefix("stdio:") {
            let words = shlex::split(command).ok_or_else(|| {
                BadRoute(format!(
                    "route {name}: stdio:{command}: a quote does not close"
                ))
            })?;
            return Route::stdio(name, words);
        }
        let parsed = url::Url::parse(url).map_err(|e| {
            BadRoute(format!(
                "route {name}: {url:?} is not a URL (nor stdio:COMMAND): {e}"
            ))
        })?;
        if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
            return Err(BadRoute(format!(
                "route {name}: {parsed} is not an http:// or https:// URL with a host, nor stdio:COMMAND"
            )));
        }
        let endpoint = Endpoint::new(&parsed)
            .map_err(|why| BadRoute(format!("route {name}: {url:?}: {why}")))?;
        Ok(Route {
            name: name.to_owned(),
            target: Target::Http(Box::new(endpoint)),
            record: RecordOverride::default(),
        })
    }
}

impl Route {
    /// A stdio route: `words` the program and its arguments.
    fn stdio(name: &str, words: Vec<String>) -> Result<Route, BadRoute> {
        check_name(name)?;
        if words.first().is_none_or(|program| program.is_empty()) {
            return Err(BadRoute(format!(
                "route {name}: stdio: names no command (write NAME=stdio:PROGRAM ARGS, quoted as in a shell)"
            )));
        }
        Ok(Route {
            name: name.to_owned(),
            target: Target::Stdio(words.into()),
            record: RecordOverride::default(),
        })
    }
}

/// Refuses a route name that cannot be a path segment and a server's name.
fn check_name(name: &str) -> Result<(), BadRoute> {
    let name_ok = !name.is_empty()
        && name.len() <= 128
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    if name_ok {
        return Ok(());
    }
    Err(BadRoute(format!(
        "route name {name:?}: use 1 to 128 letters, digits, '-', '_' or '.' (it is a URL path segment and the server's name)"
    )))
}

/// Routes as one `--route` value (or `SCHEMAGATE_ROUTES`) gives them, quoted as in a shell:
/// `NAME=URL` words separated by white space, and at most one stdio route, last, whose command
/// is every word after `NAME=stdio:` (so its arguments may take any form, `--url=http://...`
/// too). More stdio routes: one `--route` each, or the routes file.
#[derive(Debug, Clone, PartialEq)]
pub struct RouteList(pub Vec<Route>);

impl FromStr for RouteList {
    type Err = BadRoute;

    fn from_str(text: &str) -> Result<Self, BadRoute> {
        let words = shlex::split(text)
            .ok_or_else(|| BadRoute(format!("{text:?}: a quote does not close")))?;
        let mut routes = Vec::new();
        let mut words = words.into_iter();
        while let Some(word) = words.next() {
            if let Some((name, first)) = word
                .split_once('=')
                .and_then(|(name, target)| Some((name, target.strip_prefix("stdio:")?)))
            {
                let command: Vec<String> = std::iter::once(first.to_owned())
                    .filter(|w| !w.is_empty())
                    .chain(words.by_ref())
                    .collect();
                routes.push(Route::stdio(name, command)?);
                break;
            }
            routes.push(word.parse()?);
        }
        Ok(RouteList(routes))
    }
}

/// What a routes file says: its routes, and the hosts and origins it allows besides the flags'.
#[derive(Debug, Default)]
pub struct RoutesFile {
    pub routes: Vec<Route>,
    pub allowed: AllowedPeers,
}

/// Reads a routes file: `[routes]` with one `NAME = "URL"` (or `"stdio:COMMAND ARGS"`) per
/// upstream, or `NAME = { url = "URL", record = ... }` for a route with its own recording
/// settings; and optionally `allowed_hosts = [...]` and `allowed_origins = [...]` (added to
/// `--allowed-hosts` and `--allowed-origins`).
pub fn read_file(path: &Path) -> anyhow::Result<RoutesFile> {
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Text {
        #[serde(default)]
        allowed_hosts: Vec<String>,
        #[serde(default)]
        allowed_origins: Vec<String>,
        routes: BTreeMap<String, toml::Value>,
    }
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("--routes {}: cannot read it", path.display()))?;
    let file: Text = toml::from_str(&text).with_context(|| {
        format!(
            "--routes {}: expected [routes] with NAME = \"URL\" lines (and optionally allowed_hosts, allowed_origins lists before it)",
            path.display()
        )
    })?;
    let allowed = AllowedPeers {
        hosts: file.allowed_hosts,
        origins: file.allowed_origins,
    };
    allowed
        .validate()
        .map_err(anyhow::Error::msg)
        .with_context(|| format!("--routes {}", path.display()))?;
    let routes = file
        .routes
        .into_iter()
        .map(|(name, entry)| {
            file_route(&name, entry).with_context(|| format!("--routes {}", path.display()))
        })
        .collect::<anyhow::Result<_>>()?;
    Ok(RoutesFile { routes, allowed })
}

/// One route of the file: `"URL"`, or `{ url = "URL", record = ... }`.
fn file_route(name: &str, entry: toml::Value) -> anyhow::Result<Route> {
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Entry {
        url: String,
        record: Option<toml::Value>,
    }
    let (url, record) = match entry {
        toml::Value::String(url) => (url, None),
        table @ toml::Value::Table(_) => {
            let entry: Entry = table.try_into().with_context(|| {
                format!("route {name}: expected {{ url = \"URL\", record = ... }}")
            })?;
            (entry.url, entry.record)
        }
        other => anyhow::bail!(
            "route {name}: expected \"URL\" or {{ url = \"URL\", record = ... }} (found: {})",
            other.type_str()
        ),
    };
    let mut route: Route = format!("{name}={url}").parse()?;
    if let Some(record) = record {
        route.record = record_override(record).with_context(|| format!("route {name}"))?;
    }
    Ok(route)
}

/// A route's `record`: `false` (its sessions are not recorded), `true` (as the flags say), or
/// `{ sample = RATE, max_bytes = N, redact = ["/POINTER"] }` over the flags'.
fn record_override(record: toml::Value) -> anyhow::Result<RecordOverride> {
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Own {
        sample: Option<f64>,
        max_bytes: Option<u64>,
        #[serde(default)]
        redact: Vec<String>,
    }
    let own: Own = match record {
        toml::Value::Boolean(on) => {
            return Ok(RecordOverride {
                off: !on,
                ..RecordOverride::default()
            })
        }
        table => table.try_into().context(
            "record: expected false, true or { sample = RATE, max_bytes = N, redact = [\"/POINTER\"] }",
        )?,
    };
    let names = SettingNames {
        sample: "record.sample",
        max_bytes: "record.max_bytes",
        redact: "record.redact",
    };
    check_settings(&names, own.sample, own.max_bytes, &own.redact)?;
    Ok(RecordOverride {
        off: false,
        sample: own.sample,
        max_bytes: own.max_bytes,
        redact: own.redact,
    })
}

/// One route and what its sessions share.
pub(crate) struct RouteState {
    pub(super) route: Route,
    pub(super) config: BoundaryConfig,
    pub(super) shared: Arc<Shared>,
    pub(super) upstream: RouteUpstream,
    /// The route's own recording settings in force (a reload may change them while the route
    /// is kept).
    pub(super) record: arc_swap::ArcSwap<RecordOverride>,
    /// The recording of the route's requests that belong to no session (`--record`): one file
    /// for all of them, made at the first (under the settings in force then).
    pub(super) sessionless: std::sync::OnceLock<Option<Arc<crate::mcp::record::Recording>>>,
}

/// The routes in force, by name, and who may reach them from a browser.
pub(crate) struct RouteTable {
    pub(super) by_name: HashMap<String, Arc<RouteState>>,
    /// The route names, sorted (for a 404's message).
    pub(super) names: String,
    /// The `Host` and `Origin` checks: the listener's names, the flags' and the routes file's.
    pub(crate) origins: Origins,
}

impl RouteTable {
    /// The table of `routes`. A route that is in `previous` with the same target keeps its
    /// state (its sessions' shared contract status and counters, a stdio route's processes);
    /// its recording settings are the new ones.
    pub(super) fn build(
        gate: &Gate,
        boundary: &BoundaryConfig,
        stdio: StdioLimits,
        routes: Vec<Route>,
        origins: Origins,
        previous: Option<&RouteTable>,
    ) -> anyhow::Result<RouteTable> {
        anyhow::ensure!(
            !routes.is_empty(),
            "no route: give at least one --route NAME=URL (or a --routes file)"
        );
        let mut by_name = HashMap::new();
        for route in routes {
            anyhow::ensure!(
                !by_name.contains_key(&route.name),
                "route {}: given twice",
                route.name
            );
            let kept = previous
                .and_then(|p| p.by_name.get(&route.name))
                .filter(|state| state.route.target == route.target)
                .cloned();
            if let Some(kept) = &kept {
                if **kept.record.load() != route.record {
                    kept.record.store(Arc::new(route.record.clone()));
                }
            }
            let state = kept.unwrap_or_else(|| {
                Arc::new(RouteState {
                    config: BoundaryConfig {
                        server: route.name.as_str().into(),
                        transport: Transport::Gateway,
                        ..boundary.clone()
                    },
                    shared: Arc::new(Shared::new(gate, Transport::Gateway)),
                    record: arc_swap::ArcSwap::from_pointee(route.record.clone()),
                    sessionless: std::sync::OnceLock::new(),
                    upstream: match &route.target {
                        Target::Http(endpoint) => RouteUpstream::Http(Endpoint::clone(endpoint)),
                        Target::Stdio(command) => RouteUpstream::Stdio(Servers::new(
                            &route.name,
                            Arc::clone(command),
                            stdio,
                            Arc::clone(gate.metrics()),
                        )),
                    },
                    route: route.clone(),
                })
            });
            by_name.insert(route.name, state);
        }
        let mut names: Vec<&str> = by_name.keys().map(String::as_str).collect();
        names.sort_unstable();
        let names = names.join(", ");
        Ok(RouteTable {
            by_name,
            names,
            origins,
        })
    }

    /// Stops every stdio route's processes and waits for them to be gone (see
    /// [`Servers::shut_down`]).
    pub(super) async fn shut_down_stdio(&self) {
        let stopping = self
            .by_name
            .values()
            .filter_map(|route| match &route.upstream {
                RouteUpstream::Stdio(servers) => Some(servers.shut_down()),
                RouteUpstream::Http(_) => None,
            });
        futures_util::future::join_all(stopping).await;
    }

    pub(super) fn get(&self, name: &str) -> Option<Arc<RouteState>> {
        self.by_name.get(name).cloned()
    }
}

/// The routes of the flags and of the routes file, if any, and the hosts and origins the file
/// allows.
pub(super) fn all_routes(
    flags: &[Route],
    file: Option<&std::path::Path>,
) -> anyhow::Result<(Vec<Route>, AllowedPeers)> {
    let mut routes = flags.to_vec();
    let mut allowed = AllowedPeers::default();
    if let Some(path) = file {
        let file = read_file(path)?;
        routes.extend(file.routes);
        allowed = file.allowed;
    }
    Ok((routes, allowed))
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
        let file = read_file(&path).expect("routes");
        let names: Vec<&str> = file.routes.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["billing", "crm"]);
        assert_eq!(file.allowed, AllowedPeers::default());
        std::fs::write(
            &path,
            "allowed_hosts = [\"mcp.example\"]\nallowed_origins = [\"https://app.example\"]\n[routes]\ncrm = \"http://crm.internal:8000/mcp\"\n",
        )
        .expect("write");
        let file = read_file(&path).expect("routes");
        assert_eq!(file.allowed.hosts, ["mcp.example"]);
        assert_eq!(file.allowed.origins, ["https://app.example"]);
        std::fs::write(
            &path,
            "allowed_origins = [\"app.example\"]\n[routes]\ncrm = \"http://crm.internal:8000/mcp\"\n",
        )
        .expect("write");
        assert!(read_file(&path).is_err(), "an origin without its scheme");
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
    fn a_route_of_the_file_may_carry_its_own_recording_settings() {
        let dir = tempfile::tempdir().expect("a directory");
        let path = dir.path().join("routes.toml");
        std::fs::write(
            &path,
            "[routes]\ncrm = \"http://crm.internal:8000/mcp\"\nbank = { url = \"http://bank/mcp\", record = false }\n[routes.files]\nurl = \"stdio:srv --root /x\"\nrecord = { sample = 0.5, max_bytes = 4096, redact = [\"/arguments/path\"] }\n",
        )
        .expect("write");
        let file = read_file(&path).expect("routes");
        let by_name: HashMap<&str, &Route> =
            file.routes.iter().map(|r| (r.name.as_str(), r)).collect();
        assert!(by_name["crm"].record.is_default());
        assert!(by_name["bank"].record.off);
        let files = &by_name["files"].record;
        assert_eq!(files.sample, Some(0.5));
        assert_eq!(files.max_bytes, Some(4096));
        assert_eq!(files.redact, ["/arguments/path"]);
        assert!(matches!(&by_name["files"].target, Target::Stdio(words) if words.len() == 3));
        for (entry, says) in [
            (
                "{ url = \"http://x/mcp\", record = { sample = 3 } }",
                "from 0 to 1",
            ),
            (
                "{ url = \"http://x/mcp\", record = { redact = [\"x\"] } }",
                "starts with `/`",
            ),
            (
                "{ url = \"http://x/mcp\", record = { every = 1 } }",
                "record: expected",
            ),
            (
                "{ url = \"http://x/mcp\", recrod = false }",
                "expected { url",
            ),
            ("7", "(found: integer)"),
        ] {
            std::fs::write(&path, format!("[routes]\nx = {entry}\n")).expect("write");
            let error = format!("{:#}", read_file(&path).expect_err(entry));
            assert!(
                error.contains("route x") && error.contains(says),
                "{entry}: {error}"
            );
        }
    }

    #[test]
    fn what_a_client_reads_of_a_target_holds_no_secret() {
        let route: Route = "crm=https://user:pw@crm.internal:8443/v1/mcp?token=s3cret&x=1"
            .parse()
            .expect("a route");
        assert_eq!(route.target.public(), "https://crm.internal:8443");
        let logged = route.target.redacted();
        assert!(
            !logged.contains("s3cret") && !logged.contains("pw"),
            "{logged}"
        );
        assert!(
            logged.contains("token=REDACTED") && logged.contains("/v1/mcp"),
            "{logged}"
        );
        let stdio: Route = "files=stdio:srv --key s3cret".parse().expect("a route");
        assert!(!stdio.target.public().contains("s3cret"));
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
            "crm=http://crm/mcp b=HTTPS://b/mcp files=stdio:npx -y \"@acme/files mcp\" --url=http://x/mcp"
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
                "b=https://b/mcp",
                "files=stdio:npx -y '@acme/files mcp' '--url=http://x/mcp'"
            ]
        );
        assert!("crm=http://crm/mcp extra".parse::<RouteList>().is_err());
        let spaced: RouteList = "files=stdio:'/opt/My App/srv' x".parse().expect("a route");
        assert_eq!(
            spaced.0[0].target,
            Target::Stdio(["/opt/My App/srv", "x"].map(String::from).into())
        );
        let apart: RouteList = "files=stdio: srv".parse().expect("a route");
        assert_eq!(apart.0[0].target, Target::Stdio(["srv".to_owned()].into()));
        assert!("files=stdio:".parse::<RouteList>().is_err());
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
