//! The gateway's HTTP routes: `/mcp/{route}` (POST a message, GET the server's stream, DELETE
//! the session), the routes' OAuth metadata, `/healthz` and `/readyz`; anything else is 404,
//! another method on a route 405. A body that is not one JSON-RPC message is refused here with a
//! JSON-RPC error, before the rules see it. A POST of a message to a route is answered below the
//! router ([`Port`]), other requests through it.

use super::exchange::{AnswerHead, ClientRequest, Exchange};
use super::routes::RouteState;
use super::sessions::{Held, Order, ORDER_WAIT};
use super::upstream::headers::{MCP_METHOD, MCP_NAME, MCP_SESSION_ID};
use super::upstream::RouteUpstream;
use super::Gateway;
use crate::core::auth::{Caller, PeerNames, Scope};
use crate::core::domain::ProtocolVersion;
use crate::core::error::{CheckError, ErrorClass, Unauthenticated};
use crate::core::metrics::Transport;
use crate::mcp::{self, Framing};
use crate::net::origins::Refused;
use axum::body::Bytes;
use axum::extract::{Path, Request, State};
use axum::http::{header, HeaderMap, HeaderName, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::future::RouteFuture;
use axum::routing::{get, post};
use axum::Router;
use futures_util::future::{BoxFuture, Either};
use hyper::body::Incoming;
use std::convert::Infallible;
use std::sync::Arc;
use std::task::{Context, Poll};

/// The `MCP-Protocol-Version` header.
const PROTOCOL_VERSION: HeaderName = HeaderName::from_static("mcp-protocol-version");

/// The gateway port's service. A POST to a route (`/mcp/NAME`), nearly every request the port
/// gets, is answered here, below the router: none of its matching, its path parameter or its
/// middleware future, each a few allocations per request. Every other request goes to the
/// [`router`], and so does a POST whose route name holds a percent escape (the router decodes
/// it).
#[derive(Clone)]
pub struct Port {
    gateway: Arc<Gateway>,
    router: Router,
}

/// The gateway port's service over its shared state.
pub fn service(gateway: Arc<Gateway>) -> Port {
    Port {
        router: router(Arc::clone(&gateway)),
        gateway,
    }
}

/// The route name a POST to `/mcp/NAME` names, as the router would read it: one segment, no
/// percent escape to decode.
fn posted_route<B>(request: &http::Request<B>) -> Option<&str> {
    if request.method() != Method::POST {
        return None;
    }
    let name = request.uri().path().strip_prefix("/mcp/")?;
    (!name.is_empty() && !name.contains(['/', '%'])).then_some(name)
}

impl tower::Service<http::Request<Incoming>> for Port {
    type Response = Response;
    type Error = Infallible;
    type Future = Either<BoxFuture<'static, Result<Response, Infallible>>, RouteFuture<Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<Incoming>) -> Self::Future {
        let Some(name) = posted_route(&request) else {
            return Either::Right(tower::Service::call(&mut self.router, request));
        };
        // As the router's middleware and then `post_message` do, with the routes loaded once.
        let routes = self.gateway.routes.load();
        let route = match routes.origins.check_request(&request) {
            Err(refused) => Err(origin_refused(&refused)),
            Ok(()) => routes
                .get(name)
                .ok_or_else(|| unknown_route(&self.gateway, name)),
        };
        drop(routes);
        let gateway = Arc::clone(&self.gateway);
        Either::Left(Box::pin(async move {
            Ok(match route {
                Ok(route) => post_to_route(gateway, route, request).await,
                Err(refused) => refused,
            })
        }))
    }
}

/// The gateway's routes over its shared state.
fn router(gateway: Arc<Gateway>) -> Router {
    // Every route a browser could reach is behind the Host and Origin checks; the probes are not
    // (a kubelet names the pod's address).
    let guarded = Router::new()
        .route(
            "/mcp/{route}",
            post(post_message).get(open_stream).delete(end_session),
        )
        .route(
            "/.well-known/oauth-protected-resource/mcp/{route}",
            get(resource_metadata),
        )
        .route_layer(axum::middleware::from_fn_with_state(
            Arc::clone(&gateway),
            host_and_origin,
        ));
    Router::new()
        .merge(guarded)
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(ready))
        .fallback(not_found)
        .with_state(gateway)
}

/// The answer to a POST whose message could not be read whole: too long, too slow, past the
/// receiving budget, or cut off (counted, as REST's refusals are).
fn unread(gateway: &Gateway, error: &CheckError) -> Response {
    gateway.gate.instrument().refused(Transport::Gateway, error);
    let (status, text) = match error {
        CheckError::BodyTooLarge { limit } => (
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("schemagate gateway: the message is longer than --max-message-bytes ({limit} bytes); it was not relayed"),
        ),
        CheckError::BodyTimeout { secs } => (
            StatusCode::REQUEST_TIMEOUT,
            format!("schemagate gateway: the message did not arrive within {secs} s; send it whole"),
        ),
        CheckError::Overloaded(_) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("schemagate gateway: {error}"),
        ),
        other => (
            StatusCode::BAD_REQUEST,
            format!("schemagate gateway: the message could not be read ({other}); it was not relayed"),
        ),
    };
    refusal(status, None, mcp::INVALID_REQUEST, &text)
}

/// Lets a request through when its `Host` and `Origin` are ones the gateway answers (see
/// [`crate::net::origins`]); 403 with a JSON-RPC error naming the header otherwise, before
/// anything else is read (no session, no process, no upstream).
async fn host_and_origin(
    State(gateway): State<Arc<Gateway>>,
    request: Request,
    next: axum::middleware::Next,
) -> Response {
    match gateway.routes.load().origins.check_request(&request) {
        Ok(()) => next.run(request).await,
        Err(refused) => origin_refused(&refused),
    }
}

/// The 403 for a request whose `Host` or `Origin` the gateway does not answer.
fn origin_refused(refused: &Refused) -> Response {
    tracing::info!(header = refused.header(), refused = %refused, "a request was refused for its Host or Origin");
    let message = format!("schemagate gateway: {refused}");
    refusal(StatusCode::FORBIDDEN, None, mcp::INVALID_REQUEST, &message)
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

/// The route's OAuth protected-resource metadata: the upstream's, with `resource` the route's
/// URL here (see [`super::oauth`]). Public, as the upstream's is: it needs no token.
async fn resource_metadata(
    State(gateway): State<Arc<Gateway>>,
    Path(name): Path<String>,
    headers: HeaderMap,
) -> Response {
    let Some(route) = gateway.routes.load().get(&name) else {
        return unknown_route(&gateway, &name);
    };
    let base = super::oauth::public_base(&gateway, headers.get(header::HOST));
    let (status, body) = super::oauth::metadata(&gateway, &route, &base).await;
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

/// Ready once the shared registry (if any) has been read in full: a replica that answers
/// before it would judge calls without the contracts the others learned.
async fn ready(State(gateway): State<Arc<Gateway>>) -> Response {
    if gateway.gate.is_ready() {
        (StatusCode::OK, "ready\n").into_response()
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "not ready: reading the shared registry\n",
        )
            .into_response()
    }
}

async fn not_found(State(gateway): State<Arc<Gateway>>, request: Request) -> Response {
    let message = format!(
        "schemagate gateway: nothing at {}; MCP clients connect to /mcp/NAME, where NAME is one of the routes: {}",
        request.uri().path(),
        gateway.routes.load().names
    );
    refusal(StatusCode::NOT_FOUND, None, mcp::INVALID_REQUEST, &message)
}

/// The 404 for a route that does not exist, naming those that do.
fn unknown_route(gateway: &Gateway, name: &str) -> Response {
    let message = format!(
        "schemagate gateway: no route named {name:?}; the routes are: {}",
        gateway.routes.load().names
    );
    refusal(StatusCode::NOT_FOUND, None, mcp::INVALID_REQUEST, &message)
}

/// Who sends a request to `route`: the token in `Proxy-Authorization` (`Authorization` is the
/// upstream's) or the client certificate's name, with the `check` scope and `route` among the
/// servers it may name; anyone when no tokens are configured.
fn caller(
    gateway: &Gateway,
    route: &RouteState,
    headers: &HeaderMap,
    peer: Option<&PeerNames>,
) -> Result<Arc<Caller>, CheckError> {
    let credentials = headers
        .get(header::PROXY_AUTHORIZATION)
        .map(|v| v.as_bytes());
    let caller = gateway
        .gate
        .auth()
        .authenticate(credentials, peer, Scope::Check)?;
    caller.may_name(Some(&route.route.name))?;
    Ok(caller)
}

/// A request refused for its credentials: 407 (with `Proxy-Authenticate`) without a known one,
/// 403 for a token that may not use the route; counted.
fn auth_refusal(gateway: &Gateway, error: CheckError) -> Response {
    gateway
        .gate
        .instrument()
        .refused(Transport::Gateway, &error);
    let (status, message) = match &error {
        CheckError::Unauthenticated(Unauthenticated::Missing) => (
            StatusCode::PROXY_AUTHENTICATION_REQUIRED,
            "schemagate gateway: no credentials: send `Proxy-Authorization: Bearer TOKEN` (`Authorization` goes to the upstream MCP server unchanged), or a client certificate where --tls-client-ca is set".to_owned(),
        ),
        CheckError::Unauthenticated(Unauthenticated::Unknown) => (
            StatusCode::PROXY_AUTHENTICATION_REQUIRED,
            "schemagate gateway: the token in Proxy-Authorization (or the client certificate's name) is not one schemagate knows (it may have been revoked): ask the operator for a token".to_owned(),
        ),
        other if other.class() == ErrorClass::Forbidden => {
            (StatusCode::FORBIDDEN, format!("schemagate gateway: {other}"))
        }
        other => (StatusCode::FORBIDDEN, format!("schemagate gateway: {other}")),
    };
    let mut response = refusal(status, None, mcp::INVALID_REQUEST, &message);
    if status == StatusCode::PROXY_AUTHENTICATION_REQUIRED {
        response.headers_mut().insert(
            header::PROXY_AUTHENTICATE,
            HeaderValue::from_static("Bearer realm=\"schemagate\""),
        );
    }
    response
}

/// A request naming a session a stdio route does not run: 404 before any rule runs (no listing,
/// no metric series for what it names, no process).
fn unknown_stdio_session(
    route: &RouteState,
    caller: &Caller,
    headers: &HeaderMap,
) -> Option<Response> {
    let RouteUpstream::Stdio(servers) = &route.upstream else {
        return None;
    };
    let named = headers.get(MCP_SESSION_ID)?.to_str().ok()?;
    if servers.knows(caller.name(), named) {
        return None;
    }
    let message = super::upstream::stdio::no_session(&route.route.name, named);
    Some(refusal(
        StatusCode::NOT_FOUND,
        None,
        mcp::INVALID_REQUEST,
        &message,
    ))
}

/// The session a request names, as this replica holds it: its rules, whether it is adopted
/// (named but not held here: held once the upstream answers it), and the order its requests
/// keep (none for a session not held yet).
struct Named {
    boundary: Arc<crate::mcp::Boundary>,
    adopt: bool,
    order: Option<Arc<Order>>,
}

/// The session the request names, held here for the same caller; or a new one: a session's own
/// when the request names one or `begins` one (`initialize`), else the request's alone.
fn session(
    gateway: &Gateway,
    route: &RouteState,
    caller: &Arc<Caller>,
    headers: &HeaderMap,
    begins: bool,
) -> Named {
    let named = headers.get(MCP_SESSION_ID).and_then(|v| v.to_str().ok());
    let held = named.and_then(|id| gateway.sessions.get(&route.route.name, caller.name(), id));
    let adopt = named.is_some() && held.is_none();
    let (boundary, order) = match held {
        Some(Held { boundary, order }) => (boundary, Some(order)),
        None => (gateway.boundary(route, caller, adopt || begins), None),
    };
    if let Some(version) = headers
        .get(PROTOCOL_VERSION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| ProtocolVersion::parse(v).ok())
    {
        boundary.assume_protocol(version);
    }
    Named {
        boundary,
        adopt,
        order,
    }
}

async fn post_message(
    State(gateway): State<Arc<Gateway>>,
    Path(name): Path<String>,
    request: Request,
) -> Response {
    let Some(route) = gateway.routes.load().get(&name) else {
        return unknown_route(&gateway, &name);
    };
    post_to_route(gateway, route, request).await
}

/// A message POSTed to `route`: its caller, its body read whole, its framing, its session, then
/// its exchange with the upstream.
async fn post_to_route<B>(
    gateway: Arc<Gateway>,
    route: Arc<RouteState>,
    request: http::Request<B>,
) -> Response
where
    B: http_body::Body<Data = Bytes> + Unpin,
    B::Error: std::fmt::Display,
{
    let (parts, body) = request.into_parts();
    let caller = match caller(&gateway, &route, &parts.headers, parts.extensions.get()) {
        Ok(caller) => caller,
        Err(e) => return auth_refusal(&gateway, e),
    };
    if let Some(unknown) = unknown_stdio_session(&route, &caller, &parts.headers) {
        return unknown;
    }
    let message = match crate::net::body::read(&gateway.gate, &parts.headers, body).await {
        Ok(message) => message,
        Err(e) => return unread(&gateway, &e),
    };
    // The envelope, scanned here once, goes to the exchange with the message; the framing is
    // read from it here.
    let envelope = mcp::Envelope::scan(&message);
    let framing = Framing::scanned(&envelope, &message);
    if let Some(mismatch) = header_mismatch(&parts.headers, &framing, &envelope) {
        let id = match &framing {
            Framing::Request { id, .. } => Some(*id),
            _ => None,
        };
        return refusal(StatusCode::BAD_REQUEST, id, mcp::HEADER_MISMATCH, &mismatch);
    }
    // Whether an answer is owed, and whether the message begins a session (`initialize`) or
    // says the client is initialized.
    let (expects_answer, begins, initialized) = match &framing {
        Framing::Request { method, .. } => (true, method == "initialize", false),
        Framing::Other { method } => (
            false,
            false,
            method.as_deref() == Some("notifications/initialized"),
        ),
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
    };
    let Named {
        boundary,
        adopt,
        order,
    } = session(&gateway, &route, &caller, &parts.headers, begins);
    if let Some(order) = order {
        if initialized {
            order.initialized();
        }
        order.before_post(expects_answer).await;
    }
    let request = ClientRequest {
        method: Method::POST,
        headers: parts.headers,
        envelope,
        expects_answer,
        caller: Arc::clone(&caller),
        adopt,
    };
    let answer = Exchange::start(gateway, route, boundary, request);
    answer.respond(move |route_name| match framing {
        // A request is owed an answer: never a 202 that says there is none.
        Framing::Request { id, .. } => refusal(
            StatusCode::BAD_GATEWAY,
            Some(id),
            mcp::UPSTREAM_FAILED,
            &format!(
                "schemagate gateway: route {route_name}: no answer to this request could be relayed (see the gateway's log)"
            ),
        ),
        _ => AnswerHead::accepted().into_response(),
    })
    .await
}

async fn open_stream(
    State(gateway): State<Arc<Gateway>>,
    Path(name): Path<String>,
    request: Request,
) -> Response {
    relay_bodyless(gateway, &name, request, Method::GET).await
}

async fn end_session(
    State(gateway): State<Arc<Gateway>>,
    Path(name): Path<String>,
    request: Request,
) -> Response {
    relay_bodyless(gateway, &name, request, Method::DELETE).await
}

async fn relay_bodyless(
    gateway: Arc<Gateway>,
    name: &str,
    request: Request,
    method: Method,
) -> Response {
    let Some(route) = gateway.routes.load().get(name) else {
        return unknown_route(&gateway, name);
    };
    let (parts, _) = request.into_parts();
    let headers = &parts.headers;
    let caller = match caller(&gateway, &route, headers, parts.extensions.get()) {
        Ok(caller) => caller,
        Err(e) => return auth_refusal(&gateway, e),
    };
    if let Some(unknown) = unknown_stdio_session(&route, &caller, headers) {
        return unknown;
    }
    let Named {
        boundary,
        adopt,
        order,
    } = session(&gateway, &route, &caller, headers, false);
    // A GET holds the session's order until the upstream opens its stream (or ORDER_WAIT
    // passes), so the POSTs sent after it wait for it.
    let opening = match order {
        Some(order) if method == Method::GET => order.opening(),
        _ => None,
    };
    let request = ClientRequest {
        method,
        headers: parts.headers,
        envelope: mcp::Envelope::scan(&Bytes::new()),
        expects_answer: false,
        caller: Arc::clone(&caller),
        adopt,
    };
    let answer = Exchange::start(gateway, route, boundary, request);
    let response = answer.respond(|_| AnswerHead::accepted().into_response());
    let Some(opening) = opening else {
        return response.await;
    };
    tokio::pin!(response);
    match tokio::time::timeout(ORDER_WAIT, &mut response).await {
        Ok(response) => response,
        Err(_) => {
            drop(opening);
            response.await
        }
    }
}

/// Where a header that describes the body (2026-07-28: `Mcp-Method`, and `Mcp-Name` for a
/// `tools/call`) disagrees with it, what the HeaderMismatch error says. The gateway judges the
/// body; an upstream may route by the headers; the two must name the same call.
fn header_mismatch(
    headers: &HeaderMap,
    framing: &Framing,
    scanned: &mcp::Envelope,
) -> Option<String> {
    // A header sent twice names two calls: an upstream may act on either value.
    for (name, shown) in [(&MCP_METHOD, "Mcp-Method"), (&MCP_NAME, "Mcp-Name")] {
        if headers.get_all(name).iter().nth(1).is_some() {
            return Some(format!(
                "schemagate gateway: HeaderMismatch: the {shown} header is sent more than once; send it once, naming what the body names"
            ));
        }
    }
    let header = |name: &HeaderName| {
        headers
            .get(name)
            .map(|v| String::from_utf8_lossy(v.as_bytes()))
    };
    let method = match framing {
        Framing::Request { method, .. } => Some(method.as_ref()),
        Framing::Other { method } => method.as_deref(),
        _ => return None,
    };
    if let Some(said) = header(&MCP_METHOD) {
        if method != Some(said.as_ref()) {
            return Some(format!(
                "schemagate gateway: HeaderMismatch: the Mcp-Method header says {said:?}, the body's method is {:?}; send the same in both",
                method.unwrap_or("(none)")
            ));
        }
    }
    // The call's tool is read again only when a header names one.
    let said = header(&MCP_NAME)?;
    let tool = mcp::called_tool(scanned)?;
    (said != tool).then(|| {
        format!(
            "schemagate gateway: HeaderMismatch: the Mcp-Name header says {said:?}, the body calls tool {tool:?}; send the same in both"
        )
    })
}
