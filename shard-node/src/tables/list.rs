//! `GET /api/databases/{id}/tables`: every table with its fields.

use axum::extract::{Path, State};
use axum::Json;
use serde_json::{json, Value};

use crate::auth::Reader;
use crate::db::DbOp;
use crate::error::ApiResult;
use crate::schema::TableJson;
use crate::state::AppState;

pub async fn handler(
    Reader(access): Reader,
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> ApiResult<Json<Value>> {
    let database_id = access.database(&id)?;
    let tables = list(&state, database_id).await?;
    Ok(Json(json!({ "tables": tables })))
}

/// Tables by `position`, `created_at`, each with its ordered fields.
pub async fn list(state: &AppState, database_id: &str) -> ApiResult<Vec<TableJson>> {
    state
        .db
        .measured(DbOp::ListTables, async {
            let mut client = state.db.client_for(database_id).await?;
            let schema = state.schemas.get(&mut client, database_id).await?;
            Ok(schema.tables.iter().map(|t| schema.table_json(t)).collect())
        })
        .await
}
