//! Contract changes: how a tool's new contract compares with the one in force, from the
//! consumer's side. Each part of a tool (its output schema, its input schema, its annotations,
//! its texts) gets a [`Class`] and the reasons for it, as JSON pointers and keywords.
//!
//! The class of a schema change is decided on canonical forms, by the validator's own
//! experimental `canonical` module (jsonschema 0.61): two schemas that reduce to one canonical
//! form are `identical`; otherwise containment decides. For an output schema the change is
//! `compatible` when the old schema covers the new one (every result the new one admits, the old
//! one admitted: the tool now promises at least as much) and `breaking` when a result the new one
//! admits was refused by the old one; for an input schema the direction is reversed (arguments
//! valid before must stay valid). Containment is asked first (`covers`, which proves `yes`
//! well); where it is undecided, the difference (`subtract`: the values one side admits and the
//! other refuses) is asked whether any value is in it. Either answer is proved, not guessed: when
//! the module cannot decide (a construct it does not model, two different patterns, a reference it cannot follow),
//! the class is `unknown`. It is used rather than a comparison of our own because it answers the
//! question exactly (as a set of values) where it answers at all, and says so where it does not;
//! a keyword-by-keyword comparison would have to re-derive the validator's semantics (`$ref`,
//! combinators, formats, the draft) and would guess where they interact.
//!
//! Where neither answers, a counterexample still proves a change breaking: a value built from
//! the two schemas' keywords that the new side admits and the old one refuses ([`witness`]); it
//! is shown among the reasons (for a breaking change found either way).
//!
//! The reasons come from a walk of the two schema documents side by side ([`reasons`]), keyword
//! by keyword, in the terms Confluent's `SchemaDiff` uses: they say what changed, the class says
//! what it means.

mod annotations;
mod description;
mod dialect;
mod reasons;
mod witness;

pub use annotations::annotations_change;
pub use description::{description_change, Texts};

use crate::core::policy::{CompileOptions, RegexEngine};
use jsonschema::canonical::{CanonicalSchema, Containment, Satisfiability};
use jsonschema::PatternOptions;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// What a change means to the consumers of a contract.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Class {
    /// The same canonical schema: nothing a consumer can see changed.
    Identical,
    /// Consumers that relied on the old contract are served: an output schema admits no result
    /// the old one refused; an input schema refuses no arguments the old one admitted.
    Compatible,
    /// Some consumer may be served what it never agreed to: an output schema admits results the
    /// old one refused; an input schema refuses arguments the old one admitted. For annotations:
    /// a safety claim weakened.
    Breaking,
    /// The analysis could not decide (never guessed).
    Unknown,
    /// Text the model or a person reads changed (a description, a title): no machine can judge
    /// what it means; a person should read it.
    Review,
}

impl Class {
    /// The class's name, as the API and the metrics give it.
    pub fn as_str(self) -> &'static str {
        match self {
            Class::Identical => "identical",
            Class::Compatible => "compatible",
            Class::Breaking => "breaking",
            Class::Unknown => "unknown",
            Class::Review => "review",
        }
    }

    /// The class of a change made of parts of these classes: the one that asks most of the
    /// consumer (breaking, then unknown, then review, then compatible, then identical).
    pub fn worst(classes: impl IntoIterator<Item = Class>) -> Class {
        let rank = |class: Class| match class {
            Class::Identical => 0,
            Class::Compatible => 1,
            Class::Review => 2,
            Class::Unknown => 3,
            Class::Breaking => 4,
        };
        classes
            .into_iter()
            .max_by_key(|c| rank(*c))
            .unwrap_or(Class::Identical)
    }
}

/// The part of a tool a change is to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Part {
    Output,
    Input,
    Annotations,
    /// The texts: the tool's `title` and `description`, its annotations' `title`, and the
    /// `description`s inside its schemas.
    Description,
}

impl Part {
    /// The part's name, as the API and the metrics (`schema` label) give it.
    pub fn as_str(self) -> &'static str {
        match self {
            Part::Output => "output",
            Part::Input => "input",
            Part::Annotations => "annotations",
            Part::Description => "description",
        }
    }
}

/// One part's change: its class, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Change {
    pub schema: Part,
    pub class: Class,
    /// Each difference found, as `POINTER: what` (`/properties/email: removed from required`).
    pub reasons: Vec<String>,
}

/// Compares the schema in force (`old`) with the new one (`new`) for `part` (input or output),
/// under the options checks compile it with (whether `format` asserts, the regex engine). A
/// schema that is absent admits everything (`true`).
pub fn schema_change(
    old: Option<&Value>,
    new: Option<&Value>,
    part: Part,
    options: CompileOptions,
) -> Change {
    let anything = Value::Bool(true);
    let (old, new) = (old.unwrap_or(&anything), new.unwrap_or(&anything));
    // Who must still be served: an output's consumer reads what the new schema admits; an
    // input's callers send what the old one admitted.
    let sides = |old, new| match part {
        Part::Output | Part::Annotations | Part::Description => (old, new),
        Part::Input => (new, old),
    };
    let both = match dialect::in_one_dialect(old, new) {
        Ok(both) => both,
        Err(why) => {
            // Not in one dialect: each schema is still judged under its own, so a value one
            // admits and the other refuses still proves the change breaking.
            let mut reasons = reasons::between(old, new);
            let (outer, inner) = sides(old, new);
            let class = match witness::find(outer, inner, options).ok().flatten() {
                Some(value) => {
                    reasons.push(example_reason(part, &value));
                    Class::Breaking
                }
                None => Class::Unknown,
            };
            reasons.push(format!("(undecided in one dialect: {why})"));
            return Change {
                schema: part,
                class,
                reasons,
            };
        }
    };
    let (old, new) = (both.old.as_ref(), both.new.as_ref());
    let mut reasons = reasons::between(old, new);
    let (outer, inner) = sides(old, new);
    let class = if old == new {
        Class::Identical
    } else {
        let decided = classify(outer, inner, options);
        // A value one side admits and the other refuses proves the change breaking, and shows how.
        let example = match decided {
            Ok(Class::Identical | Class::Compatible) => None,
            _ => witness::find(outer, inner, options).ok().flatten(),
        };
        match (decided, example) {
            (_, Some(value)) => {
                reasons.push(example_reason(part, &value));
                Class::Breaking
            }
            (Ok(class), None) => class,
            (Err(why), None) => {
                reasons.push(format!("(undecided: {why})"));
                Class::Unknown
            }
        }
    };
    if class == Class::Identical {
        // Spelling and annotations only (key order, `description`, `title`, the dialect):
        // nothing to report.
        reasons.clear();
    } else {
        // How the two were read in one dialect.
        reasons.extend(
            both.notes
                .iter()
                .map(|note| format!("(compared in 2020-12: {note})")),
        );
    }
    Change {
        schema: part,
        class,
        reasons,
    }
}

/// The reason that shows a breaking change by a value.
fn example_reason(part: Part, value: &Value) -> String {
    let text = reasons::quote_within(value, 120);
    match part {
        Part::Input => format!("(for example, arguments {text}: valid before, refused now)"),
        Part::Output | Part::Annotations | Part::Description => {
            format!("(for example, a result {text}: refused before, admitted now)")
        }
    }
}

/// The class of a change between two different schema documents, from the side that must
/// still be served (`outer`: every value `inner` admits must be admitted by it), or why it is
/// undecided.
fn classify(outer: &Value, inner: &Value, options: CompileOptions) -> Result<Class, String> {
    let outer = canonical(outer, options)?;
    let inner = canonical(inner, options)?;
    if outer.to_json_schema() == inner.to_json_schema() {
        return Ok(Class::Identical);
    }
    let (outer, inner) = (&outer, &inner);
    match outer.covers(inner) {
        Ok(Containment::Yes) => return Ok(Class::Compatible),
        Ok(Containment::No) => return Ok(Class::Breaking),
        Ok(Containment::Unknown) | Err(_) => {}
    }
    // Undecided by containment: the values the inner side admits and the outer one refuses, as
    // a schema. Empty proves the change compatible; a value in it proves it breaking.
    let difference = inner
        .subtract(outer)
        .map_err(|e| format!("the difference cannot be expressed ({e})"))?;
    match difference.satisfiability() {
        Satisfiability::No => Ok(Class::Compatible),
        Satisfiability::Yes => Ok(Class::Breaking),
        Satisfiability::Unknown => {
            Err("neither containment nor a value in the difference was established".to_owned())
        }
    }
}

/// `schema`'s canonical form under `options`, never fetching a reference.
fn canonical(schema: &Value, options: CompileOptions) -> Result<CanonicalSchema, String> {
    let builder = jsonschema::canonical::options()
        .offline()
        .should_validate_formats(options.assert_formats);
    let builder = match options.regex_engine {
        RegexEngine::BoundedBacktracking => {
            builder.with_pattern_options(PatternOptions::fancy_regex())
        }
        RegexEngine::Linear => builder.with_pattern_options(PatternOptions::regex()),
    };
    builder.canonicalize(schema).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests;
