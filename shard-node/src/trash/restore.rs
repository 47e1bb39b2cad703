//! `POST /api/tables/{id}/trash/restore`: `{ids}` (at most 100) back to
//! active; 400 when an id is not in the trash; `record.created` fires.

use axum::extract::{Path, State};
use axum::Json;
use serde_json::{Map, Value};

use crate::auth::{Access, Editor};
use crate::error::ApiResult;
use crate::http::body::JsonObject;
use crate::records::events::{self, RecordEvent};
use crate::records::reply::{self, Shape};
use crate::records::{cells, store};
use crate::state::{AppState, Db, DbOp};

pub async fn handler(
    Editor(access): Editor,
    State(state): State<AppState>,
    Path(id): Path<String>,
    JsonObject(body): JsonObject,
) -> ApiResult<Json<Map<String, Value>>> {
    let ids = super::ids(&body)?;
    Ok(Json(restore(&state.db, &access, &id, &ids).await?))
}

pub async fn restore(
    db: &Db,
    access: &Access,
    table_id: &str,
    ids: &[String],
) -> ApiResult<Map<String, Value>> {
    db.in_transaction(&access.database_id, DbOp::RestoreRecords, async |tx| {
        let table = super::trashed_batch(tx, access, table_id, ids).await?;
        let schema = crate::schema::cache::load(tx, &access.database_id).await?;
        let table_schema = schema
            .table(table_id)
            .ok_or(crate::error::ApiError::NotFound)?;
        store::restore(tx, &table, ids)
            .await
            .map_err(|e| cells::unique_violation(e.into(), table_schema))?;
        events::record_events(tx, &table, RecordEvent::Created, ids, ids.len()).await?;
        let read = cells::read_fields(tx, &table, None).await?;
        let rows = store::by_ids(tx, &table, &read.exprs(), &read.values, ids).await?;
        let shape = Shape::default();
        let records = rows
            .into_iter()
            .map(|r| reply::record_json(r, &read.fields, shape, &[]))
            .collect();
        let mut out = Map::new();
        out.insert("records".into(), Value::Array(records));
        Ok(out)
    })
    .await
}
