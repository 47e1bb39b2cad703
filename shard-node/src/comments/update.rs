//! `PATCH /api/comments/{id}` body `{text}`: the author only (403
//! otherwise); sets `edited: true` and bumps `updated_at`. Reply `{comment}`.

use axum::extract::{Path, State};
use axum::Json;
use serde_json::{json, Value};

use super::{Commenter, AUTHOR_ONLY_EDIT};
use crate::catalog::comments;
use crate::db::DbOp;
use crate::error::{ApiError, ApiResult};
use crate::http::body::JsonObject;
use crate::state::AppState;

pub async fn handler(
    Commenter(access): Commenter,
    State(state): State<AppState>,
    Path(id): Path<String>,
    JsonObject(body): JsonObject,
) -> ApiResult<Json<Value>> {
    let text = super::text(&body)?;
    let database_id = access.database_id.as_str();
    let comment = state
        .db
        .in_transaction(database_id, DbOp::UpdateComment, async |tx| {
            let current = comments::get(tx, database_id, &id, true)
                .await?
                .ok_or(ApiError::NotFound)?;
            if current.author_id != access.user_id() {
                return Err(ApiError::Forbidden(AUTHOR_ONLY_EDIT));
            }
            comments::update_text(tx, database_id, &id, &text)
                .await?
                .ok_or(ApiError::NotFound)
        })
        .await?;
    Ok(Json(json!({ "comment": comment })))
}
