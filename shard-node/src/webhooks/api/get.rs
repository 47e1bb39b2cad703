//! `GET /api/webhooks/{id}`: the full configuration, secret blank. Any
//! member.

use axum::extract::{Path, State};
use axum::Json;
use serde_json::{json, Value};

use crate::auth::Reader;
use crate::catalog::webhooks::{self, Webhook};
use crate::db::{Db, DbOp};
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;

pub async fn handler(
    Reader(access): Reader,
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> ApiResult<Json<Value>> {
    let webhook = get(&state.db, &access.database_id, &id).await?;
    Ok(Json(json!({ "webhook": webhook.secret_hidden() })))
}

pub async fn get(db: &Db, database_id: &str, id: &str) -> ApiResult<Webhook> {
    db.measured(DbOp::GetWebhook, async {
        let client = db.client_for(database_id).await?;
        webhooks::get(&*client, database_id, id)
            .await?
            .ok_or(ApiError::NotFound)
    })
    .await
}
