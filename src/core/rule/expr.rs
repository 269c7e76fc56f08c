//! A rule's CEL expression: compiled once when the policy loads, within bounds that keep its
//! evaluation bounded too, and evaluated over a payload converted within a budget.
//!
//! The bounds, checked at load:
//! - at most [`MAX_SOURCE_BYTES`] of text, [`MAX_NODES`] nodes, [`MAX_DEPTH`] levels of nesting;
//! - comprehensions (`all`, `exists`, `exists_one`, `filter`, `map`) nested at most
//!   [`MAX_NESTING`] deep, and no `+` inside one beyond the macro's own (so no string or list is
//!   built per item);
//! - at most [`MAX_PLUS`] `+` elsewhere.
//!
//! And when it runs: the payload is converted to CEL values only up to [`MAX_VALUES`] values and
//! [`MAX_STRING_BYTES`] of strings, and an expression with comprehensions is not run when its
//! worst case passes [`MAX_WORK`]: values to the power of its loops (comprehensions nested, and
//! one more where a loop's body reads the payload again), times its nodes weighed (a `matches`
//! compiles its pattern on each call). The rule cannot be evaluated, which fails it.

use super::budget::Budget;
use super::fast::Fast;
use super::paths;
use super::payload::{self, Readable};
use cel::common::ast::{EntryExpr, Expr};
use cel::common::types::{CelList, CelMap, CelMapKey, CelString};
use cel::common::value::{CowVal, Val};
use cel::context::VariableResolver;
use cel::{Context, ExecutionError, FunctionContext, IdedExpr, Program, Value};
use std::collections::HashMap;
use std::sync::Arc;

pub const MAX_SOURCE_BYTES: usize = 2048;
pub const MAX_NODES: usize = 256;
pub const MAX_DEPTH: usize = 32;
pub const MAX_NESTING: usize = 2;
pub const MAX_PLUS: usize = 8;
pub use super::budget::{MAX_STRING_BYTES, MAX_VALUES};
pub const MAX_WORK: f64 = 1e7;
/// The worst-case weight of a `matches` call (it compiles its pattern each time), in nodes.
const MATCHES_WEIGHT: usize = 1000;
/// The worst-case weight of a `within` or `within_roots` call (it resolves each directory), in
/// nodes.
const WITHIN_WEIGHT: usize = 300;
/// The stack the parser runs on (it recurses per nesting level).
const PARSE_STACK: usize = 32 << 20;

/// A compiled expression and what it uses.
pub struct Compiled {
    program: Program,
    /// Loops over the payload nested at most this deep (see [`Shape::loops`]).
    loops: u32,
    /// The nodes' weight in the worst case (see [`Shape::weight`]).
    weight: usize,
    /// It reads `roots` (or calls `within_roots`).
    pub uses_roots: bool,
    /// It reads `server`, `tool`, `caller`: only what it reads is bound.
    uses: [bool; 3],
    /// The payload's members it reads, when it reads the payload only through them
    /// (`arguments.amount`): only those are converted. `None`: the whole payload.
    reads: Option<Vec<String>>,
    /// Its shape, where the payload decides it without CEL (see [`super::fast`]): only for an
    /// expression that reads the payload through members.
    fast: Option<Fast>,
}

impl std::fmt::Debug for Compiled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Compiled")
            .field("loops", &self.loops)
            .field("weight", &self.weight)
            .field("reads", &self.reads)
            .field("fast", &self.fast)
            .finish_non_exhaustive()
    }
}

/// Why an expression was refused: where (line and column in the expression, 1-based, when
/// known) and what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    pub at: Option<(usize, usize)>,
    pub message: String,
}

impl Refused {
    fn whole(message: String) -> Self {
        Self { at: None, message }
    }
}

/// Compiles `source`, which reads the payload as `variable`, within the bounds (see the
/// module's notes).
pub fn compile(source: &str, variable: &'static str) -> Result<Compiled, Refused> {
    if source.len() > MAX_SOURCE_BYTES {
        return Err(Refused::whole(format!(
            "the expression is {} bytes; at most {MAX_SOURCE_BYTES}",
            source.len()
        )));
    }
    let text = source.to_owned();
    // The parser recurses per level, on a stack of its own, so no expression can overflow the
    // loading thread's.
    let parsed = std::thread::Builder::new()
        .name("rule-compile".into())
        .stack_size(PARSE_STACK)
        .spawn(move || {
            Program::compile(&text).map(|program| {
                let shape = shape(program.expression(), variable);
                let reads = reads(program.expression(), variable);
                let fast = reads
                    .as_deref()
                    .and_then(|reads| Fast::of(program.expression(), variable, reads));
                (program, (shape, reads, fast))
            })
        })
        .map_err(|e| Refused::whole(format!("cannot start the compiler: {e}")))?
        .join()
        .map_err(|_| Refused::whole("the expression could not be parsed".into()))?;
    let (program, (shape, reads, fast)) = parsed.map_err(|e| {
        let first = e.errors.first();
        Refused {
            at: first.map(|e| (e.pos.0.max(1) as usize, e.pos.1.max(0) as usize + 1)),
            message: first.map_or_else(|| "does not parse".into(), |e| e.msg.clone()),
        }
    })?;
    let Shape {
        nodes,
        depth,
        nesting,
        loops,
        weight,
        plus,
        plus_in_loop,
        shadows_roots,
    } = shape;
    if shadows_roots {
        return Err(Refused::whole(
            "a comprehension's variable may not be named `roots` (it would hide the client's roots)"
                .into(),
        ));
    }
    let refuse = |what: String| Err(Refused::whole(what));
    if nodes > MAX_NODES {
        return refuse(format!(
            "the expression has {nodes} nodes; at most {MAX_NODES}"
        ));
    }
    if depth > MAX_DEPTH {
        return refuse(format!(
            "the expression nests {depth} deep; at most {MAX_DEPTH}"
        ));
    }
    if nesting as usize > MAX_NESTING {
        return refuse(format!(
            "comprehensions (all, exists, filter, map) nest {nesting} deep; at most {MAX_NESTING}"
        ));
    }
    if plus_in_loop {
        return refuse(
            "`+` inside all, exists, filter or map builds a value per item; compare instead (`x.a <= 100 - x.b`)".into(),
        );
    }
    if plus > MAX_PLUS {
        return refuse(format!("the expression has {plus} `+`; at most {MAX_PLUS}"));
    }
    let references = program.references();
    let uses_roots = references.has_variable("roots") || references.has_function("within_roots");
    let uses = ["server", "tool", "caller"].map(|name| references.has_variable(name));
    Ok(Compiled {
        program,
        loops,
        weight,
        uses_roots,
        uses,
        reads,
        fast,
    })
}

/// The members of `variable` an expression reads, when it reads `variable` only as the operand
/// of a member selection (`arguments.amount`, `has(arguments.to)`); `None` when it reads it any
/// other way (`size(arguments)`, `arguments.exists(...)`).
fn reads(root: &IdedExpr, variable: &str) -> Option<Vec<String>> {
    let mut members: Vec<String> = Vec::new();
    let mut stack: Vec<&IdedExpr> = vec![root];
    while let Some(e) = stack.pop() {
        match &e.expr {
            Expr::Select(select) => match &select.operand.expr {
                Expr::Ident(name) if name == variable => {
                    if !members.contains(&select.field) {
                        members.push(select.field.clone());
                    }
                }
                _ => stack.push(&select.operand),
            },
            Expr::Ident(name) if name == variable => return None,
            Expr::Call(call) => {
                stack.extend(call.target.as_deref());
                stack.extend(&call.args);
            }
            Expr::Comprehension(c) => {
                stack.extend([
                    &c.iter_range,
                    &c.accu_init,
                    &c.loop_cond,
                    &c.loop_step,
                    &c.result,
                ]);
            }
            Expr::List(list) => stack.extend(&list.elements),
            Expr::Map(map) => {
                for entry in &map.entries {
                    if let EntryExpr::MapEntry(m) = &entry.expr {
                        stack.extend([&m.key, &m.value]);
                    }
                }
            }
            Expr::Struct(s) => {
                for entry in &s.entries {
                    if let EntryExpr::StructField(f) = &entry.expr {
                        stack.push(&f.value);
                    }
                }
            }
            Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => {}
        }
    }
    Some(members)
}

/// What an expression is made of, counted without recursion.
#[derive(Debug, Default)]
struct Shape {
    nodes: usize,
    depth: usize,
    /// Comprehensions nested.
    nesting: u32,
    /// Nested loops over the payload for the worst case: comprehensions, and one more where a
    /// loop's body reads the payload again (`x in arguments.ids`, each item against all).
    loops: u32,
    /// The nodes' cost for the worst case: a call that compiles a regular expression
    /// (`matches`) or resolves paths against a list (`within`, `within_roots`) weighs more.
    weight: usize,
    plus: usize,
    plus_in_loop: bool,
    /// A comprehension names its variable `roots`, which would hide the client's.
    shadows_roots: bool,
}

/// What one call costs in the worst case, in nodes.
fn call_weight(name: &str) -> usize {
    match name {
        "matches" => MATCHES_WEIGHT,
        "within" | "within_roots" => WITHIN_WEIGHT,
        _ => 1,
    }
}

fn shape(root: &IdedExpr, variable: &str) -> Shape {
    let mut shape = Shape::default();
    // (expression, depth, comprehensions around it, inside a loop's own step or condition)
    let mut stack: Vec<(&IdedExpr, usize, u32, Option<&str>)> = vec![(root, 1, 0, None)];
    while let Some((e, depth, nesting, accu)) = stack.pop() {
        shape.nodes += 1;
        shape.weight += match &e.expr {
            Expr::Call(call) => call_weight(&call.func_name),
            _ => 1,
        };
        shape.depth = shape.depth.max(depth);
        shape.nesting = shape.nesting.max(nesting);
        shape.loops = shape.loops.max(nesting);
        let next = depth + 1;
        match &e.expr {
            Expr::Ident(name) if name == variable && nesting > 0 => {
                shape.loops = shape.loops.max(nesting + 1);
            }
            Expr::Call(call) => {
                if call.func_name == "_+_" {
                    // The macro's own accumulation (`accu + [x]`, `accu + 1`) is not the user's.
                    let own = accu.is_some_and(|accu| {
                        matches!(call.args.first().map(|a| &a.expr), Some(Expr::Ident(name)) if name == accu)
                    });
                    match (own, accu.is_some()) {
                        (true, _) => {}
                        (false, true) => shape.plus_in_loop = true,
                        (false, false) => shape.plus += 1,
                    }
                }
                if let Some(target) = &call.target {
                    stack.push((target, next, nesting, accu));
                }
                for arg in &call.args {
                    stack.push((arg, next, nesting, accu));
                }
            }
            Expr::Comprehension(c) => {
                shape.shadows_roots |= [Some(&c.iter_var), c.iter_var2.as_ref(), Some(&c.accu_var)]
                    .into_iter()
                    .flatten()
                    .any(|name| name == "roots");
                stack.push((&c.iter_range, next, nesting, accu));
                stack.push((&c.accu_init, next, nesting, accu));
                let inner = Some(c.accu_var.as_str());
                stack.push((&c.loop_cond, next, nesting + 1, inner));
                stack.push((&c.loop_step, next, nesting + 1, inner));
                stack.push((&c.result, next, nesting, accu));
            }
            Expr::List(list) => {
                for item in &list.elements {
                    stack.push((item, next, nesting, accu));
                }
            }
            Expr::Map(map) => {
                for entry in &map.entries {
                    if let EntryExpr::MapEntry(m) = &entry.expr {
                        stack.push((&m.key, next, nesting, accu));
                        stack.push((&m.value, next, nesting, accu));
                    }
                }
            }
            Expr::Struct(s) => {
                for entry in &s.entries {
                    if let EntryExpr::StructField(f) = &entry.expr {
                        stack.push((&f.value, next, nesting, accu));
                    }
                }
            }
            Expr::Select(select) => stack.push((&select.operand, next, nesting, accu)),
            Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => {}
        }
    }
    shape
}

impl Compiled {
    /// The payload's members it reads, when it reads it only through them.
    #[cfg(test)]
    pub(super) fn reads(&self) -> Option<&[String]> {
        self.reads.as_deref()
    }

    /// Its shape, where the payload decides it without CEL.
    #[cfg(test)]
    pub(super) fn fast(&self) -> Option<&Fast> {
        self.fast.as_ref()
    }

    /// The most work its evaluation over a payload of `values` values can take (in nodes
    /// visited): what decides whether it may run on an async thread.
    pub fn work(&self, values: usize) -> f64 {
        let values = values as f64;
        values + values.powi(self.loops.max(1) as i32) * self.weight as f64
    }
}

/// What an expression sees.
pub struct Bindings<'a> {
    /// `arguments` or `result`, and its value.
    pub payload: (&'static str, &'a dyn Readable),
    pub server: &'a str,
    pub tool: &'a str,
    pub caller: (&'a str, &'a [&'static str]),
    /// The client's roots, when known.
    pub roots: Option<&'a [String]>,
}

/// What became of an evaluation.
#[derive(Debug, Clone, PartialEq)]
pub enum Evaluated {
    Holds,
    Fails,
    /// It could not be evaluated: why.
    Unevaluable(String),
    /// It reads the client's roots, and they are not known.
    NoRoots,
}

/// What `within_roots` says when the roots are not known.
const ROOTS_UNKNOWN: &str = "the client's roots are not known";

/// The context every rule's evaluation starts from: the standard library and the functions on
/// paths (`within`, and `within_roots`, which reads the evaluation's `roots`). Built once per
/// policy; each evaluation binds its variables in a scope of its own.
pub struct Base {
    context: Context<'static, 'static>,
}

impl Base {
    pub fn new() -> Result<Self, String> {
        let mut context = Context::default();
        context
            .add_function(
                "within_roots",
                |ftx: &FunctionContext, path: Arc<String>| -> Result<bool, ExecutionError> {
                    let Some(roots) = ftx.ptx.get_variable("roots") else {
                        return Err(ftx.error(ROOTS_UNKNOWN));
                    };
                    let Value::List(roots) = Value::try_from(&*roots)? else {
                        return Err(ftx.error("roots is not a list"));
                    };
                    paths::within(&path, roots.iter().filter_map(as_str))
                        .map_err(|e| ftx.error(e.0))
                },
            )
            .and_then(|()| {
                context.add_function(
                    "within",
                    |ftx: &FunctionContext,
                     path: Arc<String>,
                     dirs: Arc<Vec<Value>>|
                     -> Result<bool, ExecutionError> {
                        paths::within(&path, dirs.iter().filter_map(as_str))
                            .map_err(|e| ftx.error(e.0))
                    },
                )
            })
            .map_err(|e| format!("the rules' functions: {e}"))?;
        Ok(Self { context })
    }
}

fn as_str(value: &Value) -> Option<&str> {
    match value {
        Value::String(s) => Some(s.as_str()),
        _ => None,
    }
}

impl Compiled {
    /// Evaluates the expression over `bindings`: decided from the payload where its shape
    /// allows (the answer CEL would give), by CEL otherwise.
    pub fn evaluate(&self, base: &Base, bindings: &Bindings<'_>) -> Evaluated {
        if let (Some(fast), Some(reads)) = (&self.fast, &self.reads) {
            match bindings.payload.1.decide(fast, reads, bindings.roots) {
                // Past its work bound, CEL would not run it.
                Some((_, values)) if self.too_much_work(values) => {}
                Some((true, _)) => return Evaluated::Holds,
                Some((false, _)) => return Evaluated::Fails,
                None => {}
            }
        }
        self.run(base, bindings)
    }

    /// Its comprehensions' worst case over `values` values is past [`MAX_WORK`].
    fn too_much_work(&self, values: usize) -> bool {
        self.loops > 0 && (values as f64).powi(self.loops as i32) * self.weight as f64 > MAX_WORK
    }

    /// Evaluates the expression over `bindings` with CEL's interpreter.
    pub(super) fn run(&self, base: &Base, bindings: &Bindings<'_>) -> Evaluated {
        let (variable, readable) = bindings.payload;
        let mut budget = Budget::default();
        let payload = match &self.reads {
            None => readable.cel_whole(&mut budget),
            Some(keys) => payload::members(readable, keys, &mut budget),
        };
        let payload = match payload {
            Ok(value) => value,
            Err(why) => return Evaluated::Unevaluable(format!("the {variable} {why}")),
        };
        if self.too_much_work(budget.values()) {
            return Evaluated::Unevaluable(format!(
                "the {variable} holds {} values: too many for this rule's nested comprehensions to judge within its bound",
                budget.values()
            ));
        }
        // Only what the expression reads is bound.
        let [server, tool, caller] = self.uses;
        let bound = Bound {
            variable,
            payload,
            server: server.then(|| CelString::from(bindings.server)),
            tool: tool.then(|| CelString::from(bindings.tool)),
            caller: caller.then(|| caller_value(bindings.caller)),
            roots: bindings
                .roots
                .filter(|_| self.uses_roots)
                .map(|roots| strings(roots.iter().map(String::as_str))),
        };
        // The base binds nothing; this evaluation's scope finds its variables in `bound`.
        let context: &Context<'_, '_> = &base.context;
        let mut scope = context.new_inner_scope();
        scope.set_variable_resolver(&bound);
        match self.program.execute(&scope) {
            Ok(Value::Bool(true)) => Evaluated::Holds,
            Ok(Value::Bool(false)) => Evaluated::Fails,
            Ok(other) => Evaluated::Unevaluable(format!(
                "the expression gave {}, not true or false",
                kind(&other)
            )),
            Err(ExecutionError::UndeclaredReference(name)) if name.as_str() == "roots" => {
                Evaluated::NoRoots
            }
            Err(ExecutionError::FunctionError { message, .. }) if message == ROOTS_UNKNOWN => {
                Evaluated::NoRoots
            }
            Err(e) => Evaluated::Unevaluable(e.to_string()),
        }
    }
}

/// One evaluation's variables, found by name (cel's resolver) rather than inserted into a scope;
/// each borrows what it was built from.
struct Bound<'a> {
    /// `arguments` or `result`.
    variable: &'static str,
    payload: Box<dyn Val + 'a>,
    server: Option<CelString<'a>>,
    tool: Option<CelString<'a>>,
    caller: Option<CelMap<'a>>,
    roots: Option<CelList<'a>>,
}

impl VariableResolver for Bound<'_> {
    fn resolve<'b>(&'b self, name: &str) -> Option<CowVal<'b, 'b>> {
        let value: &'b dyn Val = match name {
            "server" => self.server.as_ref()?,
            "tool" => self.tool.as_ref()?,
            "caller" => self.caller.as_ref()?,
            "roots" => self.roots.as_ref()?,
            _ if name == self.variable => self.payload.as_ref(),
            _ => return None,
        };
        Some(CowVal::Borrowed(value))
    }
}

/// `caller`: `{"name": ..., "scopes": [...]}`.
fn caller_value<'a>((name, scopes): (&'a str, &'a [&'static str])) -> CelMap<'a> {
    let members: HashMap<CelMapKey<'a>, Box<dyn Val + 'a>> = HashMap::from([
        (
            CelMapKey::String(CelString::from("name")),
            Box::new(CelString::from(name)) as Box<dyn Val>,
        ),
        (
            CelMapKey::String(CelString::from("scopes")),
            Box::new(strings(scopes.iter().copied())),
        ),
    ]);
    CelMap::from(members)
}

/// A list of strings, borrowed.
fn strings<'a>(items: impl Iterator<Item = &'a str>) -> CelList<'a> {
    CelList::from(
        items
            .map(|s| Box::new(CelString::from(s)) as Box<dyn Val + 'a>)
            .collect::<Vec<_>>(),
    )
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::List(_) => "a list",
        Value::Map(_) => "a map",
        Value::Int(_) | Value::UInt(_) | Value::Float(_) => "a number",
        Value::String(_) => "a string",
        Value::Null => "null",
        _ => "another value",
    }
}
