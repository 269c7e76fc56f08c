//! Two schemas that name different dialects (`$schema`: a TypeScript server's zod-to-json-schema
//! stamps draft-07, a Python one 2020-12 or nothing) compared in one. Where neither uses a keyword
//! whose meaning differs between the two dialects, they are compared with `$schema` left out: the
//! same keywords mean the same. Where one does (an `items` array, `additionalItems`,
//! `dependencies`, `$ref` beside other keywords before 2019-09...), the change is not decided here,
//! and the reason names the keyword.

use referencing::Draft;
use serde_json::{Map, Value};
use std::borrow::Cow;

/// `old` and `new` in one dialect: as they are when they name the same one (none is 2020-12);
/// without their root `$schema` when their keywords mean the same in both; else why not.
pub fn in_one_dialect<'a>(
    old: &'a Value,
    new: &'a Value,
) -> Result<(Cow<'a, Value>, Cow<'a, Value>), String> {
    // As the validator reads them: the same detection compiles them.
    let (was, is) = (Draft::default().detect(old), Draft::default().detect(new));
    if was == is {
        return Ok((Cow::Borrowed(old), Cow::Borrowed(new)));
    }
    for (schema, draft) in [(old, was), (new, is)] {
        if let Some(keyword) = differs(schema, draft) {
            return Err(format!(
                "the schemas name different dialects ({was:?} and {is:?}), and `{keyword}` means something else under {draft:?}"
            ));
        }
    }
    Ok((without_dialect(old), without_dialect(new)))
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

/// A keyword of `schema` (anywhere in it) whose meaning under `draft` is not its meaning under
/// 2020-12, if any. Over-approximated: a property that happens to bear such a name counts too,
/// which leaves the change undecided, never decided wrongly. A dialect not recognised counts as
/// one before 2019-09.
fn differs(schema: &Value, draft: Draft) -> Option<&str> {
    if draft == Draft::Draft202012 {
        return None;
    }
    let before_2019 = draft != Draft::Draft201909;
    match schema {
        Value::Object(map) => map
            .iter()
            .find(|(key, value)| match key.as_str() {
                "items" => value.is_array(),
                "exclusiveMinimum" | "exclusiveMaximum" => value.is_boolean(),
                "additionalItems" | "dependencies" | "$recursiveRef" | "$recursiveAnchor"
                | "prefixItems" | "$dynamicRef" | "$dynamicAnchor" => true,
                "dependentRequired"
                | "dependentSchemas"
                | "unevaluatedProperties"
                | "unevaluatedItems" => before_2019,
                "$ref" => before_2019 && has_siblings(map),
                _ => false,
            })
            .map(|(key, _)| key.as_str())
            .or_else(|| map.values().find_map(|v| differs(v, draft))),
        Value::Array(items) => items.iter().find_map(|v| differs(v, draft)),
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

    const DRAFT_2020_12: &str = "https://json-schema.org/draft/2020-12/schema";

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
        // The same dialect on both sides, however its URI is spelled: compared as they are.
        let same = json!({"$schema": DRAFT_07, "items": [{"type": "string"}]});
        assert!(in_one_dialect(&same, &same).is_ok());
        let spelled =
            json!({"$schema": DRAFT_07.trim_end_matches('#'), "items": [{"type": "integer"}]});
        assert!(in_one_dialect(&same, &spelled).is_ok());
    }
}
