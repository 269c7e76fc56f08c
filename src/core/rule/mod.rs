//! Rules beside the schemas: named conditions of the policy (`[[rules]]`) that a tool call's
//! arguments or a result's `structuredContent` must meet, where a schema cannot say it (an
//! amount's ceiling for a caller, a path inside the client's roots). A rule is a CEL expression
//! ([`expr`]) or a list of paths that must lie within the client's roots ([`paths`]). A rule that
//! does not hold, or cannot be evaluated, is an error of the verdict (keyword `rule`), judged in
//! the same pass as the schema and under the same tier.

mod budget;
pub mod expr;
mod fast;
pub(crate) mod on_check;
pub mod paths;
pub mod payload;

use crate::core::domain::Tier;
use ahash::AHashMap;
use globset::{Glob, GlobMatcher};
use paths::PathPointer;
pub use payload::Readable;
use serde::Deserialize;
use std::borrow::Cow;

/// The most values a `paths` rule looks at in one payload.
const MAX_PATHS: usize = 10_000;

/// Which payload a rule reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RulePayload {
    Arguments,
    Result,
}

impl RulePayload {
    /// Where the rules on this payload are kept in [`RuleSet`]'s index.
    fn index(self) -> usize {
        match self {
            RulePayload::Arguments => 0,
            RulePayload::Result => 1,
        }
    }

    fn variable(self) -> &'static str {
        match self {
            RulePayload::Arguments => "arguments",
            RulePayload::Result => "result",
        }
    }
}

/// What a rule that needs the client's roots does where none are known (the `unknown_roots`
/// setting). Unset: `reject` under the untrusted tier, `log` otherwise.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum UnknownRoots {
    /// The rule holds.
    Pass,
    /// The rule holds, and a warning says it was not judged.
    Log,
    /// The rule fails.
    Reject,
}

/// A rule as the policy file writes it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RuleFile {
    name: String,
    #[serde(default = "any")]
    server: String,
    #[serde(default = "any")]
    tool: String,
    payload: RulePayload,
    expr: Option<toml::Spanned<String>>,
    paths: Option<Vec<String>>,
    message: Option<String>,
    unknown_roots: Option<UnknownRoots>,
}

fn any() -> String {
    "*".to_owned()
}

#[derive(Debug)]
enum Body {
    Expr(expr::Compiled),
    Paths(Vec<PathPointer>),
}

/// One compiled rule.
#[derive(Debug)]
pub struct Rule {
    pub name: String,
    server: GlobMatcher,
    tool: GlobMatcher,
    pub payload: RulePayload,
    body: Body,
    /// What the model reads when the rule fails.
    pub message: String,
    unknown_roots: Option<UnknownRoots>,
}

/// The policy's rules, compiled.
#[derive(Default)]
pub struct RuleSet {
    rules: Vec<Rule>,
    /// The rules naming a server and a tool exactly, by server then tool, then payload (see
    /// [`RulePayload::index`]): found without a glob.
    exact: AHashMap<String, AHashMap<String, [Vec<usize>; 2]>>,
    /// The others, matched by their globs.
    globbed: Vec<usize>,
    /// The context their expressions run in (none without rules).
    base: Option<expr::Base>,
}

impl std::fmt::Debug for RuleSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RuleSet")
            .field("rules", &self.rules)
            .finish_non_exhaustive()
    }
}

/// Who asks and what the session knows: what a rule sees besides the payload.
#[derive(Debug, Clone, Copy)]
pub struct Facts<'a> {
    pub server: &'a str,
    pub tool: &'a str,
    /// The caller's token name and scopes.
    pub caller: (&'a str, &'a [&'static str]),
    /// The client's roots (URIs), when the session knows them.
    pub roots: Option<&'a [String]>,
    pub tier: Tier,
}

/// A payload's size as its reader counted it: what decides whether rules may read it at all
/// (zero: not counted, as for a value already built).
#[derive(Debug, Clone, Copy, Default)]
pub struct Size {
    pub values: usize,
    pub string_bytes: usize,
}

/// A rule that did not hold: its name and the message the model reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Broken {
    pub rule: String,
    pub message: String,
}

impl RuleSet {
    /// Compiles the policy file's rules; `text` is the file (for the line of a broken
    /// expression). An error names the rule, and the line and column where it can.
    pub(crate) fn compile(files: Vec<RuleFile>, text: &str) -> Result<RuleSet, (String, String)> {
        let mut rules: Vec<Rule> = Vec::with_capacity(files.len());
        for (i, file) in files.into_iter().enumerate() {
            let at = format!(" rules[{i}] (name = {:?})", file.name);
            let rule = compile_one(file, text).map_err(|message| (at.clone(), message))?;
            if rules.iter().any(|r| r.name == rule.name) {
                return Err((at, "another rule has this name".into()));
            }
            rules.push(rule);
        }
        let base = match rules.is_empty() {
            true => None,
            false => Some(expr::Base::new().map_err(|e| (String::new(), e))?),
        };
        let mut exact: AHashMap<String, AHashMap<String, [Vec<usize>; 2]>> = AHashMap::new();
        let mut globbed = Vec::new();
        for (i, rule) in rules.iter().enumerate() {
            match (
                literal(rule.server.glob().glob()),
                literal(rule.tool.glob().glob()),
            ) {
                (Some(server), Some(tool)) => exact
                    .entry(server.to_owned())
                    .or_default()
                    .entry(tool.to_owned())
                    .or_default()[rule.payload.index()]
                .push(i),
                _ => globbed.push(i),
            }
        }
        Ok(RuleSet {
            rules,
            exact,
            globbed,
            base,
        })
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    pub fn len(&self) -> usize {
        self.rules.len()
    }

    /// Judges `payload` (the arguments or the structuredContent, as `kind` says) by every rule
    /// that applies to `facts`' server and tool: the ones that did not hold.
    pub fn judge(
        &self,
        kind: RulePayload,
        payload: &serde_json::Value,
        facts: &Facts<'_>,
    ) -> Vec<Broken> {
        self.applying(kind, facts.server, facts.tool).judge(
            (Size::default(), payload),
            facts,
            &mut Vec::new(),
        )
    }

    /// The rules that apply to `server`'s `tool` for `kind`, in file order. Without globbed
    /// rules, that is a list kept already.
    pub fn applying(&self, kind: RulePayload, server: &str, tool: &str) -> Applying<'_> {
        let exact: &[usize] = self
            .exact
            .get(server)
            .and_then(|tools| tools.get(tool))
            .map_or(&[], |kinds| &kinds[kind.index()]);
        let indices = if self.globbed.is_empty() {
            Cow::Borrowed(exact)
        } else {
            let mut found: Vec<usize> = exact
                .iter()
                .copied()
                .chain(self.globbed.iter().copied().filter(|&i| {
                    let rule = &self.rules[i];
                    rule.payload == kind
                        && matches(&rule.server, server)
                        && matches(&rule.tool, tool)
                }))
                .collect();
            found.sort_unstable();
            Cow::Owned(found)
        };
        Applying {
            set: self,
            kind,
            indices,
        }
    }
}

/// Whether `name` matches `glob`; `*` (a rule's default) without running it.
fn matches(glob: &GlobMatcher, name: &str) -> bool {
    glob.glob().glob() == "*" || glob.is_match(name)
}

/// A glob pattern's text when it is a plain name (no `*`, `?`, `[` or `{`).
fn literal(pattern: &str) -> Option<&str> {
    (!pattern.contains(['*', '?', '[', '{', '\\'])).then_some(pattern)
}

/// The rules that apply to one check, found once.
pub struct Applying<'r> {
    set: &'r RuleSet,
    kind: RulePayload,
    /// The rules' places in the set, in file order.
    indices: Cow<'r, [usize]>,
}

impl Applying<'_> {
    pub fn is_empty(&self) -> bool {
        self.indices.is_empty()
    }

    fn rules(&self) -> impl Iterator<Item = &Rule> {
        self.indices.iter().map(|&i| &self.set.rules[i])
    }

    /// The most work they can take over a payload of `values` values (see
    /// [`expr::Compiled::work`]; a paths rule reads each value once).
    pub fn work(&self, values: usize) -> f64 {
        // Past the values rules read, they fail without running.
        if values > expr::MAX_VALUES {
            return 0.0;
        }
        self.rules()
            .map(|rule| match &rule.body {
                Body::Expr(compiled) => compiled.work(values),
                Body::Paths(_) => values as f64,
            })
            .sum()
    }

    /// Judges a payload of `size`, read only as far as each rule needs: past
    /// [`expr::MAX_VALUES`] values or [`expr::MAX_STRING_BYTES`] of strings, each rule fails as
    /// not evaluable, and the payload is never read. The rules that did not hold; those that
    /// were not judged (the client's roots unknown, and `unknown_roots` letting them pass) go to
    /// `not_judged`.
    pub fn judge(
        &self,
        (size, payload): (Size, &dyn Readable),
        facts: &Facts<'_>,
        not_judged: &mut Vec<Broken>,
    ) -> Vec<Broken> {
        let Some(base) = &self.set.base else {
            return Vec::new();
        };
        let too_large = if size.values > expr::MAX_VALUES {
            Some(format!(
                "the {} hold {} values, more than {} values",
                self.kind.variable(),
                size.values,
                expr::MAX_VALUES
            ))
        } else if size.string_bytes > expr::MAX_STRING_BYTES {
            Some(format!(
                "the {} hold {} bytes of strings, more than {}",
                self.kind.variable(),
                size.string_bytes,
                expr::MAX_STRING_BYTES
            ))
        } else {
            None
        };
        let mut broken = Vec::new();
        for rule in self.rules() {
            let judged = match &too_large {
                Some(why) => Judged::Fails(format!(
                    "{} (could not be evaluated: {why}: too many for a rule to judge)",
                    rule.message
                )),
                None => rule.judge(base, payload, facts),
            };
            let (into, message) = match judged {
                Judged::Holds => continue,
                Judged::Fails(message) => (&mut broken, message),
                Judged::Unjudged(message) => (&mut *not_judged, message),
            };
            into.push(Broken {
                rule: rule.name.clone(),
                message,
            });
        }
        broken
    }
}

fn compile_one(file: RuleFile, text: &str) -> Result<Rule, String> {
    if file.name.is_empty() || file.name.len() > 128 {
        return Err("`name` must be 1 to 128 characters".into());
    }
    let glob = |what: &str, pattern: &str| {
        Glob::new(pattern)
            .map(|g| g.compile_matcher())
            .map_err(|e| format!("`{what}` is not a valid glob: {e}"))
    };
    let (server, tool) = (glob("server", &file.server)?, glob("tool", &file.tool)?);
    let body = match (file.expr, file.paths) {
        (Some(source), None) => {
            let span = source.span();
            let compiled =
                expr::compile(source.get_ref(), file.payload.variable()).map_err(|refused| {
                    let (line, column) = position(text, span.start, refused.at);
                    format!("line {line}, column {column}: `expr`: {}", refused.message)
                })?;
            Body::Expr(compiled)
        }
        (None, Some(paths)) => {
            if paths.is_empty() {
                return Err("`paths` names no path".into());
            }
            let pointers = paths
                .iter()
                .map(|p| PathPointer::parse(p))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| format!("`paths`: {e}"))?;
            Body::Paths(pointers)
        }
        (Some(_), Some(_)) => return Err("give `expr` or `paths`, not both".into()),
        (None, None) => return Err("give `expr` (a CEL expression) or `paths`".into()),
    };
    let message = file.message.unwrap_or_else(|| match &body {
        Body::Expr(_) => format!("the {} break rule {:?}", file.payload.variable(), file.name),
        Body::Paths(_) => {
            "a path lies outside the directories the user gave (the client's roots)".into()
        }
    });
    Ok(Rule {
        name: file.name,
        server,
        tool,
        payload: file.payload,
        body,
        message,
        unknown_roots: file.unknown_roots,
    })
}

/// What `pointers` can reach of `payload`: the members they start with, or all of it when one
/// starts with `*`.
fn read_for(pointers: &[PathPointer], payload: &dyn Readable) -> serde_json::Value {
    let keys: Option<Vec<&str>> = pointers.iter().map(PathPointer::first_key).collect();
    match keys {
        None => payload.value(),
        Some(keys) => serde_json::Value::Object(
            keys.into_iter()
                .filter_map(|key| {
                    payload
                        .member_value(key)
                        .map(|value| (key.to_owned(), value))
                })
                .collect(),
        ),
    }
}

/// The line and column (1-based) in the policy file of the expression that starts at byte
/// `start` (its opening quote), or of the place `inner` (line, column) within it.
fn position(text: &str, start: usize, inner: Option<(usize, usize)>) -> (usize, usize) {
    let before = &text[..start.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
    match inner {
        // The expression's first character follows the quote.
        Some((1, c)) => (line, column + c),
        Some((l, c)) => (line + l - 1, c),
        None => (line, column),
    }
}

impl Rule {
    /// Why the rule does not hold of `payload`, or `None` when it holds.
    fn judge(&self, base: &expr::Base, payload: &dyn Readable, facts: &Facts<'_>) -> Judged {
        if let (Body::Paths(_), None) = (&self.body, facts.roots) {
            return self.without_roots(facts);
        }
        match &self.body {
            Body::Expr(compiled) => {
                let bindings = expr::Bindings {
                    payload: (self.payload.variable(), payload),
                    server: facts.server,
                    tool: facts.tool,
                    caller: facts.caller,
                    roots: facts.roots,
                };
                match compiled.evaluate(base, &bindings) {
                    expr::Evaluated::Holds => Judged::Holds,
                    expr::Evaluated::Fails => Judged::Fails(self.message.clone()),
                    expr::Evaluated::Unevaluable(why) => {
                        Judged::Fails(format!("{} (could not be evaluated: {why})", self.message))
                    }
                    expr::Evaluated::NoRoots => self.without_roots(facts),
                }
            }
            Body::Paths(pointers) => {
                let roots = facts.roots.unwrap_or(&[]);
                let payload = read_for(pointers, payload);
                for pointer in pointers {
                    let Some(found) = pointer.find(&payload, MAX_PATHS) else {
                        return Judged::Fails(format!(
                            "{} (could not be evaluated: {} finds more than {MAX_PATHS} paths)",
                            self.message,
                            pointer.as_str()
                        ));
                    };
                    for (at, value) in found {
                        let Some(path) = value.as_str() else {
                            return Judged::Fails(format!("{}: {at} is not a path", self.message));
                        };
                        match paths::within(path, roots.iter().map(String::as_str)) {
                            Ok(true) => {}
                            Ok(false) => {
                                return Judged::Fails(format!(
                                    "{}: {at} ({path}) is outside",
                                    self.message
                                ))
                            }
                            Err(e) => {
                                return Judged::Fails(format!("{}: {at}: {}", self.message, e.0))
                            }
                        }
                    }
                }
                Judged::Holds
            }
        }
    }

    /// What the rule comes to when it reads the client's roots and none are known: as
    /// `unknown_roots` says (unset: reject under untrusted, log otherwise).
    fn without_roots(&self, facts: &Facts<'_>) -> Judged {
        let mode = self.unknown_roots.unwrap_or(match facts.tier {
            Tier::Untrusted => UnknownRoots::Reject,
            _ => UnknownRoots::Log,
        });
        let not_judged = || {
            format!(
                "rule {} was not judged: the client's roots are not known (unknown_roots lets it pass)",
                self.name
            )
        };
        match mode {
            UnknownRoots::Pass => Judged::Unjudged(not_judged()),
            UnknownRoots::Log => {
                tracing::warn!(rule = %self.name, server = facts.server, tool = facts.tool, "a rule on the client's roots was not judged: the session knows no roots (unknown_roots = \"log\")");
                Judged::Unjudged(not_judged())
            }
            UnknownRoots::Reject => Judged::Fails(format!(
                "{} (not judged: the client's roots are not known; the client must declare roots and answer roots/list)",
                self.message
            )),
        }
    }
}

/// What one rule came to.
enum Judged {
    Holds,
    /// It does not hold (or could not be evaluated): the message the model reads.
    Fails(String),
    /// It was not judged, and passes as `unknown_roots` says: what the verdict's finding says.
    Unjudged(String),
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rule_set(policy: &str) -> Result<RuleSet, (String, String)> {
        #[derive(Deserialize)]
        struct File {
            rules: Vec<RuleFile>,
        }
        let file: File = toml::from_str(policy).expect("TOML");
        RuleSet::compile(file.rules, policy)
    }

    fn facts<'a>(roots: Option<&'a [String]>, scopes: &'a [&'static str]) -> Facts<'a> {
        Facts {
            server: "bank-eu",
            tool: "transfer",
            caller: ("ops", scopes),
            roots,
            tier: Tier::Untrusted,
        }
    }

    const LIMIT: &str = r#"
[[rules]]
name = "transfer_limit"
server = "bank-*"
tool = "transfer"
payload = "arguments"
expr = "arguments.amount <= 1000 || caller.scopes.exists(s, s == 'admin')"
message = "amount above 1,000 needs a person to approve it"
"#;

    #[test]
    fn an_expression_holds_fails_or_cannot_be_evaluated_and_fails_then_too() {
        let rules = rule_set(LIMIT).expect("compiles");
        let judge = |args: serde_json::Value, scopes: &[&'static str]| {
            rules.judge(RulePayload::Arguments, &args, &facts(None, scopes))
        };
        assert!(judge(json!({"amount": 10}), &[]).is_empty());
        assert!(judge(json!({"amount": 5000}), &["admin"]).is_empty());
        let broken = judge(json!({"amount": 5000}), &["check"]);
        assert_eq!(broken.len(), 1);
        assert_eq!(broken[0].rule, "transfer_limit");
        assert_eq!(
            broken[0].message,
            "amount above 1,000 needs a person to approve it"
        );
        let missing = judge(json!({"to": "x"}), &[]);
        assert!(
            missing[0].message.contains("could not be evaluated")
                && missing[0].message.contains("amount"),
            "{missing:?}"
        );
        let result = rules.judge(
            RulePayload::Result,
            &json!({"amount": 5000}),
            &facts(None, &[]),
        );
        assert!(
            result.is_empty(),
            "a rule on arguments does not judge results"
        );
        // Only the members an expression reads are read: a large one beside them costs nothing.
        let blob: Vec<usize> = (0..200_000).collect();
        assert!(judge(json!({"amount": 5, "blob": blob}), &[]).is_empty());
        let other = Facts {
            server: "crm",
            ..facts(None, &[])
        };
        assert!(rules
            .judge(RulePayload::Arguments, &json!({"amount": 5000}), &other)
            .is_empty());
    }

    #[test]
    fn paths_must_lie_within_the_roots_and_unknown_roots_follow_the_tier() {
        let rules = rule_set(
            "[[rules]]\nname = \"in_roots\"\ntool = \"*\"\npayload = \"arguments\"\npaths = [\"/path\", \"/paths/*\"]\n",
        )
        .expect("compiles");
        let roots = ["file:///srv/shared".to_owned()];
        let judge = |args: serde_json::Value, roots: Option<&[String]>, tier: Tier| {
            let facts = Facts {
                tier,
                ..facts(roots, &[])
            };
            rules.judge(RulePayload::Arguments, &args, &facts)
        };
        let untrusted = Tier::Untrusted;
        assert!(judge(json!({"path": "/srv/shared/a"}), Some(&roots), untrusted).is_empty());
        assert!(judge(
            json!({"paths": ["/srv/shared/a", "/srv/shared/b"]}),
            Some(&roots),
            untrusted
        )
        .is_empty());
        for outside in [
            json!({"path": "/srv/shared/../../etc/passwd"}),
            json!({"paths": ["/srv/shared/a", "file:///etc/shadow"]}),
            json!({"path": "relative.txt"}),
            json!({"path": 7}),
        ] {
            assert_eq!(
                judge(outside.clone(), Some(&roots), untrusted).len(),
                1,
                "{outside}"
            );
        }
        let unknown = judge(json!({"path": "/srv/shared/a"}), None, untrusted);
        assert!(
            unknown[0].message.contains("roots are not known"),
            "{unknown:?}"
        );
        assert!(
            judge(json!({"path": "/x"}), None, Tier::Trusted).is_empty(),
            "logged, passed"
        );
    }

    #[test]
    fn without_roots_an_expression_is_still_judged_on_the_rest() {
        let rules = rule_set(
            "[[rules]]\nname = \"r\"\npayload = \"arguments\"\nunknown_roots = \"pass\"\nexpr = \"arguments.amount <= 1000 && within_roots(arguments.path)\"\n",
        )
        .expect("compiles");
        let applying = rules.applying(RulePayload::Arguments, "bank-eu", "transfer");
        let judge = |args: serde_json::Value| {
            let mut not_judged = Vec::new();
            let broken =
                applying.judge((Size::default(), &args), &facts(None, &[]), &mut not_judged);
            (broken.len(), not_judged.len())
        };
        assert_eq!(
            judge(json!({"amount": 5000, "path": "/x"})),
            (1, 0),
            "the amount fails it"
        );
        assert_eq!(
            judge(json!({"amount": 10, "path": "/x"})),
            (0, 1),
            "passed, said not judged"
        );
    }

    #[test]
    fn within_roots_and_within_are_functions_of_expressions() {
        let rules = rule_set(
            "[[rules]]\nname = \"src\"\npayload = \"arguments\"\nexpr = \"within_roots(arguments.path) && within(arguments.path, ['/srv/shared/src'])\"\n",
        )
        .expect("compiles");
        let roots = ["/srv/shared".to_owned()];
        let judge = |path: &str, roots: Option<&[String]>| {
            rules.judge(
                RulePayload::Arguments,
                &json!({"path": path}),
                &facts(roots, &[]),
            )
        };
        assert!(judge("/srv/shared/src/main.rs", Some(&roots)).is_empty());
        assert_eq!(judge("/srv/shared/README", Some(&roots)).len(), 1);
        assert_eq!(judge("/srv/shared/src/../../../etc", Some(&roots)).len(), 1);
        assert_eq!(
            judge("/srv/shared/src/x", None).len(),
            1,
            "no roots known: rejected"
        );
    }

    #[test]
    fn a_broken_or_costly_rule_is_refused_at_load_with_its_place() {
        let refused = |expr: &str| -> String {
            let policy =
                format!("[[rules]]\nname = \"r\"\npayload = \"arguments\"\nexpr = {expr:?}\n");
            let (at, message) = rule_set(&policy).expect_err(expr);
            format!("{at}: {message}")
        };
        let syntax = refused("arguments.amount <= ");
        assert!(
            syntax.contains("rules[0]") && syntax.contains("line 4, column"),
            "{syntax}"
        );
        let plus = ["arguments.a"; 10].join(" + ") + " == ''";
        assert!(refused(&plus).contains("9 `+`"), "{}", refused(&plus));
        assert!(refused(
            "arguments.items.all(x, arguments.items.all(y, arguments.items.all(z, x == y)))"
        )
        .contains("nest 3 deep"));
        assert!(refused("arguments.items.all(x, x.name + 'a' == 'b')")
            .contains("builds a value per item"));
        let deep = format!("size({}true{}) == 1", "[".repeat(40), "]".repeat(40));
        assert!(refused(&deep).contains("nests"), "{}", refused(&deep));
        assert!(refused(&"x".repeat(5000)).contains("at most 2048"));
        let no_body =
            rule_set("[[rules]]\nname = \"r\"\npayload = \"arguments\"\n").expect_err("no body");
        assert!(no_body.1.contains("give `expr`"), "{no_body:?}");
        let twice = rule_set(&format!("{LIMIT}{LIMIT}")).expect_err("a name twice");
        assert!(twice.1.contains("another rule has this name"));
    }

    #[test]
    fn a_payload_past_the_budget_cannot_be_judged_and_fails() {
        let rules = rule_set(
            "[[rules]]\nname = \"r\"\npayload = \"arguments\"\nexpr = \"arguments.items.all(x, arguments.items.exists(y, y == x))\"\n",
        )
        .expect("compiles");
        let judge = |n: usize| {
            let items: Vec<usize> = (0..n).collect();
            rules.judge(
                RulePayload::Arguments,
                &json!({"items": items}),
                &facts(None, &[]),
            )
        };
        assert!(judge(100).is_empty());
        let quadratic = judge(50_000);
        assert!(quadratic[0].message.contains("too many"), "{quadratic:?}");
        let huge = judge(1_000_000);
        assert!(
            huge[0].message.contains("more than 100000 values"),
            "{huge:?}"
        );
        // One comprehension whose body reads the payload again is a loop in a loop.
        let membership = rule_set(
            "[[rules]]\nname = \"r\"\npayload = \"arguments\"\nexpr = \"arguments.items.all(x, x in arguments.items)\"\n",
        )
        .expect("compiles");
        let items: Vec<usize> = (0..20_000).collect();
        let broken = membership.judge(
            RulePayload::Arguments,
            &json!({"items": items}),
            &facts(None, &[]),
        );
        assert!(broken[0].message.contains("too many"), "{broken:?}");
    }

    #[test]
    fn a_document_reads_as_the_same_value_serde_json_reads() {
        let rules = rule_set(
            r#"
[[rules]]
name = "members"
payload = "result"
expr = "type(result.i) == int && type(result.u) == uint && type(result.f) == double && result.e == 100.0 && result.n == -3 && type(result.z) == int && result.s == 'a\"b' && result.o.k"

[[rules]]
name = "whole"
payload = "result"
expr = "size(result) == 9 && result.l.exists(x, x == 2) && result.o == {'k': true}"
"#,
        )
        .expect("compiles");
        let judge_both = |text: &str| {
            let value: serde_json::Value = serde_json::from_str(text).expect("JSON");
            let document =
                crate::core::document::Document::read(text.as_bytes(), 64).expect("read");
            let broken = |payload: &dyn Readable| -> Vec<String> {
                rules
                    .applying(RulePayload::Result, "s", "t")
                    .judge(
                        (Size::default(), payload),
                        &facts(None, &[]),
                        &mut Vec::new(),
                    )
                    .into_iter()
                    .map(|b| b.rule)
                    .collect()
            };
            let (parsed, read) = (broken(&value), broken(&document));
            assert_eq!(parsed, read, "{text}");
            read
        };
        let holds = r#"{"i": 5, "u": 18446744073709551615, "f": 1.5, "e": 1e2, "n": -3, "z": -0, "s": "a\"b", "l": [1, 2], "o": {"k": false, "k": true}}"#;
        assert!(judge_both(holds).is_empty());
        // An integer written as a double is a double; a member given once more is a tenth.
        let breaks = holds.replace(r#""i": 5"#, r#""i": 5.0, "x": null"#);
        assert_eq!(judge_both(&breaks), ["members", "whole"]);
    }
}
