//! Changes to a tool's MCP annotations. Hints are claims a client may act on (a host that skips
//! confirmation for a read-only tool), and each is read with its default from MCP's
//! `ToolAnnotations` (the same in every revision since 2025-03-26): `readOnlyHint` false,
//! `destructiveHint` true, `idempotentHint` false, `openWorldHint` true. A change that makes a tool
//! claim more safety (not read-only to read-only, destructive to not, not idempotent to
//! idempotent, open world to closed) is `breaking`: a host may stop asking before it runs the tool,
//! or retry it. One that claims less is `compatible`. Spelling out a default, or dropping one, is
//! `identical`. Any other edit (a value that is not a boolean, a member MCP does not define) is
//! recorded as `compatible`, not alerted: pinning tools that hashed annotations raised a "changed"
//! on every reconnect. A `title` is text, the `description` part's (see [`super::description`]).

use super::{Change, Class, Part};
use serde_json::{Map, Value};

/// Compares the annotations in force (`old`) with the new ones; `None` for either is no
/// annotations.
pub fn annotations_change(old: Option<&Value>, new: Option<&Value>) -> Change {
    let empty = Map::new();
    let (old, new) = (
        old.and_then(Value::as_object).unwrap_or(&empty),
        new.and_then(Value::as_object).unwrap_or(&empty),
    );
    let mut reasons = Vec::new();
    let mut classes = Vec::new();
    let mut claims_more = false;
    let mut keys: Vec<&String> = new.keys().collect();
    keys.extend(old.keys().filter(|k| !new.contains_key(*k)));
    for key in keys {
        let (before, after) = (old.get(key), new.get(key));
        // A title is text for people: the `description` part's.
        if before == after || key == "title" {
            continue;
        }
        let show = |v: Option<&Value>| v.map_or_else(|| "absent".to_owned(), Value::to_string);
        let Some(hint) = Hint::of(key) else {
            reasons.push(format!("/{key}: {} -> {}", show(before), show(after)));
            classes.push(Class::Compatible);
            continue;
        };
        let (was, is) = (hint.claim(before), hint.claim(after));
        if was == is {
            // A default spelled out or dropped: the same claim.
            continue;
        }
        let more_safety =
            matches!((was, is), (Some(was), Some(is)) if is == hint.safe && was != hint.safe);
        claims_more |= more_safety;
        classes.push(match more_safety {
            true => Class::Breaking,
            false => Class::Compatible,
        });
        let read = |v: Option<&Value>, claim: Option<bool>| match (v, claim) {
            (None, Some(default)) => format!("absent ({default})"),
            _ => show(v),
        };
        reasons.push(format!(
            "/{key}: {} -> {}{}",
            read(before, was),
            read(after, is),
            if more_safety {
                " (the tool claims more safety: a host may stop asking before it runs it)"
            } else {
                ""
            }
        ));
    }
    let class = if reasons.is_empty() {
        Class::Identical
    } else if claims_more {
        Class::Breaking
    } else {
        Class::Compatible
    };
    Change {
        schema: Part::Annotations,
        class,
        reasons,
        reason_classes: classes,
    }
}

/// One of MCP's tool hints: its default, and the value that claims safety.
struct Hint {
    default: bool,
    safe: bool,
}

impl Hint {
    fn of(key: &str) -> Option<Hint> {
        let (default, safe) = match key {
            "readOnlyHint" => (false, true),
            "destructiveHint" => (true, false),
            "idempotentHint" => (false, true),
            "openWorldHint" => (true, false),
            _ => return None,
        };
        Some(Hint { default, safe })
    }

    /// What `value` claims: its boolean, the default when absent; `None` for a value that is not
    /// a boolean (no claim a client reads).
    fn claim(&self, value: Option<&Value>) -> Option<bool> {
        match value {
            None => Some(self.default),
            Some(value) => value.as_bool(),
        }
    }
}
