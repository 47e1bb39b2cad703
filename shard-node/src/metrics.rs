//! The node's Prometheus series and its `GET /metrics` page.
//!
//! The page needs `Authorization: Bearer <METRICS_TOKEN>` (a read-only
//! credential of its own, never the operator's admin token): without it the
//! answer is the 401 envelope of any unsigned request; a node started
//! without `METRICS_TOKEN` (or without a recorder) does not serve it (404).
//!
//! Series (besides the shared ones of `service_kit::metrics`, whose
//! `route` is axum's matched route, `unknown` when none matched):
//! * `tabula_db_pool_connections{pool="requests|maintenance|deliverer"}`
//!   and `tabula_db_pool_wait_seconds{pool}`: the three pools of
//!   [`crate::state::Db`].
//! * [`DB_OPERATION`]: every named database operation ([`DbOp`]).
//! * [`WEBHOOK_PENDING`]: the outbox's unfinished deliveries, counted when
//!   the page is rendered.
//! * [`WEBHOOK_ATTEMPTS`]: the deliverer's attempts by outcome.

use std::time::Duration;

use axum::extract::State;
use axum::http::{header, HeaderMap};
use axum::response::{IntoResponse, Response};
use service_kit::metrics::{self as shared, PrometheusHandle};

use crate::catalog::deliveries::After;
use crate::config::Secret;
use crate::error::ApiError;
use crate::state::{AppState, DbOp};

/// Time of one named database operation, by `op` and `outcome` (`ok`,
/// `error`). Histogram.
pub const DB_OPERATION: &str = "tabula_db_operation_duration_seconds";
/// Deliveries not finished yet (due, leased, or waiting for a retry or a
/// paused webhook), by `shard`: every node of a shard reports the same
/// outbox, so dashboards take the `max` per shard. Gauge.
pub const WEBHOOK_PENDING: &str = "tabula_webhook_deliveries_pending";
/// Delivery attempts, by `outcome`: `succeeded`, `retry` (failed, another
/// attempt scheduled), `exhausted` (failed, no retry left). Counter.
pub const WEBHOOK_ATTEMPTS: &str = "tabula_webhook_delivery_attempts_total";

/// The longest the page waits for the pending count; then it renders
/// without refreshing it.
const PENDING_COUNT_TIMEOUT: Duration = Duration::from_secs(2);

/// What serving the page needs: the recorder's handle and the metrics token.
#[derive(Clone)]
pub struct Page {
    handle: PrometheusHandle,
    token: Secret,
}

impl Page {
    /// `None` (no page) unless both a recorder and a token are given.
    pub fn new(handle: Option<PrometheusHandle>, token: Option<Secret>) -> Option<Self> {
        Some(Self {
            handle: handle?,
            token: token?,
        })
    }
}

/// The `# HELP` lines of the node's series (with the shared ones).
pub fn describe() {
    use ::metrics::{describe_counter, describe_gauge, describe_histogram, Unit};
    shared::describe();
    describe_histogram!(
        DB_OPERATION,
        Unit::Seconds,
        "Time of a named database operation, by outcome."
    );
    describe_gauge!(
        WEBHOOK_PENDING,
        "Unfinished deliveries in the shard's webhook outbox."
    );
    describe_counter!(
        WEBHOOK_ATTEMPTS,
        "Webhook delivery attempts, by outcome (succeeded, retry, exhausted)."
    );
}

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

/// Gauges read when the page is rendered: pool status and the outbox.
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

/// Counts every request by method, matched route and status, its latency,
/// and the requests in flight (layered on the whole router).
pub use service_kit::metrics::measure;

/// Records one database operation of [`crate::state::Db::measured`].
pub fn db_operation(op: DbOp, ok: bool, elapsed: Duration) {
    let outcome = if ok { "ok" } else { "error" };
    ::metrics::histogram!(DB_OPERATION, "op" => op.as_str(), "outcome" => outcome)
        .record(elapsed.as_secs_f64());
}

/// Counts one finished delivery attempt.
pub fn webhook_attempt(after: &After) {
    let outcome = match after {
        After::Succeeded => "succeeded",
        After::RetryIn(_) => "retry",
        After::Exhausted => "exhausted",
    };
    ::metrics::counter!(WEBHOOK_ATTEMPTS, "outcome" => outcome).increment(1);
}
