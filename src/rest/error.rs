//! The REST edge of [`CheckError`]: a status and a JSON body `{"error": {"code", "message"}}`.

use crate::core::error::{CheckError, ErrorClass, Remedy};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;

/// The HTTP status for each class of refusal.
pub fn status_of(class: ErrorClass) -> StatusCode {
    match class {
        ErrorClass::BadRequest => StatusCode::BAD_REQUEST,
        ErrorClass::NotFound => StatusCode::NOT_FOUND,
        ErrorClass::TooLarge => StatusCode::PAYLOAD_TOO_LARGE,
        ErrorClass::Unprocessable => StatusCode::UNPROCESSABLE_ENTITY,
        ErrorClass::Unavailable | ErrorClass::Overloaded => StatusCode::SERVICE_UNAVAILABLE,
        ErrorClass::Timeout => StatusCode::REQUEST_TIMEOUT,
        ErrorClass::Unauthenticated => StatusCode::UNAUTHORIZED,
        ErrorClass::Forbidden => StatusCode::FORBIDDEN,
        ErrorClass::Conflict => StatusCode::CONFLICT,
        ErrorClass::Internal => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

/// Codes only the REST edge sends: a policy or token reload refused, a method a route does not
/// take, a path no route has.
pub const POLICY_INVALID: &str = "policy_invalid";
pub const TOKENS_INVALID: &str = "tokens_invalid";
pub const METHOD_NOT_ALLOWED: &str = "method_not_allowed";
pub const NOT_FOUND: &str = "not_found";
/// A `/v1/` request whose `Host` or `Origin` the listener does not answer (DNS rebinding, a
/// cross-site request).
pub const HOST_NOT_ALLOWED: &str = "host_not_allowed";
pub const ORIGIN_NOT_ALLOWED: &str = "origin_not_allowed";

/// Every `code` a REST error body can carry: the check errors (all but `malformed_message` and
/// `unavailable`, which only gRPC sends: an undecodable message, a stream cut by a drain) and the
/// edge's own. `docs/openapi.yaml` lists the same.
pub fn codes() -> Vec<&'static str> {
    CheckError::CODES
        .into_iter()
        .filter(|&c| c != "malformed_message" && c != "unavailable")
        .chain([
            POLICY_INVALID,
            TOKENS_INVALID,
            METHOD_NOT_ALLOWED,
            NOT_FOUND,
            HOST_NOT_ALLOWED,
            ORIGIN_NOT_ALLOWED,
        ])
        .collect()
}

/// The 403 of a request refused for its `Host` or `Origin` (logged: it is how a web page's
/// attempt shows).
pub fn origin_refused(refused: &crate::net::origins::Refused) -> Response {
    tracing::info!(header = refused.header(), refused = %refused, "a request was refused for its Host or Origin");
    let code = match refused {
        crate::net::origins::Refused::Host(_) => HOST_NOT_ALLOWED,
        crate::net::origins::Refused::Origin(_) => ORIGIN_NOT_ALLOWED,
    };
    plain(StatusCode::FORBIDDEN, code, refused.to_string())
}

/// What `Retry-After` says when schemagate is overloaded: work drains in well under a second.
pub const RETRY_AFTER_SECS: &str = "1";

/// The body of every REST error, and of a failed batch item.
#[derive(Debug, Serialize)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

#[derive(Debug, Serialize)]
pub struct ErrorDetail {
    pub code: &'static str,
    pub message: String,
}

impl From<&CheckError> for ErrorBody {
    fn from(e: &CheckError) -> Self {
        let mut message = e.to_string();
        match e.remedy() {
            Some(Remedy::RegisterTools { server }) => message.push_str(&format!(
                " (register with PUT /v1/servers/{}/tools)",
                server.unwrap_or("{server}")
            )),
            None => {}
        }
        ErrorBody {
            error: ErrorDetail {
                code: e.code(),
                message,
            },
        }
    }
}

/// A [`CheckError`] on its way out as an HTTP response.
#[derive(Debug)]
pub struct ApiError(pub CheckError);

impl From<CheckError> for ApiError {
    fn from(e: CheckError) -> Self {
        ApiError(e)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = status_of(self.0.class());
        let mut response = (status, axum::Json(ErrorBody::from(&self.0))).into_response();
        match self.0.class() {
            ErrorClass::Overloaded => {
                response.headers_mut().insert(
                    axum::http::header::RETRY_AFTER,
                    axum::http::HeaderValue::from_static(RETRY_AFTER_SECS),
                );
            }
            ErrorClass::Unauthenticated => {
                response.headers_mut().insert(
                    axum::http::header::WWW_AUTHENTICATE,
                    axum::http::HeaderValue::from_static(r#"Bearer realm="schemagate""#),
                );
            }
            _ => {}
        }
        response
    }
}

/// A plain error response for things that are not checks (unknown route, reload failure).
pub fn plain(status: StatusCode, code: &'static str, message: String) -> Response {
    (
        status,
        axum::Json(ErrorBody {
            error: ErrorDetail { code, message },
        }),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::error::Capacity;

    #[test]
    fn each_class_has_its_status() {
        let pinned = [
            (CheckError::MalformedJson("x".into()), 400),
            (CheckError::MissingPayload, 400),
            (CheckError::UnknownSchemaHash("h".into()), 404),
            (CheckError::BodyTooLarge { limit: 1 }, 413),
            (CheckError::BatchTooLarge { len: 2, limit: 1 }, 413),
            (CheckError::SchemaTooLarge { size: 2, limit: 1 }, 413),
            (CheckError::SchemaInvalid("x".into()), 422),
            (CheckError::RemoteRef("u".into()), 422),
            (CheckError::SchemaTooComplex("x".into()), 422),
            (
                CheckError::TooDeep {
                    what: "payload",
                    limit: 1,
                },
                422,
            ),
            (
                CheckError::NumberTooLong {
                    length: 5000,
                    limit: 4096,
                },
                422,
            ),
            (CheckError::MalformedMessage("x".into()), 400),
            (
                CheckError::TooManyTools {
                    server: "s".into(),
                    tools: 2,
                    limit: 1,
                },
                413,
            ),
            (
                CheckError::Overloaded(Capacity::Queued {
                    checks: 1,
                    bytes: 1,
                }),
                503,
            ),
            (CheckError::BodyTimeout { secs: 1 }, 408),
            (
                CheckError::Unauthenticated(crate::core::error::Unauthenticated::Unknown),
                401,
            ),
            (
                CheckError::Forbidden {
                    token: "t".into(),
                    denied: crate::core::error::Denied::Scope("register"),
                },
                403,
            ),
            (
                CheckError::ContractPinned {
                    server: "s".into(),
                    detail: "d".into(),
                    tools: vec!["t".into()],
                },
                409,
            ),
            (CheckError::Unavailable, 503),
            (CheckError::Internal, 500),
        ];
        for (error, status) in pinned {
            assert_eq!(status_of(error.class()).as_u16(), status, "{error:?}");
        }
    }
}
