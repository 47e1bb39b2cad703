//! `GET /api/webhooks/{id}/deliveries` (any member): the delivery log of a
//! webhook, the [`LOG_LENGTH`] most recent deliveries, newest first, as
//! `{deliveries: [...]}` (`catalog::deliveries::Delivery`). Replays:
//! [`super::replay`].

use axum::extract::{Path, State};
use axum::Json;
use serde_json::{json, Value};

use crate::auth::Reader;
use crate::catalog::deliveries::{self, Delivery};
use crate::catalog::webhooks;
use crate::db::{Db, DbOp};
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;

/// Part C: the log lists the 50 most recent deliveries.
pub const LOG_LENGTH: i64 = 50;

pub async fn handler(
    Reader(access): Reader,
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> ApiResult<Json<Value>> {
    let log = list(&state.db, &access.database_id, &id).await?;
    Ok(Json(json!({ "deliveries": log })))
}

/// The webhook's log, newest first; 404 when the webhook is not in
/// `database_id`.
pub async fn list(db: &Db, database_id: &str, webhook_id: &str) -> ApiResult<Vec<Delivery>> {
    db.measured(DbOp::ListDeliveries, async {
        let client = db.client_for(database_id).await?;
        webhooks::get(&*client, database_id, webhook_id)
            .await?
            .ok_or(ApiError::NotFound)?;
        Ok(deliveries::recent(&*client, webhook_id, LOG_LENGTH).await?)
    })
    .await
}
