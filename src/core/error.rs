//! The reasons a check cannot be made at all. A verdict, even a failing one, is not an error.
//!
//! These errors know nothing of HTTP or gRPC: each adapter maps an [`ErrorClass`] to its own status
//! (and pins that mapping in a unit test).

use crate::core::domain::{NameError, UnknownProtocol};

/// What kind of refusal an error is; adapters turn this into a status code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorClass {
    /// The request is not well formed (malformed JSON, a missing or contradictory field).
    BadRequest,
    /// Something the request names is not known here (a schema hash, a registered tool).
    NotFound,
    /// A size or count limit was exceeded.
    TooLarge,
    /// The request is well formed but its schema or payload cannot be checked (does not compile,
    /// would need a fetch, is too costly).
    Unprocessable,
    /// The service is shutting down.
    Unavailable,
    /// The service has as much work as it takes; retry shortly.
    Overloaded,
    /// The client took too long to send its request.
    Timeout,
    /// No credentials, or ones schemagate does not know.
    Unauthenticated,
    /// Known credentials without the right to do this.
    Forbidden,
    /// The request conflicts with the state it would change (a pinned contract).
    Conflict,
    /// A fault inside schemagate; details are logged, not sent.
    Internal,
}

/// Why a check (or a registration) was refused.
#[derive(Debug, Clone, thiserror::Error)]
pub enum CheckError {
    /// The message says which document is not JSON, and where.
    #[error("{0}")]
    MalformedJson(String),
    #[error("{0}")]
    InvalidField(String),
    /// A request message that cannot be decoded at all (truncated, or a string field that is not
    /// UTF-8).
    #[error("the request message cannot be decoded ({0}): send a complete, well-formed message")]
    MalformedMessage(String),
    #[error("{0}")]
    InvalidName(#[from] NameError),
    #[error("no payload: send exactly one of `instance`, `result` or `arguments`")]
    MissingPayload,
    #[error("more than one payload: send exactly one of `instance`, `result` or `arguments`")]
    ConflictingPayloads,
    #[error("no schema: send `schema` (inline JSON) or `schema_hash`, or name a `server` and `tool` whose tools are registered")]
    MissingSchema,
    #[error("both `schema` and `schema_hash` were sent: send one")]
    ConflictingSchemas,
    #[error("schema_hash {0} is not known to this instance: send the schema inline once as `schema` (its answer carries the hash), or register the tool")]
    UnknownSchemaHash(String),
    #[error("tool {tool:?} of server {server:?} is not registered: register the server's tools, or send the schema inline")]
    UnknownTool { server: String, tool: String },
    #[error("server {0:?} has no registered tools: register its tools first (list the registered servers to see which are)")]
    UnknownServer(String),
    /// A registration that would change a pinned contract; `detail` names each refused tool,
    /// its change, its reasons and the hash that accepts it.
    #[error("the contract of server {server:?} is pinned and this registration would change it, so nothing was registered: {detail}. Accept each change (POST /v1/servers/{server}/tools/TOOL/accept, or gRPC AcceptContract, with its hash; admin scope) and register again, or unpin it in the policy")]
    ContractPinned {
        server: String,
        detail: String,
        /// The tools whose changes were refused.
        tools: Vec<String>,
    },
    #[error("request body is larger than the limit of {limit} bytes (see --max-body-bytes): split the batch or send less")]
    BodyTooLarge { limit: usize },
    #[error("batch has {len} items; the limit is {limit} (see --max-batch-items): split it")]
    BatchTooLarge { len: usize, limit: usize },
    #[error("schema is {size} bytes; the limit is {limit} (see --max-schema-bytes)")]
    SchemaTooLarge { size: usize, limit: usize },
    #[error("{what} nests deeper than {limit} levels (see --max-depth): flatten it")]
    TooDeep { what: &'static str, limit: usize },
    #[error("schema does not compile: {0}")]
    SchemaInvalid(String),
    #[error("schema $ref {0:?} points outside the schema; schemagate never fetches a $ref from the network or disk: copy the referenced schema under `$defs` and point the $ref at \"#/$defs/...\"")]
    RemoteRef(String),
    #[error("schema is too costly to evaluate: {0}")]
    SchemaTooComplex(String),
    #[error("this check would cost about {work} schema evaluations, over the limit of {limit} (see --max-check-work): send a smaller payload or a simpler schema")]
    WorkLimitExceeded { work: u64, limit: u64 },
    #[error("the payload holds a number written with {length} characters, past the {limit} a number may have (numbers are judged exactly, from their literal, up to that length): send it as a string, and type it as one in the schema")]
    NumberTooLong { length: usize, limit: usize },
    #[error("outputSchema root must be an object schema (\"type\": \"object\") under MCP {version}; fix the tool's outputSchema, follow MCP 2026-07-28 (`protocol_version`), which allows any root, or set require_object_root = false in the policy")]
    SchemaRootNotObject { version: &'static str },
    #[error("registering would bring server {server:?} to {tools} tools, past the limit of {limit} registered tools across all servers (see --max-registered-tools): register fewer tools, or remove a server's")]
    TooManyTools {
        server: String,
        tools: usize,
        limit: usize,
    },
    #[error("request body did not arrive within {secs} s (see --body-read-timeout-secs): send the whole body at once")]
    BodyTimeout { secs: u64 },
    #[error("schemagate is at capacity ({0}): retry after a short wait, or on another instance")]
    Overloaded(Capacity),
    #[error("{0}")]
    Unauthenticated(Unauthenticated),
    #[error("token {token:?} {denied}")]
    Forbidden { token: String, denied: Denied },
    #[error("schemagate is shutting down; retry on another instance")]
    Unavailable,
    #[error("the shared registry (Redis) cannot be reached, so this change was not made ({0}); contracts already registered are still served: retry shortly")]
    RegistryUnavailable(String),
    #[error("internal error; the details are in schemagate's log")]
    Internal,
}

/// Why a request's credentials were not accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Unauthenticated {
    #[error("no credentials: send `Authorization: Bearer TOKEN` (gRPC: `authorization` metadata), or a client certificate where --tls-client-ca is set")]
    Missing,
    #[error("the bearer token (or the client certificate's name) is not one schemagate knows (it may have been revoked): ask the operator for a token")]
    Unknown,
}

/// What a known caller may not do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Denied {
    #[error("lacks the `{0}` scope this needs: ask the operator to grant it")]
    Scope(&'static str),
    #[error(
        "may not name server {server:?} (its servers: {allowed}): use a token for that server"
    )]
    Server { server: String, allowed: String },
}

/// Which bound an overloaded request met.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Capacity {
    /// Work admitted to the workers (queued or running).
    Queued { checks: usize, bytes: usize },
    /// Bytes held by request bodies still arriving.
    Receiving { held: usize, limit: usize },
    /// A gateway stdio route's processes, every one in use.
    Processes { limit: usize },
}

impl std::fmt::Display for Capacity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Capacity::Queued { checks, bytes } => write!(
                f,
                "{checks} checks, {bytes} bytes of work admitted; see --max-queued-checks and --max-queued-bytes"
            ),
            Capacity::Receiving { held, limit } => write!(
                f,
                "request bodies still arriving hold {held} of {limit} bytes; see --max-receiving-bytes"
            ),
            Capacity::Processes { limit } => write!(
                f,
                "the route runs {limit} stdio processes, all in use; see --stdio-max-processes"
            ),
        }
    }
}

/// A remedy whose how-to depends on the transport: each adapter names its own way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Remedy<'a> {
    /// Register the tools of this server (or of the check's server).
    RegisterTools { server: Option<&'a str> },
}

impl From<UnknownProtocol> for CheckError {
    fn from(e: UnknownProtocol) -> Self {
        CheckError::InvalidField(e.to_string())
    }
}

impl CheckError {
    /// What the client can do about it that the transport names (a route, an RPC); the core's
    /// message stays the same over every transport.
    pub fn remedy(&self) -> Option<Remedy<'_>> {
        match self {
            CheckError::MissingSchema => Some(Remedy::RegisterTools { server: None }),
            CheckError::UnknownTool { server, .. } => Some(Remedy::RegisterTools {
                server: Some(server),
            }),
            _ => None,
        }
    }

    /// A stable, machine-readable code; the same string appears in REST and gRPC error bodies and in
    /// `schemagate_request_errors_total{code}`.
    pub fn code(&self) -> &'static str {
        match self {
            CheckError::MalformedJson(_) => "malformed_json",
            CheckError::InvalidField(_) | CheckError::InvalidName(_) => "invalid_field",
            CheckError::MalformedMessage(_) => "malformed_message",
            CheckError::MissingPayload => "missing_payload",
            CheckError::ConflictingPayloads => "conflicting_payloads",
            CheckError::MissingSchema => "missing_schema",
            CheckError::ConflictingSchemas => "conflicting_schemas",
            CheckError::UnknownSchemaHash(_) => "unknown_schema_hash",
            CheckError::UnknownTool { .. } => "unknown_tool",
            CheckError::UnknownServer(_) => "unknown_server",
            CheckError::BodyTooLarge { .. } => "body_too_large",
            CheckError::BatchTooLarge { .. } => "batch_too_large",
            CheckError::SchemaTooLarge { .. } => "schema_too_large",
            CheckError::TooDeep { .. } => "nesting_too_deep",
            CheckError::SchemaInvalid(_) => "schema_invalid",
            CheckError::RemoteRef(_) => "schema_ref_not_allowed",
            CheckError::SchemaTooComplex(_) => "schema_too_complex",
            CheckError::WorkLimitExceeded { .. } => "work_limit_exceeded",
            CheckError::SchemaRootNotObject { .. } => "schema_root_not_object",
            CheckError::NumberTooLong { .. } => "number_too_long",
            CheckError::TooManyTools { .. } => "too_many_tools",
            CheckError::BodyTimeout { .. } => "body_timeout",
            CheckError::Overloaded(_) => "overloaded",
            CheckError::Unauthenticated(_) => "unauthenticated",
            CheckError::Forbidden { .. } => "forbidden",
            CheckError::ContractPinned { .. } => "contract_pinned",
            CheckError::Unavailable => "unavailable",
            CheckError::RegistryUnavailable(_) => "registry_unavailable",
            CheckError::Internal => "internal",
        }
    }

    /// Every code, in the order of [`CheckError::code_index`]: the `code` label values of
    /// `schemagate_request_errors_total`, there from start-up.
    pub const CODES: [&'static str; 29] = [
        "malformed_json",
        "malformed_message",
        "invalid_field",
        "missing_payload",
        "conflicting_payloads",
        "missing_schema",
        "conflicting_schemas",
        "unknown_schema_hash",
        "unknown_tool",
        "unknown_server",
        "body_too_large",
        "batch_too_large",
        "schema_too_large",
        "nesting_too_deep",
        "schema_invalid",
        "schema_ref_not_allowed",
        "schema_too_complex",
        "work_limit_exceeded",
        "schema_root_not_object",
        "number_too_long",
        "too_many_tools",
        "body_timeout",
        "overloaded",
        "unauthenticated",
        "forbidden",
        "contract_pinned",
        "unavailable",
        "registry_unavailable",
        "internal",
    ];

    /// The place of [`CheckError::code`] in [`CheckError::CODES`].
    pub fn code_index(&self) -> usize {
        let code = self.code();
        Self::CODES
            .iter()
            .position(|&c| c == code)
            .unwrap_or(Self::CODES.len() - 1)
    }

    pub fn class(&self) -> ErrorClass {
        match self {
            CheckError::MalformedJson(_)
            | CheckError::MalformedMessage(_)
            | CheckError::InvalidField(_)
            | CheckError::InvalidName(_)
            | CheckError::MissingPayload
            | CheckError::ConflictingPayloads
            | CheckError::MissingSchema
            | CheckError::ConflictingSchemas => ErrorClass::BadRequest,
            CheckError::UnknownSchemaHash(_)
            | CheckError::UnknownTool { .. }
            | CheckError::UnknownServer(_) => ErrorClass::NotFound,
            CheckError::BodyTooLarge { .. }
            | CheckError::BatchTooLarge { .. }
            | CheckError::SchemaTooLarge { .. }
            | CheckError::TooManyTools { .. } => ErrorClass::TooLarge,
            CheckError::TooDeep { .. }
            | CheckError::SchemaInvalid(_)
            | CheckError::RemoteRef(_)
            | CheckError::SchemaTooComplex(_)
            | CheckError::WorkLimitExceeded { .. }
            | CheckError::SchemaRootNotObject { .. }
            | CheckError::NumberTooLong { .. } => ErrorClass::Unprocessable,
            CheckError::BodyTimeout { .. } => ErrorClass::Timeout,
            CheckError::Overloaded(_) => ErrorClass::Overloaded,
            CheckError::Unauthenticated(_) => ErrorClass::Unauthenticated,
            CheckError::Forbidden { .. } => ErrorClass::Forbidden,
            CheckError::ContractPinned { .. } => ErrorClass::Conflict,
            CheckError::Unavailable | CheckError::RegistryUnavailable(_) => ErrorClass::Unavailable,
            CheckError::Internal => ErrorClass::Internal,
        }
    }
}

/// Whether serde_json stopped at its own recursion guard: nesting past it is a depth problem,
/// not malformed JSON. (serde_json says so only in its message; this is the one place that reads
/// it.)
pub(crate) fn is_too_deep(err: &serde_json::Error) -> bool {
    err.to_string().starts_with("recursion limit exceeded")
}

/// Maps a serde_json error on a request body, or on the payload field `field` of one, to the right
/// refusal: nesting past serde_json's own recursion guard is a depth problem, a value of the wrong
/// shape an invalid field, anything else malformed JSON.
pub(crate) fn from_json_error(
    err: &serde_json::Error,
    depth_limit: usize,
    field: Option<&str>,
) -> CheckError {
    if is_too_deep(err) {
        return CheckError::TooDeep {
            what: "request body",
            limit: depth_limit,
        };
    }
    match (err.is_data(), field) {
        (true, None) => CheckError::InvalidField(err.to_string()),
        (true, Some(field)) => CheckError::InvalidField(format!("`{field}`: {err}")),
        (false, None) => {
            CheckError::MalformedJson(format!("request body is not valid JSON: {err}"))
        }
        (false, Some(field)) => {
            CheckError::MalformedJson(format!("`{field}` is not valid JSON: {err}"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_is_listed_once() {
        let every = [
            CheckError::MalformedJson(String::new()),
            CheckError::MalformedMessage(String::new()),
            CheckError::InvalidField(String::new()),
            CheckError::MissingPayload,
            CheckError::ConflictingPayloads,
            CheckError::MissingSchema,
            CheckError::ConflictingSchemas,
            CheckError::UnknownSchemaHash(String::new()),
            CheckError::UnknownTool {
                server: String::new(),
                tool: String::new(),
            },
            CheckError::UnknownServer(String::new()),
            CheckError::BodyTooLarge { limit: 1 },
            CheckError::BatchTooLarge { len: 2, limit: 1 },
            CheckError::SchemaTooLarge { size: 2, limit: 1 },
            CheckError::TooDeep {
                what: "payload",
                limit: 1,
            },
            CheckError::SchemaInvalid(String::new()),
            CheckError::RemoteRef(String::new()),
            CheckError::SchemaTooComplex(String::new()),
            CheckError::WorkLimitExceeded { work: 2, limit: 1 },
            CheckError::SchemaRootNotObject {
                version: "2025-06-18",
            },
            CheckError::NumberTooLong {
                length: 5000,
                limit: 4096,
            },
            CheckError::TooManyTools {
                server: String::new(),
                tools: 2,
                limit: 1,
            },
            CheckError::BodyTimeout { secs: 1 },
            CheckError::Overloaded(Capacity::Queued {
                checks: 1,
                bytes: 1,
            }),
            CheckError::Unauthenticated(Unauthenticated::Missing),
            CheckError::Forbidden {
                token: "t".into(),
                denied: Denied::Scope("check"),
            },
            CheckError::ContractPinned {
                server: String::new(),
                detail: String::new(),
                tools: Vec::new(),
            },
            CheckError::Unavailable,
            CheckError::RegistryUnavailable(String::new()),
            CheckError::Internal,
        ];
        let codes: Vec<&str> = every.iter().map(CheckError::code).collect();
        assert_eq!(codes, CheckError::CODES, "CODES lists every code, in order");
        for (i, e) in every.iter().enumerate() {
            assert_eq!(e.code_index(), i, "{e:?}");
        }
    }
}
