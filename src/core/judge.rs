//! How a check is judged: the synchronous core that turns a [`Check`] into a [`Verdict`] (policy,
//! registry, cache, validation, drift, metrics). It knows nothing of threads or transports: the
//! [`crate::core::gate`] decides where it runs, the adapters how it arrives.

use crate::core::auth::Caller;
use crate::core::check::{Check, Document, Payload, SchemaSource};
use crate::core::document::DocumentJson;
use crate::core::domain::SchemaHash;
use crate::core::domain::{ProtocolVersion, ServerId, Tier, ToolName};
use crate::core::drift::text_drift;
use crate::core::error::CheckError;
use crate::core::metrics::{Attempt, Metrics, TargetMetrics};
use crate::core::policy::{ArgumentsMode, PolicyStore, Rules};
use crate::core::registry::redis::RedisRegistry;
use crate::core::registry::Registry;
use crate::core::resolve::{miss, schema_of, SchemaRef};
use crate::core::rule::on_check;
use crate::core::schema::cache::{CacheKey, Compiled, SchemaCache};
use crate::core::schema::compile::CompiledSchema;
use crate::core::schema::texts::SchemaTexts;
use crate::core::verdict::{
    clip, feedback, field_path, schema_keyword, with_article, Action, Finding, Outcome,
    ShadowVerdict, ValidationFailure, Verdict,
};
use crate::core::Limits;
use bytes::Bytes;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

/// Work small enough to do on the async runtime's thread.
pub(crate) const INLINE_WORK: u64 = 50_000;
/// Longest error message kept (messages can quote the whole failing value).
const MAX_MESSAGE_BYTES: usize = 300;

/// A verdict before anything is concluded: nothing validated, action `pass`.
fn unvalidated_verdict(tier: Tier, check: &Check) -> Verdict {
    Verdict {
        valid: None,
        action: Action::Pass,
        tier,
        outcome: Outcome::Valid,
        schema_hash: None,
        errors: Vec::new(),
        truncated: false,
        feedback: String::new(),
        findings: Vec::new(),
        shadow: None,
        call_id: check.call_id.clone(),
    }
}

/// Where a check is judged.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Placement {
    /// On an async thread: no compile, no long work.
    Inline,
    /// On a worker, which may compile and do long work; `hit_counted` when an inline attempt
    /// already counted the cache hit.
    Worker { hit_counted: bool },
}

/// Why a check has no verdict yet.
pub(crate) enum Deferred {
    Refused(CheckError),
    /// Inline only: it needs a compile or more work than is fit for an async thread, so it goes
    /// to a worker, carrying whether its cache hit was already counted.
    ToWorker {
        hit_counted: bool,
    },
}

impl From<CheckError> for Deferred {
    fn from(e: CheckError) -> Self {
        Deferred::Refused(e)
    }
}

/// What the gate and its judge share: the limits, the policy, the compiled schemas, the
/// registry and the schema texts seen in checks (and the shared registry), and the metrics.
pub(crate) struct Parts {
    pub(crate) limits: Limits,
    pub(crate) policy: Arc<PolicyStore>,
    pub(crate) cache: Arc<SchemaCache>,
    pub(crate) registry: Arc<Registry>,
    /// Schema texts seen in checks, by hash (registered ones are the registry's).
    pub(crate) texts: Arc<SchemaTexts>,
    /// The shared registry, with `--registry redis://...`.
    pub(crate) shared: Option<Arc<RedisRegistry>>,
    pub(crate) metrics: Arc<Metrics>,
}

/// The schemas a check is judged against, compiled (or their compile failure, cached).
struct Schemas {
    hash: SchemaHash,
    enforced: Compiled,
    /// The MCP revision the schema was registered under.
    protocol: Option<ProtocolVersion>,
    /// The tool's shadow schema, judged beside and only reported.
    shadow: Option<(SchemaHash, Compiled)>,
}

/// Judges checks: the synchronous part of the core, shared by every request.
pub(crate) struct Judge {
    parts: Arc<Parts>,
}

impl Judge {
    /// A judge over the gate's parts.
    pub(crate) fn new(parts: Arc<Parts>) -> Self {
        Self { parts }
    }

    /// [`Judge::evaluate`], with a panic turned into this check's own `internal` error, so one
    /// check can never take a batch, a stream or the process down with it.
    pub(crate) fn judge(
        &self,
        check: &Check,
        caller: &Caller,
        placement: Placement,
    ) -> Result<Verdict, Deferred> {
        match std::panic::catch_unwind(AssertUnwindSafe(|| self.evaluate(check, caller, placement)))
        {
            Ok(result) => result,
            Err(_) => {
                tracing::error!(
                    server = check.server.as_deref().unwrap_or(""),
                    tool = check.tool.as_deref().unwrap_or(""),
                    call_id = check.call_id.as_deref().unwrap_or(""),
                    "a check panicked; it was answered as internal"
                );
                Err(Deferred::Refused(CheckError::Internal))
            }
        }
    }

    /// The check itself, step by step: the rules (or a verdict with nothing to validate), the
    /// schemas, the payload validated, the policy's rules on it, the findings beside it, the
    /// shadow schema, the conclusion. Inline, it refuses to compile or to do long work and
    /// answers `Deferred::ToWorker` instead.
    fn evaluate(
        &self,
        check: &Check,
        caller: &Caller,
        placement: Placement,
    ) -> Result<Verdict, Deferred> {
        let (server, tool) = names(check)?;
        let policy = self.parts.policy.load();
        let rules = policy.rules_for(server, tool);
        let target = self.parts.metrics.target(server, tool);
        let attempt = Attempt::of(check.attempt);
        // Nothing validated (yet): `valid` stays unset unless a validation sets it.
        let unvalidated = |outcome: Outcome| {
            target.count(rules.tier, check.payload.kind(), attempt, outcome);
            let mut verdict = Verdict {
                outcome,
                ..unvalidated_verdict(rules.tier, check)
            };
            // Nothing validated, so never a failure: what is past the budget is said.
            if let Some(finding) = on_check::over_budget(check, &rules) {
                verdict.findings.push(finding);
            }
            verdict
        };
        if let Some(outcome) = not_validated(check, &rules) {
            return Ok(unvalidated(outcome));
        }
        let Some(schemas) = self.schemas(check, &rules, placement)? else {
            return Ok(unvalidated(Outcome::Unchecked));
        };
        let compiled = match schemas.enforced.as_ref() {
            Ok(c) => c,
            Err(e) => return Err(e.clone().into()),
        };
        let version = check
            .protocol_version
            .or(schemas.protocol)
            .unwrap_or(ProtocolVersion::NEWEST);
        let mut verdict = unvalidated_verdict(rules.tier, check);
        verdict.schema_hash = Some(schemas.hash);
        let document = self.document(check, compiled, &rules, version)?;
        // The policy's rules run in the same pass: long ones on a worker, before anything else.
        let ruled = on_check::applying(check, document, policy.rule_set());
        if placement == Placement::Inline
            && ruled.as_ref().is_some_and(|(applying, payload)| {
                applying.work(payload.nodes as usize) > INLINE_WORK as f64
            })
        {
            return Err(Deferred::ToWorker { hit_counted: true });
        }
        self.validate(compiled, document, placement, &mut verdict)?;
        if let Some(ruled) = &ruled {
            on_check::judge_rules(check, ruled, (caller, rules.tier), &mut verdict);
        }
        if let Some(finding) = on_check::over_budget(check, &rules) {
            if rules.tier == Tier::Untrusted {
                verdict.errors.push(ValidationFailure {
                    instance_path: String::new(),
                    schema_path: "max_result_bytes".into(),
                    keyword: finding.kind.into(),
                    message: finding.message.clone(),
                });
            }
            verdict.findings.push(finding);
        }
        self.findings(check, document, version, &rules, &target, &mut verdict);
        if let Some((shadow_hash, Ok(shadow))) =
            schemas.shadow.as_ref().map(|(h, c)| (h, c.as_ref()))
        {
            let judged = (document, version, placement != Placement::Inline);
            verdict.shadow = self.shadow_verdict(*shadow_hash, shadow, judged, check, &rules)?;
        }
        self.conclude(&mut verdict, &rules, check, &target, attempt);
        if let Some(shadow) = &verdict.shadow {
            self.parts
                .metrics
                .shadow_validation(&target, shadow.errors.is_empty());
        }
        Ok(verdict)
    }

    /// The schemas `check` is judged against, compiled: `None` for a registered tool that
    /// declares none for the payload. A name or hash this replica does not hold may have just
    /// been registered on another: with a shared registry it is read through to Redis once (on a
    /// worker) before the miss is answered. Inline, a schema not compiled yet goes to a worker.
    fn schemas(
        &self,
        check: &Check,
        rules: &Rules,
        placement: Placement,
    ) -> Result<Option<Schemas>, Deferred> {
        let parts = &self.parts;
        let registered = parts.registry.load();
        let reread;
        let found = match schema_of(check, &registered, &parts.texts, rules.compile) {
            Ok(found) => found,
            // Only a miss pays for the read-through.
            Err(e) => match (&parts.shared, miss(check, &registered, &parts.texts)) {
                (Some(shared), Some(miss)) if shared.may_read_through(&miss) => {
                    if placement == Placement::Inline {
                        return Err(Deferred::ToWorker { hit_counted: false });
                    }
                    if !shared.read_through(miss) {
                        return Err(e.into());
                    }
                    reread = parts.registry.load();
                    schema_of(check, &reread, &parts.texts, rules.compile)?
                }
                _ => return Err(e.into()),
            },
        };
        let Some(SchemaRef {
            hash,
            key,
            text,
            protocol,
            shadow,
        }) = found
        else {
            return Ok(None);
        };
        let enforced = match placement {
            Placement::Worker { hit_counted } => {
                let (compiled, missed) =
                    parts
                        .cache
                        .get_or_compile(key, &text, rules.compile, !hit_counted);
                if missed && matches!(check.schema, SchemaSource::Inline(_)) {
                    parts.texts.remember(hash, &text);
                    if let Some(shared) = &parts.shared {
                        shared.share_text(hash, &text);
                    }
                }
                compiled
            }
            Placement::Inline => parts
                .cache
                .get(&key)
                .ok_or(Deferred::ToWorker { hit_counted: false })?,
        };
        let shadow = self.shadow_compiled(shadow, rules, placement)?;
        Ok(Some(Schemas {
            hash,
            enforced,
            protocol,
            shadow,
        }))
    }

    /// The tool's shadow schema, compiled as the enforced one is (one that does not compile is
    /// not judged: its registration reported why).
    fn shadow_compiled(
        &self,
        shadow: Option<(SchemaHash, CacheKey, Bytes)>,
        rules: &Rules,
        placement: Placement,
    ) -> Result<Option<(SchemaHash, Compiled)>, Deferred> {
        let Some((hash, key, text)) = shadow else {
            return Ok(None);
        };
        let cache = &self.parts.cache;
        let compiled = match placement {
            Placement::Worker { .. } => cache.get_or_compile(key, &text, rules.compile, true).0,
            Placement::Inline => cache
                .get(&key)
                .ok_or(Deferred::ToWorker { hit_counted: true })?,
        };
        Ok(Some((hash, compiled)))
    }

    /// The document a check validates: the payload, or a result's `structuredContent` (whose
    /// schema's root must be an object where the revision says so).
    fn document<'c>(
        &self,
        check: &'c Check,
        compiled: &CompiledSchema,
        rules: &Rules,
        version: ProtocolVersion,
    ) -> Result<Option<&'c Document>, Deferred> {
        Ok(match &check.payload {
            Payload::Instance(v) | Payload::Arguments(v) => Some(v),
            Payload::Result(r) => {
                if rules.object_root_required(version) && !compiled.root_is_object {
                    return Err(CheckError::SchemaRootNotObject {
                        version: version.as_str(),
                    }
                    .into());
                }
                r.structured_content.as_ref()
            }
        })
    }

    /// Validates `document` against `compiled` into `verdict`'s errors: a result without
    /// `structuredContent` fails; a payload too deep or too costly is refused; inline, long work
    /// goes to a worker.
    fn validate(
        &self,
        compiled: &CompiledSchema,
        document: Option<&Document>,
        placement: Placement,
        verdict: &mut Verdict,
    ) -> Result<(), Deferred> {
        let on_worker = placement != Placement::Inline;
        let Some(doc) = document else {
            verdict.errors.push(ValidationFailure {
                instance_path: String::new(),
                schema_path: String::new(),
                keyword: "structuredContent".into(),
                message: "structuredContent is absent, but the tool declares an outputSchema: return the result as structuredContent (the text copy in content is not checked)".into(),
            });
            return Ok(());
        };
        let limits = &self.parts.limits;
        if doc.depth > limits.max_depth {
            return Err(CheckError::TooDeep {
                what: "payload",
                limit: limits.max_depth,
            }
            .into());
        }
        let work = compiled.work(doc.nodes, doc.string_bytes);
        if work > limits.max_check_work {
            return Err(CheckError::WorkLimitExceeded {
                work,
                limit: limits.max_check_work,
            }
            .into());
        }
        if !on_worker && work > INLINE_WORK {
            return Err(Deferred::ToWorker { hit_counted: true });
        }
        if !compiled.validator.is_valid(doc.root()) {
            if !on_worker && work.saturating_mul(4) > INLINE_WORK {
                // Collecting errors costs more than the yes/no answer.
                return Err(Deferred::ToWorker { hit_counted: true });
            }
            self.collect_errors(&compiled.validator, doc, work, verdict);
        }
        Ok(())
    }

    /// What a result's verdict reports beside its errors: a text copy that differs from
    /// `structuredContent` (a failure too where the policy says so), and under 2026-07-28 a
    /// non-object `structuredContent` without its text block.
    fn findings(
        &self,
        check: &Check,
        document: Option<&Document>,
        version: ProtocolVersion,
        rules: &Rules,
        target: &TargetMetrics,
        verdict: &mut Verdict,
    ) {
        let (Payload::Result(r), Some(structured)) = (&check.payload, document) else {
            return;
        };
        if let Some(finding) = text_drift(r, structured) {
            target.drift().increment(1);
            if rules.drift_fails {
                verdict.errors.push(ValidationFailure {
                    instance_path: finding.instance_path.clone(),
                    schema_path: String::new(),
                    keyword: "content".into(),
                    message: finding.message.clone(),
                });
            }
            verdict.findings.push(finding);
        }
        if version >= ProtocolVersion::V2026_07_28 && !structured.is_object() && !r.has_text_block {
            verdict.findings.push(Finding {
                kind: "missing_text_copy",
                instance_path: String::new(),
                message: "structuredContent is not an object, and MCP 2026-07-28 asks for a TextContent block beside it in content: add one".into(),
            });
        }
    }

    /// How the shadow schema `compiled` judges the check's `document`: `None` when the check
    /// would cost more than --max-check-work (not judged, so not reported); on an async thread,
    /// long work is sent to a worker.
    fn shadow_verdict(
        &self,
        schema_hash: SchemaHash,
        compiled: &CompiledSchema,
        (document, version, on_worker): (Option<&Document>, ProtocolVersion, bool),
        check: &Check,
        rules: &Rules,
    ) -> Result<Option<ShadowVerdict>, Deferred> {
        let mut judged = unvalidated_verdict(rules.tier, check);
        let root_refused = matches!(check.payload, Payload::Result(_))
            && rules.object_root_required(version)
            && !compiled.root_is_object;
        match document {
            // Promoted, this candidate would refuse every result: its root is not an object.
            _ if root_refused => judged.errors.push(ValidationFailure {
                instance_path: String::new(),
                schema_path: String::new(),
                keyword: "type".into(),
                message: format!(
                    "the candidate's root is not an object schema, which MCP {} requires of an outputSchema",
                    version.as_str()
                ),
            }),
            None => judged.errors.push(ValidationFailure {
                instance_path: String::new(),
                schema_path: String::new(),
                keyword: "structuredContent".into(),
                message: "structuredContent is absent".into(),
            }),
            Some(doc) => {
                let work = compiled.work(doc.nodes, doc.string_bytes);
                if work > self.parts.limits.max_check_work {
                    return Ok(None);
                }
                if !on_worker && work > INLINE_WORK {
                    return Err(Deferred::ToWorker { hit_counted: true });
                }
                if !compiled.validator.is_valid(doc.root()) {
                    if !on_worker && work.saturating_mul(4) > INLINE_WORK {
                        return Err(Deferred::ToWorker { hit_counted: true });
                    }
                    self.collect_errors(&compiled.validator, doc, work, &mut judged);
                }
            }
        }
        let rejects = match check.payload {
            Payload::Arguments(_) => rules.arguments == ArgumentsMode::Reject,
            _ => rules.tier == Tier::Untrusted,
        };
        Ok(Some(ShadowVerdict {
            would_block: !judged.errors.is_empty() && rejects,
            schema_hash,
            errors: judged.errors,
            truncated: judged.truncated,
        }))
    }

    fn collect_errors(
        &self,
        validator: &jsonschema::Validator<DocumentJson>,
        doc: &Document,
        work: u64,
        verdict: &mut Verdict,
    ) {
        if work > self.parts.limits.max_error_work {
            verdict.errors.push(ValidationFailure {
                instance_path: String::new(),
                schema_path: String::new(),
                keyword: "errors".into(),
                message: format!(
                    "the payload fails its schema; its errors were not listed because listing them would cost about {work} evaluations (limit {}, see --max-error-work)",
                    self.parts.limits.max_error_work
                ),
            });
            verdict.truncated = true;
            return;
        }
        let max = self.parts.limits.max_errors;
        let mut count = 0usize;
        for error in validator.iter_errors(doc.root()) {
            count += 1;
            if count > max {
                verdict.truncated = true;
                break;
            }
            let schema_path = error.schema_path().as_str();
            verdict.errors.push(ValidationFailure {
                instance_path: error.instance_path().as_str().to_owned(),
                keyword: schema_keyword(error.kind().keyword(), schema_path).to_owned(),
                schema_path: schema_path.to_owned(),
                message: clip(with_article(error.to_string()), MAX_MESSAGE_BYTES),
            });
        }
    }

    /// Sets validity, action and feedback, and counts the check.
    fn conclude(
        &self,
        verdict: &mut Verdict,
        rules: &Rules,
        check: &Check,
        target: &TargetMetrics,
        attempt: Attempt,
    ) {
        let valid = verdict.errors.is_empty();
        verdict.valid = Some(valid);
        verdict.outcome = if valid {
            Outcome::Valid
        } else {
            Outcome::Invalid
        };
        if !valid {
            let reject = match check.payload {
                Payload::Arguments(_) => rules.arguments == ArgumentsMode::Reject,
                _ => rules.tier == Tier::Untrusted,
            };
            verdict.action = if reject { Action::Reject } else { Action::Pass };
            verdict.feedback =
                feedback(check.payload.subject(), &verdict.errors, verdict.truncated);
            for e in &verdict.errors {
                self.parts.metrics.field_failure(
                    target,
                    check.payload.kind(),
                    &field_path(e),
                    &e.keyword,
                );
            }
            if verdict.action == Action::Pass {
                tracing::warn!(
                    server = check.server.as_deref().unwrap_or(""),
                    tool = check.tool.as_deref().unwrap_or(""),
                    tier = rules.tier.as_str(),
                    call_id = check.call_id.as_deref().unwrap_or(""),
                    feedback = %verdict.feedback,
                    subject = check.payload.subject(),
                    "a check failed its schema or the policy's rules (logged, passed)"
                );
            }
        }
        target.count(rules.tier, check.payload.kind(), attempt, verdict.outcome);
    }
}

/// The check's server and tool names, refused when they are not names.
fn names(check: &Check) -> Result<(Option<&str>, Option<&str>), CheckError> {
    let (server, tool) = (check.server.as_deref(), check.tool.as_deref());
    if let Some(s) = server {
        ServerId::check(s)?;
    }
    if let Some(t) = tool {
        ToolName::check(t)?;
    }
    Ok((server, tool))
}

/// Why a check is answered without validation, if it is: a tool's own error, or a payload the
/// policy skips (arguments by the `arguments` switch, everything else by the tier).
fn not_validated(check: &Check, rules: &Rules) -> Option<Outcome> {
    if let Payload::Result(r) = &check.payload {
        if r.is_error {
            return Some(Outcome::ToolError);
        }
    }
    let skipped = match check.payload {
        Payload::Arguments(_) => rules.arguments == ArgumentsMode::Off,
        _ => rules.tier == Tier::Trusted,
    };
    skipped.then_some(Outcome::Skipped)
}

/// Runs `read`, turning a panic into an `internal` error for this item alone.
pub(crate) fn guarded<T>(read: impl FnOnce() -> Result<T, CheckError>) -> Result<T, CheckError> {
    std::panic::catch_unwind(AssertUnwindSafe(read)).unwrap_or_else(|_| {
        tracing::error!("reading a check panicked; it was answered as internal");
        Err(CheckError::Internal)
    })
}
