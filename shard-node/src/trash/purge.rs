//! `POST /api/tables/{id}/trash/purge`: `{ids}` (at most 100, all in the
//! trash) or `{all: true}`. Permanent; no event. An editor's `all` purges
//! the trashed records it created (decision: the spec's own-records rule
//! applied to "all"); an owner's purges every trashed record. The purged
//! records' attachments and comments go in the same transaction (their bytes follow
//! through `blob_garbage` and the blob sweeper).

use axum::extract::{Path, State};
use axum::Json;
use cluster_protocol::control::Role;
use serde_json::{json, Value};

use crate::auth::Held;
use crate::auth::{Access, Editor};
use crate::catalog::{attachments, comments};
use crate::db::DbOp;
use crate::error::{ApiError, ApiResult};
use crate::http::body::JsonObject;
use crate::records::delete::deleted_reply;
use crate::records::{store, write};
use crate::state::AppState;
use crate::webhooks::outbox;

pub async fn handler(
    Editor(access): Editor,
    State(state): State<AppState>,
    Path(id): Path<String>,
    JsonObject(body): JsonObject,
) -> ApiResult<Json<Value>> {
    match body.get("all") {
        Some(Value::Bool(true)) if !body.contains_key("ids") => {
            let n = purge_all(&state, &access, &id).await?;
            return Ok(Json(json!({ "deleted": n })));
        }
        Some(Value::Bool(true)) => {
            return Err(ApiError::bad_request("Send either ids or all, not both."))
        }
        None | Some(Value::Null) | Some(Value::Bool(false)) => {}
        Some(_) => return Err(ApiError::bad_request("all must be true.")),
    }
    let ids = super::ids(&body)?;
    purge(&state, &access, &id, &ids).await?;
    Ok(Json(deleted_reply(&ids)))
}

/// Removes `ids` from the trash for good; they leave the match memory
/// (no event fires).
pub async fn purge(
    state: &AppState,
    access: &Access,
    table_id: &str,
    ids: &[String],
) -> ApiResult<()> {
    let database_id = access.database_id.as_str();
    write::in_transaction(
        state,
        DbOp::PurgeRecords,
        (database_id, table_id, Held::Checked),
        ids.len(),
        async |tx, ctx| {
            super::trashed_batch(tx, access, &ctx.record_table, ids).await?;
            store::purge(tx, &ctx.record_table, ids).await?;
            let purged: Vec<&str> = ids.iter().map(String::as_str).collect();
            attachments::delete_for_records(tx, table_id, &purged).await?;
            comments::delete_for_records(tx, table_id, &purged).await?;
            outbox::purged(tx, ctx, Some(ids)).await
        },
    )
    .await
}

pub async fn purge_all(state: &AppState, access: &Access, table_id: &str) -> ApiResult<u64> {
    let database_id = access.database_id.as_str();
    write::in_transaction(
        state,
        DbOp::PurgeRecords,
        (database_id, table_id, Held::Checked),
        0,
        async |tx, ctx| {
            let only = (access.principal.role != Some(Role::Owner)).then(|| access.user_id());
            let purged = store::purge_all(tx, &ctx.record_table, only).await?;
            let ids: Vec<&str> = purged.iter().map(String::as_str).collect();
            attachments::delete_for_records(tx, table_id, &ids).await?;
            comments::delete_for_records(tx, table_id, &ids).await?;
            outbox::purged(tx, ctx, None).await?;
            Ok(purged.len() as u64)
        },
    )
    .await
}
