//! The internal HTTP API (table in `cluster_protocol::control`) and
//! `GET /metrics`. Every route but health requires the admin token; handlers only parse, call
//! `service`, and serialise.

mod databases;
mod keys;
mod members;
mod moves;
mod rebalance;
mod shards;
mod users;

use axum::extract::{Request, State};
use axum::http::header::AUTHORIZATION;
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::routing::{get, patch, post};
use axum::{Json, Router};
use cluster_protocol::control::Ok as OkReply;
use subtle::ConstantTimeEq;

use crate::error::ApiError;
use crate::AppState;

pub fn router(state: AppState) -> Router {
    let protected = Router::new()
        .route("/internal/keys", post(keys::create))
        .route(
            "/internal/keys/{key_id}",
            get(keys::fetch).patch(keys::update).delete(keys::revoke),
        )
        .route("/internal/users", post(users::create))
        .route("/internal/users/{user_id}/access", get(users::access))
        .route("/internal/users/{user_id}/suspend", post(users::suspend))
        .route(
            "/internal/users/{user_id}/unsuspend",
            post(users::unsuspend),
        )
        .route("/internal/placements/{tag}", get(databases::placement))
        .route("/internal/placements/lookup", post(databases::lookup))
        .route("/internal/databases", get(databases::list))
        .route("/internal/databases/allocate", post(databases::allocate))
        .route("/internal/databases/{id}", get(databases::show))
        .route("/internal/databases/{id}/confirm", post(databases::confirm))
        .route("/internal/databases/{id}/release", post(databases::release))
        .route(
            "/internal/databases/{id}/members",
            get(members::list_of_database).post(members::add_to_database),
        )
        .route(
            "/internal/databases/{id}/members/{user_id}",
            patch(members::change_role).delete(members::remove_from_database),
        )
        .route(
            "/internal/members",
            post(members::add).delete(members::remove),
        )
        .route(
            "/internal/support",
            post(members::grant).delete(members::revoke),
        )
        .route("/internal/shards", get(shards::list).post(shards::add))
        .route("/internal/shards/{name}/drain", post(shards::drain))
        .route("/internal/shards/{name}/activate", post(shards::activate))
        .route("/internal/moves", get(moves::list).post(moves::create))
        .route("/internal/moves/{id}", get(moves::show))
        .route("/internal/moves/{id}/abort", post(moves::abort))
        .route("/internal/rebalance", post(rebalance::rebalance))
        .route("/metrics", get(crate::metrics::handler))
        .route_layer(middleware::from_fn_with_state(state.clone(), require_token));
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

/// `Authorization: Bearer <CONTROL_PLANE_TOKEN>`, compared in constant time.
async fn require_token(
    State(state): State<AppState>,
    req: Request,
    next: Next,
) -> Result<Response, ApiError> {
    let presented = req
        .headers()
        .get(AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or("");
    let expected = state.token.expose().as_bytes();
    if expected.is_empty() || !bool::from(presented.as_bytes().ct_eq(expected)) {
        return Err(ApiError::Unauthorized);
    }
    Ok(next.run(req).await)
}

/// One span per request; the outcome is logged when it completes.
async fn trace_request(req: Request, next: Next) -> Response {
    use tracing::Instrument;
    let span = tracing::info_span!("request", method = %req.method(), path = %req.uri().path());
    async move {
        let started = std::time::Instant::now();
        let response = next.run(req).await;
        tracing::debug!(
            status = response.status().as_u16(),
            elapsed_ms = started.elapsed().as_millis() as u64,
            "done"
        );
        response
    }
    .instrument(span)
    .await
}
