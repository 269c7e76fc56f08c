//! The trust policy: which tier each server (and tool) is in, and the rules a check follows there.
//!
//! A policy comes from embedded defaults (every server `untrusted`) or a TOML file. Server rules
//! match by exact name or glob; exact names win over globs, and among globs the first in file order
//! wins. A rule may override the tier of single tools and the three rule switches.
//!
//! How the policy reloads: [`PolicyStore`] holds the policy in force and re-reads its file on
//! SIGHUP, on the admin endpoint, and when the file's content changes (`Gate::watch_files`, through [`crate::ops::reload`]); a bad file
//! keeps the policy in force.

use crate::core::domain::Tier;
use crate::core::metrics::Metrics;
use crate::core::rule::{RuleFile, RuleSet};
use arc_swap::{ArcSwap, Guard};
use globset::{Glob, GlobSet, GlobSetBuilder};
use serde::Deserialize;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The regular-expression engine a schema's `pattern` and `patternProperties` run on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize)]
pub enum RegexEngine {
    /// fancy-regex: supports look-around and back-references; plain patterns run on the linear
    /// engine, the rest under a backtracking bound.
    #[serde(rename = "bounded-backtracking")]
    BoundedBacktracking,
    /// The `regex` crate: linear time always; patterns with look-around do not compile.
    #[serde(rename = "linear")]
    Linear,
}

/// The options that change how a schema compiles; they are part of the cache key, so two policies
/// never share a validator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CompileOptions {
    pub assert_formats: bool,
    pub regex_engine: RegexEngine,
}

impl CompileOptions {
    /// Every combination, in the order of [`CompileOptions::index`].
    pub const ALL: [CompileOptions; 4] = [
        CompileOptions::new(false, RegexEngine::BoundedBacktracking),
        CompileOptions::new(false, RegexEngine::Linear),
        CompileOptions::new(true, RegexEngine::BoundedBacktracking),
        CompileOptions::new(true, RegexEngine::Linear),
    ];

    const fn new(assert_formats: bool, regex_engine: RegexEngine) -> Self {
        Self {
            assert_formats,
            regex_engine,
        }
    }

    /// This combination's place in [`CompileOptions::ALL`].
    pub fn index(self) -> usize {
        usize::from(self.assert_formats) * 2 + usize::from(self.regex_engine == RegexEngine::Linear)
    }
}

/// What happens to tool-call arguments that fail the tool's inputSchema (the `arguments` switch).
/// Unset, the tier decides: `reject` for untrusted, `log` for semi-trusted, `off` for trusted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ArgumentsMode {
    /// Validated; failing arguments get action `reject` (`schemagate proxy` answers the call with
    /// an `isError` result and never forwards it).
    Reject,
    /// Validated, counted and logged; action `pass`.
    Log,
    /// Not validated: outcome `skipped`.
    Off,
}

impl ArgumentsMode {
    /// The mode a tier implies when the policy sets none.
    pub fn of_tier(tier: Tier) -> Self {
        match tier {
            Tier::Untrusted => ArgumentsMode::Reject,
            Tier::SemiTrusted => ArgumentsMode::Log,
            Tier::Trusted => ArgumentsMode::Off,
        }
    }
}

/// What happens on the MCP wire to a call of a tool that neither the session's listing nor the
/// server's contract names (a model inventing a tool name, or a tool the server keeps from this
/// client): the `unknown_tools` switch. Unset, the tier decides: `reject` for untrusted (what a
/// session was not offered is not sent on), `pass` otherwise.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum UnknownTools {
    /// Relayed to the server, which answers it; counted `unchecked`.
    Pass,
    /// Answered by schemagate with a tool execution error; never relayed.
    Reject,
}

/// What the policy says for one check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rules {
    pub tier: Tier,
    pub compile: CompileOptions,
    /// A text copy in `content` that disagrees with `structuredContent` fails the check.
    pub drift_fails: bool,
    /// Whether an outputSchema's root must be an object schema, when the policy says so; unset,
    /// the MCP revision decides ([`Rules::object_root_required`]).
    pub require_object_root: Option<bool>,
    /// What failing tool-call arguments lead to.
    pub arguments: ArgumentsMode,
    /// What a call of a tool no listing names leads to, on the MCP wire.
    pub unknown_tools: UnknownTools,
    /// The tool's contract is pinned: a registration that changes it (or, for a server pinned
    /// as a whole, adds or removes tools) is refused until the new contract is accepted.
    pub pin: bool,
    /// The result budget: a tool result of more bytes is a finding (`result_too_large`), and
    /// under untrusted a failure. Unset (or 0): none.
    pub max_result_bytes: Option<u64>,
}

impl Rules {
    /// Whether an outputSchema's root must be an object schema under `version`: the policy's
    /// `require_object_root` when it sets one, else the revision's rule (required before
    /// 2026-07-28).
    pub fn object_root_required(&self, version: crate::core::domain::ProtocolVersion) -> bool {
        self.require_object_root
            .unwrap_or_else(|| version.requires_object_root())
    }
}

/// Why a policy could not be loaded; the message names the file, the key and what to fix.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    #[error("cannot read policy file {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("policy{at}: {message}")]
    Invalid { at: String, message: String },
}

#[derive(Debug, Default, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
struct Switches {
    assert_formats: Option<bool>,
    drift_fails: Option<bool>,
    require_object_root: Option<bool>,
    regex_engine: Option<RegexEngine>,
    arguments: Option<ArgumentsMode>,
    unknown_tools: Option<UnknownTools>,
    pin: Option<bool>,
    max_result_bytes: Option<u64>,
}

impl Switches {
    /// `self` with every switch that `over` sets replaced.
    fn overlay(self, over: &Switches) -> Switches {
        Switches {
            assert_formats: over.assert_formats.or(self.assert_formats),
            drift_fails: over.drift_fails.or(self.drift_fails),
            require_object_root: over.require_object_root.or(self.require_object_root),
            regex_engine: over.regex_engine.or(self.regex_engine),
            arguments: over.arguments.or(self.arguments),
            unknown_tools: over.unknown_tools.or(self.unknown_tools),
            pin: over.pin.or(self.pin),
            max_result_bytes: over.max_result_bytes.or(self.max_result_bytes),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PolicyFile {
    #[serde(default = "default_tier")]
    default_tier: Tier,
    #[serde(flatten)]
    switches: Switches,
    #[serde(default)]
    tiers: HashMap<Tier, Switches>,
    #[serde(default)]
    servers: Vec<ServerRuleFile>,
    #[serde(default)]
    rules: Vec<RuleFile>,
}

fn default_tier() -> Tier {
    Tier::Untrusted
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ServerRuleFile {
    #[serde(rename = "match")]
    pattern: String,
    tier: Tier,
    #[serde(flatten)]
    switches: Switches,
    #[serde(default)]
    tools: HashMap<String, ToolRule>,
}

/// A tool's override: a tier (`"untrusted"`), or a table with a tier and switches
/// (`{ tier = "semi-trusted", arguments = "off" }`).
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(untagged)]
enum ToolRule {
    Tier(Tier),
    Table(ToolTable),
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
struct ToolTable {
    tier: Option<Tier>,
    #[serde(flatten)]
    switches: Switches,
}

impl ToolRule {
    fn tier(&self) -> Option<Tier> {
        match self {
            ToolRule::Tier(tier) => Some(*tier),
            ToolRule::Table(table) => table.tier,
        }
    }

    fn switches(&self) -> Option<&Switches> {
        match self {
            ToolRule::Tier(_) => None,
            ToolRule::Table(table) => Some(&table.switches),
        }
    }
}

#[derive(Debug)]
struct ServerRule {
    tier: Tier,
    switches: Switches,
    tools: HashMap<String, ToolRule>,
}

/// A loaded, ready-to-query trust policy.
#[derive(Debug)]
pub struct Policy {
    default_tier: Tier,
    base: Switches,
    tiers: HashMap<Tier, Switches>,
    rules: Vec<ServerRule>,
    exact: HashMap<String, usize>,
    globs: GlobSet,
    /// Index into `rules` for each glob in `globs`, in file order.
    glob_rules: Vec<usize>,
    /// The rules beside the schemas (`[[rules]]`), compiled.
    rule_set: RuleSet,
}

impl Default for Policy {
    /// The embedded defaults: every server `untrusted`, formats asserted, drift reported but not
    /// failing, object roots required, bounded-backtracking regexes.
    fn default() -> Self {
        Policy::from_toml_str("").unwrap_or_else(|_| unreachable!("the empty policy is valid"))
    }
}

impl Policy {
    /// Parses a policy from TOML text.
    ///
    /// ```
    /// use schemagate::core::domain::Tier;
    /// use schemagate::core::policy::Policy;
    ///
    /// let policy = Policy::from_toml_str(
    ///     "[[servers]]\nmatch = \"internal-*\"\ntier = \"trusted\"\n",
    /// )?;
    /// assert_eq!(policy.rules_for(Some("internal-db"), None).tier, Tier::Trusted);
    /// assert_eq!(policy.rules_for(Some("marketplace-x"), None).tier, Tier::Untrusted);
    /// # Ok::<(), schemagate::core::policy::PolicyError>(())
    /// ```
    pub fn from_toml_str(text: &str) -> Result<Policy, PolicyError> {
        let file: PolicyFile = toml::from_str(text).map_err(|e| PolicyError::Invalid {
            at: String::new(),
            message: e.to_string().trim_end().to_owned(),
        })?;
        let mut rules = Vec::with_capacity(file.servers.len());
        let mut exact = HashMap::new();
        let mut globs = GlobSetBuilder::new();
        let mut glob_rules = Vec::new();
        for (i, rule) in file.servers.into_iter().enumerate() {
            let at = format!(" servers[{i}] (match = {:?})", rule.pattern);
            if rule.pattern.is_empty() {
                return Err(PolicyError::Invalid {
                    at,
                    message: "`match` must not be empty".into(),
                });
            }
            if rule.pattern.contains(['*', '?', '[', '{']) {
                let glob = Glob::new(&rule.pattern).map_err(|e| PolicyError::Invalid {
                    at: at.clone(),
                    message: format!("`match` is not a valid glob: {e}"),
                })?;
                globs.add(glob);
                glob_rules.push(i);
            } else if exact.insert(rule.pattern.clone(), i).is_some() {
                return Err(PolicyError::Invalid {
                    at,
                    message: "another rule already matches this exact server id".into(),
                });
            }
            rules.push(ServerRule {
                tier: rule.tier,
                switches: rule.switches,
                tools: rule.tools,
            });
        }
        let globs = globs.build().map_err(|e| PolicyError::Invalid {
            at: " servers".into(),
            message: e.to_string(),
        })?;
        let rule_set = RuleSet::compile(file.rules, text)
            .map_err(|(at, message)| PolicyError::Invalid { at, message })?;
        Ok(Policy {
            rule_set,
            default_tier: file.default_tier,
            base: file.switches,
            tiers: file.tiers,
            rules,
            exact,
            globs,
            glob_rules,
        })
    }

    /// Reads and parses a policy file.
    pub fn from_file(path: &Path) -> Result<Policy, PolicyError> {
        let text = std::fs::read_to_string(path).map_err(|source| PolicyError::Read {
            path: path.display().to_string(),
            source,
        })?;
        Policy::from_toml_str(&text).map_err(|e| match e {
            PolicyError::Invalid { at, message } => PolicyError::Invalid {
                at: format!(" {}{at}", path.display()),
                message,
            },
            other => other,
        })
    }

    /// The rules beside the schemas.
    pub fn rule_set(&self) -> &RuleSet {
        &self.rule_set
    }

    fn rule_for(&self, server: &str) -> Option<&ServerRule> {
        if let Some(&i) = self.exact.get(server) {
            return Some(&self.rules[i]);
        }
        if self.glob_rules.is_empty() {
            return None;
        }
        // `matches` returns glob indices in ascending order: the first is the earliest in the file.
        let first = self.globs.matches(server).into_iter().next()?;
        Some(&self.rules[self.glob_rules[first]])
    }

    /// The tier and rules for a check on `server`'s `tool`. A check that names no server (a bare
    /// check) gets the default tier.
    pub fn rules_for(&self, server: Option<&str>, tool: Option<&str>) -> Rules {
        let rule = server.and_then(|s| self.rule_for(s));
        let tool_rule = rule.zip(tool).and_then(|(rule, t)| rule.tools.get(t));
        let tier = match rule {
            Some(rule) => tool_rule.and_then(ToolRule::tier).unwrap_or(rule.tier),
            None => self.default_tier,
        };
        let mut switches = self.base;
        if let Some(over) = self.tiers.get(&tier) {
            switches = switches.overlay(over);
        }
        if let Some(rule) = rule {
            switches = switches.overlay(&rule.switches);
        }
        if let Some(over) = tool_rule.and_then(ToolRule::switches) {
            switches = switches.overlay(over);
        }
        Rules {
            tier,
            compile: CompileOptions {
                assert_formats: switches.assert_formats.unwrap_or(true),
                regex_engine: switches
                    .regex_engine
                    .unwrap_or(RegexEngine::BoundedBacktracking),
            },
            drift_fails: switches.drift_fails.unwrap_or(false),
            require_object_root: switches.require_object_root,
            arguments: switches
                .arguments
                .unwrap_or_else(|| ArgumentsMode::of_tier(tier)),
            unknown_tools: switches.unknown_tools.unwrap_or(match tier {
                Tier::Untrusted => UnknownTools::Reject,
                _ => UnknownTools::Pass,
            }),
            pin: switches.pin.unwrap_or(false),
            max_result_bytes: switches.max_result_bytes.filter(|&max| max > 0),
        }
    }
}

/// The policy in force, swapped whole on a reload; reads take no lock.
pub struct PolicyStore {
    current: ArcSwap<Policy>,
    path: Option<PathBuf>,
    metrics: Arc<Metrics>,
}

impl PolicyStore {
    pub fn new(policy: Policy, path: Option<PathBuf>, metrics: Arc<Metrics>) -> Self {
        Self {
            current: ArcSwap::from_pointee(policy),
            path,
            metrics,
        }
    }

    /// The policy in force; hold it only for the length of a check.
    pub fn load(&self) -> Guard<Arc<Policy>> {
        self.current.load()
    }

    /// The policy file, when one is configured.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// Re-reads the policy file. A bad file keeps the policy in force and says why.
    pub fn reload(&self) -> Result<(), PolicyError> {
        let Some(path) = &self.path else {
            return Err(PolicyError::Invalid {
                at: String::new(),
                message: "no policy file is configured (start with --policy FILE)".into(),
            });
        };
        match Policy::from_file(path) {
            Ok(policy) => {
                self.current.store(Arc::new(policy));
                self.metrics.policy_reload(true);
                tracing::info!(path = %path.display(), "policy reloaded");
                Ok(())
            }
            Err(e) => {
                self.metrics.policy_reload(false);
                tracing::error!(path = %path.display(), error = %e, "policy reload failed; the previous policy stays in force");
                Err(e)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compile_option_indices_match_their_places() {
        for (i, options) in CompileOptions::ALL.iter().enumerate() {
            assert_eq!(options.index(), i, "{options:?}");
        }
    }

    const EXAMPLE: &str = r#"
default_tier = "untrusted"
drift_fails = false

[tiers.semi-trusted]
assert_formats = false

[[servers]]
match = "internal-*"
tier = "trusted"

[[servers]]
match = "*-crm"
tier = "semi-trusted"

[[servers]]
match = "partner-crm"
tier = "semi-trusted"
drift_fails = true
tools = { charge_card = "untrusted" }
"#;

    #[test]
    fn defaults_make_every_server_untrusted() {
        let rules = Policy::default().rules_for(Some("anything"), Some("tool"));
        assert_eq!(rules.tier, Tier::Untrusted);
        assert!(rules.compile.assert_formats);
        assert!(!rules.drift_fails);
        assert_eq!(rules.require_object_root, None, "the MCP revision decides");
    }

    #[test]
    fn arguments_follow_the_tier_unless_set_per_server_or_tool() {
        let policy = Policy::from_toml_str(
            r#"
[[servers]]
match = "partner-*"
tier = "semi-trusted"
arguments = "reject"
tools = { search = { arguments = "off" }, pay = "untrusted", peek = { tier = "trusted" } }

[[servers]]
match = "internal"
tier = "trusted"
"#,
        )
        .expect("valid policy");
        let mode = |server, tool| policy.rules_for(Some(server), Some(tool)).arguments;
        assert_eq!(
            mode("marketplace", "x"),
            ArgumentsMode::Reject,
            "untrusted default"
        );
        assert_eq!(mode("internal", "x"), ArgumentsMode::Off, "trusted default");
        assert_eq!(
            mode("partner-crm", "x"),
            ArgumentsMode::Reject,
            "server switch"
        );
        assert_eq!(
            mode("partner-crm", "search"),
            ArgumentsMode::Off,
            "tool table"
        );
        assert_eq!(
            policy.rules_for(Some("partner-crm"), Some("search")).tier,
            Tier::SemiTrusted
        );
        assert_eq!(
            policy.rules_for(Some("partner-crm"), Some("pay")).tier,
            Tier::Untrusted
        );
        assert_eq!(
            policy.rules_for(Some("partner-crm"), Some("peek")).tier,
            Tier::Trusted
        );
        let bad = Policy::from_toml_str("arguments = \"sometimes\"");
        assert!(bad.is_err());
    }

    #[test]
    fn exact_names_globs_and_tool_overrides() {
        let p = Policy::from_toml_str(EXAMPLE).expect("example parses");
        assert_eq!(p.rules_for(Some("internal-db"), None).tier, Tier::Trusted);
        assert_eq!(p.rules_for(Some("other-crm"), None).tier, Tier::SemiTrusted);
        let crm = p.rules_for(Some("partner-crm"), Some("get_customer"));
        assert_eq!(crm.tier, Tier::SemiTrusted);
        assert!(crm.drift_fails, "the exact rule wins over the glob");
        assert!(!crm.compile.assert_formats, "tier section applies");
        let charge = p.rules_for(Some("partner-crm"), Some("charge_card"));
        assert_eq!(charge.tier, Tier::Untrusted);
        assert!(charge.compile.assert_formats, "untrusted keeps the default");
        assert_eq!(p.rules_for(Some("stranger"), None).tier, Tier::Untrusted);
        assert_eq!(p.rules_for(None, None).tier, Tier::Untrusted);
    }

    #[test]
    fn bad_policies_name_the_key() {
        let err = Policy::from_toml_str("default_tier = \"friendly\"").unwrap_err();
        let text = err.to_string();
        assert!(text.contains("default_tier"), "{text}");
        assert!(text.contains("friendly"), "{text}");

        let err =
            Policy::from_toml_str("[[servers]]\nmatch = \"a\"\ntier = \"trusted\"\ncolour = 1")
                .unwrap_err()
                .to_string();
        assert!(err.contains("colour"), "{err}");

        let err = Policy::from_toml_str("[[servers]]\nmatch = \"a[\"\ntier = \"trusted\"")
            .unwrap_err()
            .to_string();
        assert!(err.contains("servers[0]") && err.contains("glob"), "{err}");
    }
}
