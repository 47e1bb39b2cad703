//! `GET /api/tables/{id}/trash`: trashed records newest first, keyed by
//! name, each with `deleted_at`; no companion map.

use std::collections::HashMap;

use axum::extract::{Path, Query, State};
use axum::Json;
use chrono::{DateTime, Utc};
use filter_lang::bookmark::fingerprint;
use filter_lang::{Bookmark, BookmarkKey};
use serde_json::{Map, Value};

use crate::attachments::links::Links;
use crate::attachments::shown;
use crate::auth::Reader;
use crate::db::{Db, DbOp};
use crate::error::{ApiError, ApiResult};
use crate::json::format_ts;
use crate::records::reply::{self, Shape};
use crate::records::table::RecordTable;
use crate::records::{cells, filter_error, page_size, store};
use crate::state::AppState;

/// What a trash bookmark is signed under: this table's trash listing.
fn order(table_id: &str) -> String {
    fingerprint(&["trash", table_id])
}

pub async fn handler(
    Reader(access): Reader,
    State(state): State<AppState>,
    Path(id): Path<String>,
    Query(query): Query<HashMap<String, String>>,
) -> ApiResult<Json<Map<String, Value>>> {
    let size = page_size(
        query
            .get("page_size")
            .map(|s| Value::String(s.clone()))
            .as_ref(),
    )?;
    let key = crate::records::bookmarks::bookmark_key(&state);
    let after = match query.get("bookmark") {
        None => None,
        Some(text) => Some(decode(text, &key, &id)?),
    };
    let reply = list(
        &state.db,
        &state.links,
        &key,
        &access.database_id,
        &id,
        size,
        after,
    )
    .await?;
    Ok(Json(reply))
}

fn decode(text: &str, key: &BookmarkKey, table_id: &str) -> ApiResult<(DateTime<Utc>, String)> {
    let b = Bookmark::decode(text, key, &order(table_id)).map_err(filter_error)?;
    let invalid = || ApiError::bad_request("bookmark: The bookmark does not continue this list.");
    if b.values.len() != 1 {
        return Err(invalid());
    }
    let at = b.values[0]
        .as_deref()
        .and_then(|s| DateTime::parse_from_rfc3339(s).ok())
        .ok_or_else(invalid)?;
    Ok((at.with_timezone(&Utc), b.id))
}

pub async fn list(
    db: &Db,
    links: &Links,
    key: &BookmarkKey,
    database_id: &str,
    table_id: &str,
    size: i64,
    after: Option<(DateTime<Utc>, String)>,
) -> ApiResult<Map<String, Value>> {
    db.measured(DbOp::ListTrash, async {
        let client = db.client_for(database_id).await?;
        let table = RecordTable::load(&*client, database_id, table_id).await?;
        let read = cells::read_fields(&*client, &table, None).await?;
        let mut rows = store::trash_page(
            &*client,
            &table,
            &read.exprs(),
            &read.values,
            after,
            size + 1,
        )
        .await?;
        let more = rows.len() as i64 > size;
        rows.truncate(size as usize);
        let next = match (more, rows.last()) {
            (true, Some(last)) => Some(
                Bookmark {
                    order: order(table_id),
                    values: vec![last
                        .deleted_at
                        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Micros, true))],
                    id: last.id.clone(),
                }
                .encode(key),
            ),
            _ => None,
        };
        shown::expand(
            &*client,
            links,
            database_id,
            &read.fields,
            &mut rows,
            shown::Style::Reply,
        )
        .await?;
        let records: Vec<Value> = rows
            .into_iter()
            .map(|r| {
                let deleted = r.deleted_at.map(|t| format_ts(&t)).into();
                reply::record_json(
                    r,
                    &read.fields,
                    Shape::default(),
                    &[("deleted_at", deleted)],
                )
            })
            .collect();
        let mut out = Map::new();
        out.insert("records".into(), Value::Array(records));
        if let Some(b) = next {
            out.insert("bookmark".into(), Value::String(b));
        }
        Ok(out)
    })
    .await
}
