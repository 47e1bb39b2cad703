//! `POST /api/tables/{id}/records/{rid}/comments` body `{text}`: any
//! member with a read-write key (viewers included, support refused).
//! The record must be live (trashed or missing: 404). Reply `{comment}`.

use axum::extract::{Path, State};
use axum::Json;
use cluster_protocol::ids::{self, Kind};
use serde_json::{json, Value};

use super::Commenter;
use crate::auth::Access;
use crate::catalog::comments::{self, Comment, New};
use crate::db::DbOp;
use crate::error::{ApiError, ApiResult};
use crate::http::body::JsonObject;
use crate::records::store;
use crate::records::table::RecordTable;
use crate::state::AppState;

pub async fn handler(
    Commenter(access): Commenter,
    State(state): State<AppState>,
    Path((table_id, record_id)): Path<(String, String)>,
    JsonObject(body): JsonObject,
) -> ApiResult<Json<Value>> {
    let text = super::text(&body)?;
    let comment = create(&state, &access, &table_id, &record_id, &text).await?;
    Ok(Json(json!({ "comment": comment })))
}

pub async fn create(
    state: &AppState,
    access: &Access,
    table_id: &str,
    record_id: &str,
    text: &str,
) -> ApiResult<Comment> {
    let database_id = access.database_id.as_str();
    state
        .db
        .in_transaction(database_id, DbOp::CreateComment, async |tx| {
            let rt = RecordTable::load(tx, database_id, table_id).await?;
            // Key-share on the live record: a purge racing with this insert
            // waits for it and then deletes the comment with the record.
            if !store::lock_live(tx, &rt.qualified, record_id).await? {
                return Err(ApiError::NotFound);
            }
            let id = ids::new_tagged(Kind::Comment, &rt.tag);
            let new = New {
                id: &id,
                database_id,
                table_id,
                record_id,
                author_id: access.user_id(),
                text,
            };
            Ok(comments::insert(tx, &new).await?)
        })
        .await
}
