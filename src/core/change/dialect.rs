//! Two schemas that name different dialects (`$schema`: a TypeScript server's zod-to-json-schema
//! stamps draft-07, a Python one 2020-12 or nothing) compared in one: each is brought into
//! 2020-12 where the keywords mean the same there, and each translation is recorded:
//!
//! - `definitions` becomes `$defs`, and references into it follow;
//! - `dependencies` becomes `dependentRequired` (a list of names) or `dependentSchemas`;
//! - an `items` array becomes `prefixItems`, and `additionalItems` beside it becomes `items`
//!   (`additionalItems` beside a single `items` schema means nothing, and goes);
//! - draft-04's boolean `exclusiveMinimum`/`exclusiveMaximum` become the bound they qualify;
//!   draft-04's `id` becomes `$id`;
//! - before 2019-09, keywords beside `$ref` are ignored, so they go (its `definitions` stay);
//!   keywords a dialect does not know (`prefixItems`, `dependentRequired`, `unevaluated*`,
//!   `$dynamicRef`... in draft-07) are ignored by it, so they go too;
//! - 2019-09's `$recursiveRef: "#"` becomes `$dynamicRef` to a `$dynamicAnchor` where its root
//!   has `$recursiveAnchor: true`, else a plain `$ref: "#"`.
//!
//! What cannot be translated exactly (a `$recursiveRef` in a schema with embedded resources, a
//! `$defs` and a `definitions` with the same name, a dialect not recognised...) is named, and the
//! change is left to a counterexample or undecided. Two schemas that name the same dialect are
//! compared as they are.

use referencing::Draft;
use serde_json::{Map, Value};
use std::borrow::Cow;
use std::collections::BTreeSet;

/// Both schemas in one dialect, and the translations made to get there.
pub struct InOne<'a> {
    pub old: Cow<'a, Value>,
    pub new: Cow<'a, Value>,
    /// Each translation, once (`draft-07 `definitions` read as 2020-12 `$defs``).
    pub notes: Vec<String>,
}

/// Deepest nesting translated (schemas come from callers).
const MAX_DEPTH: usize = 128;
/// The anchor a translated `$recursiveRef` refers to.
const RECURSIVE_ANCHOR: &str = "schemagate-recursive";

/// `old` and `new` in one dialect: as they are when they name the same one; else each in 2020-12,
/// or why that cannot be done exactly.
pub fn in_one_dialect<'a>(old: &'a Value, new: &'a Value) -> Result<InOne<'a>, String> {
    // As the validator reads them: the same detection compiles them.
    let (was, is) = (Draft::default().detect(old), Draft::default().detect(new));
    if was == is {
        return Ok(InOne {
            old: Cow::Borrowed(old),
            new: Cow::Borrowed(new),
            notes: Vec::new(),
        });
    }
    let mut notes = BTreeSet::new();
    let old = to_2020_12(old, was, &mut notes).map_err(|why| {
        format!("the schemas name different dialects ({was:?} and {is:?}): {why}")
    })?;
    let new = to_2020_12(new, is, &mut notes).map_err(|why| {
        format!("the schemas name different dialects ({was:?} and {is:?}): {why}")
    })?;
    Ok(InOne {
        old: Cow::Owned(old),
        new: Cow::Owned(new),
        notes: notes.into_iter().collect(),
    })
}

/// `schema`, written under `draft`, as 2020-12 reads the same (its root `$schema` left out).
fn to_2020_12(schema: &Value, draft: Draft, notes: &mut BTreeSet<String>) -> Result<Value, String> {
    let name = dialect_name(draft);
    let mut translation = Translation {
        draft,
        name,
        notes,
        recursive_root: false,
    };
    if let Value::Object(map) = schema {
        if draft == Draft::Draft201909 {
            translation.recursive_root = map.get("$recursiveAnchor") == Some(&Value::Bool(true));
            if translation.recursive_root && has_embedded_id(schema, true, 0) {
                return Err(
                    "`$recursiveRef` in a schema with embedded resources (`$id`) cannot be translated exactly"
                        .to_owned(),
                );
            }
        }
    }
    let mut out = translation.schema(schema, 0)?;
    if let Value::Object(map) = &mut out {
        map.remove("$schema");
    }
    Ok(out)
}

fn dialect_name(draft: Draft) -> &'static str {
    match draft {
        Draft::Draft4 => "draft-04",
        Draft::Draft6 => "draft-06",
        Draft::Draft7 => "draft-07",
        Draft::Draft201909 => "2019-09",
        _ => "2020-12",
    }
}

/// Whether `schema` has an `$id` below its root.
fn has_embedded_id(schema: &Value, root: bool, depth: usize) -> bool {
    if depth > MAX_DEPTH {
        return true;
    }
    match schema {
        Value::Object(map) => {
            (!root && map.contains_key("$id"))
                || map.values().any(|v| has_embedded_id(v, false, depth + 1))
        }
        Value::Array(items) => items.iter().any(|v| has_embedded_id(v, false, depth + 1)),
        _ => false,
    }
}

struct Translation<'n> {
    draft: Draft,
    name: &'static str,
    notes: &'n mut BTreeSet<String>,
    /// A 2019-09 root with `$recursiveAnchor: true`.
    recursive_root: bool,
}

/// Keywords whose value is one subschema, in every dialect.
const ONE: [&str; 11] = [
    "additionalProperties",
    "contains",
    "propertyNames",
    "not",
    "if",
    "then",
    "else",
    "unevaluatedProperties",
    "unevaluatedItems",
    "contentSchema",
    "items",
];
/// Keywords whose value maps names to subschemas.
const NAMED: [&str; 4] = [
    "properties",
    "patternProperties",
    "$defs",
    "dependentSchemas",
];
/// Keywords whose value lists subschemas.
const LISTS: [&str; 4] = ["allOf", "anyOf", "oneOf", "prefixItems"];

impl Translation<'_> {
    fn note(&mut self, what: &str) {
        self.notes.insert(format!("{} {what}", self.name));
    }

    /// Whether `keyword` is one this dialect does not know (and so ignores).
    fn unknown_here(&self, keyword: &str) -> bool {
        let before_2019 = !matches!(self.draft, Draft::Draft201909 | Draft::Draft202012);
        match keyword {
            "prefixItems" | "$dynamicRef" | "$dynamicAnchor" => self.draft != Draft::Draft202012,
            "dependentRequired"
            | "dependentSchemas"
            | "unevaluatedProperties"
            | "unevaluatedItems"
            | "minContains"
            | "maxContains"
            | "$anchor"
            | "$recursiveRef"
            | "$recursiveAnchor" => before_2019,
            "const" | "contains" | "propertyNames" | "examples" => self.draft == Draft::Draft4,
            "if" | "then" | "else" | "contentMediaType" | "contentEncoding" | "$comment" => {
                matches!(self.draft, Draft::Draft4 | Draft::Draft6)
            }
            _ => false,
        }
    }

    /// `schema` in 2020-12: a schema with `$ref` before 2019-09 as [`Self::alone_ref`] says,
    /// any other keyword by keyword.
    fn schema(&mut self, schema: &Value, depth: usize) -> Result<Value, String> {
        if depth > MAX_DEPTH {
            return Err(format!("nested deeper than {MAX_DEPTH}"));
        }
        let Value::Object(map) = schema else {
            return Ok(schema.clone());
        };
        let before_2019 = !matches!(self.draft, Draft::Draft201909 | Draft::Draft202012);
        if before_2019 && map.contains_key("$ref") {
            return self.alone_ref(map, depth);
        }
        let mut out = Map::new();
        for (key, value) in map {
            if self.unknown_here(key) {
                self.note(&format!("`{key}` (not a keyword there) left out"));
                continue;
            }
            self.keyword(&mut out, map, (key, value), depth)?;
        }
        Ok(Value::Object(out))
    }

    /// Before 2019-09, `$ref` stands alone: what is beside it is ignored, and goes (but its
    /// `definitions` stay reachable by pointer, and its annotations are kept).
    fn alone_ref(&mut self, map: &Map<String, Value>, depth: usize) -> Result<Value, String> {
        let mut out = Map::new();
        let mut dropped = false;
        for (key, value) in map {
            match key.as_str() {
                "$ref" => {
                    out.insert("$ref".to_owned(), self.reference(value));
                }
                "definitions" | "$defs" => self.defs(&mut out, key, value, depth)?,
                "$schema" | "$id" | "id" | "title" | "description" | "$comment" => {
                    out.insert(key.clone(), value.clone());
                }
                _ => dropped = true,
            }
        }
        if dropped {
            self.note("keywords beside `$ref` (ignored there) left out");
        }
        Ok(Value::Object(out))
    }

    /// One keyword of `map` (the schema it is in) into `out`, in 2020-12.
    fn keyword(
        &mut self,
        out: &mut Map<String, Value>,
        map: &Map<String, Value>,
        (key, value): (&String, &Value),
        depth: usize,
    ) -> Result<(), String> {
        let items_array = map.get("items").is_some_and(Value::is_array);
        match key.as_str() {
            "definitions" | "$defs" => self.defs(out, key, value, depth)?,
            "$ref" => {
                out.insert("$ref".to_owned(), self.reference(value));
            }
            "$recursiveRef" => self.recursive_ref(out, value)?,
            "$recursiveAnchor" => {
                if value == &Value::Bool(true) && self.recursive_root {
                    out.insert(
                        "$dynamicAnchor".to_owned(),
                        Value::String(RECURSIVE_ANCHOR.to_owned()),
                    );
                }
            }
            "id" if self.draft == Draft::Draft4 && value.is_string() => {
                self.note("`id` read as 2020-12 `$id`");
                out.insert("$id".to_owned(), value.clone());
            }
            "items" if items_array => {
                self.note("`items` array read as 2020-12 `prefixItems`");
                out.insert("prefixItems".to_owned(), self.list(value, depth)?);
            }
            "additionalItems" if items_array => {
                self.note("`additionalItems` read as 2020-12 `items`");
                out.insert("items".to_owned(), self.schema(value, depth + 1)?);
            }
            "additionalItems" => {
                self.note("`additionalItems` beside a single `items` (ignored there) left out");
            }
            "dependencies" => self.dependencies(out, value, depth)?,
            "exclusiveMinimum" | "exclusiveMaximum" if value.is_boolean() => {
                self.exclusive_bound(out, map, key, value)?
            }
            // Qualified by a boolean exclusive bound: that bound takes its value.
            "minimum" if map.get("exclusiveMinimum") == Some(&Value::Bool(true)) => {}
            "maximum" if map.get("exclusiveMaximum") == Some(&Value::Bool(true)) => {}
            _ if ONE.contains(&key.as_str()) => {
                out.insert(key.clone(), self.schema(value, depth + 1)?);
            }
            _ if NAMED.contains(&key.as_str()) => {
                out.insert(key.clone(), self.named(value, depth)?);
            }
            _ if LISTS.contains(&key.as_str()) => {
                out.insert(key.clone(), self.list(value, depth)?);
            }
            _ => {
                out.insert(key.clone(), value.clone());
            }
        }
        Ok(())
    }

    /// 2019-09's `$recursiveRef: "#"`: a `$dynamicRef` where the root has `$recursiveAnchor:
    /// true`, else a plain `$ref: "#"`.
    fn recursive_ref(&mut self, out: &mut Map<String, Value>, value: &Value) -> Result<(), String> {
        if value.as_str() != Some("#") {
            return Err(format!("`$recursiveRef` {value} is not \"#\""));
        }
        if self.recursive_root {
            self.note("`$recursiveRef` read as 2020-12 `$dynamicRef`");
            out.insert(
                "$dynamicRef".to_owned(),
                Value::String(format!("#{RECURSIVE_ANCHOR}")),
            );
        } else {
            self.note("`$recursiveRef` without a recursive anchor read as `$ref`");
            out.insert("$ref".to_owned(), Value::String("#".to_owned()));
        }
        Ok(())
    }

    /// `dependencies`: a list of names as `dependentRequired`, a schema as `dependentSchemas`.
    fn dependencies(
        &mut self,
        out: &mut Map<String, Value>,
        value: &Value,
        depth: usize,
    ) -> Result<(), String> {
        let Value::Object(dependencies) = value else {
            return Err("`dependencies` that is not an object".to_owned());
        };
        for (name, dependency) in dependencies {
            let (keyword, value) = match dependency {
                Value::Array(_) => ("dependentRequired", dependency.clone()),
                _ => ("dependentSchemas", self.schema(dependency, depth + 1)?),
            };
            self.note(&format!("`dependencies` read as 2020-12 `{keyword}`"));
            let slot = out
                .entry(keyword.to_owned())
                .or_insert_with(|| Value::Object(Map::new()));
            if let Value::Object(slot) = slot {
                slot.insert(name.clone(), value);
            }
        }
        Ok(())
    }

    /// Draft-04's boolean `exclusiveMinimum`/`exclusiveMaximum`: `true` becomes the bound it
    /// qualifies; `false` says nothing.
    fn exclusive_bound(
        &mut self,
        out: &mut Map<String, Value>,
        map: &Map<String, Value>,
        key: &str,
        value: &Value,
    ) -> Result<(), String> {
        if value != &Value::Bool(true) {
            return Ok(());
        }
        let bound = match key {
            "exclusiveMinimum" => "minimum",
            _ => "maximum",
        };
        let Some(limit) = map.get(bound) else {
            return Err(format!("`{key}: true` without `{bound}`"));
        };
        self.note(&format!("boolean `{key}` read as a 2020-12 bound"));
        out.insert(key.to_owned(), limit.clone());
        Ok(())
    }

    /// `definitions` (or `$defs`) of `value` into `out`'s `$defs`; a name in both cannot be.
    fn defs(
        &mut self,
        out: &mut Map<String, Value>,
        key: &str,
        value: &Value,
        depth: usize,
    ) -> Result<(), String> {
        if key == "definitions" {
            self.note("`definitions` read as 2020-12 `$defs`");
        }
        let Value::Object(named) = self.named(value, depth)? else {
            return Err(format!("`{key}` that is not an object"));
        };
        let slot = out
            .entry("$defs".to_owned())
            .or_insert_with(|| Value::Object(Map::new()));
        let Value::Object(slot) = slot else {
            return Err("`$defs` that is not an object".to_owned());
        };
        for (name, schema) in named {
            if slot.insert(name.clone(), schema).is_some() {
                return Err(format!("`definitions` and `$defs` both name {name:?}"));
            }
        }
        Ok(())
    }

    /// A reference into `definitions`, pointed at `$defs`.
    fn reference(&mut self, value: &Value) -> Value {
        match value
            .as_str()
            .and_then(|r| r.strip_prefix("#/definitions/"))
        {
            Some(rest) => Value::String(format!("#/$defs/{rest}")),
            None => value.clone(),
        }
    }

    fn named(&mut self, value: &Value, depth: usize) -> Result<Value, String> {
        let Value::Object(named) = value else {
            return Ok(value.clone());
        };
        let mut out = Map::new();
        for (name, schema) in named {
            out.insert(name.clone(), self.schema(schema, depth + 1)?);
        }
        Ok(Value::Object(out))
    }

    fn list(&mut self, value: &Value, depth: usize) -> Result<Value, String> {
        let Value::Array(items) = value else {
            return Ok(value.clone());
        };
        items
            .iter()
            .map(|item| self.schema(item, depth + 1))
            .collect::<Result<Vec<_>, _>>()
            .map(Value::Array)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const DRAFT_07: &str = "http://json-schema.org/draft-07/schema#";
    const DRAFT_04: &str = "http://json-schema.org/draft-04/schema#";
    const DRAFT_2019_09: &str = "https://json-schema.org/draft/2019-09/schema";
    const DRAFT_2020_12: &str = "https://json-schema.org/draft/2020-12/schema";

    fn translated(schema: Value) -> (Value, Vec<String>) {
        let other = json!({"$schema": DRAFT_2020_12});
        let both = in_one_dialect(&schema, &other).expect("translated");
        (both.old.into_owned(), both.notes)
    }

    #[test]
    fn schemas_whose_keywords_mean_the_same_lose_only_their_dialect() {
        let old = json!({"$schema": DRAFT_07, "type": "object", "properties": {"id": {"type": "integer"}}});
        let new = json!({"type": "object", "properties": {"id": {"type": "integer"}}});
        let both = in_one_dialect(&old, &new).expect("one dialect");
        assert_eq!(both.old.as_ref(), &new);
        assert_eq!(both.new.as_ref(), &new);
        assert!(both.notes.is_empty(), "{:?}", both.notes);
    }

    #[test]
    fn each_keyword_that_differs_is_translated_and_noted() {
        let (schema, notes) = translated(json!({
            "$schema": DRAFT_07,
            "definitions": {"name": {"type": "string"}},
            "type": "object",
            "properties": {
                "name": {"$ref": "#/definitions/name", "maxLength": 3},
                "pair": {"type": "array", "items": [{"type": "string"}], "additionalItems": false},
                "list": {"type": "array", "items": {"type": "string"}, "additionalItems": false}
            },
            "dependencies": {"a": ["b"], "c": {"required": ["d"]}},
            "dependentRequired": {"x": ["y"]}
        }));
        assert_eq!(
            schema,
            json!({
                "$defs": {"name": {"type": "string"}},
                "type": "object",
                "properties": {
                    "name": {"$ref": "#/$defs/name"},
                    "pair": {"type": "array", "prefixItems": [{"type": "string"}], "items": false},
                    "list": {"type": "array", "items": {"type": "string"}}
                },
                "dependentRequired": {"a": ["b"]},
                "dependentSchemas": {"c": {"required": ["d"]}}
            })
        );
        assert_eq!(
            notes,
            [
                "draft-07 `additionalItems` beside a single `items` (ignored there) left out",
                "draft-07 `additionalItems` read as 2020-12 `items`",
                "draft-07 `definitions` read as 2020-12 `$defs`",
                "draft-07 `dependencies` read as 2020-12 `dependentRequired`",
                "draft-07 `dependencies` read as 2020-12 `dependentSchemas`",
                "draft-07 `dependentRequired` (not a keyword there) left out",
                "draft-07 `items` array read as 2020-12 `prefixItems`",
                "draft-07 keywords beside `$ref` (ignored there) left out",
            ]
        );
    }

    #[test]
    fn draft_04_bounds_and_2019_09_recursion_are_translated() {
        let (schema, _) = translated(json!({
            "$schema": DRAFT_04,
            "type": "number", "minimum": 0, "exclusiveMinimum": true,
            "maximum": 10, "exclusiveMaximum": false
        }));
        assert_eq!(
            schema,
            json!({"type": "number", "exclusiveMinimum": 0, "maximum": 10})
        );
        let (schema, notes) = translated(json!({
            "$schema": DRAFT_2019_09, "$recursiveAnchor": true,
            "type": "object", "properties": {"child": {"$recursiveRef": "#"}}
        }));
        assert_eq!(
            schema,
            json!({"$dynamicAnchor": RECURSIVE_ANCHOR, "type": "object",
                "properties": {"child": {"$dynamicRef": format!("#{RECURSIVE_ANCHOR}")}}})
        );
        assert_eq!(
            notes,
            ["2019-09 `$recursiveRef` read as 2020-12 `$dynamicRef`"]
        );
    }

    #[test]
    fn what_cannot_be_translated_exactly_is_named() {
        let other = json!({"$schema": DRAFT_2020_12});
        for (schema, says) in [
            (
                json!({"$schema": DRAFT_07, "definitions": {"a": {}}, "$defs": {"a": {}}}),
                "both name \"a\"",
            ),
            (
                json!({"$schema": DRAFT_04, "exclusiveMinimum": true}),
                "`exclusiveMinimum: true` without `minimum`",
            ),
            (
                json!({"$schema": DRAFT_2019_09, "$recursiveAnchor": true, "$defs": {"x": {"$id": "x.json"}}, "items": {"$recursiveRef": "#"}}),
                "embedded resources",
            ),
        ] {
            let why = in_one_dialect(&schema, &other)
                .err()
                .expect("not translated");
            assert!(why.contains(says), "{why}");
        }
        // The same dialect on both sides, however its URI is spelled: compared as they are.
        let same = json!({"$schema": DRAFT_07, "items": [{"type": "string"}]});
        let spelled =
            json!({"$schema": DRAFT_07.trim_end_matches('#'), "items": [{"type": "integer"}]});
        let both = in_one_dialect(&same, &spelled).expect("one dialect");
        assert_eq!(both.old.as_ref(), &same);
    }
}
