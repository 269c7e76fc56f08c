//! The gateway's HTTP routes: `/mcp/{route}` (POST a message, GET the server's stream, DELETE
//! the session), `/healthz`; anything else is 404, another method on a route 405. A body that is
//! not one JSON-RPC message is refused here with a JSON-RPC error, before the rules see it.

use super::exchange::{Answer, Exchange, Head, MCP_SESSION_ID};
use super::Gateway;
use crate::core::domain::ProtocolVersion;
use crate::mcp::{self, Framing};
use axum::body::{Body, Bytes};
use axum::extract::{Path, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use std::convert::Infallible;
use std::sync::Arc;

/// The `MCP-Protocol-Version` header.
const PROTOCOL_VERSION: &str = "mcp-protocol-version";

/// The gateway's routes over its shared state.
pub fn router(gateway: Arc<Gateway>) -> Router {
    Router::new()
        .route(
            "/mcp/{route}",
            post(post_message).get(open_stream).delete(end_session),
        )
        .route("/healthz", get(|| async { "ok\n" }))
        .fallback(not_found)
        .with_state(gateway)
}

/// A JSON-RPC error as a whole answer: `status`, and `message` under `code`.
fn refusal(status: StatusCode, id: Option<&str>, code: i64, message: &str) -> Response {
    let body = mcp::error_answer(id, code, message);
    (
        status,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        body,
    )
        .into_response()
}

async fn not_found(State(gateway): State<Arc<Gateway>>, request: Request) -> Response {
    let message = format!(
        "schemagate gateway: nothing at {}; MCP clients connect to /mcp/NAME, where NAME is one of the routes: {}",
        request.uri().path(),
        gateway.names
    );
    refusal(StatusCode::NOT_FOUND, None, mcp::INVALID_REQUEST, &message)
}

/// The 404 for a route that does not exist, naming those that do.
fn unknown_route(gateway: &Gateway, name: &str) -> Response {
    let message = format!(
        "schemagate gateway: no route named {name:?}; the routes are: {}",
        gateway.names
    );
    refusal(StatusCode::NOT_FOUND, None, mcp::INVALID_REQUEST, &message)
}

/// The session the request names (held here, or made for it), or a new one.
fn session(
    gateway: &Gateway,
    route: &super::RouteState,
    headers: &HeaderMap,
) -> Arc<crate::mcp::Boundary> {
    let boundary = match headers.get(MCP_SESSION_ID).and_then(|v| v.to_str().ok()) {
        Some(id) => gateway
            .sessions
            .get_or_insert(route.index, id, || gateway.boundary(route)),
        None => gateway.boundary(route),
    };
    if let Some(version) = headers
        .get(PROTOCOL_VERSION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| ProtocolVersion::parse(v).ok())
    {
        boundary.assume_protocol(version);
    }
    boundary
}

async fn post_message(
    State(gateway): State<Arc<Gateway>>,
    Path(name): Path<String>,
    request: Request,
) -> Response {
    let Some(route) = gateway.routes.get(&name).cloned() else {
        return unknown_route(&gateway, &name);
    };
    let (parts, body) = request.into_parts();
    let limit = gateway.max_message_bytes;
    let read =
        tokio::time::timeout(gateway.body_read_timeout, axum::body::to_bytes(body, limit)).await;
    let message = match read {
        Ok(Ok(message)) => message,
        Ok(Err(_)) => {
            let text = format!(
                "schemagate gateway: the message is longer than --max-message-bytes ({limit} bytes), or its body was cut off; it was not relayed"
            );
            return refusal(
                StatusCode::PAYLOAD_TOO_LARGE,
                None,
                mcp::INVALID_REQUEST,
                &text,
            );
        }
        Err(_) => {
            let text = format!(
                "schemagate gateway: the message did not arrive within {} s; send it whole",
                gateway.body_read_timeout.as_secs()
            );
            return refusal(
                StatusCode::REQUEST_TIMEOUT,
                None,
                mcp::INVALID_REQUEST,
                &text,
            );
        }
    };
    match mcp::framing(&message) {
        Framing::Request { .. } | Framing::Other => {}
        Framing::Batch => {
            return refusal(
                StatusCode::BAD_REQUEST,
                None,
                mcp::INVALID_REQUEST,
                "schemagate gateway: a JSON-RPC batch is not relayed (MCP has not allowed batches since 2025-06-18); send each message in a POST of its own",
            )
        }
        Framing::NotJsonRpc => {
            return refusal(
                StatusCode::BAD_REQUEST,
                None,
                mcp::PARSE_ERROR,
                "schemagate gateway: the body is not a JSON-RPC message; POST one JSON-RPC request, notification or answer as JSON",
            )
        }
    }
    let boundary = session(&gateway, &route, &parts.headers);
    let (exchange, answer) = Exchange::new(gateway, route, boundary, &parts.headers, message);
    exchange.post();
    respond(answer).await
}

async fn open_stream(
    State(gateway): State<Arc<Gateway>>,
    Path(name): Path<String>,
    headers: HeaderMap,
) -> Response {
    relay_bodyless(gateway, &name, &headers, Method::GET).await
}

async fn end_session(
    State(gateway): State<Arc<Gateway>>,
    Path(name): Path<String>,
    headers: HeaderMap,
) -> Response {
    relay_bodyless(gateway, &name, &headers, Method::DELETE).await
}

async fn relay_bodyless(
    gateway: Arc<Gateway>,
    name: &str,
    headers: &HeaderMap,
    method: Method,
) -> Response {
    let Some(route) = gateway.routes.get(name).cloned() else {
        return unknown_route(&gateway, name);
    };
    let boundary = session(&gateway, &route, headers);
    let (exchange, answer) = Exchange::new(gateway, route, boundary, headers, Bytes::new());
    if method == Method::DELETE {
        exchange.ended();
    }
    exchange.open(method);
    respond(answer).await
}

/// The client's answer: its head once decided, its body as the exchange writes it.
async fn respond(answer: Answer) -> Response {
    let Answer { head, body } = answer;
    let head = head.await.unwrap_or_else(|_| Head::accepted());
    let stream = futures_util::stream::unfold(body, |mut body| async move {
        body.recv()
            .await
            .map(|chunk| (Ok::<_, Infallible>(chunk), body))
    });
    let mut response = Response::new(Body::from_stream(stream));
    *response.status_mut() = head.status;
    *response.headers_mut() = head.headers;
    response
}
