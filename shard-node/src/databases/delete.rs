//! `DELETE /api/databases/{id}`: an owner's act that no API key may perform
//! (part C), so every request reaching a shard is refused by the
//! [`Owner<DeleteDatabase>`] extractor. [`purge`] is the real deletion, for
//! the day a person's session reaches the shard (and for operators).

use axum::extract::{Path, State};
use axum::Json;
use serde_json::{json, Value};

use crate::auth::{DeleteDatabase, Owner};
use crate::catalog::databases;
use crate::catalog::placements::{self, Need};
use crate::db::{Db, DbOp};
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;
use crate::tenant_schema;

pub async fn handler(
    Owner(access, _): Owner<DeleteDatabase>,
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> ApiResult<Json<Value>> {
    let database_id = access.database(&id)?;
    if !purge(&state.db, database_id).await? {
        return Err(ApiError::NotFound);
    }
    Ok(Json(json!({ "deleted": true })))
}

/// Drops the tenant schema (every table in it) and the catalog row (tables,
/// fields, views and the placement cascade) in one transaction behind the
/// structural fence (409 while the database is being moved). `false` if
/// not held here (no placement, or fenced).
pub async fn purge(db: &Db, database_id: &str) -> ApiResult<bool> {
    // Not held here: nothing but the fence (or the lock) ran, so the
    // transaction commits empty.
    db.in_transaction_fenced_by(
        database_id,
        DbOp::DeleteDatabase,
        async |tx| match placements::fence(tx, database_id, Need::Structure).await {
            Err(ApiError::Misplaced) => Ok(false),
            fenced => fenced.map(|()| true),
        },
        async |tx, held| {
            if !held || databases::lock(tx, database_id).await?.is_none() {
                return Ok(false);
            }
            tenant_schema::drop_schema(tx, database_id).await?;
            databases::delete(tx, database_id).await?;
            Ok(true)
        },
    )
    .await
}
