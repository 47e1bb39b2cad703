//! `GET /api/databases/{id}/tables`: every table with its fields.

use axum::extract::{Path, State};
use axum::Json;
use serde_json::{json, Value};

use crate::auth::Reader;
use crate::catalog::tables::Table;
use crate::catalog::{fields, tables};
use crate::error::ApiResult;
use crate::state::{AppState, Db, DbOp};

pub async fn handler(
    Reader(access): Reader,
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> ApiResult<Json<Value>> {
    let database_id = access.database(&id)?;
    let tables = list(&state.db, database_id).await?;
    Ok(Json(json!({ "tables": tables })))
}

/// Tables by `position`, `created_at`, each with its ordered fields.
pub async fn list(db: &Db, database_id: &str) -> ApiResult<Vec<Table>> {
    db.measured(DbOp::ListTables, async {
        let client = db.client().await?;
        let mut list = tables::list(&client, database_id).await?;
        let mut by_table = fields::list_for_database(&client, database_id).await?;
        for table in &mut list {
            table.fields = Some(by_table.remove(&table.id).unwrap_or_default());
        }
        Ok(list)
    })
    .await
}
