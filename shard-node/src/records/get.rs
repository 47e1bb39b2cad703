//! `GET /api/tables/{id}/records/{rid}`: one live record, every field,
//! with the companion map.

use std::collections::HashMap;

use axum::extract::{Path, Query, State};
use axum::Json;
use serde_json::{Map, Value};

use super::cells::read;
use super::reply::{self, Shape};
use super::store;
use super::table::RecordTable;
use crate::attachments::shown;
use crate::auth::Reader;
use crate::error::{ApiError, ApiResult};
use crate::state::{AppState, DbOp};

pub async fn handler(
    Reader(access): Reader,
    State(state): State<AppState>,
    Path((id, rid)): Path<(String, String)>,
    Query(query): Query<HashMap<String, String>>,
) -> ApiResult<Json<Map<String, Value>>> {
    let mut shape = Shape::from_query(&query)?;
    shape.link_display_cap = query
        .get("link_display_cap")
        .and_then(|s| s.parse::<usize>().ok())
        .filter(|n| (1..=1000).contains(n));
    let database_id = access.database_id.clone();
    let reply = state
        .db
        .measured(DbOp::GetRecord, async {
            let mut client = state.db.client_for(&database_id).await?;
            let schema = state
                .schemas
                .get_at(&mut client, &database_id, access.schema_version)
                .await?;
            let rt = RecordTable::load(&*client, &database_id, &id).await?;
            let table = schema.table(&id).ok_or(ApiError::NotFound)?;
            let read = read::read_set(&schema, table, None);
            let rows = store::by_ids(
                &*client,
                &rt,
                &read.exprs(),
                &read.values,
                std::slice::from_ref(&rid),
            )
            .await?;
            let fields = read.fields;
            let mut rows: Vec<_> = rows
                .into_iter()
                .filter(|r| r.deleted_at.is_none())
                .collect();
            shown::expand(
                &*client,
                &state.links,
                &database_id,
                &fields,
                &mut rows,
                shown::Style::Reply,
            )
            .await?;
            let rec = rows.pop().ok_or(ApiError::NotFound)?;
            let mut out = Map::new();
            out.insert(
                "record".into(),
                reply::record_json(rec, &fields, shape, &[]),
            );
            let (k, v) = reply::companion(&fields, shape);
            out.insert(k.into(), v);
            Ok(out)
        })
        .await?;
    Ok(Json(reply))
}
