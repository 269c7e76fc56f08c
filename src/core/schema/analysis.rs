//! Bounds the work a schema can imply before it ever runs.
//!
//! A 2 KB schema whose definitions each reference the next one twice, thirty levels deep, compiles
//! in a millisecond and then costs 2^30 evaluations per instance. This module builds the graph of
//! a schema's subschemas (following `$ref`s, `$dynamicRef`s and `$recursiveRef`s exactly as the
//! validator resolves them) and works out an upper bound on how many subschemas can be evaluated
//! at any single position of an instance, and how many regular expressions can run on one string
//! there. A check then costs at most the first bound times the instance's size, plus the second
//! times the length of its strings, which the caller compares with its limit.
//!
//! The bound is conservative where the real evaluation is dynamic: a `$dynamicRef` costs the
//! dearest of its candidates (its static target and every `$dynamicAnchor` of its name in any
//! resource the schema can reach), and subschemas that apply to the same child position are
//! added.

use referencing::{uri, Draft, Registry, Resolver, ResourceRef, Retrieve, Uri};
use serde_json::Value;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex};

/// The base URI the validator gives a schema without a root `$id`.
const DEFAULT_BASE_URI: &str = "json-schema:///";

/// How costly a schema is to evaluate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaCost {
    /// Upper bound on subschema evaluations at any one instance position.
    pub per_position: u64,
    /// Upper bound on regular expressions (`pattern`, `patternProperties`) run on the strings at
    /// any one instance position.
    pub patterns_per_position: u64,
    /// Number of distinct subschemas reachable from the root.
    pub subschemas: usize,
    /// The distinct regular expressions reachable from the root.
    pub patterns: Vec<String>,
}

/// Why a schema was found too costly, or could not be analysed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CostError {
    #[error("its $ref chain {0} loops back to itself without consuming any of the instance, so evaluation would never end: break the cycle")]
    Cycle(String),
    #[error("up to {bound} subschema evaluations can apply to one position of an instance (the limit is {limit}), usually from `$ref`s that fan out through allOf/anyOf/oneOf: simplify the schema")]
    FanOut { bound: u64, limit: u64 },
    #[error("it has more than {0} subschemas reachable from its root: split it")]
    TooManySubschemas(usize),
    /// A reference to a resource outside the schema (never fetched).
    #[error("its $ref {0:?} points outside the schema")]
    Remote(String),
    /// A reference (or `$id`) that does not resolve within the schema.
    #[error("{0}")]
    Unresolved(String),
}

const MAX_SUBSCHEMAS: usize = 100_000;
/// Analysis steps allowed before a schema is judged too complex to analyse.
const MAX_ANALYSIS_STEPS: u64 = 20_000_000;
/// Keywords whose values are data, not subschemas: nothing inside them is a resource or anchor.
const DATA_KEYWORDS: [&str; 4] = ["const", "enum", "default", "examples"];

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
    /// Regular expressions this subschema runs at its position (`pattern`, `patternProperties`).
    patterns: u64,
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

/// A retriever that fetches nothing and remembers the first URI it was asked for, so the error
/// can name it.
#[derive(Clone, Default)]
pub(crate) struct RefusedUri(Arc<Mutex<Option<String>>>);

impl RefusedUri {
    pub(crate) fn take(&self) -> Option<String> {
        self.0.lock().ok().and_then(|mut first| first.take())
    }
}

impl Retrieve for RefusedUri {
    fn retrieve(
        &self,
        uri: &Uri<String>,
    ) -> Result<Value, Box<dyn std::error::Error + Send + Sync>> {
        if let Ok(mut first) = self.0.lock() {
            first.get_or_insert_with(|| uri.as_str().to_owned());
        }
        Err(format!("schemagate does not fetch {uri}").into())
    }
}

/// Computes the cost bound of `schema`, refusing it when the bound passes `limit`.
///
/// References are resolved by the validator crate's own registry (`referencing`), so a `$ref`
/// reaches here exactly the subschema it reaches when the schema runs, however it is spelled
/// (relative to an `$id`, absolute, a percent-encoded pointer, an anchor). A reference that does
/// not resolve is refused: it is never counted as free.
pub fn analyse(schema: &Value, limit: u64) -> Result<SchemaCost, CostError> {
    let draft = Draft::default().detect(schema);
    let refused = RefusedUri::default();
    let base = match draft.create_resource_ref(schema).id() {
        Some(id) => uri::from_str(id).map_err(|e| CostError::Unresolved(e.to_string()))?,
        None => {
            uri::from_str(DEFAULT_BASE_URI).map_err(|e| CostError::Unresolved(e.to_string()))?
        }
    };
    let registry = Registry::new()
        .retriever(refused.clone())
        .draft(draft)
        .add(base.as_str(), draft.create_resource_ref(schema))
        .and_then(|builder| builder.prepare())
        .map_err(|e| match refused.take() {
            Some(uri) => CostError::Remote(uri),
            None => CostError::Unresolved(e.to_string()),
        })?;
    let mut graph = Graph::new();
    let root_resolver = registry.resolver(base);
    graph.intern(schema, root_resolver.clone(), draft);
    graph.walk_resource(schema, &root_resolver, draft)?;
    graph.explore()?;
    let Graph {
        nodes, patterns, ..
    } = graph;
    let order = same_position_order(&nodes)?;
    let ones = vec![1u64; nodes.len()];
    let per_position = deep_counts(&nodes, &order, &ones, limit)?;
    let pattern_weights: Vec<u64> = nodes.iter().map(|n| n.patterns).collect();
    let patterns_per_position = if pattern_weights.iter().all(|&w| w == 0) {
        0
    } else {
        deep_counts(&nodes, &order, &pattern_weights, limit)?
    };
    Ok(SchemaCost {
        per_position,
        patterns_per_position,
        subschemas: nodes.len(),
        patterns: patterns.into_iter().collect(),
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

/// The summed weight of everything that evaluates at the position where each node applies
/// (itself included). Dynamic back edges (possible only through `$dynamicRef`
/// over-approximation) count as zero.
fn local_counts(
    nodes: &[Node],
    order: &[usize],
    weights: &[u64],
    limit: u64,
) -> Result<Vec<u64>, CostError> {
    let mut local = vec![0u64; nodes.len()];
    for &n in order {
        let mut sum = weights[n];
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
/// for instances `t` levels deep, so a recursive schema converges or passes the limit. Each node
/// weighs `weights[node]` (1 to count subschemas, its regex count to count regexes).
fn deep_counts(
    nodes: &[Node],
    order: &[usize],
    weights: &[u64],
    limit: u64,
) -> Result<u64, CostError> {
    let local = local_counts(nodes, order, weights, limit)?;
    let mut deep = local.clone();
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
    // The root is interned first.
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

/// The graph of subschemas reachable from the root, built through the validator's resolver.
struct Graph<'r> {
    /// A subschema is one node per (location, base URI): the same value under another base
    /// resolves its references differently.
    ids: HashMap<(*const Value, String), usize>,
    nodes: Vec<Node>,
    /// What each node was built from, until it is expanded.
    sources: Vec<(&'r Value, Resolver<'r>, Draft)>,
    todo: Vec<usize>,
    /// Every `$dynamicAnchor` (by name) and `$recursiveAnchor: true` (under "") in the resources
    /// seen so far: the candidates of a dynamic reference.
    dynamic_anchors: HashMap<String, Vec<usize>>,
    /// Dynamic references: (node, index into its choices, anchor name), completed as anchors are
    /// found.
    dynamic_refs: Vec<(usize, usize, String)>,
    /// Objects already walked for anchors.
    walked: HashSet<*const Value>,
    names: HashMap<String, u32>,
    patterns: BTreeSet<String>,
}

impl<'r> Graph<'r> {
    fn new() -> Self {
        Graph {
            ids: HashMap::new(),
            nodes: Vec::new(),
            sources: Vec::new(),
            todo: Vec::new(),
            dynamic_anchors: HashMap::new(),
            dynamic_refs: Vec::new(),
            walked: HashSet::new(),
            names: HashMap::new(),
            patterns: BTreeSet::new(),
        }
    }

    fn intern(&mut self, value: &'r Value, resolver: Resolver<'r>, draft: Draft) -> usize {
        let key = (
            value as *const Value,
            resolver.base_uri().as_str().to_owned(),
        );
        if let Some(&id) = self.ids.get(&key) {
            return id;
        }
        let id = self.nodes.len();
        self.ids.insert(key, id);
        self.nodes.push(Node::default());
        self.sources.push((value, resolver, draft));
        self.todo.push(id);
        id
    }

    /// Expands nodes until no new one appears, giving each dynamic reference every anchor of its
    /// name found along the way.
    fn explore(&mut self) -> Result<(), CostError> {
        loop {
            while let Some(id) = self.todo.pop() {
                self.expand(id)?;
                if self.nodes.len() > MAX_SUBSCHEMAS {
                    return Err(CostError::TooManySubschemas(MAX_SUBSCHEMAS));
                }
            }
            for (node, choice, name) in &self.dynamic_refs {
                let group = &mut self.nodes[*node].choices[*choice];
                for &anchor in self.dynamic_anchors.get(name).into_iter().flatten() {
                    if !group.contains(&anchor) {
                        group.push(anchor);
                    }
                }
            }
            if self.todo.is_empty() {
                return Ok(());
            }
        }
    }

    /// Records the dynamic anchors of the resource `value` (the root, or a document a reference
    /// led to), each as a node under the base URI in force at it.
    fn walk_resource(
        &mut self,
        value: &'r Value,
        resolver: &Resolver<'r>,
        draft: Draft,
    ) -> Result<(), CostError> {
        // The resource itself is already based at its `$id`; what lies inside is not yet.
        let mut stack = vec![(value, resolver.clone(), draft, true)];
        while let Some((value, resolver, draft, entered)) = stack.pop() {
            match value {
                Value::Object(map) => {
                    if !self.walked.insert(value as *const Value) {
                        continue;
                    }
                    let draft = draft.detect(value);
                    let resolver = if entered {
                        resolver
                    } else {
                        resolver
                            .in_subresource(ResourceRef::new(value, draft))
                            .map_err(|e| CostError::Unresolved(e.to_string()))?
                    };
                    let mut anchor_names = Vec::new();
                    if let Some(name) = map.get("$dynamicAnchor").and_then(Value::as_str) {
                        anchor_names.push(name.to_owned());
                    }
                    if map.get("$recursiveAnchor") == Some(&Value::Bool(true)) {
                        anchor_names.push(String::new());
                    }
                    for name in anchor_names {
                        let node = self.intern(value, resolver.clone(), draft);
                        self.dynamic_anchors.entry(name).or_default().push(node);
                    }
                    for (keyword, child) in map {
                        if !DATA_KEYWORDS.contains(&keyword.as_str()) {
                            stack.push((child, resolver.clone(), draft, false));
                        }
                    }
                }
                Value::Array(items) => {
                    stack.extend(items.iter().map(|c| (c, resolver.clone(), draft, false)));
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Follows `reference` from `resolver` the way the validator does; walks the document it
    /// lands in for anchors when that document is new.
    fn follow(&mut self, resolver: &Resolver<'r>, reference: &str) -> Result<usize, CostError> {
        let unresolved = |e: referencing::Error| {
            CostError::Unresolved(format!(
                "its $ref {reference:?} does not resolve to a subschema of this schema ({e}): point it at a subschema under `$defs`"
            ))
        };
        let resolved = resolver.lookup(reference).map_err(unresolved)?;
        let (contents, target_resolver, draft) = resolved.into_inner();
        if !self.walked.contains(&(contents as *const Value)) {
            // A document outside the schema (a built-in meta-schema): its resource root holds
            // the anchors its dynamic references may land on.
            if let Ok(resource) = target_resolver.lookup("") {
                let (root, root_resolver, root_draft) = resource.into_inner();
                self.walk_resource(root, &root_resolver, root_draft)?;
            }
        }
        Ok(self.intern(contents, target_resolver, draft))
    }

    fn name(&mut self, name: &str) -> u32 {
        let next = self.names.len() as u32;
        *self.names.entry(name.to_owned()).or_insert(next)
    }

    /// A subschema under the keyword of a node based at `resolver`.
    fn child(
        &mut self,
        value: &'r Value,
        resolver: &Resolver<'r>,
        draft: Draft,
    ) -> Result<usize, CostError> {
        let draft = draft.detect(value);
        let resolver = resolver
            .in_subresource(ResourceRef::new(value, draft))
            .map_err(|e| CostError::Unresolved(e.to_string()))?;
        Ok(self.intern(value, resolver, draft))
    }

    fn expand(&mut self, id: usize) -> Result<(), CostError> {
        let (value, resolver, draft) = self.sources[id].clone();
        let Value::Object(map) = value else {
            return Ok(());
        };
        let mut node = Node::default();
        for (keyword, sub) in map {
            match keyword.as_str() {
                "not" | "if" | "then" | "else" => {
                    node.same.push(self.child(sub, &resolver, draft)?)
                }
                "allOf" | "anyOf" | "oneOf" => {
                    for s in sub.as_array().into_iter().flatten() {
                        node.same.push(self.child(s, &resolver, draft)?);
                    }
                }
                "dependentSchemas" | "dependencies" => {
                    for s in sub.as_object().into_iter().flat_map(|m| m.values()) {
                        if s.is_object() || s.is_boolean() {
                            node.same.push(self.child(s, &resolver, draft)?);
                        }
                    }
                }
                "$ref" => {
                    if let Some(reference) = sub.as_str() {
                        node.same.push(self.follow(&resolver, reference)?);
                    }
                }
                "$dynamicRef" | "$recursiveRef" => {
                    let Some(reference) = sub.as_str() else {
                        continue;
                    };
                    let (target, name) = self.dynamic_target(keyword, reference, &resolver)?;
                    self.dynamic_refs.push((id, node.choices.len(), name));
                    node.choices.push(vec![target]);
                }
                "properties" => {
                    for (name, s) in sub.as_object().into_iter().flatten() {
                        let key = Key::Prop(self.name(name));
                        node.desc.push((key, self.child(s, &resolver, draft)?));
                    }
                }
                "patternProperties" => {
                    for (pattern, s) in sub.as_object().into_iter().flatten() {
                        node.patterns += 1;
                        self.patterns.insert(pattern.clone());
                        node.desc
                            .push((Key::AnyProp, self.child(s, &resolver, draft)?));
                    }
                }
                "pattern" => {
                    if let Some(pattern) = sub.as_str() {
                        node.patterns += 1;
                        self.patterns.insert(pattern.to_owned());
                    }
                }
                "additionalProperties" | "unevaluatedProperties" | "propertyNames" => {
                    node.desc
                        .push((Key::AnyProp, self.child(sub, &resolver, draft)?));
                }
                "items" | "prefixItems" => match sub {
                    Value::Array(list) => {
                        for (i, s) in list.iter().enumerate() {
                            let key = Key::Index(u32::try_from(i).unwrap_or(u32::MAX));
                            node.desc.push((key, self.child(s, &resolver, draft)?));
                        }
                    }
                    other => node
                        .desc
                        .push((Key::AnyItem, self.child(other, &resolver, draft)?)),
                },
                "additionalItems" | "unevaluatedItems" | "contains" => {
                    node.desc
                        .push((Key::AnyItem, self.child(sub, &resolver, draft)?));
                }
                _ => {}
            }
        }
        // Choices were appended to while this node was being built; keep their indices.
        self.nodes[id] = node;
        Ok(())
    }

    /// Where a `$dynamicRef` (or 2019-09's `$recursiveRef`, `keyword`) to `reference` first
    /// leads, and the dynamic anchor's name it looks for (none for `$recursiveRef`).
    fn dynamic_target(
        &mut self,
        keyword: &str,
        reference: &str,
        resolver: &Resolver<'r>,
    ) -> Result<(usize, String), CostError> {
        if keyword == "$recursiveRef" {
            return Ok((self.follow(resolver, "#")?, String::new()));
        }
        let fragment = reference.rsplit_once('#').map_or("", |(_, f)| f);
        let name = percent_encoding::percent_decode_str(fragment).decode_utf8_lossy();
        Ok((self.follow(resolver, reference)?, name.into_owned()))
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

    /// A doubling chain whose definitions carry `$id`s, each level's references written by
    /// `spell(level)`.
    fn id_chain(levels: usize, spell: impl Fn(usize) -> String) -> Value {
        let mut defs = serde_json::Map::new();
        for i in 0..levels {
            let next = spell(i + 1);
            defs.insert(
                format!("d{i}"),
                json!({"$id": format!("d{i}.json"), "allOf": [{"$ref": next}, {"$ref": next}]}),
            );
        }
        defs.insert(
            format!("d{levels}"),
            json!({"$id": format!("d{levels}.json"), "type": "string"}),
        );
        json!({"$id": "https://x.test/root.json", "$defs": defs, "$ref": spell(0)})
    }

    #[test]
    fn refs_are_followed_however_they_are_spelled() {
        type Spelling = (&'static str, fn(usize) -> String);
        let spellings: [Spelling; 5] = [
            ("relative", |i| format!("d{i}.json")),
            ("dot-relative", |i| format!("./d{i}.json")),
            ("absolute", |i| format!("https://x.test/d{i}.json")),
            ("empty fragment", |i| format!("d{i}.json#")),
            ("parent-relative", |i| format!("../d{i}.json")),
        ];
        for (name, spell) in spellings {
            let small = analyse(&id_chain(3, spell), 10_000)
                .unwrap_or_else(|e| panic!("{name}: a short chain is fine: {e}"));
            assert!(small.per_position >= 8, "{name}: {small:?}");
            let err = analyse(&id_chain(30, spell), 10_000).unwrap_err();
            assert!(matches!(err, CostError::FanOut { .. }), "{name}: {err}");
        }
        // Pointers into the root, plain and percent-encoded, from definitions without `$id`.
        for pointer in [
            "#/$defs/d",
            "#/%24defs/d",
            "https://x.test/root.json#/$defs/d",
        ] {
            let mut defs = serde_json::Map::new();
            for i in 0..30 {
                let next = format!("{pointer}{}", i + 1);
                defs.insert(
                    format!("d{i}"),
                    json!({"allOf": [{"$ref": next}, {"$ref": next}]}),
                );
            }
            defs.insert("d30".into(), json!({"type": "string"}));
            let schema = json!({"$id": "https://x.test/root.json", "$defs": defs,
                                "$ref": format!("{pointer}0")});
            let err = analyse(&schema, 10_000).unwrap_err();
            assert!(matches!(err, CostError::FanOut { .. }), "{pointer}: {err}");
        }
    }

    #[test]
    fn unresolvable_refs_are_refused_not_free() {
        for reference in [
            "#%aé",
            "#/$defs/missing",
            "#nowhere",
            "#/%ZZ",
            "other.json#%",
        ] {
            let schema = json!({"$defs": {"a": {"type": "string"}}, "$ref": reference});
            match analyse(&schema, 10_000) {
                Err(CostError::Unresolved(_) | CostError::Remote(_)) => {}
                other => panic!("{reference:?}: {other:?}"),
            }
        }
        match analyse(&json!({"$ref": "https://example.com/s.json"}), 10_000) {
            Err(CostError::Remote(uri)) => assert!(uri.contains("example.com"), "{uri}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn patterns_are_counted_per_position() {
        let schema = json!({"anyOf": [{"pattern": "a+"}, {"pattern": "b+"}, {"pattern": "c+"}],
                            "patternProperties": {"^x": {}}});
        let cost = analyse(&schema, 10_000).expect("small");
        assert_eq!(cost.patterns_per_position, 4, "{cost:?}");
        assert_eq!(cost.patterns.len(), 4);
        let none = analyse(&json!({"type": "string"}), 10_000).expect("small");
        assert_eq!(none.patterns_per_position, 0);
    }

    mod properties {
        use super::super::*;
        use proptest::prelude::*;
        use serde_json::json;

        /// How one level of a generated chain is named and referenced.
        #[derive(Debug, Clone)]
        struct Level {
            /// The definition carries `"$id": "dN.json"`.
            id: bool,
            /// A `$dynamicAnchor` rather than an `$anchor` (referenced by `$dynamicRef`).
            dynamic: bool,
            /// References to this level: each picks a spelling by this index.
            spellings: Vec<u8>,
        }

        /// The reference to level `n`, from a definition whose base is the root's when
        /// `from_root`, in the spelling `pick` chooses among those that resolve.
        fn spell(n: usize, level: &Level, from_root: bool, pick: u8) -> (&'static str, String) {
            let keyword = if level.dynamic { "$dynamicRef" } else { "$ref" };
            let mut options: Vec<(&'static str, String)> = if level.id {
                vec![
                    ("$ref", format!("d{n}.json")),
                    ("$ref", format!("./d{n}.json")),
                    ("$ref", format!("https://x.test/d{n}.json")),
                    ("$ref", format!("d{n}.json#")),
                    (
                        "$ref",
                        format!("d{n}.json#/allOf/..").replace("/allOf/..", ""),
                    ),
                    (keyword, format!("https://x.test/d{n}.json#a{n}")),
                ]
            } else {
                vec![
                    ("$ref", format!("https://x.test/root.json#/$defs/d{n}")),
                    ("$ref", format!("https://x.test/root.json#/%24defs/d{n}")),
                    (keyword, format!("https://x.test/root.json#a{n}")),
                ]
            };
            if from_root && !level.id {
                options.push(("$ref", format!("#/$defs/d{n}")));
                options.push(("$ref", format!("#/%24d%65fs/d{n}")));
                options.push((keyword, format!("#a{n}")));
            }
            options.swap_remove(usize::from(pick) % options.len())
        }

        fn chain(levels: &[Level], leaf_pattern: bool) -> Value {
            let mut defs = serde_json::Map::new();
            let n = levels.len();
            for (i, level) in levels.iter().enumerate() {
                let mut def = serde_json::Map::new();
                if level.id {
                    def.insert("$id".into(), json!(format!("d{i}.json")));
                }
                let anchor = if level.dynamic {
                    "$dynamicAnchor"
                } else {
                    "$anchor"
                };
                def.insert(anchor.into(), json!(format!("a{i}")));
                if i + 1 < n {
                    let next = &levels[i + 1];
                    let refs: Vec<Value> = level
                        .spellings
                        .iter()
                        .map(|&pick| {
                            let (keyword, reference) = spell(i + 1, next, !level.id, pick);
                            json!({ keyword: reference })
                        })
                        .collect();
                    def.insert("allOf".into(), Value::Array(refs));
                } else {
                    def.insert("type".into(), json!("string"));
                    if leaf_pattern {
                        def.insert("pattern".into(), json!("^[a-z]+$"));
                    }
                }
                defs.insert(format!("d{i}"), Value::Object(def));
            }
            let (keyword, reference) = spell(0, &levels[0], true, 0);
            json!({"$id": "https://x.test/root.json", "$defs": defs, keyword: reference})
        }

        fn level() -> impl Strategy<Value = Level> {
            (
                any::<bool>(),
                any::<bool>(),
                prop::collection::vec(any::<u8>(), 1..=3),
            )
                .prop_map(|(id, dynamic, spellings)| Level {
                    id,
                    dynamic,
                    spellings,
                })
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(96))]

            /// The analysed bound is never below what the validator does: a full evaluation
            /// (every branch, no short cut) produces one output unit per keyword applied, and no
            /// subschema here has more than four keywords.
            #[test]
            fn cost_bounds_the_validators_work(
                levels in prop::collection::vec(level(), 1..=11),
                leaf_pattern in any::<bool>(),
                word in "[a-z]{1,8}",
            ) {
                let schema = chain(&levels, leaf_pattern);
                let Ok(cost) = analyse(&schema, 2_000) else {
                    return Ok(());
                };
                let validator = jsonschema::options()
                    .build(&schema)
                    .map_err(|e| TestCaseError::fail(format!("{e}: {schema}")))?;
                for instance in [json!(word), json!(7)] {
                    let units = serde_json::to_value(validator.evaluate(&instance).list())
                        .ok()
                        .and_then(|v| v.get("details").and_then(Value::as_array).map(Vec::len))
                        .unwrap_or(0) as u64;
                    prop_assert!(
                        units <= cost.per_position * 5,
                        "{units} output units against a bound of {} for {schema}",
                        cost.per_position
                    );
                }
            }

            /// Arbitrary schema shapes built from the referencing keywords never panic the
            /// analysis, whatever their strings hold.
            #[test]
            fn analysis_never_panics(schema in hostile_schema()) {
                let _ = analyse(&schema, 10_000);
            }
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(5_000))]

            /// The long run of the cost property: `cargo test --lib -- --ignored long_run`.
            #[test]
            #[ignore = "long run: cargo test --lib -- --ignored long_run"]
            fn long_run_cost_bounds_the_validators_work(
                levels in prop::collection::vec(level(), 1..=11),
                leaf_pattern in any::<bool>(),
            ) {
                let schema = chain(&levels, leaf_pattern);
                if let Ok(cost) = analyse(&schema, 2_000) {
                    let validator = jsonschema::options()
                        .build(&schema)
                        .map_err(|e| TestCaseError::fail(format!("{e}: {schema}")))?;
                    let units = serde_json::to_value(validator.evaluate(&json!("abc")).list())
                        .ok()
                        .and_then(|v| v.get("details").and_then(Value::as_array).map(Vec::len))
                        .unwrap_or(0) as u64;
                    prop_assert!(units <= cost.per_position * 5, "{units} vs {cost:?}: {schema}");
                }
            }

            #[test]
            #[ignore = "long run: cargo test --lib -- --ignored long_run"]
            fn long_run_analysis_never_panics(schema in hostile_schema()) {
                let _ = analyse(&schema, 10_000);
            }
        }

        fn hostile_schema() -> impl Strategy<Value = Value> {
            let text = prop_oneof![
                any::<String>(),
                prop::sample::select(vec![
                    "#",
                    "#/",
                    "#/$defs/a",
                    "#%aé",
                    "#%",
                    "%",
                    "a.json",
                    "./a.json",
                    "../../x",
                    "urn:x",
                    "https://x.test/a#b",
                    "#a",
                    "%2F",
                    "#/%24defs/%61",
                    "é#é",
                    "",
                    "//host/p",
                    "?q#",
                    "a:b",
                    "#/-1",
                    "#/0/1",
                ])
                .prop_map(str::to_owned),
            ];
            let leaf = prop_oneof![
                text.clone().prop_map(Value::String),
                any::<bool>().prop_map(Value::Bool),
                any::<i64>().prop_map(Value::from),
            ];
            let keyword = prop::sample::select(vec![
                "$ref",
                "$id",
                "$anchor",
                "$dynamicRef",
                "$dynamicAnchor",
                "$recursiveRef",
                "$recursiveAnchor",
                "$defs",
                "allOf",
                "anyOf",
                "items",
                "properties",
                "pattern",
                "patternProperties",
                "not",
                "$schema",
                "a",
                "definitions",
                "id",
            ]);
            leaf.prop_recursive(5, 64, 6, move |inner| {
                prop_oneof![
                    prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                    prop::collection::btree_map(keyword.clone(), inner, 0..5).prop_map(|m| {
                        Value::Object(m.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
                    }),
                ]
            })
        }
    }
}
