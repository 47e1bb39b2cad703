//! `POST /api/tables/{id}/trash/purge`: `{ids}` (at most 100, all in the
//! trash) or `{all: true}`. Permanent; no event. An editor's `all` purges
//! the trashed records it created (decision: the spec's own-records rule
//! applied to "all"); an owner's purges every trashed record.

use axum::extract::{Path, State};
use axum::Json;
use cluster_protocol::control::Role;
use serde_json::{json, Value};

use crate::auth::{Access, Editor};
use crate::error::{ApiError, ApiResult};
use crate::http::body::JsonObject;
use crate::records::delete::deleted_reply;
use crate::records::store;
use crate::records::table::RecordTable;
use crate::state::{AppState, Db, DbOp};

pub async fn handler(
    Editor(access): Editor,
    State(state): State<AppState>,
    Path(id): Path<String>,
    JsonObject(body): JsonObject,
) -> ApiResult<Json<Value>> {
    match body.get("all") {
        Some(Value::Bool(true)) if !body.contains_key("ids") => {
            let n = purge_all(&state.db, &access, &id).await?;
            return Ok(Json(json!({ "deleted": n })));
        }
        Some(Value::Bool(true)) => {
            return Err(ApiError::bad_request("Send either ids or all, not both."))
        }
        None | Some(Value::Null) | Some(Value::Bool(false)) => {}
        Some(_) => return Err(ApiError::bad_request("all must be true.")),
    }
    let ids = super::ids(&body)?;
    purge(&state.db, &access, &id, &ids).await?;
    Ok(Json(deleted_reply(&ids)))
}

pub async fn purge(db: &Db, access: &Access, table_id: &str, ids: &[String]) -> ApiResult<()> {
    db.in_transaction(&access.database_id, DbOp::PurgeRecords, async |tx| {
        let table = super::trashed_batch(tx, access, table_id, ids).await?;
        store::purge(tx, &table, ids).await?;
        Ok(())
    })
    .await
}

pub async fn purge_all(db: &Db, access: &Access, table_id: &str) -> ApiResult<u64> {
    db.in_transaction(&access.database_id, DbOp::PurgeRecords, async |tx| {
        let table = RecordTable::load(tx, &access.database_id, table_id).await?;
        let only = (access.principal.role != Some(Role::Owner)).then(|| access.user_id());
        let n = store::purge_all(tx, &table, only).await?;
        Ok(n)
    })
    .await
}
