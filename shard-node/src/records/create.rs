//! `POST /api/tables/{id}/records`: up to 100 new records in one
//! transaction; the reply reads them back inside it.

use std::collections::HashMap;

use axum::extract::{Path, Query, State};
use axum::Json;
use cluster_protocol::ids::{self, Kind};
use serde_json::{Map, Value};

use super::reply::Shape;
use super::{batch, write};
use crate::attachments::fetch;
use crate::attachments::place::{self, Mode};
use crate::auth::{Held, HeldWrite};
use crate::db::DbOp;
use crate::error::ApiResult;
use crate::http::body::JsonObject;
use crate::state::AppState;
use crate::webhooks::outbox::{Outbox, RecordEvent, Written};

pub async fn handler(
    access: HeldWrite,
    State(state): State<AppState>,
    Path(id): Path<String>,
    Query(query): Query<HashMap<String, String>>,
    JsonObject(body): JsonObject,
) -> ApiResult<Json<Map<String, Value>>> {
    let shape = Shape::from_query(&query)?;
    let items = batch(&body, "records")?;
    let reply = create(
        &state,
        (&access.database_id, access.held()),
        &id,
        access.user_id(),
        items,
        shape,
    )
    .await?;
    Ok(Json(reply))
}

pub async fn create(
    state: &AppState,
    (database_id, held): (&str, Held),
    table_id: &str,
    user_id: &str,
    items: &[Value],
    shape: Shape,
) -> ApiResult<Map<String, Value>> {
    let cells = items
        .iter()
        .enumerate()
        .map(|(i, item)| write::cells_of(item, i))
        .collect::<ApiResult<Vec<_>>>()?;
    let fetched = fetch::prefetch(state, database_id, table_id, &cells).await?;
    let outcome = write::in_transaction(
        state,
        DbOp::CreateRecords,
        (database_id, table_id, held),
        items.len(),
        async |tx, ctx| {
            let mut rows = Vec::with_capacity(items.len());
            for (i, item) in items.iter().enumerate() {
                let id = ids::new_tagged(Kind::Record, &ctx.record_table.tag);
                rows.push((id, write::prepare_item(ctx, item, i)?));
            }
            place::settle(tx, ctx, user_id, &mut rows, Mode::Create, &fetched).await?;
            let mut outbox = Outbox::open(ctx, items.len());
            let returned = write::insert_returning(tx, ctx, user_id, &rows).await?;
            let ids: Vec<String> = rows.into_iter().map(|(id, _)| id).collect();
            outbox
                .written(tx, &[Written::new(RecordEvent::Created, &ids)])
                .await?;
            let read = outbox.records_read(&ids).or(returned);
            write::reply(tx, ctx, &ids, shape, read).await
        },
    )
    .await;
    fetched.after_write(state, outcome).await
}
