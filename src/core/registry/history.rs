//! Contracts over time: what a registration did to each tool (added, removed, or changed, with
//! the class of each changed part: see [`crate::core::change`]), and each tool's history, the
//! versions it was registered with, newest first. Bounded: [`MAX_VERSIONS`] per tool, and tools
//! with a history at most twice the registry's tool limit (the least recently changed are
//! forgotten past it). With a shared registry, Redis holds the histories instead (see
//! [`super::redis`]).

use super::{RegisteredSchema, ToolSchemas};
use crate::core::change::{
    annotations_change, description_change, schema_change, Change, Class, Part, Texts,
};
use crate::core::domain::SchemaHash;
use crate::core::policy::CompileOptions;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::VecDeque;
use std::sync::Arc;

/// Versions kept per tool.
pub const MAX_VERSIONS: usize = 20;
/// Longest schema text whose changes are analysed (classes and reasons); a longer one's change
/// is `unknown`.
const MAX_ANALYSED_BYTES: usize = 256 * 1024;

/// What a registration did to a tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChangeKind {
    Added,
    Removed,
    Changed,
}

/// One tool's change in a registration: added (compatible), removed (breaking: its callers get
/// `unknown_tool`), or changed, each changed part with its class and reasons.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolChange {
    pub tool: String,
    pub change: ChangeKind,
    /// The class of the change as a whole: its worst part's.
    pub class: Class,
    /// The parts whose text changed (for a tool changed), each with its class: `identical` for
    /// one rewritten to the same canonical form.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub schemas: Vec<Change>,
    /// For a tool added or removed in the same registration as another with the same schemas:
    /// the other's name (a likely rename; the removal is still breaking to the old name's callers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub likely_rename: Option<String>,
}

impl ToolChange {
    /// `tool` removed: breaking, as its callers now get `unknown_tool`.
    pub fn removed(tool: &str) -> Self {
        ToolChange {
            tool: tool.to_owned(),
            change: ChangeKind::Removed,
            class: Class::Breaking,
            schemas: Vec::new(),
            likely_rename: None,
        }
    }
}

/// One version of a tool's contract, as registered, and how it differs from the one before.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Version {
    /// RFC 3339 (UTC, milliseconds).
    pub registered_at: String,
    /// The token that registered it; `proxy` for a contract learned from `tools/list`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub registered_by: Option<String>,
    pub protocol_version: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_schema_hash: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema_hash: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub execution: Option<Value>,
    /// Its `title` and `description`, as it declared them (the texts inside its schemas are in
    /// the schemas' texts, by hash).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Against the version before it.
    pub change: ChangeKind,
    pub class: Class,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub schemas: Vec<Change>,
}

impl Version {
    /// The version `tool` is, after `change` (`tool` `None`: removed, as of `at`).
    pub fn of(
        change: &ToolChange,
        tool: Option<&ToolSchemas>,
        removed: &super::Provenance,
    ) -> Self {
        let provenance = tool.map_or(removed, |t| &t.provenance);
        let json = |text: &Option<Arc<str>>| {
            text.as_deref()
                .and_then(|t| serde_json::from_str::<Value>(t).ok())
        };
        Version {
            registered_at: provenance.at_rfc3339(),
            registered_by: provenance.by.as_deref().map(str::to_owned),
            protocol_version: tool
                .map(|t| t.protocol.as_str().to_owned())
                .unwrap_or_default(),
            input_schema_hash: tool
                .and_then(|t| t.input.as_ref())
                .map(|s| s.hash.to_string()),
            output_schema_hash: tool
                .and_then(|t| t.output.as_ref())
                .map(|s| s.hash.to_string()),
            annotations: tool.and_then(|t| json(&t.annotations)),
            execution: tool.and_then(|t| json(&t.execution)),
            title: tool.and_then(|t| t.title.as_deref()).map(str::to_owned),
            description: tool
                .and_then(|t| t.description.as_deref())
                .map(str::to_owned),
            change: change.change,
            class: change.class,
            schemas: change.schemas.clone(),
        }
    }
}

/// A change a pin refuses: the change, and the hash that accepts it.
#[derive(Debug, Clone)]
pub struct Refusal {
    pub change: ToolChange,
    /// The tool's contract hash after the change ([`contract_hash`]).
    pub accept: String,
}

impl Refusal {
    /// The refusal in one line: the tool, its change and class, each part's reasons, and the
    /// hash that accepts it.
    pub fn describe(&self) -> String {
        let change = &self.change;
        let kind = match change.change {
            ChangeKind::Added => "added",
            ChangeKind::Removed => "removed",
            ChangeKind::Changed => "changed",
        };
        let mut text = format!("tool {:?} {kind} ({}", change.tool, change.class.as_str());
        // A part rewritten with the same meaning says nothing here.
        for part in change
            .schemas
            .iter()
            .filter(|p| p.class != Class::Identical)
        {
            text.push_str(&format!(
                "; {} {}: {}",
                part.schema.as_str(),
                part.class.as_str(),
                part.reasons.join(", ")
            ));
        }
        text.push_str(&format!("), accept it with hash {}", self.accept));
        text
    }
}

/// Whether a pin stops `change`: a tool added or removed; a schema whose canonical form
/// changed; annotations whose safety claims weakened (or could not be compared); a text the
/// model reads (`review`: a person accepts it). Other annotation edits pass, as they would not
/// be alerted.
pub fn pin_applies(change: &ToolChange) -> bool {
    match change.change {
        ChangeKind::Added | ChangeKind::Removed => true,
        ChangeKind::Changed => change.schemas.iter().any(|part| match part.schema {
            Part::Annotations => matches!(part.class, Class::Breaking | Class::Unknown),
            Part::Output | Part::Input | Part::Description => part.class != Class::Identical,
        }),
    }
}

/// A tool's contract hash: its schemas' hashes, annotations and execution, and its title and
/// description where it declares them, together (`None`: the tool removed). What an accept
/// names.
pub fn contract_hash(tool: Option<&ToolSchemas>) -> String {
    let mut hasher = blake3::Hasher::new();
    match tool {
        None => {
            hasher.update(b"removed");
        }
        Some(tool) => {
            let hash = |s: &Option<RegisteredSchema>| s.as_ref().map(|s| s.hash.to_string());
            for part in [
                hash(&tool.input),
                hash(&tool.output),
                tool.annotations.as_deref().map(str::to_owned),
                tool.execution.as_deref().map(str::to_owned),
            ] {
                hasher.update(part.as_deref().unwrap_or("-").as_bytes());
                hasher.update(b"\n");
            }
            // Only when declared: a tool without texts keeps the hash it had before texts
            // counted. Length-prefixed, so no text can pass for another's.
            for (label, text) in [("title", &tool.title), ("description", &tool.description)] {
                if let Some(text) = text {
                    hasher.update(format!("{label} {}\n", text.len()).as_bytes());
                    hasher.update(text.as_bytes());
                }
            }
        }
    }
    hasher.finalize().to_hex().to_string()
}

/// Whether `new` is `old` again: the same schemas (by hash), annotations, execution, title and
/// description.
pub(super) fn unchanged(old: &ToolSchemas, new: &ToolSchemas) -> bool {
    let hash = |s: &Option<RegisteredSchema>| s.as_ref().map(|s| s.hash);
    hash(&old.input) == hash(&new.input)
        && hash(&old.output) == hash(&new.output)
        && old.annotations == new.annotations
        && old.execution == new.execution
        && old.title == new.title
        && old.description == new.description
}

/// What registering `new` does to the tool in force (`old`), judged under `options`; `None`
/// when nothing of it changes. A schema change is analysed only when both schemas are `usable`
/// (they compile under the cost bounds): otherwise it is `unknown`.
pub fn compare(
    old: Option<&ToolSchemas>,
    new: Option<&ToolSchemas>,
    options: CompileOptions,
    usable: &dyn Fn(&RegisteredSchema) -> bool,
) -> Option<ToolChange> {
    let (old, new) = match (old, new) {
        (None, None) => return None,
        (None, Some(new)) => {
            return Some(ToolChange {
                tool: new.name.as_str().to_owned(),
                change: ChangeKind::Added,
                class: Class::Compatible,
                schemas: Vec::new(),
                likely_rename: None,
            })
        }
        (Some(old), None) => return Some(ToolChange::removed(old.name.as_str())),
        (Some(old), Some(new)) => (old, new),
    };
    if unchanged(old, new) {
        return None;
    }
    let hash = |s: &Option<RegisteredSchema>| s.as_ref().map(|s| s.hash);
    let same_input = hash(&old.input) == hash(&new.input);
    let same_output = hash(&old.output) == hash(&new.output);
    let (was, is) = (
        Read::of(old, (same_input, same_output)),
        Read::of(new, (same_input, same_output)),
    );
    let part = |schemas: [&Option<RegisteredSchema>; 2], read: [Option<&Value>; 2], part: Part| {
        let schemas = || schemas.into_iter().flatten();
        let why = if !schemas().all(usable) {
            "a schema that cannot be used is not analysed; the registration's errors say why"
        } else if schemas().any(|s| s.text.len() > MAX_ANALYSED_BYTES) {
            "a schema past 256 KiB is not analysed"
        } else {
            return schema_change(read[0], read[1], part, options);
        };
        Change::uniform(part, Class::Unknown, vec![format!("(undecided: {why})")])
    };
    let mut schemas = Vec::new();
    if !same_output {
        let read = [was.output.as_ref(), is.output.as_ref()];
        schemas.push(part([&old.output, &new.output], read, Part::Output));
    }
    if !same_input {
        let read = [was.input.as_ref(), is.input.as_ref()];
        schemas.push(part([&old.input, &new.input], read, Part::Input));
    }
    // Annotations whose only edit is their title: that is the `description` part's.
    if old.execution != new.execution || untitled(&was) != untitled(&is) {
        schemas.push(behaviour_change(old, new, (&was, &is)));
    }
    schemas.extend(texts_change((old, &was), (new, &is)));
    let class = Class::worst(schemas.iter().map(|c| c.class));
    Some(ToolChange {
        tool: new.name.as_str().to_owned(),
        change: ChangeKind::Changed,
        class,
        schemas,
        likely_rename: None,
    })
}

/// One version of a tool as JSON, read once for a comparison: its schemas where they changed
/// (and are within the analysed size), and its annotations.
struct Read {
    input: Option<Value>,
    output: Option<Value>,
    annotations: Option<Value>,
}

impl Read {
    fn of(tool: &ToolSchemas, (same_input, same_output): (bool, bool)) -> Self {
        let read = |text: &[u8]| serde_json::from_slice::<Value>(text).unwrap_or(Value::Null);
        let schema = |s: &Option<RegisteredSchema>, same: bool| {
            s.as_ref()
                .filter(|s| !same && s.text.len() <= MAX_ANALYSED_BYTES)
                .map(|s| read(&s.text))
        };
        Read {
            input: schema(&tool.input, same_input),
            output: schema(&tool.output, same_output),
            annotations: tool.annotations.as_deref().map(|t| read(t.as_bytes())),
        }
    }
}

/// A tool's annotations without their `title` (`None` for none, or JSON that is no object).
fn untitled(read: &Read) -> Option<serde_json::Map<String, Value>> {
    let mut map = read.annotations.as_ref()?.as_object()?.clone();
    map.remove("title");
    Some(map)
}

/// A tool's input and output schemas, by hash.
pub type SchemaPair = (Option<SchemaHash>, Option<SchemaHash>);

/// Marks each tool removed whose schemas (input and output, by hash) are those of a tool added in
/// the same registration as a likely rename of it, one to one, in the order they come.
pub fn mark_renames(
    changes: &mut [ToolChange],
    old: &dyn Fn(&str) -> Option<SchemaPair>,
    new: &dyn Fn(&str) -> Option<SchemaPair>,
) {
    let mut taken = vec![false; changes.len()];
    for i in 0..changes.len() {
        if changes[i].change != ChangeKind::Removed {
            continue;
        }
        let Some(schemas) = old(&changes[i].tool) else {
            continue;
        };
        let added = (0..changes.len()).find(|&j| {
            !taken[j]
                && changes[j].change == ChangeKind::Added
                && new(&changes[j].tool) == Some(schemas)
        });
        if let Some(j) = added {
            taken[j] = true;
            changes[i].likely_rename = Some(changes[j].tool.clone());
            changes[j].likely_rename = Some(changes[i].tool.clone());
        }
    }
}

/// The change of the texts a tool shows the model and people (`review`), if any. The texts inside
/// a schema are read only where the schema changed and is within the analysed size.
fn texts_change(
    (old, was): (&ToolSchemas, &Read),
    (new, is): (&ToolSchemas, &Read),
) -> Option<Change> {
    description_change(
        &Texts {
            title: old.title.as_deref(),
            description: old.description.as_deref(),
            annotations: was.annotations.as_ref(),
            input: was.input.as_ref(),
            output: was.output.as_ref(),
        },
        &Texts {
            title: new.title.as_deref(),
            description: new.description.as_deref(),
            annotations: is.annotations.as_ref(),
            input: is.input.as_ref(),
            output: is.output.as_ref(),
        },
    )
}

/// The change of a tool's annotations (classed) and of how it runs (2025-11-25's
/// `execution.taskSupport`: recorded, not alerted).
fn behaviour_change(old: &ToolSchemas, new: &ToolSchemas, (was, is): (&Read, &Read)) -> Change {
    let text = |t: &Option<Arc<str>>| {
        t.as_deref()
            .and_then(|t| serde_json::from_str::<Value>(t).ok())
    };
    let mut change = annotations_change(was.annotations.as_ref(), is.annotations.as_ref());
    let (before, after) = (text(&old.execution), text(&new.execution));
    if before != after {
        let show = |v: &Option<Value>| {
            v.as_ref()
                .map_or_else(|| "absent".to_owned(), Value::to_string)
        };
        change.push(
            format!("/execution: {} -> {}", show(&before), show(&after)),
            Class::Compatible,
        );
        if change.class == Class::Identical {
            change.class = Class::Compatible;
        }
    }
    change
}

/// Each tool's versions, newest first, in this process.
#[derive(Debug)]
pub struct History {
    tools: moka::sync::Cache<(String, String), Arc<VecDeque<Version>>>,
    /// Held while a version is added, so two at once cannot lose one.
    writing: std::sync::Mutex<()>,
}

impl History {
    /// Histories for at most `max_tools` tools.
    pub fn new(max_tools: u64) -> Self {
        Self {
            tools: moka::sync::Cache::builder().max_capacity(max_tools).build(),
            writing: std::sync::Mutex::new(()),
        }
    }

    /// Adds `version` to `tool`'s history, keeping the newest [`MAX_VERSIONS`].
    pub fn record(&self, server: &str, tool: &str, version: Version) {
        let key = (server.to_owned(), tool.to_owned());
        let _writing = self.writing.lock().unwrap_or_else(|e| e.into_inner());
        let mut versions = self
            .tools
            .get(&key)
            .map(|v| v.as_ref().clone())
            .unwrap_or_default();
        versions.push_front(version);
        versions.truncate(MAX_VERSIONS);
        self.tools.insert(key, Arc::new(versions));
    }

    /// `tool`'s versions, newest first (empty: no history).
    pub fn versions(&self, server: &str, tool: &str) -> Vec<Version> {
        self.tools
            .get(&(server.to_owned(), tool.to_owned()))
            .map(|v| v.iter().cloned().collect())
            .unwrap_or_default()
    }
}
