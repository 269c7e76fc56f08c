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
use reasons::Effect;
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
    /// Each reason's own class, in the order of `reasons`: what that difference alone means to
    /// the consumer (a field no longer required in an output: `breaking`; one now required:
    /// `compatible`), read from its keyword and where it sits. Where that cannot be told (under
    /// `if` or `oneOf`, a reference changed, a value that shows the change), the part's class.
    /// The part's `class` is the analysis of the whole, and is what decides.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reason_classes: Vec<Class>,
}

impl Change {
    /// A part's change each of whose reasons has the part's class.
    pub fn uniform(schema: Part, class: Class, reasons: Vec<String>) -> Self {
        Change {
            schema,
            class,
            reason_classes: vec![class; reasons.len()],
            reasons,
        }
    }

    /// Adds a reason with its own class.
    pub fn push(&mut self, reason: String, class: Class) {
        self.reasons.push(reason);
        self.reason_classes.push(class);
    }
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
            let mut reasons = reasons::walk(old, new);
            let (outer, inner) = sides(old, new);
            let class = match witness::find(outer, inner, None, options).ok().flatten() {
                Some(value) => {
                    reasons.push((example_reason(part, &value), Effect::Unclear));
                    Class::Breaking
                }
                None => Class::Unknown,
            };
            reasons.push((
                format!("(undecided in one dialect: {why})"),
                Effect::Unclear,
            ));
            return classed(part, class, reasons);
        }
    };
    let (old, new) = (both.old.as_ref(), both.new.as_ref());
    let mut reasons = reasons::walk(old, new);
    let (outer, inner) = sides(old, new);
    let class = if old == new {
        Class::Identical
    } else {
        let (decided, difference) = classify(outer, inner, options);
        // A value one side admits and the other refuses proves the change breaking, and shows how.
        let example = match decided {
            Ok(Class::Identical | Class::Compatible) => None,
            _ => witness::find(outer, inner, difference.as_ref(), options)
                .ok()
                .flatten(),
        };
        match (decided, example) {
            (_, Some(value)) => {
                reasons.push((example_reason(part, &value), Effect::Unclear));
                Class::Breaking
            }
            (Ok(Class::Breaking), None) => {
                reasons.push((
                    "(proved by the analysis; no example value could be built to show it)"
                        .to_owned(),
                    Effect::Unclear,
                ));
                Class::Breaking
            }
            (Ok(class), None) => class,
            (Err(why), None) => {
                reasons.push((format!("(undecided: {why})"), Effect::Unclear));
                Class::Unknown
            }
        }
    };
    if class == Class::Identical {
        // Spelling and annotations only (key order, `description`, `title`, the dialect):
        // nothing to report.
        reasons.clear();
    }
    let mut change = classed(part, class, reasons);
    if class != Class::Identical {
        // How the two were read in one dialect: a reading, which changes nothing itself.
        for note in &both.notes {
            change.push(format!("(compared in 2020-12: {note})"), Class::Identical);
        }
    }
    change
}

/// A part's change whose reasons are classed by their effects: for an output (what results may
/// be), admitting more is breaking and less compatible; for an input (what arguments may be), the
/// other way round. A reason whose effect cannot be told has the part's class.
fn classed(part: Part, class: Class, reasons: Vec<(String, Effect)>) -> Change {
    let (reasons, reason_classes) = reasons
        .into_iter()
        .map(|(reason, effect)| {
            let own = match (part, effect) {
                (_, Effect::Unclear) => class,
                (Part::Input, Effect::Widens) | (Part::Output, Effect::Narrows) => {
                    Class::Compatible
                }
                (Part::Input, Effect::Narrows) | (Part::Output, Effect::Widens) => Class::Breaking,
                _ => class,
            };
            (reason, own)
        })
        .unzip();
    Change {
        schema: part,
        class,
        reasons,
        reason_classes,
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
/// undecided; and, for a change that is not compatible, the difference (the values `inner`
/// admits and `outer` refuses) as a schema, where it can be expressed: counterexamples are built
/// from it.
fn classify(
    outer: &Value,
    inner: &Value,
    options: CompileOptions,
) -> (Result<Class, String>, Option<Value>) {
    let (outer, inner) = match (canonical(outer, options), canonical(inner, options)) {
        (Ok(outer), Ok(inner)) => (outer, inner),
        (Err(why), _) | (_, Err(why)) => return (Err(why), None),
    };
    if outer.to_json_schema() == inner.to_json_schema() {
        return (Ok(Class::Identical), None);
    }
    let (outer, inner) = (&outer, &inner);
    let contained = outer.covers(inner);
    if let Ok(Containment::Yes) = contained {
        return (Ok(Class::Compatible), None);
    }
    // The values the inner side admits and the outer one refuses, as a schema. Empty proves the
    // change compatible; a value in it proves it breaking.
    let difference = inner.subtract(outer);
    let shown = difference
        .as_ref()
        .ok()
        .map(CanonicalSchema::to_json_schema);
    if let Ok(Containment::No) = contained {
        return (Ok(Class::Breaking), shown);
    }
    let decided = match difference {
        Err(e) => Err(format!("the difference cannot be expressed ({e})")),
        Ok(difference) => match difference.satisfiability() {
            Satisfiability::No => return (Ok(Class::Compatible), None),
            Satisfiability::Yes => Ok(Class::Breaking),
            Satisfiability::Unknown => {
                Err("neither containment nor a value in the difference was established".to_owned())
            }
        },
    };
    (decided, shown)
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
