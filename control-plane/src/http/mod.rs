//! The internal HTTP API (table in `cluster_protocol::control`) and
//! `GET /metrics`. Every route but health requires a token whose tier
//! [`routes`] allows ([`auth`]); handlers only parse, call `service`, and
//! serialise.

mod accounts;
pub mod auth;
mod databases;
mod keys;
mod members;
mod moves;
mod quotas;
mod rebalance;
mod restores;
pub mod routes;
mod shards;
mod users;

use axum::extract::Request;
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::routing::get;
use axum::{Json, Router};
use cluster_protocol::control::Ok as OkReply;

use crate::error::ApiError;
use crate::AppState;

pub fn router(state: AppState) -> Router {
    let guard = auth::Guard::new(state.tokens.clone());
    let protected = routes::table()
        .into_iter()
        .fold(Router::new(), |r, route| r.route(route.path, route.handler))
        .route_layer(middleware::from_fn_with_state(guard, auth::require_scope));
    Router::new()
        .route("/internal/health", get(health))
        .merge(protected)
        .fallback(not_found)
        .method_not_allowed_fallback(not_found)
        .layer(middleware::from_fn(crate::metrics::measure))
        .layer(middleware::from_fn(trace_request))
        .with_state(state)
}

pub(crate) fn ok() -> Json<OkReply> {
    Json(OkReply { ok: true })
}

async fn health() -> Json<OkReply> {
    ok()
}

async fn not_found() -> ApiError {
    ApiError::not_found("Not found.")
}

/// One `server` span per request, a child of the caller's `traceparent`
/// (the router's control-plane client sends it); the access log's line
/// (`metrics::measure`) is written inside it.
async fn trace_request(req: Request, next: Next) -> Response {
    service_kit::trace::server(req, next, as_is).await
}

/// The control plane's paths carry no credential: spans show them whole.
fn as_is(path: &str) -> std::borrow::Cow<'_, str> {
    path.into()
}
