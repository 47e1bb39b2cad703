//! `DELETE /api/shares/{id}` (editor): revokes the link; its token reads
//! 404 from the next request on (nothing caches a link). Reply
//! `{id, deleted: true}`.

use axum::extract::{Path, State};
use axum::Json;
use serde_json::{json, Value};

use crate::auth::Editor;
use crate::catalog::share_links;
use crate::db::DbOp;
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;

pub async fn handler(
    Editor(access): Editor,
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> ApiResult<Json<Value>> {
    let database_id = access.database_id.as_str();
    state
        .db
        .in_transaction(database_id, DbOp::DeleteShareLink, async |tx| {
            if share_links::delete(tx, database_id, &id).await? {
                Ok(())
            } else {
                Err(ApiError::NotFound)
            }
        })
        .await?;
    Ok(Json(json!({ "id": id, "deleted": true })))
}
