//! Which schema a check is judged against: the one it carries inline, one it names by hash
//! (registered, or seen in an earlier check), or the registered contract's input or output
//! schema for its server and tool; and, when this replica holds none of those, what a shared
//! registry should be asked for; and the tool's shadow schema, judged beside it.

use crate::core::check::{Check, Payload, SchemaSource};
use crate::core::domain::{ProtocolVersion, SchemaHash};
use crate::core::error::CheckError;
use crate::core::policy::CompileOptions;
use crate::core::registry::redis::Miss;
use crate::core::registry::Servers;
use crate::core::schema::cache::CacheKey;
use crate::core::schema::texts::SchemaTexts;
use bytes::Bytes;
use std::borrow::Cow;

/// The schema a check is validated against: its hash, its cache key, its text for a compile, and
/// for a registered schema the MCP revision it was registered under.
pub(crate) struct SchemaRef<'a> {
    pub(crate) hash: SchemaHash,
    pub(crate) key: CacheKey,
    pub(crate) text: Cow<'a, Bytes>,
    pub(crate) protocol: Option<ProtocolVersion>,
    /// The registered tool's shadow (candidate) schema for the payload, if it has one: its
    /// hash, cache key and text. Judged beside this one, and only reported.
    pub(crate) shadow: Option<(SchemaHash, CacheKey, Bytes)>,
}

/// The schema `check` is validated against under `options`; `None` for a registered tool
/// that declares no schema for the payload (nothing to check). A registered schema comes
/// with the MCP revision it was registered under.
pub(crate) fn schema_of<'a>(
    check: &'a Check,
    registered: &'a Servers,
    texts: &SchemaTexts,
    options: CompileOptions,
) -> Result<Option<SchemaRef<'a>>, CheckError> {
    let (server, tool) = (check.server.as_deref(), check.tool.as_deref());
    match &check.schema {
        SchemaSource::Inline(text) => {
            let hash = SchemaHash::of(text);
            Ok(Some(SchemaRef {
                hash,
                key: CacheKey::new(server, tool, &hash, options),
                text: Cow::Borrowed(text),
                protocol: None,
                shadow: None,
            }))
        }
        SchemaSource::Hash(h) => {
            let hash = SchemaHash::parse(h)?;
            let text = registered
                .text(&hash)
                .cloned()
                .or_else(|| texts.get(&hash))
                .ok_or_else(|| CheckError::UnknownSchemaHash(hash.to_string()))?;
            Ok(Some(SchemaRef {
                hash,
                key: CacheKey::new(server, tool, &hash, options),
                text: Cow::Owned(text),
                protocol: None,
                shadow: None,
            }))
        }
        SchemaSource::Registered => {
            let (Some(server), Some(tool)) = (server, tool) else {
                return Err(CheckError::MissingSchema);
            };
            let schemas = registered.registered(server, tool)?;
            let (schema, shadow) = match check.payload {
                Payload::Arguments(_) => (schemas.input.as_ref(), schemas.shadow_input.as_ref()),
                _ => (schemas.output.as_ref(), schemas.shadow_output.as_ref()),
            };
            Ok(schema.map(|schema| SchemaRef {
                hash: schema.hash,
                key: schema.key(options),
                text: Cow::Borrowed(&schema.text),
                protocol: Some(schemas.protocol),
                shadow: shadow.map(|s| (s.hash, s.key(options), s.text.clone())),
            }))
        }
        SchemaSource::Listed(listed) => {
            let schema = match check.payload {
                Payload::Arguments(_) => listed.input.as_ref(),
                _ => listed.output.as_ref(),
            };
            Ok(schema.map(|(hash, text)| SchemaRef {
                hash: *hash,
                key: CacheKey::new(server, tool, hash, options),
                text: Cow::Borrowed(text),
                protocol: Some(listed.protocol),
                shadow: None,
            }))
        }
    }
}

/// What `check` names that this replica does not hold, if anything.
pub(crate) fn miss(check: &Check, registered: &Servers, texts: &SchemaTexts) -> Option<Miss> {
    match &check.schema {
        SchemaSource::Inline(_) | SchemaSource::Listed(_) => None,
        SchemaSource::Hash(h) => {
            let hash = SchemaHash::parse(h).ok()?;
            (registered.text(&hash).is_none() && texts.get(&hash).is_none())
                .then_some(Miss::Hash(hash))
        }
        SchemaSource::Registered => {
            let (server, tool) = (check.server.as_deref()?, check.tool.as_deref()?);
            registered.tool(server, tool).is_none().then(|| Miss::Tool {
                server: server.to_owned(),
                tool: tool.to_owned(),
            })
        }
    }
}
