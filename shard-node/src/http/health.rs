//! `GET /internal/health` (unsigned): whether this node's PostgreSQL answers.

use std::time::Duration;

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use serde_json::{json, Value};

use crate::config::HEALTH_TIMEOUT_MS;
use crate::db::DbOp;
use crate::error::ApiResult;
use crate::state::AppState;

pub async fn handler(State(state): State<AppState>) -> (StatusCode, Json<Value>) {
    let probe = state.db.measured(DbOp::Health, async {
        let client = state.db.client().await?;
        client.query_one("SELECT 1", &[]).await?;
        ApiResult::Ok(())
    });
    // A probe cut off by the timeout cancels its statement (`cancel`).
    let probe = crate::cancel::abandon_on_drop(probe);
    match tokio::time::timeout(Duration::from_millis(HEALTH_TIMEOUT_MS), probe).await {
        Ok(Ok(())) => (StatusCode::OK, Json(json!({"ok": true}))),
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "health: postgres does not answer");
            (StatusCode::SERVICE_UNAVAILABLE, Json(json!({"ok": false})))
        }
        Err(_) => {
            tracing::warn!("health: postgres timed out");
            (StatusCode::SERVICE_UNAVAILABLE, Json(json!({"ok": false})))
        }
    }
}
