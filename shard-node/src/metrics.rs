//! The node's Prometheus series (`GET /metrics` is served by
//! [`crate::http::metrics_page`]).
//!
//! The page needs `Authorization: Bearer <METRICS_TOKEN>` (a read-only
//! credential of its own, never the operator's admin token): without it the
//! answer is the 401 envelope of any unsigned request; a node started
//! without `METRICS_TOKEN` (or without a recorder) does not serve it (404).
//!
//! Series (besides the shared ones of `service_kit::metrics`, whose
//! `route` is axum's matched route, `unknown` when none matched):
//! * `tabula_db_pool_capacity`, `_in_use`, `_idle`, `_waiting` and
//!   `tabula_db_pool_wait_seconds`, by `pool` (`requests`, `maintenance`,
//!   `deliverer`): the three pools of [`crate::db::Db`].
//! * [`DB_OPERATION`]: every named database operation ([`DbOp`]).
//! * [`WEBHOOK_PENDING`]: the outbox's unfinished deliveries, counted when
//!   the page is rendered.
//! * [`WEBHOOK_ATTEMPTS`]: the deliverer's attempts by outcome.
//! * [`SCHEMA_CACHE_DATABASES`], [`SCHEMA_CACHE_WEIGHT`]: the schema models
//!   held and their weight (`SHARD_SCHEMA_CACHE_FIELDS` bounds it).

use std::time::Duration;

use service_kit::metrics::{self as shared, PrometheusHandle};

use crate::catalog::deliveries::After;
use crate::config::Secret;
use crate::db::DbOp;

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

/// Databases whose schema model the node holds. Gauge.
pub const SCHEMA_CACHE_DATABASES: &str = "tabula_schema_cache_databases";
/// The weight of the models held (one per database, table, field and
/// webhook), at most `SHARD_SCHEMA_CACHE_FIELDS`. Gauge.
pub const SCHEMA_CACHE_WEIGHT: &str = "tabula_schema_cache_weight";

/// What serving the page needs: the recorder's handle and the metrics token.
#[derive(Clone)]
pub struct Page {
    pub(crate) handle: PrometheusHandle,
    pub(crate) token: Secret,
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
    describe_gauge!(
        SCHEMA_CACHE_DATABASES,
        "Databases whose schema model the node holds in memory."
    );
    describe_gauge!(
        SCHEMA_CACHE_WEIGHT,
        "Weight of the schema models held (databases + tables + fields + webhooks)."
    );
    describe_counter!(
        WEBHOOK_ATTEMPTS,
        "Webhook delivery attempts, by outcome (succeeded, retry, exhausted)."
    );
}

/// Counts every request by method, matched route and status, its latency,
/// and the requests in flight (layered on the whole router).
pub use service_kit::metrics::measure;

/// Records one database operation of [`crate::db::Db::measured`].
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
