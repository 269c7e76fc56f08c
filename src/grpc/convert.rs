//! Between protobuf messages and the core's types; no logic beyond the mapping.

use super::proto;
use crate::core::change::Change;
use crate::core::check::{self, Check, Payload, SchemaSource};
use crate::core::domain::{ProtocolVersion, Tier};
use crate::core::error::CheckError;
use crate::core::registry::history::{ChangeKind, ToolChange, Version};
use crate::core::registry::{Registration, ServerListing, ServerSummary};
use crate::core::verdict::{Action, Outcome, Verdict};
use crate::core::Limits;
use std::sync::Arc;

/// A name of the check (server, tool, call id): absent when empty, shared once read.
fn name(s: &str) -> Option<Arc<str>> {
    (!s.is_empty()).then(|| Arc::from(s))
}

/// Builds the core's check from a message, parsing its JSON documents.
pub fn check(msg: &proto::Check, limits: &Limits) -> Result<Check, CheckError> {
    use proto::check::{Payload as P, SchemaSource as S};
    let schema = match &msg.schema_source {
        Some(S::Schema(bytes)) => SchemaSource::Inline(bytes.clone()),
        Some(S::SchemaHash(hash)) => SchemaSource::Hash(hash.clone()),
        None => SchemaSource::Registered,
    };
    let depth = limits.max_depth;
    let payload = match &msg.payload {
        Some(P::Instance(b)) => {
            Payload::Instance(Payload::document_from_json("instance", b, depth)?)
        }
        Some(P::Result(b)) => Payload::Result(Payload::result_from_json(b, depth)?),
        Some(P::Arguments(b)) => {
            Payload::Arguments(Payload::document_from_json("arguments", b, depth)?)
        }
        None => return Err(CheckError::MissingPayload),
    };
    Ok(Check {
        server: name(&msg.server),
        tool: name(&msg.tool),
        schema,
        payload,
        attempt: check::attempt((msg.attempt != 0).then_some(msg.attempt))?,
        call_id: name(&msg.call_id),
        protocol_version: protocol_version(&msg.protocol_version)?,
        roots: None,
        result_bytes: match &msg.payload {
            Some(P::Result(b)) => Some(b.len()),
            _ => None,
        },
    })
}

/// A message's `protocol_version`: empty means none named.
pub fn protocol_version(text: &str) -> Result<Option<ProtocolVersion>, CheckError> {
    (!text.is_empty())
        .then(|| ProtocolVersion::parse(text))
        .transpose()
        .map_err(CheckError::from)
}

pub fn verdict(v: Verdict) -> proto::Verdict {
    proto::Verdict {
        valid: v.valid,
        action: match v.action {
            Action::Pass => proto::Action::Pass,
            Action::Reject => proto::Action::Reject,
        } as i32,
        tier: match v.tier {
            Tier::Trusted => proto::Tier::Trusted,
            Tier::SemiTrusted => proto::Tier::SemiTrusted,
            Tier::Untrusted => proto::Tier::Untrusted,
        } as i32,
        outcome: match v.outcome {
            Outcome::Valid => proto::Outcome::Valid,
            Outcome::Invalid => proto::Outcome::Invalid,
            Outcome::Skipped => proto::Outcome::Skipped,
            Outcome::ToolError => proto::Outcome::ToolError,
            Outcome::Unchecked => proto::Outcome::Unchecked,
        } as i32,
        schema_hash: v.schema_hash.map(|h| h.to_string()).unwrap_or_default(),
        errors: v.errors.into_iter().map(failure).collect(),
        truncated: v.truncated,
        shadow: v.shadow.map(|s| proto::ShadowVerdict {
            would_block: s.would_block,
            schema_hash: s.schema_hash.to_string(),
            errors: s.errors.into_iter().map(failure).collect(),
            truncated: s.truncated,
        }),
        feedback: v.feedback,
        findings: v
            .findings
            .into_iter()
            .map(|f| proto::Finding {
                kind: f.kind.to_owned(),
                message: f.message,
                instance_path: f.instance_path,
            })
            .collect(),
        call_id: v.call_id.as_deref().unwrap_or_default().to_owned(),
    }
}

pub fn error(e: &CheckError) -> proto::Error {
    proto::Error {
        code: e.code().to_owned(),
        message: super::error::message(e),
    }
}

fn failure(e: crate::core::verdict::ValidationFailure) -> proto::ValidationFailure {
    proto::ValidationFailure {
        instance_path: e.instance_path,
        schema_path: e.schema_path,
        keyword: e.keyword,
        message: e.message,
    }
}

pub fn registration(r: Registration) -> proto::RegisterToolsResponse {
    proto::RegisterToolsResponse {
        changes: r.changes.into_iter().map(tool_change).collect(),
        server: r.server,
        next_cursor: r.next_cursor.unwrap_or_default(),
        protocol_version: r.protocol_version.as_str().to_owned(),
        tools: r
            .tools
            .into_iter()
            .map(|t| proto::RegisteredTool {
                name: t.name,
                input_schema_hash: hex(t.input_schema_hash),
                output_schema_hash: hex(t.output_schema_hash),
                errors: t
                    .errors
                    .into_iter()
                    .map(|e| proto::SchemaError {
                        schema: e.schema.to_owned(),
                        code: e.code.to_owned(),
                        message: e.message,
                    })
                    .collect(),
            })
            .collect(),
    }
}

fn tool_change(c: ToolChange) -> proto::ToolChange {
    proto::ToolChange {
        tool: c.tool,
        change: change_kind(c.change).to_owned(),
        class: c.class.as_str().to_owned(),
        schemas: c.schemas.into_iter().map(part_change).collect(),
        likely_rename: c.likely_rename.unwrap_or_default(),
    }
}

fn part_change(c: Change) -> proto::PartChange {
    proto::PartChange {
        schema: c.schema.as_str().to_owned(),
        class: c.class.as_str().to_owned(),
        reasons: c.reasons,
        reason_classes: c
            .reason_classes
            .iter()
            .map(|class| class.as_str().to_owned())
            .collect(),
    }
}

fn change_kind(kind: ChangeKind) -> &'static str {
    match kind {
        ChangeKind::Added => "added",
        ChangeKind::Removed => "removed",
        ChangeKind::Changed => "changed",
    }
}

pub fn tool_version(v: Version) -> proto::ToolVersion {
    let json = |v: Option<serde_json::Value>| v.map(|v| v.to_string()).unwrap_or_default();
    proto::ToolVersion {
        registered_at: v.registered_at,
        registered_by: v.registered_by.unwrap_or_default(),
        protocol_version: v.protocol_version,
        input_schema_hash: v.input_schema_hash.unwrap_or_default(),
        output_schema_hash: v.output_schema_hash.unwrap_or_default(),
        annotations_json: json(v.annotations),
        execution_json: json(v.execution),
        title: v.title.unwrap_or_default(),
        description: v.description.unwrap_or_default(),
        change: change_kind(v.change).to_owned(),
        class: v.class.as_str().to_owned(),
        schemas: v.schemas.into_iter().map(part_change).collect(),
    }
}

fn hex(hash: Option<crate::core::domain::SchemaHash>) -> String {
    hash.map(|h| h.to_string()).unwrap_or_default()
}

pub fn server_summary(s: ServerSummary) -> proto::ServerSummary {
    proto::ServerSummary {
        server: s.server,
        tools: u32::try_from(s.tools).unwrap_or(u32::MAX),
        protocol_version: s.protocol_version.as_str().to_owned(),
        registered_at: s.registered_at,
        registered_by: s.registered_by.unwrap_or_default(),
    }
}

pub fn server_listing(l: ServerListing) -> proto::ListToolsResponse {
    let text = |raw: Option<Box<serde_json::value::RawValue>>| {
        raw.map(|r| bytes::Bytes::copy_from_slice(r.get().as_bytes()))
            .unwrap_or_default()
    };
    proto::ListToolsResponse {
        server: l.server,
        protocol_version: l.protocol_version.as_str().to_owned(),
        registered_at: l.registered_at,
        registered_by: l.registered_by.unwrap_or_default(),
        tools: l
            .tools
            .into_iter()
            .map(|t| proto::ListedTool {
                name: t.name,
                input_schema_hash: hex(t.input_schema_hash),
                output_schema_hash: hex(t.output_schema_hash),
                protocol_version: t.protocol_version.as_str().to_owned(),
                registered_at: t.registered_at,
                registered_by: t.registered_by.unwrap_or_default(),
                input_schema: text(t.input_schema),
                output_schema: text(t.output_schema),
            })
            .collect(),
    }
}
