//! `DELETE /api/tables/{id}` (owner only), in one structural transaction:
//! drops the real table and every connector of a link touching it (from
//! either side), deletes the mirrors of its links on other tables and the
//! lookups/rollups elsewhere that ride a vanishing link, strips its field
//! ids from webhook watch lists, and deletes the catalog row (its fields,
//! views and webhooks cascade).

use std::collections::HashSet;

use axum::extract::{Path, State};
use axum::Json;
use serde_json::{json, Value};

use crate::auth::{DeleteTable, Owner};
use crate::catalog::tables;
use crate::db::DbOp;
use crate::error::{ApiError, ApiResult};
use crate::fields::delete::{cascade, drop_fields};
use crate::schema::structural;
use crate::state::AppState;
use crate::tenant_schema;

pub async fn handler(
    Owner(access, _): Owner<DeleteTable>,
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> ApiResult<Json<Value>> {
    delete(&state, &access.database_id, access.user_id(), &id).await?;
    Ok(Json(json!({ "deleted": true })))
}

pub async fn delete(
    state: &AppState,
    database_id: &str,
    user_id: &str,
    table_id: &str,
) -> ApiResult<()> {
    state
        .db
        .in_structural_transaction(database_id, DbOp::DeleteTable, async |tx| {
            structural::begin(tx, database_id).await?;
            let schema = state.schemas.get_locked(tx, database_id).await?;
            let table = schema.table(table_id).ok_or(ApiError::NotFound)?;
            let own: Vec<String> = table.fields.iter().map(|f| f.id.clone()).collect();
            let doomed: HashSet<String> = cascade(&schema, &own);
            drop_fields(tx, &schema, &doomed, Some(table_id)).await?;
            if !tables::delete(tx, database_id, table_id).await? {
                return Err(ApiError::NotFound);
            }
            tenant_schema::drop_table(tx, database_id, table_id).await?;
            structural::finish(tx, database_id, user_id).await?;
            Ok(())
        })
        .await
}
