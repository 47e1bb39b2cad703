//! `DELETE /api/views/{id}`: no records touched; a table's only view stays.

use axum::extract::{Path, State};
use axum::Json;
use serde_json::{json, Value};

use crate::catalog::views;
use crate::db::{Db, DbOp};
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;
use crate::views::ViewEditor;

pub async fn handler(
    ViewEditor(access): ViewEditor,
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> ApiResult<Json<Value>> {
    delete(&state.db, &access.database_id, &id).await?;
    Ok(Json(json!({ "id": id, "deleted": true })))
}

pub async fn delete(db: &Db, database_id: &str, id: &str) -> ApiResult<()> {
    db.in_structural_transaction(database_id, DbOp::DeleteView, async |tx| {
        let view = views::get(tx, database_id, id)
            .await?
            .ok_or(ApiError::NotFound)?;
        // The table lock serialises two deletes racing for the last views.
        if !views::lock_table(tx, database_id, &view.table_id).await? {
            return Err(ApiError::NotFound);
        }
        if views::count_for_table(tx, &view.table_id).await? <= 1 {
            return Err(ApiError::bad_request(
                "A table's only view cannot be deleted.",
            ));
        }
        if !views::delete(tx, id).await? {
            return Err(ApiError::NotFound);
        }
        Ok(())
    })
    .await
}
