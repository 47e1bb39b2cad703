//! `POST /api/tables/{id}/records`: up to 100 new records in one
//! transaction; the reply reads them back inside it.

use std::collections::HashMap;

use axum::extract::{Path, Query, State};
use axum::Json;
use cluster_protocol::ids::{self, Kind};
use serde_json::{Map, Value};

use super::reply::{self, Shape};
use super::{batch, events, write};
use crate::auth::Editor;
use crate::error::ApiResult;
use crate::http::body::JsonObject;
use crate::state::{AppState, Db, DbOp};

pub async fn handler(
    Editor(access): Editor,
    State(state): State<AppState>,
    Path(id): Path<String>,
    Query(query): Query<HashMap<String, String>>,
    JsonObject(body): JsonObject,
) -> ApiResult<Json<Map<String, Value>>> {
    let shape = Shape::from_query(&query)?;
    let items = batch(&body, "records")?;
    let reply = create(
        &state,
        &access.database_id,
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
    database_id: &str,
    table_id: &str,
    user_id: &str,
    items: &[Value],
    shape: Shape,
) -> ApiResult<Map<String, Value>> {
    let db: &Db = &state.db;
    db.measured(DbOp::CreateRecords, async {
        let mut client = db.client().await?;
        let tx = client.transaction().await?;
        let ctx = write::Ctx::load(&tx, &state.schemas, database_id, table_id).await?;
        let mut rows = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let cells = write::cells_of(item, i)?;
            let prepared = write::prepare_cells(&ctx, cells, i)?;
            rows.push((
                ids::new_tagged(Kind::Record, &ctx.record_table.tag),
                prepared,
            ));
        }
        write::insert(&tx, &ctx, user_id, &rows).await?;
        let ids: Vec<String> = rows.into_iter().map(|(id, _)| id).collect();
        events::record_events(
            &tx,
            &ctx.record_table,
            events::RecordEvent::Created,
            &ids,
            items.len(),
        )
        .await?;
        let fields = ctx.read_fields()?;
        let records = write::read_back(&tx, &ctx, &fields, &ids, shape, |_| Vec::new()).await?;
        tx.commit().await?;
        Ok(reply::records_reply(records, &fields, shape))
    })
    .await
}
