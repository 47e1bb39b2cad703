//! `GET /api/tables/{id}`: one table with its fields.

use axum::extract::{Path, State};
use axum::Json;
use serde_json::{json, Value};

use crate::auth::Reader;
use crate::catalog::tables::Table;
use crate::catalog::{fields, tables};
use crate::error::{ApiError, ApiResult};
use crate::state::{AppState, Db, DbOp};

pub async fn handler(
    Reader(access): Reader,
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> ApiResult<Json<Value>> {
    let table = get(&state.db, &access.database_id, &id).await?;
    Ok(Json(json!({ "table": table })))
}

/// The table of `database_id` with its fields; 404 if missing or foreign.
pub async fn get(db: &Db, database_id: &str, table_id: &str) -> ApiResult<Table> {
    db.measured(DbOp::GetTable, async {
        let client = db.client().await?;
        let mut table = tables::get(&client, database_id, table_id)
            .await?
            .ok_or(ApiError::NotFound)?;
        table.fields = Some(fields::list_for_table(&client, table_id).await?);
        Ok(table)
    })
    .await
}
