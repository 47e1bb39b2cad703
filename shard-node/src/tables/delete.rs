//! `DELETE /api/tables/{id}` (owner only): drops the real table and the
//! catalog row (fields and views cascade) and bumps the database, in one
//! transaction. Links, webhooks and attachments join this when they land.

use axum::extract::{Path, State};
use axum::Json;
use serde_json::{json, Value};

use crate::auth::{DeleteTable, Owner};
use crate::catalog::{databases, tables};
use crate::error::{ApiError, ApiResult};
use crate::state::{AppState, Db, DbOp};
use crate::tenant_schema;

pub async fn handler(
    Owner(access, _): Owner<DeleteTable>,
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> ApiResult<Json<Value>> {
    delete(&state.db, &access.database_id, access.user_id(), &id).await?;
    Ok(Json(json!({ "deleted": true })))
}

pub async fn delete(db: &Db, database_id: &str, user_id: &str, table_id: &str) -> ApiResult<()> {
    db.measured(DbOp::DeleteTable, async {
        let mut client = db.client().await?;
        let tx = client.transaction().await?;
        // Structural work inside a database is serialised on its row.
        databases::lock(&tx, database_id)
            .await?
            .ok_or(ApiError::NotFound)?;
        if !tables::delete(&tx, database_id, table_id).await? {
            return Err(ApiError::NotFound);
        }
        tenant_schema::drop_table(&tx, database_id, table_id).await?;
        databases::touch(&tx, database_id, user_id).await?;
        tx.commit().await?;
        Ok(())
    })
    .await
}
