//! The control plane's Prometheus series and its `GET /metrics` page.
//!
//! The page sits with the other protected routes: it needs
//! `Authorization: Bearer <METRICS_TOKEN>` or the admin token (401 without,
//! 403 with another tier's), and a server started without a recorder
//! (library use) answers 404.
//!
//! Series (besides the shared ones of `service_kit::metrics`, whose
//! `route` is axum's matched route, `unknown` when none matched):
//! * `tabula_db_pool_capacity`, `_in_use`, `_idle`, `_waiting` and
//!   `tabula_db_pool_wait_seconds`, all `{pool="catalog"}`: the catalog pool.
//! * [`MOVES`]: database moves by state, counted when the page is rendered.
//! * [`MOVE_PAUSE`]: the write pauses of moves ([`Pause`]).

use std::time::Instant;

use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use cluster_protocol::control::MoveState;
use deadpool_postgres::{Object, Pool, PoolError};
use service_kit::metrics::{self as shared};

use crate::error::ApiError;
use crate::AppState;

/// Moves recorded in the catalog, by `state` (every state, 0 included).
/// Gauge.
pub const MOVES: &str = "tabula_moves";

/// How long a move held the database's writes, by `phase` (`verify`: the
/// frozen point of the verification; `cutover`: up to the flip) and
/// `outcome` (`released`, `flipped`, or `abandoned`: over budget, aborted
/// or failed, rolled back after). Histogram.
pub const MOVE_PAUSE: &str = "tabula_move_write_pause_seconds";

const CATALOG_POOL: &str = "catalog";

/// The `# HELP` lines of the control plane's series (with the shared ones).
pub fn describe() {
    shared::describe();
    ::metrics::describe_gauge!(MOVES, "Database moves in the catalog, by state.");
    ::metrics::describe_histogram!(
        MOVE_PAUSE,
        ::metrics::Unit::Seconds,
        "Write pauses of database moves, by phase (verify, cutover) and outcome."
    );
}

/// One write pause of a move, from the hold until it is released or the
/// flip is done; recorded in [`MOVE_PAUSE`] when dropped (`abandoned`
/// unless [`Pause::ended`] named the outcome).
pub struct Pause {
    phase: &'static str,
    outcome: &'static str,
    started: Instant,
}

impl Pause {
    /// A pause of `phase` starting now.
    pub fn start(phase: &'static str) -> Self {
        Self {
            phase,
            outcome: "abandoned",
            started: Instant::now(),
        }
    }

    /// Ends the pause with `outcome` (`released`, `flipped`).
    pub fn ended(mut self, outcome: &'static str) {
        self.outcome = outcome;
    }
}

impl Drop for Pause {
    fn drop(&mut self) {
        ::metrics::histogram!(MOVE_PAUSE, "phase" => self.phase, "outcome" => self.outcome)
            .record(self.started.elapsed().as_secs_f64());
    }
}

/// `GET /metrics` (behind the metrics or the admin token).
pub async fn handler(State(state): State<AppState>) -> Response {
    let Some(handle) = &state.metrics else {
        return ApiError::not_found("Not found.").into_response();
    };
    refresh_gauges(&state).await;
    (
        [(header::CONTENT_TYPE, shared::CONTENT_TYPE)],
        shared::render(handle),
    )
        .into_response()
}

/// Gauges read when the page is rendered: the pool and the moves.
async fn refresh_gauges(state: &AppState) {
    let status = state.pool.status();
    shared::pool_status(
        CATALOG_POOL,
        status.size,
        status.available,
        status.waiting,
        status.max_size,
    );
    let counts = async {
        let client = state.session().await?;
        crate::catalog::moves::count_by_state(&**client).await
    };
    match counts.await {
        Ok(counts) => {
            for s in MoveState::ALL {
                let n = counts.iter().find(|(c, _)| *c == s).map_or(0, |(_, n)| *n);
                ::metrics::gauge!(MOVES, "state" => s.as_str()).set(n as f64);
            }
        }
        Err(e) => tracing::warn!(error = format!("{e:#}"), "metrics: moves not counted"),
    }
}

/// A catalog session, its wait recorded.
pub async fn timed_get(pool: &Pool) -> Result<Object, PoolError> {
    let start = Instant::now();
    let got = pool.get().await;
    shared::pool_wait(CATALOG_POOL, got.is_ok(), start.elapsed());
    got
}

/// Counts every request by method, matched route and status, its latency,
/// and the requests in flight (layered on the whole router).
pub use service_kit::metrics::measure;
