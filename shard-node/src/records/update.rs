//! `PATCH /api/tables/{id}/records`: `{records:[{id, fields, if_updated_at?}]}`.
//! Duplicate id 400; a trashed record 400; an unknown one 404; a stale
//! `if_updated_at` aborts the batch with 409 carrying the records as they
//! are now. Nothing changes unless everything does.

use std::collections::HashMap;

use axum::extract::{Path, Query, State};
use axum::Json;
use serde_json::{Map, Value};

use super::reply::Shape;
use super::{batch, check_live, store, write};
use crate::attachments::fetch;
use crate::attachments::place::{self, Mode};
use crate::auth::{Held, HeldWrite};
use crate::db::DbOp;
use crate::error::{ApiError, ApiResult};
use crate::http::body::JsonObject;
use crate::json::format_ts;
use crate::state::AppState;
use crate::webhooks::outbox::{self, Outbox, RecordEvent, Written};

pub async fn handler(
    access: HeldWrite,
    State(state): State<AppState>,
    Path(id): Path<String>,
    Query(query): Query<HashMap<String, String>>,
    JsonObject(body): JsonObject,
) -> ApiResult<Json<Map<String, Value>>> {
    let shape = Shape::from_query(&query)?;
    let items = batch(&body, "records")?;
    Ok(Json(
        update(
            &state,
            (&access.database_id, access.held()),
            &id,
            access.user_id(),
            items,
            shape,
        )
        .await?,
    ))
}

struct Item<'a> {
    id: String,
    cells: Option<&'a Map<String, Value>>,
    if_updated_at: Option<String>,
}

fn parse_items(items: &[Value]) -> ApiResult<Vec<Item<'_>>> {
    let mut out: Vec<Item> = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let cells = write::cells_of(item, i)?;
        let id = match item.get("id") {
            Some(Value::String(s)) => s.clone(),
            _ => {
                return Err(ApiError::bad_request(format!(
                    "records[{i}].id is required."
                )))
            }
        };
        if out.iter().any(|o| o.id == id) {
            return Err(ApiError::bad_request(format!(
                "Record {id} is named twice in this batch."
            )));
        }
        let if_updated_at = match item.get("if_updated_at") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(
                chrono::DateTime::parse_from_rfc3339(s)
                    .map(|t| format_ts(&t.with_timezone(&chrono::Utc)))
                    .map_err(|_| {
                        ApiError::bad_request(format!(
                            "records[{i}].if_updated_at must be a timestamp."
                        ))
                    })?,
            ),
            Some(_) => {
                return Err(ApiError::bad_request(format!(
                    "records[{i}].if_updated_at must be a timestamp."
                )))
            }
        };
        out.push(Item {
            id,
            cells,
            if_updated_at,
        });
    }
    Ok(out)
}

pub async fn update(
    state: &AppState,
    (database_id, held): (&str, Held),
    table_id: &str,
    user_id: &str,
    items: &[Value],
    shape: Shape,
) -> ApiResult<Map<String, Value>> {
    let items = parse_items(items)?;
    let cells: Vec<_> = items.iter().map(|i| i.cells).collect();
    let fetched = fetch::prefetch(state, database_id, table_id, &cells).await?;
    let outcome = write::in_transaction(
        state,
        DbOp::UpdateRecords,
        (database_id, table_id, held),
        items.len(),
        async |tx, ctx| {
            let ids: Vec<String> = items.iter().map(|i| i.id.clone()).collect();
            let states = store::states(tx, &ctx.record_table, &ids, true).await?;
            check_live(&ids, &states, |id| {
                format!("Record {id} is in the trash and cannot be updated.")
            })?;
            if items.iter().any(|i| i.if_updated_at.is_some()) {
                let current = store::by_ids(tx, &ctx.record_table, &[], &[], &ids).await?;
                let stale: Vec<String> = items
                    .iter()
                    .filter(|i| {
                        i.if_updated_at.as_ref().is_some_and(|want| {
                            current
                                .iter()
                                .find(|r| r.id == i.id)
                                .is_some_and(|r| format_ts(&r.updated_at) != *want)
                        })
                    })
                    .map(|i| i.id.clone())
                    .collect();
                if !stale.is_empty() {
                    let fields = ctx.read_fields()?;
                    let records =
                        write::read_back(tx, ctx, &fields, &stale, shape, |_| Vec::new()).await?;
                    return Err(ApiError::ConflictWithRecords(
                        "A record changed since you read it (if_updated_at).".into(),
                        records,
                    ));
                }
            }
            let mut rows = Vec::with_capacity(items.len());
            for (i, item) in items.iter().enumerate() {
                rows.push((item.id.clone(), write::prepare_cells(ctx, item.cells, i)?));
            }
            let supplied: Vec<Vec<String>> = rows
                .iter()
                .map(|(_, p)| outbox::supplied_fields(ctx, p))
                .collect();
            let mut outbox = Outbox::open(ctx, ids.len());
            outbox.read_before(tx, &ids).await?;
            place::settle(tx, ctx, user_id, &mut rows, Mode::Replace, &fetched).await?;
            write::update(tx, ctx, &rows).await?;
            let updated = Written {
                event: RecordEvent::Updated,
                ids: &ids,
                supplied: &supplied,
            };
            outbox.written(tx, &[updated]).await?;
            let read = outbox.records_read(&ids);
            write::reply(tx, ctx, &ids, shape, read).await
        },
    )
    .await;
    fetched.after_write(state, outcome).await
}
