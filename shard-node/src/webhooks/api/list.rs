//! `GET /api/databases/{id}/webhooks`: every webhook of the database by
//! `created_at`, then id, secrets blank. Any member.

use axum::extract::{Path, State};
use axum::Json;
use serde_json::{json, Value};

use crate::auth::Reader;
use crate::catalog::webhooks::{self, Webhook};
use crate::db::{Db, DbOp};
use crate::error::ApiResult;
use crate::state::AppState;

pub async fn handler(
    Reader(access): Reader,
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> ApiResult<Json<Value>> {
    let database_id = access.database(&id)?;
    let webhooks: Vec<Webhook> = list(&state.db, database_id)
        .await?
        .into_iter()
        .map(Webhook::secret_hidden)
        .collect();
    Ok(Json(json!({ "webhooks": webhooks })))
}

pub async fn list(db: &Db, database_id: &str) -> ApiResult<Vec<Webhook>> {
    db.measured(DbOp::ListWebhooks, async {
        let client = db.client_for(database_id).await?;
        Ok(webhooks::list(&*client, database_id).await?)
    })
    .await
}
