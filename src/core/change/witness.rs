//! Counterexamples: a value one schema admits and the other refuses proves a change breaking
//! (or an inner side not covered) by itself, whatever the canonical analysis could decide. The
//! candidates are a few values built from both schemas' own keywords (each type's plain values,
//! enum and const members, bounds and one past them, objects with their required properties,
//! each optional one and one not declared, arrays of each item); each is judged by both schemas
//! compiled as checks compile them. Bounded in number and depth.

use crate::core::policy::{CompileOptions, RegexEngine};
use jsonschema::{PatternOptions, Validator};
use serde_json::{json, Map, Value};
use std::cell::Cell;

/// Most candidates built from one schema.
const MAX_CANDIDATES: usize = 256;
/// Deepest nesting a candidate is built to.
const MAX_DEPTH: usize = 6;
/// Most members of a keyword's list or map read for candidates (enum values, properties,
/// required names, combinator members).
const MAX_MEMBERS: usize = 32;
/// The name of a property no schema declares, in candidates that try an undeclared one.
const UNDECLARED: &str = "x-schemagate-undeclared";
/// Most JSON nodes all the candidates of one search hold together: nested objects with many
/// required members would otherwise grow as the product of their widths.
const MAX_NODES: usize = 100_000;

/// What is left of [`MAX_NODES`] in one search.
struct Budget(Cell<usize>);

impl Budget {
    fn left(&self) -> usize {
        self.0.get()
    }

    /// Takes `value`'s nodes from the budget, if they fit.
    fn take(&self, value: &Value) -> bool {
        let cost = nodes(value, self.left().saturating_add(1));
        let fits = cost <= self.left();
        if fits {
            self.0.set(self.left() - cost);
        }
        fits
    }
}

/// How many nodes `value` has, counted up to `limit`.
fn nodes(value: &Value, limit: usize) -> usize {
    let mut count = 0;
    let mut stack = vec![value];
    while let Some(value) = stack.pop() {
        count += 1;
        if count >= limit {
            return count;
        }
        match value {
            Value::Array(items) => stack.extend(items),
            Value::Object(map) => stack.extend(map.values()),
            _ => {}
        }
    }
    count
}

/// Adds `value` to `out` unless `out` is full, holds it already, or the budget is spent.
fn offer(out: &mut Vec<Value>, value: Value, budget: &Budget) {
    if out.len() < MAX_CANDIDATES && !out.contains(&value) && budget.take(&value) {
        out.push(value);
    }
}

/// A value `inner` admits and `outer` refuses, if one of the candidates is; `Err` when either
/// schema does not compile. `difference`, where the analysis could express it, is a schema of
/// exactly such values (in canonical form: references resolved, bounds merged), and its
/// candidates come first.
pub fn find(
    outer: &Value,
    inner: &Value,
    difference: Option<&Value>,
    options: CompileOptions,
) -> Result<Option<Value>, String> {
    let (outer_check, inner_check) = (compile(outer, options)?, compile(inner, options)?);
    let budget = Budget(Cell::new(MAX_NODES));
    // Each source's candidates apart, so that one cannot crowd out another's.
    let sources = difference.into_iter().chain([inner, outer]);
    Ok(sources
        .flat_map(|schema| {
            let mut candidates = Vec::new();
            build(schema, 0, &mut candidates, &budget);
            candidates
        })
        .find(|value| inner_check.is_valid(value) && !outer_check.is_valid(value)))
}

fn compile(schema: &Value, options: CompileOptions) -> Result<Validator, String> {
    let builder = jsonschema::options().should_validate_formats(options.assert_formats);
    let builder = match options.regex_engine {
        RegexEngine::BoundedBacktracking => {
            builder.with_pattern_options(PatternOptions::fancy_regex())
        }
        RegexEngine::Linear => builder.with_pattern_options(PatternOptions::regex()),
    };
    builder.build(schema).map_err(|e| e.to_string())
}

/// Adds candidates for `schema` to `out`.
fn build(schema: &Value, depth: usize, out: &mut Vec<Value>, budget: &Budget) {
    let push = |value: Value, out: &mut Vec<Value>| offer(out, value, budget);
    let Value::Object(schema) = schema else {
        for value in plain_values() {
            push(value, out);
        }
        return;
    };
    for member in ["enum", "examples"] {
        for value in schema
            .get(member)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .take(MAX_MEMBERS)
        {
            push(value.clone(), out);
        }
    }
    if let Some(value) = schema.get("const") {
        push(value.clone(), out);
    }
    for bound in ["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"] {
        if let Some(n) = schema.get(bound).and_then(Value::as_f64) {
            for value in [n - 1.0, n, n + 1.0, n - 0.5, n + 0.5] {
                push(number(value), out);
            }
        }
    }
    for bound in ["minLength", "maxLength"] {
        if let Some(n) = schema
            .get(bound)
            .and_then(Value::as_u64)
            .filter(|n| *n <= 64)
        {
            for len in [n.saturating_sub(1), n, n + 1] {
                push(Value::String("a".repeat(len as usize)), out);
            }
        }
    }
    for value in plain_values() {
        push(value, out);
    }
    if depth >= MAX_DEPTH {
        return;
    }
    for combinator in ["anyOf", "oneOf", "allOf"] {
        for member in schema
            .get(combinator)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .take(MAX_MEMBERS)
        {
            build(member, depth + 1, out, budget);
        }
    }
    objects(schema, depth, out, budget);
    arrays(schema, depth, out, budget);
}

/// Objects: with the required properties (each its first candidate), then with each declared
/// property added, then with one not declared (of each plain value). Each property's candidates
/// are built once.
fn objects(schema: &Map<String, Value>, depth: usize, out: &mut Vec<Value>, budget: &Budget) {
    let empty = Map::new();
    let properties = schema
        .get("properties")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .take(MAX_MEMBERS)
        .collect();
    let mut built: Vec<(&str, Vec<Value>)> = Vec::new();
    let mut candidates = |name: &str| -> Vec<Value> {
        if let Some((_, values)) = built.iter().find(|(n, _)| *n == name) {
            return values.clone();
        }
        let property = properties.get(name).unwrap_or(&Value::Bool(true));
        let mut values = Vec::new();
        build(property, depth + 1, &mut values, budget);
        // Values their own schema plausibly admits first, those built from its keywords before
        // the plain ones: a required member that no schema admits (a `null` for an integer)
        // would make every object built on it useless, and an empty array hides what its items
        // can be.
        let plain = plain_values();
        values.sort_by_cached_key(|v| (!plausible(v, property, 0), plain.contains(v)));
        let name = properties
            .get_key_value(name)
            .map_or("", |(k, _)| k.as_str());
        if !name.is_empty() {
            built.push((name, values.clone()));
        }
        values
    };
    let mut base = Map::new();
    for name in &required {
        if let Some(value) = candidates(name).into_iter().next() {
            base.insert((*name).to_owned(), value);
        }
    }
    let base_nodes = nodes(&Value::Object(base.clone()), usize::MAX);
    // An object is cloned from the base only while the budget can still hold one.
    let add = |object: Map<String, Value>, out: &mut Vec<Value>| {
        offer(out, Value::Object(object), budget)
    };
    add(base.clone(), out);
    // Declared members, then members another depends on (`dependentRequired`, `dependencies`).
    let mut names: Vec<&String> = properties.keys().take(MAX_MEMBERS).collect();
    for keyword in ["dependentRequired", "dependentSchemas", "dependencies"] {
        if let Some(Value::Object(dependents)) = schema.get(keyword) {
            names.extend(
                dependents
                    .keys()
                    .filter(|name| !properties.contains_key(*name))
                    .take(MAX_MEMBERS),
            );
        }
    }
    for name in names {
        for value in candidates(name).into_iter().take(8) {
            if budget.left() <= base_nodes {
                return;
            }
            let mut object = base.clone();
            object.insert(name.clone(), value);
            add(object, out);
        }
    }
    for value in plain_values() {
        if budget.left() <= base_nodes {
            return;
        }
        let mut object = base.clone();
        object.insert(UNDECLARED.to_owned(), value);
        add(object, out);
    }
}

/// Whether `schema` plausibly admits `value`, by its simplest keywords (`type`, `enum`, `const`,
/// numeric bounds, string lengths, an object's `required` and closed members, an array's
/// items, a combinator's members): a cheap choice among candidates, not a check.
fn plausible(value: &Value, schema: &Value, depth: usize) -> bool {
    let Value::Object(schema) = schema else {
        return schema != &Value::Bool(false);
    };
    if depth > MAX_DEPTH * 2 {
        return true;
    }
    let typed = |t: &str| match t {
        "integer" => value.as_i64().is_some() || value.as_u64().is_some(),
        "number" => value.is_number(),
        "string" => value.is_string(),
        "boolean" => value.is_boolean(),
        "object" => value.is_object(),
        "array" => value.is_array(),
        "null" => value.is_null(),
        _ => true,
    };
    let type_ok = match schema.get("type") {
        Some(Value::String(t)) => typed(t),
        Some(Value::Array(types)) => types.iter().filter_map(Value::as_str).any(typed),
        _ => true,
    };
    let enum_ok = schema
        .get("enum")
        .and_then(Value::as_array)
        .is_none_or(|values| values.contains(value));
    let const_ok = schema.get("const").is_none_or(|c| c == value);
    let bound = |name: &str| schema.get(name).and_then(Value::as_f64);
    let number_ok = value.as_f64().is_none_or(|n| {
        bound("minimum").is_none_or(|m| n >= m)
            && bound("maximum").is_none_or(|m| n <= m)
            && bound("exclusiveMinimum").is_none_or(|m| n > m)
            && bound("exclusiveMaximum").is_none_or(|m| n < m)
    });
    let length = |name: &str| schema.get(name).and_then(Value::as_u64);
    let string_ok = value.as_str().is_none_or(|text| {
        let len = text.chars().count() as u64;
        length("minLength").is_none_or(|m| len >= m) && length("maxLength").is_none_or(|m| len <= m)
    });
    let object_ok = value.as_object().is_none_or(|object| {
        let properties = schema.get("properties").and_then(Value::as_object);
        let required = schema
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .all(|name| object.contains_key(name));
        let closed = schema.get("additionalProperties") == Some(&Value::Bool(false));
        let members =
            object.iter().all(
                |(name, member)| match properties.and_then(|p| p.get(name)) {
                    Some(property) => plausible(member, property, depth + 1),
                    None => !closed,
                },
            );
        required && members
    });
    let array_ok = value
        .as_array()
        .is_none_or(|items| match schema.get("items") {
            Some(item) if item.is_object() || item.is_boolean() => {
                items.iter().all(|v| plausible(v, item, depth + 1))
            }
            _ => true,
        });
    let combinators_ok = ["anyOf", "oneOf"].iter().all(|combinator| {
        schema
            .get(*combinator)
            .and_then(Value::as_array)
            .is_none_or(|members| members.iter().any(|m| plausible(value, m, depth + 1)))
    });
    type_ok
        && enum_ok
        && const_ok
        && number_ok
        && string_ok
        && object_ok
        && array_ok
        && combinators_ok
}

/// Arrays: empty, of one of each item candidate, and a tuple of the first candidates.
fn arrays(schema: &Map<String, Value>, depth: usize, out: &mut Vec<Value>, budget: &Budget) {
    let mut items = Vec::new();
    build(
        schema.get("items").unwrap_or(&Value::Bool(true)),
        depth + 1,
        &mut items,
        budget,
    );
    // Lengths at and past each bound, of the first item candidate.
    if let Some(first) = items.first() {
        for bound in ["minItems", "maxItems"] {
            if let Some(n) = schema
                .get(bound)
                .and_then(Value::as_u64)
                .filter(|n| *n <= 64)
            {
                for len in [n.saturating_sub(1), n, n + 1] {
                    offer(out, Value::Array(vec![first.clone(); len as usize]), budget);
                }
            }
        }
    }
    for item in items.into_iter().take(64) {
        offer(out, json!([item]), budget);
    }
    if let Some(prefix) = schema.get("prefixItems").and_then(Value::as_array) {
        let tuple: Vec<Value> = prefix
            .iter()
            .filter_map(|item| {
                let mut values = Vec::new();
                build(item, depth + 1, &mut values, budget);
                values.into_iter().next()
            })
            .collect();
        offer(out, Value::Array(tuple), budget);
    }
}

/// One value of each JSON type, and the numbers and strings that tell types and formats apart.
fn plain_values() -> [Value; 9] {
    [
        Value::Null,
        Value::Bool(true),
        json!(0),
        json!(0.5),
        json!(""),
        json!("a"),
        json!([]),
        json!({}),
        json!(-1),
    ]
}

/// `n` as a JSON number: an integer where it is one.
fn number(n: f64) -> Value {
    if n.fract() == 0.0 && n.abs() < 9.0e15 {
        json!(n as i64)
    } else {
        json!(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An object schema `depth` levels deep, each level requiring `width` members of the next.
    fn nested(width: usize, depth: usize) -> Value {
        if depth == 0 {
            return json!({"type": "string"});
        }
        let names: Vec<String> = (0..width).map(|i| format!("p{i}")).collect();
        let properties: Map<String, Value> = names
            .iter()
            .map(|n| (n.clone(), nested(width, depth - 1)))
            .collect();
        json!({"type": "object", "required": names, "properties": properties})
    }

    #[test]
    fn wide_nested_required_members_stay_within_the_budget() {
        // Unbounded, the candidates would hold 5^6 members in each of hundreds of values.
        let outer = nested(5, 6);
        let mut inner = outer.clone();
        inner["properties"]["p0"] = json!({"type": ["object", "null"]});
        let options = CompileOptions {
            assert_formats: false,
            regex_engine: RegexEngine::Linear,
        };
        let mut candidates = Vec::new();
        let budget = Budget(Cell::new(MAX_NODES));
        build(&inner, 0, &mut candidates, &budget);
        let held: usize = candidates.iter().map(|c| nodes(c, usize::MAX)).sum();
        assert!(held <= MAX_NODES, "{held} nodes");
        // The search ends, with an answer that is proved if it is one.
        if let Some(value) = find(&outer, &inner, None, options).expect("both compile") {
            assert!(compile(&inner, options).expect("inner").is_valid(&value));
            assert!(!compile(&outer, options).expect("outer").is_valid(&value));
        }
    }

    #[test]
    fn a_branch_added_inside_array_items_is_shown_by_a_value() {
        let item = |branches: Value| {
            json!({"type": "object", "required": ["content"], "additionalProperties": false,
                "properties": {"content": {"type": "array", "items": branches}}})
        };
        let image = json!({"type": "object", "required": ["type", "data"], "additionalProperties": false,
            "properties": {"type": {"enum": ["image"]}, "data": {"type": "string"}}});
        let resource = json!({"type": "object", "required": ["type", "resource"], "additionalProperties": false,
            "properties": {"type": {"const": "resource"}, "resource": {"type": "object", "required": ["uri"],
                "properties": {"uri": {"type": "string"}}}}});
        let (old, new) = (
            item(image.clone()),
            item(json!({"anyOf": [image, resource]})),
        );
        let options = CompileOptions {
            assert_formats: false,
            regex_engine: RegexEngine::Linear,
        };
        let value = find(&old, &new, None, options)
            .expect("both compile")
            .expect("a value");
        assert_eq!(value["content"][0]["type"], "resource", "{value}");
    }
}
