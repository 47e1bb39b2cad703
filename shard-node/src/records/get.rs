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
use crate::auth::{Checked, HeldRead};
use crate::db::DbOp;
use crate::error::{ApiError, ApiResult};
use crate::schema::DatabaseSchema;
use crate::state::AppState;

pub async fn handler(
    read: HeldRead,
    State(state): State<AppState>,
    Path((id, rid)): Path<(String, String)>,
    Query(query): Query<HashMap<String, String>>,
) -> ApiResult<Json<Map<String, Value>>> {
    let mut shape = Shape::from_query(&query)?;
    shape.link_display_cap = query
        .get("link_display_cap")
        .and_then(|s| s.parse::<usize>().ok())
        .filter(|n| (1..=1000).contains(n));
    let reply = state
        .db
        .measured(DbOp::GetRecord, async {
            let mut client = state.db.client_for(&read.database_id).await?;
            let cached = read.cached(&state);
            let started = cached
                .as_ref()
                .map(|s| (s.version, one(&state, &client, s, &id, &rid, shape)));
            match read.check(&client, started).await? {
                Checked::Read(out) => out,
                Checked::Stale(version) => {
                    let schema = state
                        .schemas
                        .get_at(&mut client, &read.database_id, version)
                        .await?;
                    one(&state, &client, &schema, &id, &rid, shape).await
                }
            }
        })
        .await?;
    Ok(Json(reply))
}

/// The record `rid` of table `table_id` as the reply shows it (404 when
/// the table or a live record is not there).
async fn one(
    state: &AppState,
    client: &deadpool_postgres::Object,
    schema: &DatabaseSchema,
    table_id: &str,
    rid: &str,
    shape: Shape,
) -> ApiResult<Map<String, Value>> {
    let rt = RecordTable::from_schema(schema, table_id)?;
    let table = schema.table(table_id).ok_or(ApiError::NotFound)?;
    let read = read::read_set(schema, table, None);
    let rows = store::by_ids(client, &rt, &read.exprs(), &read.values, &[rid.to_owned()]).await?;
    let fields = read.fields;
    let mut rows: Vec<_> = rows
        .into_iter()
        .filter(|r| r.deleted_at.is_none())
        .collect();
    shown::expand(
        client,
        &state.links,
        &schema.database_id,
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
}
