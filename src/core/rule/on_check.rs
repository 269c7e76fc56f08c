//! The policy's limits beside the schema, applied to one check: the rules that apply to it,
//! judged on its payload into its verdict, and the result budget (`max_result_bytes`).

use super::{Applying, Facts, RulePayload, RuleSet, Size};
use crate::core::auth::Caller;
use crate::core::check::{Check, Document, Payload};
use crate::core::domain::Tier;
use crate::core::policy::Rules;
use crate::core::verdict::{clip, Finding, ValidationFailure, Verdict, RESULT_TOO_LARGE, RULE};

/// Longest message of a rule that does not hold kept (the policy's message, and a path or a
/// reason from the payload).
const MAX_RULE_MESSAGE_BYTES: usize = 1024;

/// The result budget's finding, when the check's tool result is larger than `max_result_bytes`
/// allows.
pub(crate) fn over_budget(check: &Check, rules: &Rules) -> Option<Finding> {
    let (Payload::Result(_), Some(bytes), Some(max)) =
        (&check.payload, check.result_bytes, rules.max_result_bytes)
    else {
        return None;
    };
    (bytes as u64 > max).then(|| Finding {
        kind: RESULT_TOO_LARGE,
        instance_path: String::new(),
        message: format!(
            "the result is {bytes} bytes, past the budget of {max} (max_result_bytes): return less (a page, a summary, fewer fields)"
        ),
    })
}

/// The policy's rules that apply to the check, and the payload they judge; `None` when none
/// does (no names, no payload, an instance).
pub(crate) fn applying<'c>(
    check: &'c Check,
    document: Option<&'c Document>,
    rule_set: &'c RuleSet,
) -> Option<(Applying<'c>, &'c Document)> {
    if rule_set.is_empty() {
        return None;
    }
    let kind = match check.payload {
        Payload::Arguments(_) => RulePayload::Arguments,
        Payload::Result(_) => RulePayload::Result,
        Payload::Instance(_) => return None,
    };
    let (server, tool) = (check.server.as_deref()?, check.tool.as_deref()?);
    let applying = rule_set.applying(kind, server, tool);
    (!applying.is_empty()).then_some((applying, document?))
}

/// Judges the check's payload by the rules that apply: each one that does not hold is an error
/// of the verdict (keyword `rule`, its name as `schema_path`), after the schema's.
pub(crate) fn judge_rules(
    check: &Check,
    (applying, document): &(Applying<'_>, &Document),
    (caller, tier): (&Caller, Tier),
    verdict: &mut Verdict,
) {
    // Without tokens anyone may call, with every scope: to a rule, that caller holds none.
    let scopes = match caller.token_name() {
        Some(_) => caller.scopes(),
        None => Vec::new(),
    };
    let facts = Facts {
        server: check.server.as_deref().unwrap_or(""),
        tool: check.tool.as_deref().unwrap_or(""),
        caller: (caller.name(), &scopes),
        roots: check.roots.as_deref(),
        tier,
    };
    let size = Size {
        values: document.nodes as usize,
        string_bytes: document.string_bytes as usize,
    };
    let mut not_judged = Vec::new();
    for broken in applying.judge((size, *document), &facts, &mut not_judged) {
        verdict.errors.push(ValidationFailure {
            instance_path: String::new(),
            schema_path: broken.rule.clone(),
            keyword: RULE.into(),
            message: clip(
                format!("rule {}: {}", broken.rule, broken.message),
                MAX_RULE_MESSAGE_BYTES,
            ),
        });
    }
    for rule in not_judged {
        verdict.findings.push(Finding {
            kind: "rule_not_judged",
            instance_path: String::new(),
            message: rule.message,
        });
    }
}
