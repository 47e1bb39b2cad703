//! `DELETE /api/tables/{id}/records`: moves up to 100 live records to the
//! trash (`{records:[ids]}` in the body or `records=a,b` in the query).
//! Editors may trash only records they created; owners any.

use std::collections::HashMap;

use axum::extract::{Path, Query, State};
use axum::Json;
use cluster_protocol::control::Role;
use serde_json::{json, Value};

use super::{batch, check_batch_len, check_live, record_ids, store, write};
use crate::auth::Held;
use crate::auth::{Access, Editor};
use crate::db::DbOp;
use crate::error::{ApiError, ApiResult};
use crate::http::body::{parse_object, RawBody};
use crate::state::AppState;
use crate::webhooks::outbox::{Outbox, RecordEvent, Written};

/// 403 message for an editor acting on someone else's record in the trash
/// operations (part C lists no wording for it).
pub const NOT_OWN_RECORD: &str = "Editors can only delete, restore or purge records they created.";

pub async fn handler(
    Editor(access): Editor,
    State(state): State<AppState>,
    Path(id): Path<String>,
    Query(query): Query<HashMap<String, String>>,
    RawBody(body): RawBody,
) -> ApiResult<Json<Value>> {
    let ids = match query.get("records") {
        Some(list) if body.iter().all(u8::is_ascii_whitespace) => {
            let items: Vec<Value> = list
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(|s| Value::String(s.to_owned()))
                .collect();
            if items.is_empty() {
                return Err(ApiError::bad_request(
                    "records must name at least one record.",
                ));
            }
            check_batch_len(items.len())?;
            record_ids(&items, "records")?
        }
        _ => {
            let body = parse_object(&body)?;
            record_ids(batch(&body, "records")?, "records")?
        }
    };
    trash(&state, &access, &id, &ids).await?;
    Ok(Json(deleted_reply(&ids)))
}

/// `{records:[{id, deleted: true}...]}`: the reply of trashing and of
/// purging by ids.
pub fn deleted_reply(ids: &[String]) -> Value {
    let records: Vec<Value> = ids
        .iter()
        .map(|id| json!({"id": id, "deleted": true}))
        .collect();
    json!({ "records": records })
}

/// The editor-only-own-records rule: 403 when an editor names a record
/// someone else created. `states` are (id, created_by, trashed).
pub fn check_own(access: &Access, states: &[(String, Option<String>, bool)]) -> ApiResult<()> {
    if access.principal.role == Some(Role::Owner) {
        return Ok(());
    }
    let me = access.user_id();
    if states.iter().any(|(_, by, _)| by.as_deref() != Some(me)) {
        return Err(ApiError::Forbidden(NOT_OWN_RECORD));
    }
    Ok(())
}

/// Moves `ids` to the trash; `record.deleted` fires (the record as it
/// stood in `before`).
pub async fn trash(
    state: &AppState,
    access: &Access,
    table_id: &str,
    ids: &[String],
) -> ApiResult<()> {
    let database_id = access.database_id.as_str();
    write::in_transaction(
        state,
        DbOp::TrashRecords,
        (database_id, table_id, Held::Checked),
        ids.len(),
        async |tx, ctx| {
            let table = &ctx.record_table;
            let states = store::states(tx, table, ids, true).await?;
            check_live(ids, &states, |id| {
                format!("Record {id} is already in the trash.")
            })?;
            check_own(access, &states)?;
            let mut outbox = Outbox::open(ctx, ids.len());
            store::trash(tx, table, ids).await?;
            outbox
                .written(tx, &[Written::new(RecordEvent::Deleted, ids)])
                .await
        },
    )
    .await
}
