//! Two schemas that name different dialects (`$schema`: a TypeScript server's zod-to-json-schema
//! stamps draft-07, a Python one 2020-12 or nothing) compared in one. Where neither uses a keyword
//! whose meaning differs between the two dialects, they are compared with `$schema` left out: the
//! same keywords mean the same. Where one does (an `items` array, `additionalItems`,
//! `dependencies`, `$ref` beside other keywords before 2019-09...), the change is not decided here,
//! and the reason names the keyword.

use serde_json::{Map, Value};
use std::borrow::Cow;

/// The dialect every other is compared in.
const DRAFT_2020_12: &str = "https://json-schema.org/draft/2020-12/schema";

/// `old` and `new` in one dialect: as they are when they name the same one; without their root
/// `$schema` when their keywords mean the same in both; else why not.
pub fn in_one_dialect<'a>(
    old: &'a Value,
    new: &'a Value,
) -> Result<(Cow<'a, Value>, Cow<'a, Value>), String> {
    let (was, is) = (dialect(old), dialect(new));
    if was == is {
        return Ok((Cow::Borrowed(old), Cow::Borrowed(new)));
    }
    for (schema, named) in [(old, was), (new, is)] {
        if let Some(keyword) = named
            .filter(|d| !is_2020_12(d))
            .and_then(|d| differs(schema, d))
        {
            return Err(format!(
                "the schemas name different dialects ({} and {}), and `{keyword}` means something else under {}",
                was.unwrap_or("none"),
                is.unwrap_or("none"),
                named.unwrap_or("none")
            ));
        }
    }
    Ok((without_dialect(old), without_dialect(new)))
}

/// The dialect a schema names at its root, if any.
fn dialect(schema: &Value) -> Option<&str> {
    schema.get("$schema").and_then(Value::as_str)
}

fn is_2020_12(dialect: &str) -> bool {
    dialect.trim_end_matches('#') == DRAFT_2020_12
}

fn without_dialect(schema: &Value) -> Cow<'_, Value> {
    match schema {
        Value::Object(map) if map.contains_key("$schema") => {
            let mut map: Map<String, Value> = map.clone();
            map.remove("$schema");
            Cow::Owned(Value::Object(map))
        }
        _ => Cow::Borrowed(schema),
    }
}

/// A keyword of `schema` (anywhere in it) whose meaning under `dialect` is not its meaning under
/// 2020-12, if any. Over-approximated: a property that happens to bear such a name counts too,
/// which leaves the change undecided, never decided wrongly.
fn differs(schema: &Value, dialect: &str) -> Option<&'static str> {
    let before_2019 = !dialect.contains("2019-09");
    match schema {
        Value::Object(map) => {
            let found = map.iter().find_map(|(key, value)| {
                let keyword: &'static str = match key.as_str() {
                    "items" if value.is_array() => "items",
                    "additionalItems" => "additionalItems",
                    "dependencies" => "dependencies",
                    "$recursiveRef" => "$recursiveRef",
                    "$recursiveAnchor" => "$recursiveAnchor",
                    "prefixItems" => "prefixItems",
                    "$dynamicRef" => "$dynamicRef",
                    "$dynamicAnchor" => "$dynamicAnchor",
                    "exclusiveMinimum" if value.is_boolean() => "exclusiveMinimum",
                    "exclusiveMaximum" if value.is_boolean() => "exclusiveMaximum",
                    "dependentRequired" if before_2019 => "dependentRequired",
                    "dependentSchemas" if before_2019 => "dependentSchemas",
                    "unevaluatedProperties" if before_2019 => "unevaluatedProperties",
                    "unevaluatedItems" if before_2019 => "unevaluatedItems",
                    "$ref" if before_2019 && has_siblings(map) => "$ref",
                    _ => return None,
                };
                Some(keyword)
            });
            found.or_else(|| map.values().find_map(|v| differs(v, dialect)))
        }
        Value::Array(items) => items.iter().find_map(|v| differs(v, dialect)),
        _ => None,
    }
}

/// Whether a schema with `$ref` has keywords beside it that draft-07 and older ignore.
fn has_siblings(map: &Map<String, Value>) -> bool {
    map.keys().any(|k| {
        !matches!(
            k.as_str(),
            "$ref" | "$schema" | "$id" | "$comment" | "title" | "description" | "definitions"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const DRAFT_07: &str = "http://json-schema.org/draft-07/schema#";

    #[test]
    fn schemas_whose_keywords_mean_the_same_are_compared_without_their_dialects() {
        let old = json!({"$schema": DRAFT_07, "type": "object", "properties": {"id": {"type": "integer"}}});
        let new = json!({"type": "object", "properties": {"id": {"type": "integer"}}});
        let (a, b) = in_one_dialect(&old, &new).expect("one dialect");
        assert_eq!(a.as_ref(), &new);
        assert_eq!(b.as_ref(), &new);
    }

    #[test]
    fn a_keyword_that_means_something_else_leaves_the_change_undecided() {
        for (schema, keyword) in [
            (
                json!({"$schema": DRAFT_07, "items": [{"type": "string"}]}),
                "items",
            ),
            (
                json!({"$schema": DRAFT_07, "properties": {"a": {"$ref": "#/definitions/a", "type": "string"}}}),
                "$ref",
            ),
            (
                json!({"$schema": DRAFT_07, "dependencies": {"a": ["b"]}}),
                "dependencies",
            ),
            (
                json!({"$schema": "http://json-schema.org/draft-04/schema#", "exclusiveMinimum": true, "minimum": 0}),
                "exclusiveMinimum",
            ),
        ] {
            let other = json!({"$schema": DRAFT_2020_12, "type": "object"});
            let why = in_one_dialect(&schema, &other).expect_err("undecided");
            assert!(why.contains(&format!("`{keyword}`")), "{why}");
        }
        // The same dialect on both sides: compared as they are.
        let same = json!({"$schema": DRAFT_07, "items": [{"type": "string"}]});
        assert!(in_one_dialect(&same, &same).is_ok());
    }
}
