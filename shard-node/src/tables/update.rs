//! `PATCH /api/tables/{id}`: rename only (`position`, `display_field_id`
//! and other keys are ignored); the reply carries no `fields`. A structural
//! change: the cached schema holds table names.

use axum::extract::{Path, State};
use axum::Json;
use serde_json::{json, Value};

use crate::auth::Editor;
use crate::catalog::tables;
use crate::catalog::tables::Table;
use crate::db::{Db, DbOp};
use crate::error::{ApiError, ApiResult};
use crate::http::body::{required_name, JsonObject};
use crate::schema::structural;
use crate::state::AppState;

pub async fn handler(
    Editor(access): Editor,
    State(state): State<AppState>,
    Path(id): Path<String>,
    JsonObject(body): JsonObject,
) -> ApiResult<Json<Value>> {
    let name = required_name(&body, "name")?;
    let table = rename(&state.db, &access.database_id, access.user_id(), &id, name).await?;
    Ok(Json(json!({ "table": table })))
}

/// Renames the table and bumps its database, in one transaction.
pub async fn rename(
    db: &Db,
    database_id: &str,
    user_id: &str,
    table_id: &str,
    name: &str,
) -> ApiResult<Table> {
    db.in_structural_transaction(database_id, DbOp::RenameTable, async |tx| {
        structural::begin(tx, database_id).await?;
        let table = tables::rename(tx, database_id, table_id, name)
            .await?
            .ok_or(ApiError::NotFound)?;
        structural::finish(tx, database_id, user_id).await?;
        Ok(table)
    })
    .await
}
