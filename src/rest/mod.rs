//! The REST adapter (axum): extracts bytes, calls the core, maps the answer. No validation logic
//! lives here. The registration routes are in [`registrations`].

mod error;
mod registrations;

pub use error::{codes, ApiError, ErrorBody};

use crate::core::auth::{Caller, PeerNames, Scope};
use crate::core::check::{batch_from_json, Check};
use crate::core::error::CheckError;
use crate::core::gate::{Admit, Gate};
use crate::core::metrics::Transport;
use crate::core::verdict::Verdict;
use crate::net::origins::Origins;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::future::RouteFuture;
use axum::routing::{any, delete, get, post, put};
use axum::{middleware, Extension, Json, Router};
use futures_util::future::{BoxFuture, Either};
use futures_util::FutureExt;
use hyper::body::Incoming;
use serde::Serialize;
use std::convert::Infallible;
use std::fmt::Display;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::task::{Context, Poll};
use tower_http::catch_panic::CatchPanicLayer;

/// The REST port's service. The two check routes, nearly every request the port gets, are
/// answered here, below the router: no route lookup, no middleware future, no copy of the
/// headers, the answer built as it is sent. Every other request (a check route's other methods,
/// which get 405, among them) goes to the [`router`].
#[derive(Clone)]
pub struct Rest {
    gate: Arc<Gate>,
    router: Router,
    /// Who may send `/v1/` requests from a browser (see [`crate::net::origins`]).
    origins: Arc<Origins>,
}

/// The REST service over a shared core: the check routes below the router, the rest through it;
/// `/v1/` requests from a host or origin `origins` refuses get 403 first.
pub fn service(gate: Arc<Gate>, origins: Origins) -> Rest {
    Rest {
        router: router(Arc::clone(&gate)),
        gate,
        origins: Arc::new(origins),
    }
}

/// A check route, as [`Rest`] recognises it before the router.
#[derive(Clone, Copy)]
enum CheckRoute {
    One,
    Batch,
}

impl CheckRoute {
    fn of(request: &Request<Incoming>) -> Option<CheckRoute> {
        if request.method() != Method::POST {
            return None;
        }
        match request.uri().path() {
            "/v1/validate" => Some(CheckRoute::One),
            "/v1/validate/batch" => Some(CheckRoute::Batch),
            _ => None,
        }
    }
}

impl tower::Service<Request<Incoming>> for Rest {
    type Response = Response;
    type Error = Infallible;
    type Future = Either<BoxFuture<'static, Result<Response, Infallible>>, RouteFuture<Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<Incoming>) -> Self::Future {
        if request.uri().path().starts_with("/v1/") {
            if let Err(refused) = self.origins.check_request(&request) {
                return Either::Left(Box::pin(std::future::ready(Ok(error::origin_refused(
                    &refused,
                )))));
            }
        }
        match CheckRoute::of(&request) {
            None => Either::Right(self.router.call(request)),
            Some(route) => {
                let gate = Arc::clone(&self.gate);
                Either::Left(Box::pin(
                    AssertUnwindSafe(answer_check(gate, route, request))
                        .catch_unwind()
                        .map(|answer| Ok(answer.unwrap_or_else(|_| panicked()))),
                ))
            }
        }
    }
}

/// A check route's answer: the caller's token checked for the check scope (before the body is
/// read), then the body read, checked and answered; errors as the router's handlers give them.
async fn answer_check(gate: Arc<Gate>, route: CheckRoute, request: Request<Incoming>) -> Response {
    let (parts, body) = request.into_parts();
    let caller = match caller(&gate, &parts.headers, &parts.extensions, Scope::Check) {
        Ok(caller) => caller,
        Err(e) => return e.into_response(),
    };
    let answer = match read_body(&gate, &parts.headers, body).await {
        Err(e) => Err(e),
        Ok(bytes) => match route {
            CheckRoute::One => check_one(&gate, &caller, bytes).await,
            CheckRoute::Batch => check_batch(&gate, &caller, bytes).await,
        },
    };
    answer.unwrap_or_else(IntoResponse::into_response)
}

/// The answer to a request whose handler panicked (the panic is caught; the process goes on).
fn panicked() -> Response {
    tracing::error!("a request handler panicked");
    error::plain(
        StatusCode::INTERNAL_SERVER_ERROR,
        "internal",
        "internal error; the details are in schemagate's log".into(),
    )
}

/// A JSON answer: `200 OK`, its content type, and the bytes as they are.
fn json_answer(json: Vec<u8>) -> Response {
    let mut response = Response::new(Body::from(json));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

/// The REST router over a shared core. Each group of routes asks for its scope once, in
/// [`authorise`], before its handler runs.
use registrations::{
    accept_contract, list_servers, list_tools, promote_shadow, register_tools, remove_tool,
    remove_tools, tool_history,
};

fn router(gate: Arc<Gate>) -> Router {
    let scoped = |routes: Router<Arc<Gate>>, scope: Scope| {
        routes.route_layer(middleware::from_fn_with_state(
            (Arc::clone(&gate), scope),
            authorise,
        ))
    };
    // POST on the check routes is answered by `Rest` before the router; they are routes here so
    // that their other methods get 405, as every route's do.
    let checks = Router::new()
        .route("/v1/validate", any(method_not_allowed))
        .route("/v1/validate/batch", any(method_not_allowed));
    let registrations = Router::new()
        .route("/v1/servers", get(list_servers))
        .route(
            "/v1/servers/{server}/tools",
            put(register_tools).get(list_tools).delete(remove_tools),
        )
        .route("/v1/servers/{server}/tools/{tool}", delete(remove_tool))
        .route(
            "/v1/servers/{server}/tools/{tool}/history",
            get(tool_history),
        )
        .route(
            "/v1/servers/{server}/tools/{tool}/promote",
            post(promote_shadow),
        );
    let admin = Router::new()
        .route(
            "/v1/servers/{server}/tools/{tool}/accept",
            post(accept_contract),
        )
        .route("/v1/admin/reload-policy", post(reload_policy))
        .route("/v1/admin/reload-tokens", post(reload_tokens));
    let metrics_route = Router::new().route("/metrics", get(metrics));
    let metrics_route = if gate.auth().metrics_need_token() {
        scoped(metrics_route, Scope::Metrics)
    } else {
        metrics_route
    };
    Router::new()
        .merge(checks)
        .merge(scoped(registrations, Scope::Register))
        .merge(scoped(admin, Scope::Admin))
        .merge(metrics_route)
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(CatchPanicLayer::custom(|_| panicked()))
        .with_state(gate)
}

/// Lets a request through when its bearer token has `scope` (the [`Caller`] then goes with it to
/// the handler); answers 401 or 403 otherwise, before the body is read.
async fn authorise(
    State((gate, scope)): State<(Arc<Gate>, Scope)>,
    mut request: axum::extract::Request,
    next: middleware::Next,
) -> Response {
    match caller(&gate, request.headers(), request.extensions(), scope) {
        Ok(caller) => {
            request.extensions_mut().insert(caller);
            next.run(request).await
        }
        Err(e) => e.into_response(),
    }
}

/// Who sent a request, by its bearer token (and client certificate), if they may act in
/// `scope`; a refusal (counted) otherwise.
fn caller(
    gate: &Gate,
    headers: &HeaderMap,
    extensions: &axum::http::Extensions,
    scope: Scope,
) -> Result<Arc<Caller>, ApiError> {
    let authorization = headers.get(header::AUTHORIZATION).map(|v| v.as_bytes());
    gate.auth()
        .authenticate(authorization, extensions.get::<PeerNames>(), scope)
        .map_err(|e| refuse(gate, e))
}

/// Reads the whole body: refused (and counted) at once when its declared length is over the
/// limit, as soon as it passes the limit otherwise, when it has not all arrived within the
/// body-read timeout, and when the bodies still arriving would hold more than the receiving
/// budget (its declared length is held from the start, so such a body is refused before it is
/// read).
async fn read_body<B>(gate: &Gate, headers: &HeaderMap, body: B) -> Result<Bytes, ApiError>
where
    B: http_body::Body<Data = Bytes> + Unpin,
    B::Error: Display,
{
    crate::net::body::read(gate, headers, body)
        .await
        .map_err(|e| refuse(gate, e))
}

fn refuse(gate: &Gate, e: CheckError) -> ApiError {
    gate.instrument().refused(Transport::Rest, &e);
    ApiError(e)
}

/// One check: the body checked, and its verdict answered.
async fn check_one(
    gate: &Arc<Gate>,
    caller: &Arc<Caller>,
    bytes: Bytes,
) -> Result<Response, ApiError> {
    let verdict = gate
        .check_one(caller, bytes.len(), Transport::Rest, move |limits| {
            Check::from_json(&bytes, limits.max_depth)
        })
        .await?;
    Ok(json_answer(verdict_json(&verdict)))
}

/// A verdict as JSON, in a buffer sized for it.
fn verdict_json(verdict: &Verdict) -> Vec<u8> {
    let mut out = Vec::with_capacity(verdict.json_size_hint());
    match verdict.write_json(&mut out) {
        Ok(()) => out,
        Err(e) => {
            tracing::error!(error = %e, "cannot serialise a verdict");
            br#"{"error":{"code":"internal","message":"internal error; the details are in schemagate's log"}}"#.to_vec()
        }
    }
}

/// Serialises one batch entry, a verdict or the error of that item alone (on the worker that
/// checked it).
fn batch_entry(result: Result<Verdict, CheckError>) -> Vec<u8> {
    match result {
        Ok(v) => verdict_json(&v),
        Err(e) => serde_json::to_vec(&ErrorBody::from(&e)).unwrap_or_else(|e| {
            tracing::error!(error = %e, "cannot serialise a batch entry");
            br#"{"error":{"code":"internal","message":"internal error"}}"#.to_vec()
        }),
    }
}

/// A batch: its items checked on the workers, the answers in order.
async fn check_batch(
    gate: &Arc<Gate>,
    caller: &Arc<Caller>,
    bytes: Bytes,
) -> Result<Response, ApiError> {
    let entries = gate
        .check_batch(
            caller,
            Transport::Rest,
            (bytes.len(), Admit::Shed),
            move |limits| batch_from_json(&bytes, limits.max_depth, limits.max_batch_items),
            |item, limits| item.into_check(limits.max_depth),
            batch_entry,
        )
        .await?;
    // `{"results": [...]}` from entries already serialised in parallel.
    let mut out = Vec::with_capacity(16 + entries.iter().map(|e| e.len() + 1).sum::<usize>());
    out.extend_from_slice(br#"{"results":["#);
    for (i, entry) in entries.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(entry);
    }
    out.extend_from_slice(b"]}");
    Ok(json_answer(out))
}

#[derive(Serialize)]
struct Reloaded {
    reloaded: bool,
    policy: String,
}

async fn reload_policy(
    State(gate): State<Arc<Gate>>,
    Extension(caller): Extension<Arc<Caller>>,
) -> Response {
    tracing::info!(token = caller.name(), "policy reload requested");
    match gate.reload_policy() {
        Ok(()) => Json(Reloaded {
            reloaded: true,
            policy: gate
                .policy()
                .path()
                .map(|p| p.display().to_string())
                .unwrap_or_default(),
        })
        .into_response(),
        Err(e) => error::plain(
            StatusCode::UNPROCESSABLE_ENTITY,
            error::POLICY_INVALID,
            format!("{e}; the previous policy stays in force"),
        ),
    }
}

#[derive(Serialize)]
struct TokensReloaded {
    reloaded: bool,
    tokens: usize,
}

async fn reload_tokens(
    State(gate): State<Arc<Gate>>,
    Extension(caller): Extension<Arc<Caller>>,
) -> Response {
    tracing::info!(token = caller.name(), "token reload requested");
    match gate.auth().reload() {
        Ok(tokens) => Json(TokensReloaded {
            reloaded: true,
            tokens,
        })
        .into_response(),
        Err(e) => error::plain(
            StatusCode::UNPROCESSABLE_ENTITY,
            error::TOKENS_INVALID,
            format!("{e}; the previous tokens stay in force"),
        ),
    }
}

async fn metrics(State(gate): State<Arc<Gate>>) -> Response {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        gate.render_metrics(),
    )
        .into_response()
}

async fn healthz() -> &'static str {
    "ok"
}

async fn readyz(State(gate): State<Arc<Gate>>) -> Response {
    if gate.is_ready() {
        (StatusCode::OK, "ready").into_response()
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "draining").into_response()
    }
}

async fn method_not_allowed() -> Response {
    error::plain(
        StatusCode::METHOD_NOT_ALLOWED,
        error::METHOD_NOT_ALLOWED,
        "wrong method for this endpoint: checks are POST, registrations PUT, /metrics and the probes GET".into(),
    )
}

async fn not_found() -> Response {
    error::plain(
        StatusCode::NOT_FOUND,
        error::NOT_FOUND,
        "no such endpoint: see POST /v1/validate, POST /v1/validate/batch, PUT /v1/servers/{server}/tools".into(),
    )
}
