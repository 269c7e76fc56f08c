//! The gRPC edge of [`CheckError`]: a status code, the error's message, and the machine-readable
//! code in the `schemagate-error-code` metadata entry.

use crate::core::error::{CheckError, ErrorClass, Remedy};
use tonic::{Code, Status};

/// Metadata key carrying the error code (`malformed_json`, `schema_invalid`, ...).
pub const ERROR_CODE_KEY: &str = "schemagate-error-code";

/// The gRPC code for each class of refusal.
pub fn code_of(class: ErrorClass) -> Code {
    match class {
        ErrorClass::BadRequest | ErrorClass::Unprocessable => Code::InvalidArgument,
        ErrorClass::NotFound => Code::NotFound,
        ErrorClass::TooLarge | ErrorClass::Overloaded => Code::ResourceExhausted,
        ErrorClass::Timeout => Code::DeadlineExceeded,
        ErrorClass::Unauthenticated => Code::Unauthenticated,
        ErrorClass::Forbidden => Code::PermissionDenied,
        ErrorClass::Conflict => Code::FailedPrecondition,
        ErrorClass::Unavailable => Code::Unavailable,
        ErrorClass::Internal => Code::Internal,
    }
}

/// The error's message, with the gRPC way to its remedy.
pub fn message(e: &CheckError) -> String {
    let mut message = e.to_string();
    match e.remedy() {
        Some(Remedy::RegisterTools { .. }) => message.push_str(" (register with RegisterTools)"),
        None => {}
    }
    message
}

/// The status a refused check answers with.
pub fn status(e: &CheckError) -> Status {
    let mut status = Status::new(code_of(e.class()), message(e));
    if let Ok(value) = e.code().parse() {
        status.metadata_mut().insert(ERROR_CODE_KEY, value);
    }
    status
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::error::Capacity;

    #[test]
    fn each_error_has_its_status() {
        let pinned = [
            (CheckError::MalformedJson("x".into()), Code::InvalidArgument),
            (CheckError::MissingPayload, Code::InvalidArgument),
            (CheckError::SchemaInvalid("x".into()), Code::InvalidArgument),
            (CheckError::RemoteRef("u".into()), Code::InvalidArgument),
            (
                CheckError::SchemaTooComplex("x".into()),
                Code::InvalidArgument,
            ),
            (
                CheckError::TooDeep {
                    what: "payload",
                    limit: 1,
                },
                Code::InvalidArgument,
            ),
            (CheckError::UnknownSchemaHash("h".into()), Code::NotFound),
            (
                CheckError::UnknownTool {
                    server: "s".into(),
                    tool: "t".into(),
                },
                Code::NotFound,
            ),
            (
                CheckError::BatchTooLarge { len: 2, limit: 1 },
                Code::ResourceExhausted,
            ),
            (
                CheckError::SchemaTooLarge { size: 2, limit: 1 },
                Code::ResourceExhausted,
            ),
            (
                CheckError::BodyTooLarge { limit: 1 },
                Code::ResourceExhausted,
            ),
            (
                CheckError::WorkLimitExceeded { work: 2, limit: 1 },
                Code::InvalidArgument,
            ),
            (
                CheckError::SchemaRootNotObject {
                    version: "2025-06-18",
                },
                Code::InvalidArgument,
            ),
            (CheckError::MissingSchema, Code::InvalidArgument),
            (CheckError::ConflictingSchemas, Code::InvalidArgument),
            (
                CheckError::NumberTooLong {
                    length: 5000,
                    limit: 4096,
                },
                Code::InvalidArgument,
            ),
            (
                CheckError::MalformedMessage("x".into()),
                Code::InvalidArgument,
            ),
            (
                CheckError::TooManyTools {
                    server: "s".into(),
                    tools: 2,
                    limit: 1,
                },
                Code::ResourceExhausted,
            ),
            (
                CheckError::Overloaded(Capacity::Queued {
                    checks: 1,
                    bytes: 1,
                }),
                Code::ResourceExhausted,
            ),
            (CheckError::BodyTimeout { secs: 1 }, Code::DeadlineExceeded),
            (
                CheckError::Unauthenticated(crate::core::error::Unauthenticated::Missing),
                Code::Unauthenticated,
            ),
            (
                CheckError::Forbidden {
                    token: "t".into(),
                    denied: crate::core::error::Denied::Server {
                        server: "x".into(),
                        allowed: "crm".into(),
                    },
                },
                Code::PermissionDenied,
            ),
            (CheckError::Unavailable, Code::Unavailable),
            (CheckError::Internal, Code::Internal),
        ];
        for (error, code) in pinned {
            let s = status(&error);
            assert_eq!(s.code(), code, "{error:?}");
            assert!(s.message().starts_with(&error.to_string()), "{error:?}");
            let carried = s
                .metadata()
                .get(ERROR_CODE_KEY)
                .and_then(|v| v.to_str().ok());
            assert_eq!(carried, Some(error.code()));
        }
    }

    #[test]
    fn each_class_has_its_code() {
        let pinned = [
            (ErrorClass::BadRequest, Code::InvalidArgument),
            // A schema that does not compile is the client's to fix, like a malformed request.
            (ErrorClass::Unprocessable, Code::InvalidArgument),
            (ErrorClass::NotFound, Code::NotFound),
            (ErrorClass::TooLarge, Code::ResourceExhausted),
            (ErrorClass::Unavailable, Code::Unavailable),
            // Overloaded is not unavailable: a client retries the same instance after a pause.
            (ErrorClass::Overloaded, Code::ResourceExhausted),
            (ErrorClass::Timeout, Code::DeadlineExceeded),
            (ErrorClass::Unauthenticated, Code::Unauthenticated),
            (ErrorClass::Forbidden, Code::PermissionDenied),
            (ErrorClass::Conflict, Code::FailedPrecondition),
            (ErrorClass::Internal, Code::Internal),
        ];
        for (class, code) in pinned {
            assert_eq!(code_of(class), code, "{class:?}");
        }
    }
}
