//! The commonest expressions decided straight from the payload, without building CEL values or
//! running CEL's interpreter: presence (`has(result.error)`), a member compared with a constant
//! (`arguments.amount <= 1000`, `result.status == "ok"`), a member's path within the client's
//! roots (`within_roots(arguments.path)`), and `!`, `&&`, `||` over those.
//!
//! A decision here must be the one CEL gives. So one is made only where CEL's answer is certain:
//! the members on a path are objects that hold the next member, a comparison is of one kind on
//! both sides (`int` with `int`, `double` with `double`; strings, bools and `null` for `==` and
//! `!=` only), and the members read are within the budget CEL's conversion keeps to. Anything else
//! (a member missing on the way, an `int` compared with a `double`, roots not known, an expression
//! of another shape) is left to CEL, which then gives its own answer or error. `&&` and `||`
//! follow CEL's rules for errors: either side that decides the result (`false` for `&&`, `true`
//! for `||`) decides it, whatever the other side gives.

use super::budget::{number_of, Budget, Number};
use super::paths;
use crate::core::document::NodeRef;
use cel::common::ast::{operators, Expr, LiteralValue};
use cel::IdedExpr;
use jsonschema::json::{Array, Json, Node, Object};

/// The most root members an expression decided here may read (each is looked up once).
const MAX_READS: usize = 8;

/// An expression of a shape decided here, or a part of one that is left to CEL.
#[derive(Debug, Clone, PartialEq)]
pub enum Fast {
    /// `has(v.a.b)`: the member at the path is present.
    Has(Path),
    /// `v.a.b <op> constant` (or the constant first, turned round).
    Compare(Path, Op, Constant),
    /// `within_roots(v.a.b)`.
    WithinRoots(Path),
    Not(Box<Fast>),
    And(Box<Fast>, Box<Fast>),
    Or(Box<Fast>, Box<Fast>),
    /// Any other expression: only CEL decides it.
    Other,
}

/// A member of the payload: `v.a.b` is the root member `a` (its place among the members the
/// expression reads) and then `b`.
#[derive(Debug, Clone, PartialEq)]
pub struct Path {
    root: usize,
    rest: Vec<String>,
}

/// A comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl Op {
    fn of(name: &str) -> Option<Self> {
        Some(match name {
            operators::EQUALS => Op::Eq,
            operators::NOT_EQUALS => Op::Ne,
            operators::LESS => Op::Lt,
            operators::LESS_EQUALS => Op::Le,
            operators::GREATER => Op::Gt,
            operators::GREATER_EQUALS => Op::Ge,
            _ => return None,
        })
    }

    /// The same comparison with its sides swapped (`1 < x` is `x > 1`).
    fn turned(self) -> Self {
        match self {
            Op::Lt => Op::Gt,
            Op::Le => Op::Ge,
            Op::Gt => Op::Lt,
            Op::Ge => Op::Le,
            same => same,
        }
    }

    fn holds(self, ordering: std::cmp::Ordering) -> bool {
        use std::cmp::Ordering::{Equal, Greater, Less};
        match self {
            Op::Eq => ordering == Equal,
            Op::Ne => ordering != Equal,
            Op::Lt => ordering == Less,
            Op::Le => ordering != Greater,
            Op::Gt => ordering == Greater,
            Op::Ge => ordering != Less,
        }
    }

    fn is_equality(self) -> bool {
        matches!(self, Op::Eq | Op::Ne)
    }
}

/// A constant of the expression a member is compared with.
#[derive(Debug, Clone, PartialEq)]
pub enum Constant {
    Int(i64),
    Double(f64),
    String(String),
    Bool(bool),
    Null,
}

impl Constant {
    fn of(literal: &LiteralValue) -> Option<Self> {
        Some(match literal {
            LiteralValue::Int(i) => Constant::Int(*i.inner()),
            LiteralValue::Double(d) => Constant::Double(*d.inner()),
            LiteralValue::String(s) => Constant::String(s.inner().to_owned()),
            LiteralValue::Boolean(b) => Constant::Bool(*b.inner()),
            LiteralValue::Null => Constant::Null,
            LiteralValue::UInt(_) | LiteralValue::Bytes(_) => return None,
        })
    }
}

impl Fast {
    /// The shape of `root`, which reads the payload as `variable` only through its root
    /// members `reads`; `None` when no part of it is decided here.
    pub(super) fn of(root: &IdedExpr, variable: &str, reads: &[String]) -> Option<Self> {
        if reads.len() > MAX_READS {
            return None;
        }
        match Self::shape(root, &Reading { variable, reads }) {
            Fast::Other => None,
            fast => Some(fast),
        }
    }

    fn shape(e: &IdedExpr, reading: &Reading<'_>) -> Self {
        let call = match &e.expr {
            Expr::Call(call) if call.target.is_none() => call,
            Expr::Select(select) if select.test => {
                let on = match reading.operand(&select.operand.expr) {
                    Some(Operand::Member(mut on)) => {
                        on.rest.push(select.field.clone());
                        Some(on)
                    }
                    Some(Operand::Payload) => reading.root(&select.field),
                    None => None,
                };
                return on.map_or(Fast::Other, Fast::Has);
            }
            _ => return Fast::Other,
        };
        let two = |make: fn(Box<Fast>, Box<Fast>) -> Fast| match call.args.as_slice() {
            [left, right] => match (Self::shape(left, reading), Self::shape(right, reading)) {
                (Fast::Other, Fast::Other) => Fast::Other,
                (left, right) => make(Box::new(left), Box::new(right)),
            },
            _ => Fast::Other,
        };
        match (call.func_name.as_str(), call.args.as_slice()) {
            (operators::LOGICAL_NOT, [operand]) => match Self::shape(operand, reading) {
                Fast::Other => Fast::Other,
                inner => Fast::Not(Box::new(inner)),
            },
            (operators::LOGICAL_AND, _) => two(Fast::And),
            (operators::LOGICAL_OR, _) => two(Fast::Or),
            ("within_roots", [path]) => match reading.member(path) {
                Some(on) => Fast::WithinRoots(on),
                None => Fast::Other,
            },
            (name, [left, right]) => {
                let Some(op) = Op::of(name) else {
                    return Fast::Other;
                };
                let constant = |e: &IdedExpr| match &e.expr {
                    Expr::Literal(literal) => Constant::of(literal),
                    _ => None,
                };
                if let (Some(on), Some(constant)) = (reading.member(left), constant(right)) {
                    Fast::Compare(on, op, constant)
                } else if let (Some(constant), Some(on)) = (constant(left), reading.member(right)) {
                    Fast::Compare(on, op.turned(), constant)
                } else {
                    Fast::Other
                }
            }
            _ => Fast::Other,
        }
    }
}

/// How an expression reads the payload: as `variable`, through the root members `reads`.
struct Reading<'r> {
    variable: &'r str,
    reads: &'r [String],
}

/// What a selection's operand names.
enum Operand {
    /// The payload itself (`v`).
    Payload,
    /// One of its members (`v.a.b`).
    Member(Path),
}

impl Reading<'_> {
    /// The member `e` names (`v.a.b`, not `v` itself).
    fn member(&self, e: &IdedExpr) -> Option<Path> {
        match self.operand(&e.expr)? {
            Operand::Member(on) => Some(on),
            Operand::Payload => None,
        }
    }

    /// What `e` names, when it is the payload or a selection of its members (not a test).
    fn operand(&self, e: &Expr) -> Option<Operand> {
        let mut members = Vec::new();
        let mut at = e;
        loop {
            match at {
                Expr::Select(select) if !select.test => {
                    members.push(select.field.clone());
                    at = &select.operand.expr;
                }
                Expr::Ident(name) if name == self.variable => break,
                _ => return None,
            }
        }
        let Some(first) = members.pop() else {
            return Some(Operand::Payload);
        };
        let mut path = self.root(&first)?;
        members.reverse();
        path.rest = members;
        Some(Operand::Member(path))
    }

    /// The root member `name`, which the expression reads.
    fn root(&self, name: &str) -> Option<Path> {
        Some(Path {
            root: self.reads.iter().position(|read| read == name)?,
            rest: Vec::new(),
        })
    }
}

/// What `fast` comes to over `payload`, which a rule reads only through the root members
/// `reads`, with the client's `roots` where known, and the values CEL would have been given
/// (what its work bound is reckoned on): `None` where only CEL can say.
pub(super) fn decide<'a, F: Json, N: Node<'a, F> + Member>(
    fast: &Fast,
    (payload, reads): (&N, &[String]),
    roots: Option<&[String]>,
) -> Option<(bool, usize)> {
    // The members read, as CEL's map of them holds them (none when the payload is no object).
    let mut found: [Option<N>; MAX_READS] = Default::default();
    for (key, slot) in reads.iter().zip(&mut found) {
        *slot = payload.member(key);
    }
    let holds = judge(fast, &found, roots)?;
    // CEL builds that map only within the budget; a payload past it is left to CEL, to refuse
    // it as it does.
    let mut budget = Budget::default();
    for (key, value) in reads.iter().zip(&found) {
        if let Some(value) = value {
            if !budget.counts_bytes(key.len()) || !fits(value, &mut budget) {
                return None;
            }
        }
    }
    Some((holds, budget.values()))
}

fn judge<'a, F: Json, N: Node<'a, F> + Member>(
    fast: &Fast,
    found: &[Option<N>],
    roots: Option<&[String]>,
) -> Option<bool> {
    let part = |fast| judge(fast, found, roots);
    match fast {
        Fast::Has(on) => match on.rest.split_last() {
            // A root member: present when it was found (CEL's map of the members read).
            None => Some(found.get(on.root)?.is_some()),
            Some((last, rest)) => {
                let object = walk(found, on.root, rest)?;
                object.as_object()?;
                Some(object.member(last).is_some())
            }
        },
        Fast::Compare(on, op, constant) => compare(&walk(found, on.root, &on.rest)?, *op, constant),
        // Unknown roots, a member that is no string, a path that cannot be resolved: CEL's own
        // answer (no roots known, or an error) is left to it.
        Fast::WithinRoots(on) => {
            let path = walk(found, on.root, &on.rest)?.as_string()?;
            paths::within(&path, roots?.iter().map(String::as_str)).ok()
        }
        Fast::Not(inner) => part(inner).map(|b| !b),
        Fast::And(left, right) => match (part(left), part(right)) {
            (Some(false), _) | (_, Some(false)) => Some(false),
            (Some(true), Some(true)) => Some(true),
            _ => None,
        },
        Fast::Or(left, right) => match (part(left), part(right)) {
            (Some(true), _) | (_, Some(true)) => Some(true),
            (Some(false), Some(false)) => Some(false),
            _ => None,
        },
        Fast::Other => None,
    }
}

/// The value at the root member `root` and then `rest`, when every member on the way is an
/// object that holds the next.
fn walk<'a, F: Json, N: Node<'a, F> + Member>(
    found: &[Option<N>],
    root: usize,
    rest: &[String],
) -> Option<N> {
    let mut at = found.get(root)?.clone()?;
    for key in rest {
        at = at.member(key)?;
    }
    Some(at)
}

/// A member of an object value, found as the representation finds it (the document through its
/// index of a large object's keys), and as CEL's map of the object holds it: of a name given
/// twice, the one the reader kept.
pub trait Member: Sized {
    /// The member `key`, when this is an object that has one.
    fn member(&self, key: &str) -> Option<Self>;
}

impl<'a> Member for NodeRef<'a> {
    fn member(&self, key: &str) -> Option<Self> {
        NodeRef::member(self, key)
    }
}

impl Member for &serde_json::Value {
    fn member(&self, key: &str) -> Option<Self> {
        self.get(key)
    }
}

/// `value <op> constant` where both are of one kind; `None` otherwise (CEL's heterogeneous
/// comparisons are left to it).
fn compare<'a, F: Json, N: Node<'a, F>>(value: &N, op: Op, constant: &Constant) -> Option<bool> {
    let ordering = match constant {
        Constant::Int(c) => match number_of(&value.as_number()?).ok()? {
            Number::Int(i) => i.cmp(c),
            _ => return None,
        },
        Constant::Double(c) => match number_of(&value.as_number()?).ok()? {
            Number::Double(d) => d.partial_cmp(c)?,
            _ => return None,
        },
        Constant::String(c) if op.is_equality() => value.as_string()?.as_ref().cmp(c.as_str()),
        Constant::Bool(c) if op.is_equality() => value.as_boolean()?.cmp(c),
        Constant::Null if op.is_equality() && value.is_null() => std::cmp::Ordering::Equal,
        _ => return None,
    };
    Some(op.holds(ordering))
}

/// Whether converting `node` into CEL's values stays within `budget` (the conversion counts
/// the same values and string bytes and refuses the same numbers).
fn fits<'a, F: Json, N: Node<'a, F>>(node: &N, budget: &mut Budget) -> bool {
    if !budget.counts_value() {
        return false;
    }
    if let Some(members) = node.as_object() {
        return members
            .members()
            .all(|(key, item)| budget.counts_bytes(key.as_ref().len()) && fits(&item, budget));
    }
    if let Some(items) = node.as_array() {
        return items.elements().all(|item| fits(&item, budget));
    }
    if let Some(text) = node.as_string() {
        return budget.counts_bytes(text.len());
    }
    match node.as_number() {
        Some(n) => number_of(&n).is_ok(),
        None => true,
    }
}

#[cfg(test)]
mod tests {
    use super::super::expr::{compile, Base, Bindings, Compiled, Evaluated};
    use super::super::payload::Readable;
    use crate::core::document::Document;

    const EXPRESSIONS: &[&str] = &[
        "has(result.error)",
        "!has(result.error)",
        "has(result.a.b)",
        "!has(result.a.b.c)",
        "result.n == 1",
        "result.n != 1",
        "result.n < 2",
        "2 >= result.n",
        "result.n > -1",
        "result.d <= 1.5",
        "result.d == 1.0",
        "result.s == 'x'",
        "result.s != 'x'",
        "'x' == result.s",
        "result.s < 'y'",
        "result.b == true",
        "result.z == null",
        "result.z != null",
        "result.a.b == 1",
        "has(result.error) || result.n < 2",
        "!has(result.error) && result.s == 'x'",
        "has(result.a) || size(result.s) > 3",
        "size(result.s) > 3 || has(result.a)",
        "has(result.a) && size(result.s) > 3",
        "size(result.s) > 3 && has(result.a)",
        "!(result.n == 1 || result.b == false)",
        "within_roots(result.p)",
        "!within_roots(result.p)",
        "has(result.a) || within_roots(result.p)",
        "within_roots(result.p) && result.n < 2",
        "within_roots(result.a.p)",
        "has(result.n)",
        "result.d == -0.0",
        "result.n == 1u",
        "result.n == 1.0",
        "has(result.a) || result.l.exists(x, x == 2)",
        "result.n < 2 || caller.scopes.exists(s, s == 'admin')",
        "result.l.all(x, result.l.exists(y, x == y)) || has(result.a)",
        "!has(result.a) && result.l.all(x, result.l.exists(y, x == y))",
    ];

    const PAYLOADS: &[&str] = &[
        "{}",
        "[]",
        "5",
        "null",
        r#"{"error": null}"#,
        r#"{"error": {"code": 1}, "n": 1}"#,
        r#"{"a": {"b": 1}}"#,
        r#"{"a": {"b": {"c": []}}}"#,
        r#"{"a": 1, "n": 2}"#,
        r#"{"a": [], "s": "abcd"}"#,
        r#"{"n": 1}"#,
        r#"{"n": 1.0}"#,
        r#"{"n": -0}"#,
        r#"{"n": 18446744073709551615}"#,
        r#"{"n": 1e400}"#,
        r#"{"n": 1, "n": 5}"#,
        r#"{"d": 1.5}"#,
        r#"{"d": 1}"#,
        r#"{"d": 1e2}"#,
        r#"{"s": "x"}"#,
        r#"{"s": "\u0078"}"#,
        r#"{"s": 1}"#,
        r#"{"b": true, "z": null, "s": "x", "n": 0}"#,
        r#"{"b": "true", "z": 0}"#,
        r#"{"error": 1e400}"#,
        r#"{"p": "/srv/shared/x", "n": 1}"#,
        r#"{"p": "/srv/shared/../../etc/passwd"}"#,
        r#"{"p": "file:///home/ann/a%20b", "a": 1}"#,
        r#"{"p": "file://host/srv/shared/x"}"#,
        r#"{"p": "relative/x"}"#,
        r#"{"p": "/etc/x", "n": 1}"#,
        r#"{"p": 5}"#,
        r#"{"a": {"p": "/srv/shared\/y"}}"#,
        r#"{"\u0061": {"b": 1}, "\u006e": 1, "n": 2, "d": -0.0}"#,
        r#"{"d": 0.0, "s": "\u0078\u0079"}"#,
        r#"{"a": {"b": 1, "b": {"c": 2}, "p": "/etc", "p": "/home/ann/x"}}"#,
        r#"{"p": "/srv/shared/x", "n": 5}"#,
    ];

    const ROOTS: &[&str] = &["file:///srv/shared", "/home/ann"];

    fn evaluated(
        compiled: &Compiled,
        base: &Base,
        payload: &dyn Readable,
        roots: Option<&[String]>,
    ) -> [Evaluated; 2] {
        let bindings = Bindings {
            payload: ("result", payload),
            server: "s",
            tool: "t",
            caller: ("", &[]),
            roots,
        };
        [
            compiled.evaluate(base, &bindings),
            compiled.run(base, &bindings),
        ]
    }

    #[test]
    fn a_decision_without_cel_is_the_one_cel_gives() {
        let base = Base::new().expect("base");
        let roots: Vec<String> = ROOTS.iter().map(|r| r.to_string()).collect();
        // An object large enough for the document to index its members, with a member given
        // twice.
        let large = format!(
            r#"{{{} "n": 0, "s": "y", "n": 1}}"#,
            (0..100)
                .map(|i| format!(r#""k{i}": {i},"#))
                .collect::<String>()
        );
        // A list too long for nested comprehensions over it to run within their bound.
        let long = format!(r#"{{"a": 1, "l": {:?}}}"#, vec![0; 1000]);
        // A nested object large enough to be indexed, with members given twice.
        let nested = format!(
            r#"{{"a": {{"b": 0, "p": "/etc", {} "b": 1, "p": "/srv/shared/z"}}}}"#,
            (0..40)
                .map(|i| format!(r#""k{i}": {i},"#))
                .collect::<String>()
        );
        let payloads = PAYLOADS.iter().copied().chain([
            large.as_str(),
            long.as_str(),
            nested.as_str(),
            r#"{"l": [2], "n": 1}"#,
        ]);
        let mut decided = 0;
        for source in EXPRESSIONS {
            let compiled = compile(source, "result").expect("compiles");
            for text in payloads.clone() {
                let value: serde_json::Value = serde_json::from_str(text).expect("JSON");
                let document = Document::read(text.as_bytes(), 64).expect("read");
                for roots in [None, Some(&[][..]), Some(roots.as_slice())] {
                    for payload in [&value as &dyn Readable, &document] {
                        let [fast, cel] = evaluated(&compiled, &base, payload, roots);
                        assert_eq!(fast, cel, "{source} over {text}, roots {roots:?}");
                    }
                    let reads = compiled.reads().expect("reads members");
                    decided += usize::from(
                        compiled
                            .fast()
                            .and_then(|fast| document.decide(fast, reads, roots))
                            .is_some(),
                    );
                }
            }
        }
        // Many of these pairs were decided without CEL (the rest were left to it).
        assert!(decided > 100, "{decided} decided");
    }

    #[test]
    fn the_commonest_shapes_are_decided_without_cel() {
        let roots: Vec<String> = ROOTS.iter().map(|r| r.to_string()).collect();
        for (source, text, holds) in [
            ("!has(result.error)", r#"{"rows": [1, 2]}"#, true),
            ("!has(result.error)", r#"{"error": "denied"}"#, false),
            ("has(result.a.b)", r#"{"a": {"c": 1}}"#, false),
            ("result.amount <= 1000", r#"{"amount": 1000}"#, true),
            ("result.amount <= 1000", r#"{"amount": 1001}"#, false),
            ("result.status == 'ok'", r#"{"status": "ok"}"#, true),
            ("result.ratio < 0.5", r#"{"ratio": 0.25}"#, true),
            (
                "has(result.x) || size(result.s) > 3",
                r#"{"x": 1, "s": 2}"#,
                true,
            ),
            (
                "within_roots(result.path)",
                r#"{"path": "/srv/shared/q3.csv"}"#,
                true,
            ),
            (
                "within_roots(result.path)",
                r#"{"path": "/srv/shared/../x"}"#,
                false,
            ),
        ] {
            let compiled = compile(source, "result").expect("compiles");
            let document = Document::read(text.as_bytes(), 64).expect("read");
            let (fast, reads) = (compiled.fast(), compiled.reads());
            let decided = fast
                .zip(reads)
                .and_then(|(f, r)| document.decide(f, r, Some(&roots)))
                .map(|(holds, _)| holds);
            assert_eq!(decided, Some(holds), "{source} over {text}");
        }
    }

    #[test]
    fn shapes_cel_alone_decides_are_left_to_it() {
        for source in [
            "size(result) > 1",
            "result.l.exists(x, has(x.a))",
            "result.n + 1 == 2",
            "result.n == result.m",
            "result == null",
            "caller.name == 'ops'",
        ] {
            let compiled = compile(source, "result").expect("compiles");
            assert_eq!(compiled.fast(), None, "{source}");
        }
        // Shapes decided here, with parts left to CEL.
        let compiled = compile("has(result.a) || size(result.s) > 3", "result").expect("compiles");
        assert!(compiled.fast().is_some());
    }

    #[test]
    fn a_member_past_the_budget_is_left_to_cel_to_refuse() {
        use super::super::expr::{MAX_STRING_BYTES, MAX_VALUES};
        let base = Base::new().expect("base");
        let compiled = compile("!has(result.error)", "result").expect("compiles");
        let many = serde_json::json!({ "error": vec![0; MAX_VALUES] });
        let long = serde_json::json!({ "error": vec!["x".repeat(MAX_STRING_BYTES / 2); 3] });
        for payload in [many, long] {
            let [fast, cel] = evaluated(&compiled, &base, &payload, None);
            assert!(matches!(fast, Evaluated::Unevaluable(_)), "{fast:?}");
            assert_eq!(fast, cel);
        }
    }
}
