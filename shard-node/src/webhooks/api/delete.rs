//! `DELETE /api/webhooks/{id}` (editor): deletes the webhook; its
//! deliveries (pending ones too) and match memory go with it. A button
//! field naming it is left as it is: pressing it then answers 404, as it
//! does for a button whose webhook went with its table.

use axum::extract::{Path, State};
use axum::Json;
use serde_json::{json, Value};

use crate::auth::Editor;
use crate::catalog::{databases, webhooks};
use crate::db::{Db, DbOp};
use crate::error::{ApiError, ApiResult};
use crate::schema::structural;
use crate::state::AppState;

pub async fn handler(
    Editor(access): Editor,
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> ApiResult<Json<Value>> {
    delete(&state.db, &access.database_id, &id).await?;
    Ok(Json(json!({ "id": id, "deleted": true })))
}

pub async fn delete(db: &Db, database_id: &str, id: &str) -> ApiResult<()> {
    db.in_transaction(database_id, DbOp::DeleteWebhook, async |tx| {
        structural::begin(tx, database_id).await?;
        if !webhooks::delete(tx, database_id, id).await? {
            return Err(ApiError::NotFound);
        }
        databases::bump_schema_version(tx, database_id).await?;
        Ok(())
    })
    .await
}
