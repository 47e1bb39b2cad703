//! `GET /metrics`: the page of the node's series ([`crate::metrics`]),
//! behind the metrics token, with the gauges read when it is rendered.

use std::time::Duration;

use axum::extract::State;
use axum::http::{header, HeaderMap};
use axum::response::{IntoResponse, Response};
use service_kit::metrics as shared;

use crate::error::ApiError;
use crate::metrics::{SCHEMA_CACHE_DATABASES, SCHEMA_CACHE_WEIGHT, WEBHOOK_PENDING};
use crate::state::AppState;

/// The longest the page waits for the pending count; then it renders
/// without refreshing it.
const PENDING_COUNT_TIMEOUT: Duration = Duration::from_secs(2);

/// `GET /metrics`.
pub async fn handler(State(state): State<AppState>, headers: HeaderMap) -> Response {
    let Some(page) = &state.metrics else {
        return ApiError::NotFound.into_response();
    };
    if !shared::bearer_is(&headers, page.token.expose()) {
        return ApiError::Unauthorized.into_response();
    }
    refresh_gauges(&state).await;
    (
        [(header::CONTENT_TYPE, shared::CONTENT_TYPE)],
        shared::render(&page.handle),
    )
        .into_response()
}

/// Gauges read when the page is rendered: pool status, the schema cache
/// and the outbox.
async fn refresh_gauges(state: &AppState) {
    for (pool, status) in state.db.pool_statuses() {
        shared::pool_status(
            pool,
            status.size,
            status.available,
            status.waiting,
            status.max_size,
        );
    }
    let (databases, weight) = state.schemas.held();
    ::metrics::gauge!(SCHEMA_CACHE_DATABASES).set(databases as f64);
    ::metrics::gauge!(SCHEMA_CACHE_WEIGHT).set(weight as f64);
    let count = crate::cancel::abandon_on_drop(state.db.pending_deliveries());
    match tokio::time::timeout(PENDING_COUNT_TIMEOUT, count).await {
        Ok(Ok(n)) => {
            let shard = state.shard_name.to_string();
            ::metrics::gauge!(WEBHOOK_PENDING, "shard" => shard).set(n as f64)
        }
        Ok(Err(e)) => tracing::debug!(error = %e, "metrics: pending deliveries not counted"),
        Err(_) => tracing::debug!("metrics: pending deliveries count timed out"),
    }
}
