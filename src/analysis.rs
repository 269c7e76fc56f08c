//! Bounds the work a schema can imply before it ever runs.
//!
//! A 2 KB schema whose definitions each reference the next one twice, thirty levels deep, compiles
//! in a millisecond and then costs 2^30 evaluations per instance. This module builds the graph of
//! a schema's subschemas (following local `$ref`s, `$dynamicRef`s and `$recursiveRef`s) and works
//! out an upper bound on how many subschemas can be evaluated at any single position of an
//! instance. A check then costs at most that bound times the instance's size, which the caller
//! compares with its limit.
//!
//! The bound is conservative where the real evaluation is dynamic: a `$dynamicRef` costs the
//! dearest of its candidates (its static target and every `$dynamicAnchor` of its name), and
//! subschemas that apply to the same child position are added.

use serde_json::Value;
use std::collections::HashMap;

/// How costly a schema is to evaluate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SchemaCost {
    /// Upper bound on subschema evaluations at any one instance position.
    pub per_position: u64,
    /// Number of distinct subschemas reachable from the root.
    pub subschemas: usize,
}

/// Why a schema was found too costly.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CostError {
    #[error("its $ref chain {0} loops back to itself without consuming any of the instance, so evaluation would never end: break the cycle")]
    Cycle(String),
    #[error("up to {bound} subschema evaluations can apply to one position of an instance (the limit is {limit}), usually from `$ref`s that fan out through allOf/anyOf/oneOf: simplify the schema")]
    FanOut { bound: u64, limit: u64 },
    #[error("it has more than {0} subschemas reachable from its root: split it")]
    TooManySubschemas(usize),
}

const MAX_SUBSCHEMAS: usize = 100_000;
/// Analysis steps allowed before a schema is judged too complex to analyse.
const MAX_ANALYSIS_STEPS: u64 = 20_000_000;

/// Where a descending keyword applies within the child instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Key {
    /// A named property.
    Prop(u32),
    /// Any property (additionalProperties, patternProperties, propertyNames, unevaluated...).
    AnyProp,
    /// One array index (prefixItems, tuple `items`).
    Index(u32),
    /// Any array element (items, contains, additionalItems, unevaluatedItems).
    AnyItem,
}

#[derive(Default)]
struct Node {
    /// Subschemas applied to the same instance position (all of them).
    same: Vec<usize>,
    /// Dynamic references at the same position: each applies exactly one of its candidates (the
    /// static target or a `$dynamicAnchor` of its name), so it costs the dearest of them.
    choices: Vec<Vec<usize>>,
    /// Subschemas applied to a child position.
    desc: Vec<(Key, usize)>,
}

impl Node {
    /// The `i`th same-position edge, with whether it is static (a dynamic one may not be taken).
    fn same_position_edge(&self, i: usize) -> Option<(usize, bool)> {
        match self.same.get(i) {
            Some(&c) => Some((c, true)),
            None => self
                .choices
                .iter()
                .flatten()
                .nth(i - self.same.len())
                .map(|&c| (c, false)),
        }
    }
}

/// Computes the cost bound of `schema`, refusing it when the bound passes `limit`.
pub fn analyse(schema: &Value, limit: u64) -> Result<SchemaCost, CostError> {
    let index = Index::build(schema);
    let mut graph = Graph {
        index: &index,
        ids: HashMap::new(),
        nodes: Vec::new(),
        bases: Vec::new(),
        names: HashMap::new(),
        todo: Vec::new(),
    };
    graph.intern(schema, index.base_of(schema));
    while let Some(id) = graph.todo.pop() {
        graph.expand(id);
        if graph.nodes.len() > MAX_SUBSCHEMAS {
            return Err(CostError::TooManySubschemas(MAX_SUBSCHEMAS));
        }
    }
    let nodes = graph.nodes;
    let order = same_position_order(&nodes)?;
    let local = local_counts(&nodes, &order, limit)?;
    let per_position = deep_counts(&nodes, &order, &local, limit)?;
    Ok(SchemaCost {
        per_position,
        subschemas: nodes.len(),
    })
}

/// Post-order of the same-position graph (children before parents); refuses static cycles.
fn same_position_order(nodes: &[Node]) -> Result<Vec<usize>, CostError> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        New,
        Open,
        Done,
    }
    let mut mark = vec![Mark::New; nodes.len()];
    let mut order = Vec::with_capacity(nodes.len());
    for start in 0..nodes.len() {
        if mark[start] != Mark::New {
            continue;
        }
        let mut stack = vec![(start, 0usize)];
        mark[start] = Mark::Open;
        while let Some(&mut (node, ref mut next)) = stack.last_mut() {
            if let Some((child, is_static)) = nodes[node].same_position_edge(*next) {
                *next += 1;
                match mark[child] {
                    Mark::New => {
                        mark[child] = Mark::Open;
                        stack.push((child, 0));
                    }
                    Mark::Open if is_static => {
                        return Err(CostError::Cycle(format!(
                            "through {} subschemas",
                            stack.len()
                        )))
                    }
                    _ => {}
                }
            } else {
                mark[node] = Mark::Done;
                order.push(node);
                stack.pop();
            }
        }
    }
    Ok(order)
}

/// How many subschemas evaluate at the position where each node applies (itself included).
/// Dynamic back edges (possible only through `$dynamicRef` over-approximation) count as zero.
fn local_counts(nodes: &[Node], order: &[usize], limit: u64) -> Result<Vec<u64>, CostError> {
    let mut local = vec![0u64; nodes.len()];
    for &n in order {
        let mut sum = 1u64;
        for &c in &nodes[n].same {
            sum = sum.saturating_add(local[c]);
        }
        for group in &nodes[n].choices {
            let dearest = group.iter().map(|&c| local[c]).max().unwrap_or(0);
            sum = sum.saturating_add(dearest);
        }
        if sum > limit {
            return Err(CostError::FanOut { bound: sum, limit });
        }
        local[n] = sum;
    }
    Ok(local)
}

/// The bound over every position below each node, by value iteration: round `t` knows the bound
/// for instances `t` levels deep, so a recursive schema converges or passes the limit.
fn deep_counts(
    nodes: &[Node],
    order: &[usize],
    local: &[u64],
    limit: u64,
) -> Result<u64, CostError> {
    let mut deep = local.to_vec();
    let mut steps = 0u64;
    // Generous: an instance deeper than this is refused by the depth limit long before.
    for _round in 0..256 {
        let mut changed = false;
        // Per node, the summed bound of everything that applies at each child key.
        let mut at_key: Vec<Vec<(Key, u64)>> = vec![Vec::new(); nodes.len()];
        for &n in order {
            let mut merged: Vec<(Key, u64)> = nodes[n]
                .desc
                .iter()
                .map(|&(key, child)| (key, deep[child]))
                .collect();
            for &c in &nodes[n].same {
                merged.extend_from_slice(&at_key[c]);
            }
            for group in &nodes[n].choices {
                merged.extend(dearest_per_key(group.iter().map(|&c| at_key[c].as_slice())));
            }
            steps += merged.len() as u64 + 1;
            if steps > MAX_ANALYSIS_STEPS {
                return Err(CostError::FanOut {
                    bound: steps,
                    limit,
                });
            }
            merge_per_key(&mut merged, u64::saturating_add);
            let any_prop = lookup(&merged, Key::AnyProp);
            let any_item = lookup(&merged, Key::AnyItem);
            let mut bound = local[n].max(any_prop).max(any_item);
            for &(key, v) in &merged {
                let at = match key {
                    Key::Prop(_) => v.saturating_add(any_prop),
                    Key::Index(_) => v.saturating_add(any_item),
                    Key::AnyProp | Key::AnyItem => v,
                };
                bound = bound.max(at);
            }
            if bound > limit {
                return Err(CostError::FanOut { bound, limit });
            }
            if bound != deep[n] {
                deep[n] = bound;
                changed = true;
            }
            at_key[n] = merged;
        }
        if !changed {
            break;
        }
    }
    Ok(deep.first().copied().unwrap_or(1))
}

/// For alternatives of which one applies: per key, the largest of their bounds.
fn dearest_per_key<'a>(alternatives: impl Iterator<Item = &'a [(Key, u64)]>) -> Vec<(Key, u64)> {
    let mut all: Vec<(Key, u64)> = alternatives.flatten().copied().collect();
    merge_per_key(&mut all, u64::max);
    all
}

/// Sorts `bounds` by key and folds the bounds of each key into one with `combine`.
fn merge_per_key(bounds: &mut Vec<(Key, u64)>, combine: fn(u64, u64) -> u64) {
    bounds.sort_unstable_by_key(|&(k, _)| k);
    bounds.dedup_by(|later, first| {
        let same = later.0 == first.0;
        if same {
            first.1 = combine(first.1, later.1);
        }
        same
    });
}

fn lookup(merged: &[(Key, u64)], key: Key) -> u64 {
    merged
        .binary_search_by_key(&key, |&(k, _)| k)
        .map(|i| merged[i].1)
        .unwrap_or(0)
}

/// Every resource (`$id`) and anchor of the document, and the base URI in force at each subschema.
struct Index<'v> {
    resources: HashMap<String, &'v Value>,
    anchors: HashMap<(String, String), &'v Value>,
    dynamic_anchors: HashMap<String, Vec<&'v Value>>,
    base: HashMap<*const Value, String>,
}

impl<'v> Index<'v> {
    fn build(root: &'v Value) -> Self {
        let mut index = Index {
            resources: HashMap::new(),
            anchors: HashMap::new(),
            dynamic_anchors: HashMap::new(),
            base: HashMap::new(),
        };
        index.resources.insert(String::new(), root);
        index.walk(root, String::new());
        index
    }

    fn walk(&mut self, value: &'v Value, mut base: String) {
        match value {
            Value::Object(map) => {
                let id = map
                    .get("$id")
                    .or_else(|| map.get("id").filter(|_| !map.contains_key("$id")))
                    .and_then(Value::as_str);
                if let Some(id) = id {
                    let (uri, fragment) = id.split_once('#').unwrap_or((id, ""));
                    if !uri.is_empty() {
                        base = join(&base, uri);
                        self.resources.insert(base.clone(), value);
                    }
                    if !fragment.is_empty() && !fragment.starts_with('/') {
                        self.anchors
                            .insert((base.clone(), fragment.to_owned()), value);
                    }
                }
                for key in ["$anchor", "$dynamicAnchor"] {
                    if let Some(name) = map.get(key).and_then(Value::as_str) {
                        self.anchors.insert((base.clone(), name.to_owned()), value);
                        if key == "$dynamicAnchor" {
                            self.dynamic_anchors
                                .entry(name.to_owned())
                                .or_default()
                                .push(value);
                        }
                    }
                }
                if map.get("$recursiveAnchor") == Some(&Value::Bool(true)) {
                    self.dynamic_anchors
                        .entry(String::new())
                        .or_default()
                        .push(value);
                }
                self.base.insert(value as *const Value, base.clone());
                for child in map.values() {
                    self.walk(child, base.clone());
                }
            }
            Value::Array(items) => {
                for child in items {
                    self.walk(child, base.clone());
                }
            }
            _ => {}
        }
    }

    fn base_of(&self, value: &Value) -> String {
        self.base
            .get(&(value as *const Value))
            .cloned()
            .unwrap_or_default()
    }

    /// The subschema a reference points to, if it is inside this document.
    fn resolve(&self, base: &str, reference: &str) -> Option<&'v Value> {
        let (uri, fragment) = reference.split_once('#').unwrap_or((reference, ""));
        let resource_uri = if uri.is_empty() {
            base.to_owned()
        } else {
            join(base, uri)
        };
        let resource = self.resources.get(&resource_uri).copied()?;
        if fragment.is_empty() {
            Some(resource)
        } else if fragment.starts_with('/') {
            pointer(resource, fragment)
        } else {
            self.anchors
                .get(&(resource_uri, percent_decode(fragment)))
                .copied()
        }
    }
}

/// Resolves `reference` against `base` the way RFC 3986 does for the common cases.
fn join(base: &str, reference: &str) -> String {
    if reference.contains("://") || reference.starts_with("urn:") || base.is_empty() {
        return reference.to_owned();
    }
    if let Some(rest) = reference.strip_prefix('/') {
        let authority_end = base
            .find("://")
            .and_then(|i| base[i + 3..].find('/').map(|j| i + 3 + j))
            .unwrap_or(base.len());
        return format!("{}/{}", &base[..authority_end], rest);
    }
    let dir = match base.rfind('/') {
        Some(i) if !base[..=i].ends_with("://") => &base[..=i],
        _ => return format!("{base}/{reference}"),
    };
    format!("{dir}{reference}")
}

fn percent_decode(text: &str) -> String {
    if !text.contains('%') {
        return text.to_owned();
    }
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let Ok(byte) = u8::from_str_radix(&text[i + 1..i + 3], 16) {
                out.push(byte);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn pointer<'v>(root: &'v Value, fragment: &str) -> Option<&'v Value> {
    let decoded = percent_decode(fragment);
    root.pointer(&decoded)
}

struct Graph<'v, 'i> {
    index: &'i Index<'v>,
    ids: HashMap<*const Value, usize>,
    nodes: Vec<Node>,
    bases: Vec<(&'v Value, String)>,
    names: HashMap<String, u32>,
    todo: Vec<usize>,
}

impl<'v> Graph<'v, '_> {
    fn intern(&mut self, value: &'v Value, base: String) -> usize {
        let addr = value as *const Value;
        if let Some(&id) = self.ids.get(&addr) {
            return id;
        }
        let id = self.nodes.len();
        self.ids.insert(addr, id);
        self.nodes.push(Node::default());
        self.bases.push((value, base));
        self.todo.push(id);
        id
    }

    fn name(&mut self, name: &str) -> u32 {
        let next = self.names.len() as u32;
        *self.names.entry(name.to_owned()).or_insert(next)
    }

    fn child(&mut self, value: &'v Value) -> usize {
        let base = self.index.base_of(value);
        self.intern(value, base)
    }

    fn expand(&mut self, id: usize) {
        let (value, base) = {
            let (v, b) = &self.bases[id];
            (*v, b.clone())
        };
        let Value::Object(map) = value else {
            return;
        };
        let mut same = Vec::new();
        let mut choices = Vec::new();
        let mut desc = Vec::new();
        for (keyword, sub) in map {
            match keyword.as_str() {
                "not" | "if" | "then" | "else" => same.push(self.child(sub)),
                "allOf" | "anyOf" | "oneOf" => {
                    for s in sub.as_array().into_iter().flatten() {
                        same.push(self.child(s));
                    }
                }
                "dependentSchemas" | "dependencies" => {
                    for s in sub.as_object().into_iter().flat_map(|m| m.values()) {
                        if s.is_object() || s.is_boolean() {
                            same.push(self.child(s));
                        }
                    }
                }
                "$ref" => {
                    if let Some(target) = sub.as_str().and_then(|r| self.index.resolve(&base, r)) {
                        same.push(self.child(target));
                    }
                }
                "$dynamicRef" | "$recursiveRef" => {
                    let Some(reference) = sub.as_str() else {
                        continue;
                    };
                    let mut candidates = Vec::new();
                    if let Some(target) = self.index.resolve(&base, reference) {
                        candidates.push(self.child(target));
                    }
                    let name = if keyword == "$recursiveRef" {
                        String::new()
                    } else {
                        percent_decode(reference.rsplit_once('#').map_or("", |(_, f)| f))
                    };
                    let anchors = self.index.dynamic_anchors.get(&name).cloned();
                    for target in anchors.into_iter().flatten() {
                        candidates.push(self.child(target));
                    }
                    candidates.sort_unstable();
                    candidates.dedup();
                    if !candidates.is_empty() {
                        choices.push(candidates);
                    }
                }
                "properties" => {
                    for (name, s) in sub.as_object().into_iter().flatten() {
                        let key = Key::Prop(self.name(name));
                        desc.push((key, self.child(s)));
                    }
                }
                "patternProperties" => {
                    for s in sub.as_object().into_iter().flat_map(|m| m.values()) {
                        desc.push((Key::AnyProp, self.child(s)));
                    }
                }
                "additionalProperties" | "unevaluatedProperties" | "propertyNames" => {
                    desc.push((Key::AnyProp, self.child(sub)));
                }
                "items" | "prefixItems" => match sub {
                    Value::Array(list) => {
                        for (i, s) in list.iter().enumerate() {
                            let key = Key::Index(u32::try_from(i).unwrap_or(u32::MAX));
                            desc.push((key, self.child(s)));
                        }
                    }
                    other => desc.push((Key::AnyItem, self.child(other))),
                },
                "additionalItems" | "unevaluatedItems" | "contains" => {
                    desc.push((Key::AnyItem, self.child(sub)));
                }
                _ => {}
            }
        }
        self.nodes[id] = Node {
            same,
            choices,
            desc,
        };
    }
}

/// Schemas for tests elsewhere in the crate.
#[cfg(test)]
pub(crate) mod tests_support {
    use serde_json::{json, Value};

    /// `levels` definitions, each referencing the next twice through allOf.
    pub(crate) fn doubling_chain(levels: usize) -> Value {
        let mut defs = serde_json::Map::new();
        for i in 0..levels {
            let next = format!("#/$defs/d{}", i + 1);
            defs.insert(
                format!("d{i}"),
                json!({"allOf": [{"$ref": next}, {"$ref": next}]}),
            );
        }
        defs.insert(format!("d{levels}"), json!({"type": "string"}));
        json!({"$defs": defs, "$ref": "#/$defs/d0"})
    }
}

#[cfg(test)]
mod tests {
    use super::tests_support::doubling_chain;
    use super::*;
    use serde_json::json;

    #[test]
    fn ordinary_schemas_cost_little() {
        let schema = json!({
            "type": "object",
            "properties": {
                "id": {"type": "string", "pattern": "^[a-z]+$"},
                "tags": {"type": "array", "items": {"type": "string"}},
                "address": {"$ref": "#/$defs/address"}
            },
            "$defs": {"address": {"type": "object", "properties": {"city": {"type": "string"}}}}
        });
        let cost = analyse(&schema, 10_000).expect("cheap");
        assert!(cost.per_position < 10, "{cost:?}");
    }

    #[test]
    fn recursive_tree_schemas_are_fine() {
        let schema = json!({
            "$defs": {"node": {"type": "object", "properties": {
                "left": {"$ref": "#/$defs/node"}, "right": {"$ref": "#/$defs/node"},
                "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}}}},
            "$ref": "#/$defs/node"
        });
        let cost = analyse(&schema, 10_000).expect("a tree costs little per position");
        assert!(cost.per_position < 10, "{cost:?}");
    }

    #[test]
    fn doubling_ref_chains_are_refused() {
        assert!(analyse(&doubling_chain(5), 10_000).is_ok());
        let err = analyse(&doubling_chain(30), 10_000).unwrap_err();
        assert!(matches!(err, CostError::FanOut { .. }), "{err}");
    }

    #[test]
    fn alternatives_that_each_descend_compound_with_depth() {
        // Each level offers two alternatives that both descend into the same items.
        let schema = json!({
            "$defs": {"s": {"anyOf": [
                {"type": "array", "items": {"$ref": "#/$defs/s"}},
                {"type": "array", "items": {"$ref": "#/$defs/s"}}
            ]}},
            "$ref": "#/$defs/s"
        });
        let err = analyse(&schema, 100_000).unwrap_err();
        assert!(matches!(err, CostError::FanOut { .. }), "{err}");
    }

    #[test]
    fn ref_cycles_that_consume_nothing_are_refused() {
        let schema = json!({
            "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"allOf": [{"$ref": "#/$defs/a"}]}},
            "$ref": "#/$defs/a"
        });
        assert!(matches!(analyse(&schema, 10_000), Err(CostError::Cycle(_))));
    }

    #[test]
    fn refs_resolve_through_ids_and_anchors() {
        let schema = json!({
            "$id": "https://example.com/root.json",
            "$defs": {
                "a": {"$id": "a.json", "allOf": [{"$ref": "b.json"}, {"$ref": "b.json"}]},
                "b": {"$id": "b.json", "allOf": [{"$ref": "#leaf"}, {"$ref": "#leaf"}],
                      "$defs": {"leaf": {"$anchor": "leaf", "type": "string"}}}
            },
            "$ref": "a.json"
        });
        let cost = analyse(&schema, 10_000).expect("small");
        // Each allOf item is a subschema of its own: leaf-ref = 1 + leaf = 2, b = 1 + 2 * 2 = 5,
        // b-ref = 6, a = 1 + 2 * 6 = 13, root = 1 + a = 14.
        assert_eq!(cost.per_position, 14, "{cost:?}");
    }

    #[test]
    fn dynamic_recursion_costs_one_candidate_per_level() {
        // Extensible recursion, the pattern $dynamicRef exists for (JSON-Schema-Test-Suite,
        // dynamicRef.json): each level goes through `properties`, and a $dynamicRef applies one
        // of its candidates, so the bound stays small however deep instances go.
        let schema = json!({
            "$id": "https://test.example/root", "$dynamicAnchor": "meta",
            "type": "object", "properties": {"foo": {"const": "pass"}}, "$ref": "extended",
            "$defs": {
                "extended": {"$id": "extended", "$dynamicAnchor": "meta", "type": "object",
                             "properties": {"bar": {"$ref": "bar"}}},
                "bar": {"$id": "bar", "type": "object",
                        "properties": {"baz": {"$dynamicRef": "extended#meta"}}}
            }
        });
        let cost = analyse(&schema, 10_000).expect("an ordinary recursive schema");
        assert!(cost.per_position < 20, "{cost:?}");
        let minimal = json!({"$id": "https://x.test/root", "$dynamicAnchor": "meta",
                             "properties": {"a": {"$dynamicRef": "#meta"}}});
        assert!(
            analyse(&minimal, 10_000)
                .expect("self-recursive")
                .per_position
                < 5
        );
    }

    #[test]
    fn join_follows_rfc3986_for_common_cases() {
        assert_eq!(
            join("https://x.org/a/b.json", "c.json"),
            "https://x.org/a/c.json"
        );
        assert_eq!(
            join("https://x.org/a/b.json", "/c.json"),
            "https://x.org/c.json"
        );
        assert_eq!(join("", "c.json"), "c.json");
        assert_eq!(join("https://x.org", "c.json"), "https://x.org/c.json");
        assert_eq!(join("https://x.org/a", "urn:x"), "urn:x");
    }
}
