//! `DELETE /api/comments/{id}`: the author, or an owner (403 otherwise).
//! Reply `{id, deleted: true}`.

use axum::extract::{Path, State};
use axum::Json;
use cluster_protocol::control::Role;
use serde_json::{json, Value};

use super::{Commenter, AUTHOR_OR_OWNER_DELETE};
use crate::catalog::comments;
use crate::db::DbOp;
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;

pub async fn handler(
    Commenter(access): Commenter,
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> ApiResult<Json<Value>> {
    let database_id = access.database_id.as_str();
    state
        .db
        .in_transaction(database_id, DbOp::DeleteComment, async |tx| {
            let current = comments::get(tx, database_id, &id, true)
                .await?
                .ok_or(ApiError::NotFound)?;
            let owner = access.principal.role == Some(Role::Owner);
            if current.author_id != access.user_id() && !owner {
                return Err(ApiError::Forbidden(AUTHOR_OR_OWNER_DELETE));
            }
            comments::delete(tx, database_id, &id).await?;
            Ok(())
        })
        .await?;
    Ok(Json(json!({ "id": id, "deleted": true })))
}
