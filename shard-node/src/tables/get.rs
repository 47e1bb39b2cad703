//! `GET /api/tables/{id}`: one table with its fields (and their operators).

use axum::extract::{Path, State};
use axum::Json;
use serde_json::{json, Value};

use crate::auth::Reader;
use crate::db::DbOp;
use crate::error::{ApiError, ApiResult};
use crate::schema::TableJson;
use crate::state::AppState;

pub async fn handler(
    Reader(access): Reader,
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> ApiResult<Json<Value>> {
    let table = get(&state, &access.database_id, &id).await?;
    Ok(Json(json!({ "table": table })))
}

/// The table of `database_id` with its fields; 404 if missing or foreign.
pub async fn get(state: &AppState, database_id: &str, table_id: &str) -> ApiResult<TableJson> {
    state
        .db
        .measured(DbOp::GetTable, async {
            let mut client = state.db.client_for(database_id).await?;
            let schema = state.schemas.get(&mut client, database_id).await?;
            let table = schema.table(table_id).ok_or(ApiError::NotFound)?;
            Ok(schema.table_json(table))
        })
        .await
}
