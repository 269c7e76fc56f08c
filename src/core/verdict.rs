//! The answer to a check: valid or not, what to do, why, and one line a model can act on.

use crate::core::domain::{SchemaHash, Tier};
use serde::Serialize;
use std::fmt::Write;

/// What the orchestrator should do with the result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    Pass,
    Reject,
}

impl Action {
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Pass => "pass",
            Action::Reject => "reject",
        }
    }
}

/// What the check found; the `outcome` label of `schemagate_validations_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Valid,
    Invalid,
    /// Not validated: the server is `trusted`.
    Skipped,
    /// The tool reported its own failure (`isError: true`); not validated.
    ToolError,
    /// The registered tool declares no schema for the payload; not validated.
    Unchecked,
}

impl Outcome {
    pub const ALL: [Outcome; 5] = [
        Outcome::Valid,
        Outcome::Invalid,
        Outcome::Skipped,
        Outcome::ToolError,
        Outcome::Unchecked,
    ];

    /// Its place in [`Outcome::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Valid => "valid",
            Outcome::Invalid => "invalid",
            Outcome::Skipped => "skipped",
            Outcome::ToolError => "tool_error",
            Outcome::Unchecked => "unchecked",
        }
    }
}

/// One way the payload fails its schema.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ValidationFailure {
    /// JSON pointer into the payload (`""` is the root).
    pub instance_path: String,
    /// JSON pointer into the schema, to the failing keyword.
    pub schema_path: String,
    /// The failing keyword (`required`, `format`, ...; `structuredContent` when it is absent).
    pub keyword: String,
    /// A readable sentence, e.g. `"yesterday" is not a "date-time"`.
    pub message: String,
}

/// The keyword of a policy rule that did not hold (`[[rules]]`); `schema_path` is its name.
pub const RULE: &str = "rule";
/// The keyword of a result past `max_result_bytes`; `schema_path` is `max_result_bytes`.
pub const RESULT_TOO_LARGE: &str = "result_too_large";

impl ValidationFailure {
    /// Whether it is the policy's (a rule, the result budget) rather than the schema's: it has
    /// no place in the payload, and is counted under its `schema_path`.
    pub fn is_policy(&self) -> bool {
        matches!(self.keyword.as_str(), RULE | RESULT_TOO_LARGE)
    }
}

/// Whether `errors` are all the policy's (see [`ValidationFailure::is_policy`]), and there are
/// some.
pub fn policy_only(errors: &[ValidationFailure]) -> bool {
    !errors.is_empty() && errors.iter().all(ValidationFailure::is_policy)
}

/// Something worth knowing that is not itself a schema failure.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// `text_drift`: a text block of `content` parses as JSON and is a different JSON value from
    /// `structuredContent`; `missing_text_copy`: under MCP 2026-07-28, a `structuredContent` that
    /// is not an object came without a text block.
    pub kind: &'static str,
    /// Where in `structuredContent` it applies (for drift: where the copies first differ).
    pub instance_path: String,
    pub message: String,
}

/// The verdict on one check. Served as a 200 whatever it says. REST writes it with
/// [`Verdict::write_json`], which must follow any field added here.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Verdict {
    /// `Some(true)` only for a payload validated and conforming; `None` when nothing was
    /// validated (`skipped`, `tool_error`, `unchecked`), so it is left out of the answer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub valid: Option<bool>,
    pub action: Action,
    pub tier: Tier,
    pub outcome: Outcome,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub schema_hash: Option<SchemaHash>,
    pub errors: Vec<ValidationFailure>,
    /// More failures exist than `errors` holds.
    pub truncated: bool,
    /// One line to hand back to a model for a retry; empty when valid.
    pub feedback: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub findings: Vec<Finding>,
    /// How the tool's shadow (candidate) schema judged the same payload, when it has one:
    /// reported, never enforced.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shadow: Option<ShadowVerdict>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub call_id: Option<std::sync::Arc<str>>,
}

/// A shadow schema's judgement of a payload: whether it would have blocked it (it fails the
/// candidate, and the tier or `arguments` rejects failures), and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ShadowVerdict {
    pub would_block: bool,
    pub schema_hash: SchemaHash,
    pub errors: Vec<ValidationFailure>,
    /// More failures exist than `errors` holds.
    pub truncated: bool,
}

impl Verdict {
    /// About how many bytes this verdict takes as JSON, so its answer is written without
    /// growing its buffer.
    pub fn json_size_hint(&self) -> usize {
        let findings: usize = self
            .findings
            .iter()
            .map(|f| 64 + f.instance_path.len() * 2 + f.message.len() * 2)
            .sum();
        let call_id = self.call_id.as_ref().map_or(0, |c| 16 + c.len() * 2);
        let shadow = self
            .shadow
            .as_ref()
            .map_or(0, |s| 200 + errors_size(&s.errors));
        200 + errors_size(&self.errors) + findings + call_id + shadow + self.feedback.len() * 2
    }
}

impl Verdict {
    /// Appends this verdict as JSON to `out`: byte for byte what its `Serialize` writes, faster.
    /// Its keys, enum names and hash are written as they are (they need no escaping); only text
    /// that comes from a check or a schema (paths, messages, feedback, `call_id`) goes through
    /// serde_json's string escaping. The answer is a tenth of a valid check's work otherwise.
    pub fn write_json(&self, out: &mut Vec<u8>) -> Result<(), serde_json::Error> {
        out.extend_from_slice(match self.valid {
            Some(true) => b"{\"valid\":true,\"action\":\"",
            Some(false) => b"{\"valid\":false,\"action\":\"",
            None => b"{\"action\":\"",
        });
        out.extend_from_slice(self.action.as_str().as_bytes());
        out.extend_from_slice(b"\",\"tier\":\"");
        out.extend_from_slice(self.tier.as_str().as_bytes());
        out.extend_from_slice(b"\",\"outcome\":\"");
        out.extend_from_slice(self.outcome.as_str().as_bytes());
        out.push(b'"');
        if let Some(hash) = &self.schema_hash {
            out.extend_from_slice(b",\"schema_hash\":\"");
            out.extend_from_slice(hash.to_hex().as_bytes());
            out.push(b'"');
        }
        out.extend_from_slice(b",\"errors\":[");
        write_errors(out, &self.errors)?;
        out.extend_from_slice(match self.truncated {
            true => b"],\"truncated\":true,\"feedback\":",
            false => b"],\"truncated\":false,\"feedback\":",
        });
        json_string(out, &self.feedback)?;
        if !self.findings.is_empty() {
            out.extend_from_slice(b",\"findings\":[");
            for (i, f) in self.findings.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                out.extend_from_slice(b"{\"kind\":");
                json_string(out, f.kind)?;
                out.extend_from_slice(b",\"instance_path\":");
                json_string(out, &f.instance_path)?;
                out.extend_from_slice(b",\"message\":");
                json_string(out, &f.message)?;
                out.push(b'}');
            }
            out.push(b']');
        }
        if let Some(shadow) = &self.shadow {
            out.extend_from_slice(match shadow.would_block {
                true => b",\"shadow\":{\"would_block\":true,\"schema_hash\":\"",
                false => b",\"shadow\":{\"would_block\":false,\"schema_hash\":\"",
            });
            out.extend_from_slice(shadow.schema_hash.to_hex().as_bytes());
            out.extend_from_slice(b"\",\"errors\":[");
            write_errors(out, &shadow.errors)?;
            out.extend_from_slice(match shadow.truncated {
                true => b"],\"truncated\":true}",
                false => b"],\"truncated\":false}",
            });
        }
        if let Some(call_id) = &self.call_id {
            out.extend_from_slice(b",\"call_id\":");
            json_string(out, call_id)?;
        }
        out.push(b'}');
        Ok(())
    }
}

/// The JSON size `errors` may take, escapes included.
fn errors_size(errors: &[ValidationFailure]) -> usize {
    errors
        .iter()
        .map(|e| {
            80 + e.instance_path.len() + e.schema_path.len() + e.keyword.len() + e.message.len() * 2
        })
        .sum()
}

/// `errors` as the items of a JSON array.
fn write_errors(out: &mut Vec<u8>, errors: &[ValidationFailure]) -> Result<(), serde_json::Error> {
    for (i, e) in errors.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(b"{\"instance_path\":");
        json_string(out, &e.instance_path)?;
        out.extend_from_slice(b",\"schema_path\":");
        json_string(out, &e.schema_path)?;
        out.extend_from_slice(b",\"keyword\":");
        json_string(out, &e.keyword)?;
        out.extend_from_slice(b",\"message\":");
        json_string(out, &e.message)?;
        out.push(b'}');
    }
    Ok(())
}

/// `text` as a JSON string, escaped as serde_json escapes it.
fn json_string(out: &mut Vec<u8>, text: &str) -> Result<(), serde_json::Error> {
    if text.is_empty() {
        out.extend_from_slice(b"\"\"");
        return Ok(());
    }
    serde_json::to_writer(out, text)
}

impl Serialize for SchemaHash {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_hex())
    }
}

impl Serialize for crate::core::domain::ProtocolVersion {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl Serialize for Tier {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// Builds the feedback line: `Output failed schema: /deleted_at: "yesterday" is not a "date-time"; /: ...`.
pub fn feedback(subject: &str, errors: &[ValidationFailure], truncated: bool) -> String {
    if errors.is_empty() {
        return String::new();
    }
    let mut line = String::with_capacity(32 + errors.len() * 48);
    match policy_only(errors) {
        true => {
            let _ = write!(line, "{subject} broke the policy's rules: ");
        }
        false => {
            let _ = write!(line, "{subject} failed schema: ");
        }
    }
    for (i, e) in errors.iter().enumerate() {
        if i > 0 {
            line.push_str("; ");
        }
        // A rule's message names the rule; it has no place in the payload.
        if e.keyword == RULE {
            line.push_str(&e.message);
            continue;
        }
        let path = if e.instance_path.is_empty() {
            "/"
        } else {
            &e.instance_path
        };
        let _ = write!(line, "{path}: {}", e.message);
    }
    if truncated {
        line.push_str("; and more");
    }
    line
}

/// The JSON Schema keyword a failure belongs to. The validator reports a `false` subschema under
/// its own name (`falseSchema`); the keyword is the one that holds that subschema (`items`,
/// `additionalProperties`, `properties`, `prefixItems`, `allOf`, ...), read off its schema path,
/// and `false` for a schema that is `false` at its root.
pub fn schema_keyword<'a>(reported: &'a str, schema_path: &'a str) -> &'a str {
    if reported != "falseSchema" {
        return reported;
    }
    let segments: Vec<&str> = schema_path.split('/').skip(1).collect();
    match segments.as_slice() {
        [] => "false",
        [.., holder, last]
            if matches!(
                *holder,
                "properties" | "patternProperties" | "$defs" | "definitions" | "dependentSchemas"
            ) || last.bytes().all(|b| b.is_ascii_digit()) =>
        {
            holder
        }
        [.., last] => last,
    }
}

/// `message` with "a" before a quoted word that starts with a vowel sound made "an": the
/// validator writes `"x" is not a "email"`.
pub fn with_article(message: String) -> String {
    const A_QUOTE: &str = " a \"";
    let Some(at) = message.find(A_QUOTE) else {
        return message;
    };
    let next = message[at + A_QUOTE.len()..].chars().next();
    if matches!(next, Some('a' | 'e' | 'i' | 'o' | 'A' | 'E' | 'I' | 'O')) {
        let mut fixed = message;
        fixed.insert(at + 2, 'n');
        fixed
    } else {
        message
    }
}

/// Where a failure is counted (the `path` of the field failures): its instance path with array
/// indices folded; for a rule that did not hold (keyword `rule`), the rule's name; for a result
/// past its budget (`result_too_large`), `max_result_bytes`.
pub fn field_path(failure: &ValidationFailure) -> String {
    match failure.is_policy() {
        true => failure.schema_path.clone(),
        false => fold_indices(&failure.instance_path),
    }
}

/// `key` as one token of a JSON pointer (RFC 6901): `~` written `~0`, `/` written `~1`.
pub fn pointer_token(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

/// The instance path with array indices folded to `*`, so `/items/3/id` counts as `/items/*/id`.
pub fn fold_indices(path: &str) -> String {
    if path.is_empty() {
        return "/".to_owned();
    }
    let mut out = String::with_capacity(path.len());
    for segment in path.split('/').skip(1) {
        out.push('/');
        if !segment.is_empty() && segment.bytes().all(|b| b.is_ascii_digit()) {
            out.push('*');
        } else {
            out.push_str(segment);
        }
    }
    out
}

/// Cuts a message to at most `limit` bytes on a character boundary, marking the cut.
pub fn clip(mut message: String, limit: usize) -> String {
    if message.len() > limit {
        let mut end = limit;
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        message.truncate(end);
        message.push('…');
    }
    message
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failure(path: &str, message: &str) -> ValidationFailure {
        ValidationFailure {
            instance_path: path.into(),
            schema_path: String::new(),
            keyword: "k".into(),
            message: message.into(),
        }
    }

    #[test]
    fn feedback_reads_as_one_line() {
        let errors = [
            failure("/deleted_at", r#""yesterday" is not a "date-time""#),
            failure("", r#""customer_id" is a required property"#),
        ];
        assert_eq!(
            feedback("Output", &errors, false),
            r#"Output failed schema: /deleted_at: "yesterday" is not a "date-time"; /: "customer_id" is a required property"#
        );
        assert_eq!(feedback("Output", &[], false), "");
        assert!(feedback("Arguments", &errors[..1], true).ends_with("; and more"));
    }

    #[test]
    fn false_subschemas_report_the_keyword_that_holds_them() {
        for (path, keyword) in [
            ("/items", "items"),
            ("/properties/a", "properties"),
            ("/additionalProperties", "additionalProperties"),
            ("/prefixItems/1", "prefixItems"),
            ("/allOf/1", "allOf"),
            ("/$defs/x/properties/b", "properties"),
            ("", "false"),
        ] {
            assert_eq!(schema_keyword("falseSchema", path), keyword, "{path}");
        }
        assert_eq!(schema_keyword("type", "/items/type"), "type");
    }

    #[test]
    fn articles_agree_with_the_word() {
        assert_eq!(
            with_article(r#""x" is not a "email""#.into()),
            r#""x" is not an "email""#
        );
        assert_eq!(
            with_article(r#""x" is not a "ipv4""#.into()),
            r#""x" is not an "ipv4""#
        );
        assert_eq!(
            with_article(r#""x" is not a "date-time""#.into()),
            r#""x" is not a "date-time""#
        );
        assert_eq!(
            with_article(r#""x" is not a "uuid""#.into()),
            r#""x" is not a "uuid""#
        );
    }

    #[test]
    fn indices_fold_to_a_star() {
        assert_eq!(fold_indices("/items/3/id"), "/items/*/id");
        assert_eq!(fold_indices(""), "/");
        assert_eq!(fold_indices("/a/10/b/2"), "/a/*/b/*");
        assert_eq!(fold_indices("/v1/x"), "/v1/x");
    }

    #[test]
    fn size_hint_covers_the_json() {
        let mut verdict = Verdict {
            valid: Some(false),
            action: Action::Reject,
            tier: Tier::Untrusted,
            outcome: Outcome::Invalid,
            schema_hash: Some(SchemaHash::of(b"{}")),
            errors: vec![failure("/a/\"b\"", "\"x\"\n is \"wrong\"")],
            truncated: false,
            feedback: String::new(),
            findings: Vec::new(),
            shadow: None,
            call_id: Some("call-\"1\"".into()),
        };
        verdict.feedback = feedback("Output", &verdict.errors, false);
        let json = serde_json::to_vec(&verdict).expect("serialises");
        assert!(
            json.len() <= verdict.json_size_hint(),
            "{} > {}",
            json.len(),
            verdict.json_size_hint()
        );
    }

    #[test]
    fn written_json_is_what_serde_writes() {
        let base = Verdict {
            valid: Some(true),
            action: Action::Pass,
            tier: Tier::SemiTrusted,
            outcome: Outcome::Valid,
            schema_hash: Some(SchemaHash::of(b"{}")),
            errors: Vec::new(),
            truncated: false,
            feedback: String::new(),
            findings: Vec::new(),
            shadow: None,
            call_id: None,
        };
        let errors = vec![
            failure("/a/\"b\"", "\"x\"\n is \"wrong\" \u{7} ünïcode 🚀 \\ done"),
            failure("", ""),
        ];
        let variants = [
            base.clone(),
            Verdict {
                valid: None,
                schema_hash: None,
                tier: Tier::Trusted,
                outcome: Outcome::Skipped,
                ..base.clone()
            },
            Verdict {
                valid: Some(false),
                action: Action::Reject,
                tier: Tier::Untrusted,
                outcome: Outcome::Invalid,
                feedback: feedback("Output", &errors, true),
                errors: errors.clone(),
                truncated: true,
                call_id: Some("call-\"1\"\t".into()),
                ..base.clone()
            },
            Verdict {
                valid: None,
                outcome: Outcome::ToolError,
                findings: vec![
                    Finding {
                        kind: "text_drift",
                        instance_path: "/a/\"b\"".into(),
                        message: "the copy \"differs\"".into(),
                    },
                    Finding {
                        kind: "other",
                        instance_path: String::new(),
                        message: String::new(),
                    },
                ],
                call_id: Some("".into()),
                ..base.clone()
            },
            Verdict {
                shadow: Some(ShadowVerdict {
                    would_block: true,
                    schema_hash: SchemaHash::of(b"{\"type\":\"object\"}"),
                    errors: errors.clone(),
                    truncated: false,
                }),
                ..base.clone()
            },
            Verdict {
                shadow: Some(ShadowVerdict {
                    would_block: false,
                    schema_hash: SchemaHash::of(b"{}"),
                    errors: Vec::new(),
                    truncated: true,
                }),
                call_id: Some("c".into()),
                ..base.clone()
            },
        ];
        for verdict in variants {
            let mut written = Vec::new();
            verdict.write_json(&mut written).expect("writes");
            let serialised = serde_json::to_vec(&verdict).expect("serialises");
            assert_eq!(
                String::from_utf8_lossy(&written),
                String::from_utf8_lossy(&serialised)
            );
        }
    }

    #[test]
    fn clip_respects_char_boundaries() {
        assert_eq!(clip("héllo".into(), 2), "h…");
        assert_eq!(clip("short".into(), 10), "short");
    }
}
