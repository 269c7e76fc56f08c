//! The registry as `GET /v1/servers` and `GET /v1/servers/{server}/tools` list it.

use super::{RegisteredSchema, Registry};
use crate::core::domain::{ProtocolVersion, SchemaHash};
use crate::core::error::CheckError;
use serde::Serialize;
use serde_json::value::RawValue;

/// A registered server, as `GET /v1/servers` lists it.
#[derive(Debug, Serialize)]
pub struct ServerSummary {
    pub server: String,
    pub tools: usize,
    pub protocol_version: ProtocolVersion,
    /// RFC 3339, of its latest registration.
    pub registered_at: String,
    /// The token that made its latest registration (absent without tokens).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub registered_by: Option<String>,
}

/// One registered tool, as `GET /v1/servers/{server}/tools` lists it.
#[derive(Debug, Serialize)]
pub struct ToolListing {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub input_schema_hash: Option<SchemaHash>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_schema_hash: Option<SchemaHash>,
    pub protocol_version: ProtocolVersion,
    pub registered_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub registered_by: Option<String>,
    /// The schema texts, exactly as registered, when asked for (`?schemas=true`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub input_schema: Option<Box<RawValue>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Box<RawValue>>,
}

/// One server's registration, listed.
#[derive(Debug, Serialize)]
pub struct ServerListing {
    pub server: String,
    pub protocol_version: ProtocolVersion,
    pub registered_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub registered_by: Option<String>,
    pub tools: Vec<ToolListing>,
}

impl Registry {
    /// Whether `server` has a contract registered.
    pub fn has_server(&self, server: &str) -> bool {
        self.load().server(server).is_some()
    }

    /// Every registered server that `shown` admits, by name.
    pub fn summaries(&self, shown: impl Fn(&str) -> bool) -> Vec<ServerSummary> {
        let servers = self.load();
        let mut out: Vec<ServerSummary> = servers
            .iter()
            .filter(|(name, _)| shown(name))
            .map(|(name, s)| ServerSummary {
                server: name.clone(),
                tools: s.tools.len(),
                protocol_version: s.protocol,
                registered_at: s.provenance.at_rfc3339(),
                registered_by: s.provenance.by.as_deref().map(str::to_owned),
            })
            .collect();
        out.sort_by(|a, b| a.server.cmp(&b.server));
        out
    }

    /// One server's tools by name, with their schema texts when `schemas`.
    pub fn listing(&self, server: &str, schemas: bool) -> Result<ServerListing, CheckError> {
        let servers = self.load();
        let s = servers
            .server(server)
            .ok_or_else(|| CheckError::UnknownServer(server.to_owned()))?;
        let text = |schema: &Option<RegisteredSchema>| {
            schema
                .as_ref()
                .filter(|_| schemas)
                .and_then(|s| std::str::from_utf8(&s.text).ok())
                .and_then(|t| RawValue::from_string(t.to_owned()).ok())
        };
        let mut tools: Vec<ToolListing> = s
            .tools
            .values()
            .map(|t| ToolListing {
                name: t.name.as_str().to_owned(),
                input_schema_hash: t.input.as_ref().map(|s| s.hash),
                output_schema_hash: t.output.as_ref().map(|s| s.hash),
                protocol_version: t.protocol,
                registered_at: t.provenance.at_rfc3339(),
                registered_by: t.provenance.by.as_deref().map(str::to_owned),
                input_schema: text(&t.input),
                output_schema: text(&t.output),
            })
            .collect();
        tools.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(ServerListing {
            server: server.to_owned(),
            protocol_version: s.protocol,
            registered_at: s.provenance.at_rfc3339(),
            registered_by: s.provenance.by.as_deref().map(str::to_owned),
            tools,
        })
    }
}
