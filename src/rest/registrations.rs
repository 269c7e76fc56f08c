//! The registration routes: a server's tools registered (or their shadow schemas), listed,
//! removed, promoted and accepted past a pin, and each tool's history. See [`Gate`]'s
//! registrations.

use super::{read_body, refuse, ApiError};
use crate::core::auth::Caller;
use crate::core::domain::ProtocolVersion;
use crate::core::error::CheckError;
use crate::core::gate::Gate;
use crate::core::registry::history::Version;
use crate::core::registry::{RegisterOptions, Registration, ServerListing, ServerSummary};
use axum::body::Body;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::{Extension, Json};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// The query of `PUT /v1/servers/{server}/tools`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RegisterQuery {
    /// Add the tools to the server's registration (one page of a paginated tools/list).
    #[serde(default)]
    merge: bool,
    protocol_version: Option<String>,
    /// The listed schemas are shadow (candidate) schemas of registered tools.
    #[serde(default)]
    shadow: bool,
}

/// `?shadow=true` on a removal: remove the shadow schemas only.
#[derive(Deserialize)]
pub(super) struct ShadowQuery {
    #[serde(default)]
    shadow: bool,
}

/// Reads a removal's query.
fn shadow_query(
    gate: &Gate,
    query: Result<Query<ShadowQuery>, QueryRejection>,
) -> Result<bool, ApiError> {
    let Query(query) = query.map_err(|e| {
        refuse(
            gate,
            CheckError::InvalidField(format!(
                "{}: the query takes `shadow=true|false`",
                e.body_text()
            )),
        )
    })?;
    Ok(query.shadow)
}

pub(super) async fn register_tools(
    State(gate): State<Arc<Gate>>,
    Extension(caller): Extension<Arc<Caller>>,
    Path(server): Path<String>,
    query: Result<Query<RegisterQuery>, QueryRejection>,
    headers: HeaderMap,
    raw: Body,
) -> Result<Json<Registration>, ApiError> {
    let Query(query) = query.map_err(|e| {
        refuse(
            &gate,
            CheckError::InvalidField(format!(
                "{}: the query takes `merge=true|false`, `protocol_version=2025-06-18|2025-11-25|2026-07-28` and `shadow=true|false`",
                e.body_text()
            )),
        )
    })?;
    let how = RegisterOptions {
        merge: query.merge,
        protocol_version: query
            .protocol_version
            .map(|v| ProtocolVersion::parse(&v))
            .transpose()
            .map_err(|e| refuse(&gate, e.into()))?,
        learned: false,
        drop_shadow: false,
    };
    let bytes = read_body(&gate, &headers, raw).await?;
    let registration = if query.shadow {
        gate.register_shadow(&caller, server, bytes).await
    } else {
        gate.register(&caller, server, bytes, how).await
    }
    .map_err(|e| refuse(&gate, e))?;
    Ok(Json(registration))
}

/// Makes a tool's shadow schemas its contract (a normal, classified change).
pub(super) async fn promote_shadow(
    State(gate): State<Arc<Gate>>,
    Extension(caller): Extension<Arc<Caller>>,
    Path((server, tool)): Path<(String, String)>,
) -> Result<Json<Registration>, ApiError> {
    gate.promote_shadow(&caller, &server, &tool)
        .await
        .map(Json)
        .map_err(|e| refuse(&gate, e))
}

#[derive(Serialize)]
pub(super) struct ServerList {
    servers: Vec<ServerSummary>,
}

/// The registered servers the caller may name.
pub(super) async fn list_servers(
    State(gate): State<Arc<Gate>>,
    Extension(caller): Extension<Arc<Caller>>,
) -> Json<ServerList> {
    Json(ServerList {
        servers: gate.servers(&caller),
    })
}

#[derive(Deserialize)]
pub(super) struct ListQuery {
    #[serde(default)]
    schemas: bool,
}

/// One server's registered tools; `?schemas=true` adds each schema's text.
pub(super) async fn list_tools(
    State(gate): State<Arc<Gate>>,
    Extension(caller): Extension<Arc<Caller>>,
    Path(server): Path<String>,
    query: Result<Query<ListQuery>, QueryRejection>,
) -> Result<Json<ServerListing>, ApiError> {
    let Query(query) = query.map_err(|e| {
        refuse(
            &gate,
            CheckError::InvalidField(format!(
                "{}: the query takes `schemas=true|false`",
                e.body_text()
            )),
        )
    })?;
    gate.server_tools(&caller, &server, query.schemas)
        .map(Json)
        .map_err(|e| refuse(&gate, e))
}

/// A tool's history: each version it was registered with, newest first, and its change.
#[derive(Serialize)]
pub(super) struct ToolHistory {
    server: String,
    tool: String,
    versions: Vec<Version>,
}

pub(super) async fn tool_history(
    State(gate): State<Arc<Gate>>,
    Extension(caller): Extension<Arc<Caller>>,
    Path((server, tool)): Path<(String, String)>,
) -> Result<Json<ToolHistory>, ApiError> {
    let versions = gate
        .tool_history(&caller, &server, &tool)
        .await
        .map_err(|e| refuse(&gate, e))?;
    Ok(Json(ToolHistory {
        server,
        tool,
        versions,
    }))
}

/// The body of an accept: the contract hash a `contract_pinned` refusal named.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Accept {
    hash: String,
}

#[derive(Serialize)]
pub(super) struct Accepted {
    server: String,
    tool: String,
    accepted: String,
}

/// Accepts a change to a pinned contract (admin scope): the registration that brings the
/// contract with this hash is no longer refused.
pub(super) async fn accept_contract(
    State(gate): State<Arc<Gate>>,
    Extension(caller): Extension<Arc<Caller>>,
    Path((server, tool)): Path<(String, String)>,
    headers: HeaderMap,
    raw: Body,
) -> Result<Json<Accepted>, ApiError> {
    let bytes = read_body(&gate, &headers, raw).await?;
    let accept: Accept = serde_json::from_slice(&bytes).map_err(|e| {
        refuse(
            &gate,
            CheckError::MalformedJson(format!(
                "the body must be {{\"hash\": \"...\"}}, the contract hash a contract_pinned refusal named: {e}"
            )),
        )
    })?;
    gate.accept_contract(&caller, &server, &tool, &accept.hash)
        .await
        .map_err(|e| refuse(&gate, e))?;
    Ok(Json(Accepted {
        server,
        tool,
        accepted: accept.hash,
    }))
}

#[derive(Serialize)]
pub(super) struct Removed {
    server: String,
    removed: usize,
}

/// Removes all of a server's tools (and the server).
pub(super) async fn remove_tools(
    State(gate): State<Arc<Gate>>,
    Extension(caller): Extension<Arc<Caller>>,
    Path(server): Path<String>,
    query: Result<Query<ShadowQuery>, QueryRejection>,
) -> Result<Json<Removed>, ApiError> {
    let removed = if shadow_query(&gate, query)? {
        gate.remove_shadow(&caller, &server, None).await
    } else {
        gate.remove_tools(&caller, &server, None).await
    }
    .map_err(|e| refuse(&gate, e))?;
    Ok(Json(Removed { server, removed }))
}

/// Removes one tool of a server.
pub(super) async fn remove_tool(
    State(gate): State<Arc<Gate>>,
    Extension(caller): Extension<Arc<Caller>>,
    Path((server, tool)): Path<(String, String)>,
    query: Result<Query<ShadowQuery>, QueryRejection>,
) -> Result<Json<Removed>, ApiError> {
    let removed = if shadow_query(&gate, query)? {
        gate.remove_shadow(&caller, &server, Some(&tool)).await
    } else {
        gate.remove_tools(&caller, &server, Some(&tool)).await
    }
    .map_err(|e| refuse(&gate, e))?;
    Ok(Json(Removed { server, removed }))
}
