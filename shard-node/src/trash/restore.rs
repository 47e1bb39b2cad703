//! `POST /api/tables/{id}/trash/restore`: `{ids}` (at most 100) back to
//! active; 400 when an id is not in the trash; `record.created` fires.

use axum::extract::{Path, State};
use axum::Json;
use serde_json::{Map, Value};

use crate::auth::Held;
use crate::auth::{Access, Editor};
use crate::db::DbOp;
use crate::error::ApiResult;
use crate::http::body::JsonObject;
use crate::records::reply::{self, Shape};
use crate::records::{cells, store, write};
use crate::state::AppState;
use crate::webhooks::outbox::{Outbox, RecordEvent, Written};

pub async fn handler(
    Editor(access): Editor,
    State(state): State<AppState>,
    Path(id): Path<String>,
    JsonObject(body): JsonObject,
) -> ApiResult<Json<Map<String, Value>>> {
    let ids = super::ids(&body)?;
    Ok(Json(restore(&state, &access, &id, &ids).await?))
}

pub async fn restore(
    state: &AppState,
    access: &Access,
    table_id: &str,
    ids: &[String],
) -> ApiResult<Map<String, Value>> {
    let database_id = access.database_id.as_str();
    write::in_transaction(
        state,
        DbOp::RestoreRecords,
        (database_id, table_id, Held::Checked),
        ids.len(),
        async |tx, ctx| {
            let table = &ctx.record_table;
            super::trashed_batch(tx, access, table, ids).await?;
            let mut outbox = Outbox::open(ctx, ids.len());
            let table_schema = ctx.table()?;
            store::restore(tx, table, ids)
                .await
                .map_err(|e| cells::unique_violation(e.into(), table_schema))?;
            outbox
                .written(tx, &[Written::new(RecordEvent::Created, ids)])
                .await?;
            let read = ctx.read_fields()?;
            let mut rows = store::by_ids(tx, table, &read.exprs(), &read.values, ids).await?;
            ctx.show_attachments(tx, &read.fields, &mut rows).await?;
            let shape = Shape::default();
            let records = rows
                .into_iter()
                .map(|r| reply::record_json(r, &read.fields, shape, &[]))
                .collect();
            let mut out = Map::new();
            out.insert("records".into(), Value::Array(records));
            Ok(out)
        },
    )
    .await
}
