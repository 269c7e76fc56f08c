//! Changes to a tool's MCP annotations. Hints are claims a client may act on (a host that skips
//! confirmation for a read-only tool), so a change that weakens a safety claim is `breaking`:
//! `destructiveHint` true to false or absent, `readOnlyHint` absent or false to true,
//! `openWorldHint` true to false. Any other edit (a title, `idempotentHint`, a hint made more
//! cautious) is recorded as `compatible`, not alerted: pinning tools that hashed annotations
//! raised a "changed" on every reconnect.

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
    let mut weakened = false;
    let mut keys: Vec<&String> = new.keys().collect();
    keys.extend(old.keys().filter(|k| !new.contains_key(*k)));
    for key in keys {
        let (before, after) = (old.get(key), new.get(key));
        if before == after {
            continue;
        }
        let is_true = |v: Option<&Value>| v == Some(&Value::Bool(true));
        let weakens = match key.as_str() {
            "destructiveHint" => is_true(before) && !is_true(after),
            "readOnlyHint" => !is_true(before) && is_true(after),
            "openWorldHint" => is_true(before) && after == Some(&Value::Bool(false)),
            _ => false,
        };
        weakened |= weakens;
        let show = |v: Option<&Value>| v.map_or_else(|| "absent".to_owned(), Value::to_string);
        reasons.push(format!(
            "/{key}: {} -> {}{}",
            show(before),
            show(after),
            if weakens {
                " (a safety claim weakened)"
            } else {
                ""
            }
        ));
    }
    let class = if reasons.is_empty() {
        Class::Identical
    } else if weakened {
        Class::Breaking
    } else {
        Class::Compatible
    };
    Change {
        schema: Part::Annotations,
        class,
        reasons,
    }
}
