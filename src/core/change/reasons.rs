//! The reasons of a change: the two schema documents walked side by side, keyword by keyword,
//! each difference said at its JSON pointer (`/properties/email: removed from required`,
//! `/properties/plan/enum: added "trial"`). Subschemas are followed where both sides have them
//! (properties, `$defs`, items, combinator members matched by equality first, then in order);
//! annotation keywords (`title`, `description`, `examples`...) are not differences. Bounded in
//! depth and in the number of reasons, as schemas come from callers.

use crate::core::verdict::pointer_token;
use serde_json::{Map, Value};
use std::collections::HashSet;

/// Most reasons listed; past it, how many more there were.
const MAX_REASONS: usize = 64;
/// Deepest subschema followed.
const MAX_DEPTH: usize = 64;
/// Longest value quoted in a reason, in characters.
const MAX_QUOTED: usize = 80;

/// Keywords that annotate and never change what a schema admits.
const ANNOTATIONS: [&str; 9] = [
    "title",
    "description",
    "examples",
    "default",
    "$comment",
    "deprecated",
    "readOnly",
    "writeOnly",
    "$anchor",
];
/// Keywords whose value is one subschema.
const SUBSCHEMA: [&str; 13] = [
    "additionalProperties",
    "items",
    "additionalItems",
    "contains",
    "propertyNames",
    "not",
    "if",
    "then",
    "else",
    "unevaluatedProperties",
    "unevaluatedItems",
    "contentSchema",
    "$recursiveRef",
];
/// Keywords whose value maps names to subschemas.
const NAMED: [&str; 5] = [
    "properties",
    "patternProperties",
    "$defs",
    "definitions",
    "dependentSchemas",
];
/// Keywords whose value lists subschemas.
const LISTS: [&str; 4] = ["anyOf", "oneOf", "allOf", "prefixItems"];

/// What one difference does to the values the whole schema admits, were it the only one: read
/// from the keyword (a type added widens, a bound raised narrows...) and where it sits (under
/// `not` the effect turns; under `if`, `oneOf`, a definition or an unknown keyword it cannot be
/// told).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    Widens,
    Narrows,
    Unclear,
}

impl Effect {
    /// What the contrary edit does (a member removed where one added widens, say).
    fn opposite(self) -> Effect {
        match self {
            Effect::Widens => Effect::Narrows,
            Effect::Narrows => Effect::Widens,
            Effect::Unclear => Effect::Unclear,
        }
    }
}

/// The differences between `old` and `new`, in document order of `new` (then what `old` alone
/// had).
#[cfg(test)]
pub fn between(old: &Value, new: &Value) -> Vec<String> {
    walk(old, new).into_iter().map(|(text, _)| text).collect()
}

/// The differences between `old` and `new` (in document order of `new`, then what `old` alone
/// had), each with its [`Effect`].
pub fn walk(old: &Value, new: &Value) -> Vec<(String, Effect)> {
    let mut walk = Walk {
        out: Vec::new(),
        more: 0,
        polarity: Polarity::Kept,
    };
    walk.schema("", old, new, 0);
    if walk.more > 0 {
        walk.out.push((
            format!("... and {} more differences", walk.more),
            Effect::Unclear,
        ));
    }
    walk.out
}

/// How an edit at the current place acts on the whole schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Polarity {
    /// As on the place (a property's schema, an `anyOf` member).
    Kept,
    /// The other way (under `not`).
    Turned,
    /// Cannot be told (under `if`, `oneOf`, a definition reached by reference).
    Lost,
}

struct Walk {
    out: Vec<(String, Effect)>,
    more: usize,
    polarity: Polarity,
}

impl Walk {
    fn say(&mut self, at: &str, effect: Effect, what: impl FnOnce() -> String) {
        if self.out.len() < MAX_REASONS {
            let at = if at.is_empty() { "(root)" } else { at };
            let effect = match self.polarity {
                Polarity::Kept => effect,
                Polarity::Turned => effect.opposite(),
                Polarity::Lost => Effect::Unclear,
            };
            self.out.push((format!("{at}: {}", what()), effect));
        } else {
            self.more += 1;
        }
    }

    fn schema(&mut self, at: &str, old: &Value, new: &Value, depth: usize) {
        if old == new {
            return;
        }
        if depth >= MAX_DEPTH {
            self.say(at, Effect::Unclear, || {
                "changed (nested too deeply to compare further)".to_owned()
            });
            return;
        }
        // A schema that is `true` (or `{}`) admits everything; `false`, nothing.
        let effect = match (everything(old), everything(new)) {
            (Some(was), Some(is)) if was == is => Effect::Unclear,
            (Some(true), _) | (_, Some(false)) => Effect::Narrows,
            (_, Some(true)) | (Some(false), _) => Effect::Widens,
            _ => Effect::Unclear,
        };
        match (old, new) {
            (Value::Object(old), Value::Object(new)) => self.object(at, old, new, depth),
            _ => self.say(at, effect, || format!("{} -> {}", quote(old), quote(new))),
        }
    }

    /// Walks a subschema under `keyword`, with the polarity that keyword gives it.
    fn under(&mut self, keyword: &str, at: &str, old: &Value, new: &Value, depth: usize) {
        let saved = self.polarity;
        self.polarity = match (keyword, saved) {
            ("not", Polarity::Kept) => Polarity::Turned,
            ("not", Polarity::Turned) => Polarity::Kept,
            ("if" | "oneOf" | "$defs" | "definitions" | "$recursiveRef" | "contentSchema", _) => {
                Polarity::Lost
            }
            (_, polarity) => polarity,
        };
        self.schema(at, old, new, depth);
        self.polarity = saved;
    }

    fn object(
        &mut self,
        at: &str,
        old: &Map<String, Value>,
        new: &Map<String, Value>,
        depth: usize,
    ) {
        let mut keywords: Vec<&String> = new.keys().collect();
        keywords.extend(old.keys().filter(|k| !new.contains_key(*k)));
        for keyword in keywords {
            let (before, after) = (old.get(keyword), new.get(keyword));
            if before == after || ANNOTATIONS.contains(&keyword.as_str()) {
                continue;
            }
            let here = format!("{at}/{}", pointer_token(keyword));
            match keyword.as_str() {
                "type" => self.types(&here, before, after),
                "required" => self.required(at, before, after),
                "enum" => self.values(&here, before, after),
                "properties" => {
                    // A property declared on an open object constrains it (narrows); on a
                    // closed one, admits it (widens).
                    let closed = |m: &Map<String, Value>| {
                        m.get("additionalProperties") == Some(&Value::Bool(false))
                    };
                    let open = |m: &Map<String, Value>| {
                        m.get("additionalProperties")
                            .is_none_or(|a| everything(a) == Some(true))
                    };
                    let added = match (closed(old) && closed(new), open(old) && open(new)) {
                        (true, _) => Effect::Widens,
                        (_, true) => Effect::Narrows,
                        _ => Effect::Unclear,
                    };
                    self.named(&here, keyword, before, after, depth, added)
                }
                k if NAMED.contains(&k) => {
                    self.named(&here, keyword, before, after, depth, Effect::Unclear)
                }
                k if LISTS.contains(&k) => self.list(&here, keyword, before, after, depth),
                k if SUBSCHEMA.contains(&k) => match (before, after) {
                    (Some(b), Some(a)) => self.under(keyword, &here, b, a, depth + 1),
                    _ => self.scalar(&here, keyword, before, after),
                },
                _ => self.scalar(&here, keyword, before, after),
            }
        }
    }

    /// `type`: the types added and removed (absent is every type).
    fn types(&mut self, at: &str, old: Option<&Value>, new: Option<&Value>) {
        let (Some(old), Some(new)) = (types(old), types(new)) else {
            match new {
                None => self.say(at, Effect::Widens, || "removed (any type now)".to_owned()),
                Some(new) => self.say(at, Effect::Narrows, || {
                    format!("now {} (was any type)", quote(new))
                }),
            }
            return;
        };
        for added in new.iter().filter(|t| !old.contains(t)) {
            self.say(at, Effect::Widens, || format!("added {}", quote(added)));
        }
        for removed in old.iter().filter(|t| !new.contains(t)) {
            self.say(at, Effect::Narrows, || {
                format!("removed {}", quote(removed))
            });
        }
    }

    /// `required`: each name added or removed, at its property.
    fn required(&mut self, at: &str, old: Option<&Value>, new: Option<&Value>) {
        let names = |v: Option<&Value>| -> Vec<String> {
            v.and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default()
        };
        let (old, new) = (names(old), names(new));
        let (old_set, new_set): (HashSet<&String>, HashSet<&String>) =
            (old.iter().collect(), new.iter().collect());
        for name in new.iter().filter(|n| !old_set.contains(n)) {
            self.say(
                &format!("{at}/properties/{}", pointer_token(name)),
                Effect::Narrows,
                || "added to required".to_owned(),
            );
        }
        for name in old.iter().filter(|n| !new_set.contains(n)) {
            self.say(
                &format!("{at}/properties/{}", pointer_token(name)),
                Effect::Widens,
                || "removed from required".to_owned(),
            );
        }
    }

    /// `enum`: each value added or removed.
    fn values(&mut self, at: &str, old: Option<&Value>, new: Option<&Value>) {
        match (old.and_then(Value::as_array), new.and_then(Value::as_array)) {
            (Some(old), Some(new)) => {
                let (old_set, new_set) = (texts(old), texts(new));
                for added in new.iter().filter(|v| !old_set.contains(&v.to_string())) {
                    self.say(at, Effect::Widens, || format!("added {}", quote(added)));
                }
                for removed in old.iter().filter(|v| !new_set.contains(&v.to_string())) {
                    self.say(at, Effect::Narrows, || {
                        format!("removed {}", quote(removed))
                    });
                }
            }
            _ => self.scalar(at, "enum", old, new),
        }
    }

    /// A map of named subschemas: each name added or removed, the common ones followed.
    /// `added`: what a name added does (its removal, the contrary).
    fn named(
        &mut self,
        at: &str,
        keyword: &str,
        old: Option<&Value>,
        new: Option<&Value>,
        depth: usize,
        added: Effect,
    ) {
        let empty = Map::new();
        let (old, new) = (
            old.and_then(Value::as_object).unwrap_or(&empty),
            new.and_then(Value::as_object).unwrap_or(&empty),
        );
        let removed = added.opposite();
        for (name, after) in new {
            let here = format!("{at}/{}", pointer_token(name));
            match old.get(name) {
                Some(before) => self.under(keyword, &here, before, after, depth + 1),
                None => self.say(&here, added, || "added".to_owned()),
            }
        }
        for name in old.keys().filter(|n| !new.contains_key(*n)) {
            self.say(&format!("{at}/{}", pointer_token(name)), removed, || {
                "removed".to_owned()
            });
        }
    }

    /// A list of subschemas. `prefixItems` by position; the combinators by member: equal members
    /// pair first, the rest in order; a member left over was added or removed.
    fn list(
        &mut self,
        at: &str,
        keyword: &str,
        old: Option<&Value>,
        new: Option<&Value>,
        depth: usize,
    ) {
        let none = Vec::new();
        let (old_present, new_present) = (old.is_some(), new.is_some());
        let (old, new) = (
            old.and_then(Value::as_array).unwrap_or(&none),
            new.and_then(Value::as_array).unwrap_or(&none),
        );
        if keyword == "prefixItems" {
            for (i, after) in new.iter().enumerate() {
                match old.get(i) {
                    Some(before) => {
                        self.under(keyword, &format!("{at}/{i}"), before, after, depth + 1)
                    }
                    None => self.say(&format!("{at}/{i}"), Effect::Unclear, || "added".to_owned()),
                }
            }
            for i in new.len()..old.len() {
                self.say(&format!("{at}/{i}"), Effect::Unclear, || {
                    "removed".to_owned()
                });
            }
            return;
        }
        // A member added to `anyOf` admits more; to `allOf`, less; to `oneOf`, cannot be told. A
        // combinator that was not there at all is a new constraint (and one gone, a lifted one).
        let (was, is) = (old_present, new_present);
        let added = match keyword {
            _ if !was => Effect::Narrows,
            _ if !is => Effect::Widens,
            "anyOf" => Effect::Widens,
            "allOf" => Effect::Narrows,
            _ => Effect::Unclear,
        };
        let removed = added.opposite();
        let (old_set, new_set) = (texts(old), texts(new));
        let mut unmatched_old: Vec<usize> = (0..old.len())
            .filter(|&i| !new_set.contains(&old[i].to_string()))
            .collect();
        let unmatched_new: Vec<usize> = (0..new.len())
            .filter(|&j| !old_set.contains(&new[j].to_string()))
            .collect();
        let mut left_old = unmatched_old.drain(..);
        for j in unmatched_new {
            match left_old.next() {
                Some(i) => self.under(keyword, &format!("{at}/{j}"), &old[i], &new[j], depth + 1),
                None => self.say(&format!("{at}/{j}"), added, || "member added".to_owned()),
            }
        }
        for i in left_old {
            self.say(at, removed, || {
                format!("member {i} of the old schema removed")
            });
        }
    }

    /// Any other keyword: added, removed or changed, with its values.
    fn scalar(&mut self, at: &str, keyword: &str, old: Option<&Value>, new: Option<&Value>) {
        let note = if keyword == "pattern" {
            " (only identical patterns compare)"
        } else {
            ""
        };
        let (added, changed) = constraint(keyword, old, new);
        let removed = match added {
            Effect::Narrows => Effect::Widens,
            _ => Effect::Unclear,
        };
        match (old, new) {
            (None, Some(new)) => self.say(at, added, || format!("added {}{note}", quote(new))),
            (Some(old), None) => self.say(at, removed, || {
                format!("removed (was {}){note}", quote(old))
            }),
            (Some(old), Some(new)) => {
                self.say(at, changed, || {
                    format!("{} -> {}{note}", quote(old), quote(new))
                });
            }
            (None, None) => {}
        }
    }
}

/// What a keyword that is not walked does: added (`Narrows` for a constraint, `Unclear` for what
/// is not one), and changed from `old` to `new` (a bound raised or lowered, `uniqueItems` turned).
fn constraint(keyword: &str, old: Option<&Value>, new: Option<&Value>) -> (Effect, Effect) {
    let number = |v: Option<&Value>| v.and_then(Value::as_f64);
    let (lower, upper) = (
        matches!(
            keyword,
            "minimum"
                | "exclusiveMinimum"
                | "minLength"
                | "minItems"
                | "minProperties"
                | "minContains"
        ),
        matches!(
            keyword,
            "maximum"
                | "exclusiveMaximum"
                | "maxLength"
                | "maxItems"
                | "maxProperties"
                | "maxContains"
        ),
    );
    let changed = match (number(old), number(new)) {
        (Some(was), Some(is)) if lower => {
            if is > was {
                Effect::Narrows
            } else {
                Effect::Widens
            }
        }
        (Some(was), Some(is)) if upper => {
            if is < was {
                Effect::Narrows
            } else {
                Effect::Widens
            }
        }
        _ => match (keyword, new) {
            ("uniqueItems", Some(Value::Bool(true))) => Effect::Narrows,
            ("uniqueItems", Some(Value::Bool(false))) => Effect::Widens,
            (
                "additionalProperties"
                | "items"
                | "additionalItems"
                | "unevaluatedProperties"
                | "unevaluatedItems",
                Some(new),
            ) => match everything(new) {
                Some(true) => Effect::Widens,
                Some(false) => Effect::Narrows,
                None => Effect::Unclear,
            },
            _ => Effect::Unclear,
        },
    };
    let is_constraint = lower
        || upper
        || matches!(
            keyword,
            "multipleOf"
                | "pattern"
                | "format"
                | "const"
                | "enum"
                | "uniqueItems"
                | "required"
                | "dependentRequired"
                | "additionalProperties"
                | "items"
                | "additionalItems"
                | "contains"
                | "propertyNames"
                | "not"
                | "unevaluatedProperties"
                | "unevaluatedItems"
        );
    let added = match (keyword, new) {
        // A schema that admits everything, added, constrains nothing.
        (_, Some(value)) if SUBSCHEMA.contains(&keyword) && everything(value) == Some(true) => {
            Effect::Unclear
        }
        ("uniqueItems", Some(Value::Bool(false))) => Effect::Unclear,
        _ if is_constraint => Effect::Narrows,
        _ => Effect::Unclear,
    };
    (added, changed)
}

/// Whether a schema admits every value (`true`, `{}`) or none (`false`); `None` otherwise.
fn everything(schema: &Value) -> Option<bool> {
    match schema {
        Value::Bool(all) => Some(*all),
        Value::Object(map) if map.keys().all(|k| ANNOTATIONS.contains(&k.as_str())) => Some(true),
        _ => None,
    }
}

/// Each value as JSON text (serde_json writes an object's keys in one order), for membership
/// in linear time.
fn texts(values: &[Value]) -> HashSet<String> {
    values.iter().map(Value::to_string).collect()
}

/// The types `type` names; `None` when absent (every type).
fn types(value: Option<&Value>) -> Option<Vec<Value>> {
    match value? {
        Value::Array(types) => Some(types.clone()),
        one => Some(vec![one.clone()]),
    }
}

/// `value` as JSON text, at most about [`MAX_QUOTED`] characters: past that, whole members (and
/// items) are left out, marked `...`, never a token cut in two; a long string keeps its start.
fn quote(value: &Value) -> String {
    quote_within(value, MAX_QUOTED)
}

/// `value` as JSON text within about `max` characters (see [`quote`]).
pub(super) fn quote_within(value: &Value, max: usize) -> String {
    let text = value.to_string();
    if text.chars().count() <= max {
        return text;
    }
    let mut out = String::new();
    elide(value, text, max, &mut out);
    out
}

/// Writes `value` (whose JSON text is `whole`) to `out` within about `budget` characters (see
/// [`quote`]).
fn elide(value: &Value, whole: String, budget: usize, out: &mut String) {
    if whole.chars().count() <= budget {
        out.push_str(&whole);
        return;
    }
    let start = out.len();
    let parts: Vec<(Option<String>, &Value)> = match value {
        Value::Object(map) => map
            .iter()
            .map(|(k, v)| (Some(Value::String(k.clone()).to_string()), v))
            .collect(),
        Value::Array(items) => items.iter().map(|v| (None, v)).collect(),
        Value::String(text) => {
            let kept: String = text.chars().take(budget.saturating_sub(5)).collect();
            out.push_str(&Value::String(format!("{kept}...")).to_string());
            return;
        }
        _ => {
            out.push_str(&whole);
            return;
        }
    };
    let (open, close) = match value {
        Value::Object(_) => ('{', '}'),
        _ => ('[', ']'),
    };
    out.push(open);
    for (i, (key, item)) in parts.iter().enumerate() {
        let used = out[start..].chars().count();
        let prefix = key.as_ref().map_or(0, |k| k.chars().count() + 1) + usize::from(i > 0);
        let room = budget.saturating_sub(used + prefix + 5);
        let item_text = item.to_string();
        let fits = item_text.chars().count() <= room;
        // The first member is shown in part rather than not at all; later ones whole or not.
        if !fits && (i > 0 || room < 8) {
            out.push_str(if i > 0 { ",..." } else { "..." });
            out.push(close);
            return;
        }
        if i > 0 {
            out.push(',');
        }
        if let Some(key) = key {
            out.push_str(key);
            out.push(':');
        }
        match fits {
            true => out.push_str(&item_text),
            false => elide(item, item_text, room, out),
        }
    }
    out.push(close);
}
