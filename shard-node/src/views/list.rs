//! `GET /api/tables/{id}/views`: the table's views by position.

use axum::extract::{Path, State};
use axum::Json;
use serde_json::{json, Value};

use crate::auth::Reader;
use crate::catalog::tables;
use crate::catalog::views::{self, View};
use crate::db::{Db, DbOp};
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;

pub async fn handler(
    Reader(access): Reader,
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> ApiResult<Json<Value>> {
    let views = list(&state.db, &access.database_id, &id).await?;
    Ok(Json(json!({ "views": views })))
}

pub async fn list(db: &Db, database_id: &str, table_id: &str) -> ApiResult<Vec<View>> {
    db.measured(DbOp::ListViews, async {
        let client = db.client_for(database_id).await?;
        tables::get(&*client, database_id, table_id)
            .await?
            .ok_or(ApiError::NotFound)?;
        Ok(views::list_for_table(&*client, table_id).await?)
    })
    .await
}
