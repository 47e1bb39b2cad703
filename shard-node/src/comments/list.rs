//! `GET /api/tables/{id}/records/{rid}/comments` (any member): the live
//! record's comments oldest first, `{comments, bookmark?}`, keyset paged
//! by (`created_at`, `id`). `page_size` 1 to 100 (default 50); `bookmark`
//! is the previous page's value verbatim, signed like a records bookmark
//! and valid only for this record's comments; absent on the last page.

use std::collections::HashMap;

use axum::extract::{Path, Query, State};
use axum::Json;
use chrono::{DateTime, SecondsFormat, Utc};
use filter_lang::bookmark::fingerprint;
use filter_lang::Bookmark;
use serde_json::{json, Value};

use crate::auth::Reader;
use crate::catalog::comments::{self, Comment};
use crate::config::{COMMENT_PAGE_SIZE_DEFAULT, COMMENT_PAGE_SIZE_MAX};
use crate::db::DbOp;
use crate::error::{ApiError, ApiResult};
use crate::records::bookmarks::bookmark_key;
use crate::records::filter_error;
use crate::records::store;
use crate::records::table::RecordTable;
use crate::state::AppState;

/// `page_size` as sent: a whole number from 1 to [`COMMENT_PAGE_SIZE_MAX`].
pub fn page_size(raw: Option<&String>) -> ApiResult<i64> {
    let Some(raw) = raw else {
        return Ok(COMMENT_PAGE_SIZE_DEFAULT);
    };
    match raw.trim().parse::<i64>() {
        Ok(n) if (1..=COMMENT_PAGE_SIZE_MAX).contains(&n) => Ok(n),
        _ => Err(ApiError::bad_request(format!(
            "page_size must be a whole number from 1 to {COMMENT_PAGE_SIZE_MAX}."
        ))),
    }
}

/// What a comments bookmark is valid under: this record's comments.
fn order(table_id: &str, record_id: &str) -> String {
    fingerprint(&["comments", table_id, record_id])
}

fn resume_at(b: &Bookmark) -> ApiResult<DateTime<Utc>> {
    let text = b.values.first().cloned().flatten().unwrap_or_default();
    DateTime::parse_from_rfc3339(&text)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|_| ApiError::bad_request("bookmark: The bookmark is not valid."))
}

pub async fn handler(
    Reader(access): Reader,
    State(state): State<AppState>,
    Path((table_id, record_id)): Path<(String, String)>,
    Query(query): Query<HashMap<String, String>>,
) -> ApiResult<Json<Value>> {
    let take = page_size(query.get("page_size"))?;
    let order = order(&table_id, &record_id);
    let key = bookmark_key(&state);
    let after = match query.get("bookmark") {
        None => None,
        Some(text) => {
            let b = Bookmark::decode(text, &key, &order).map_err(filter_error)?;
            Some((resume_at(&b)?, b.id))
        }
    };
    let database_id = access.database_id.as_str();
    let mut page: Vec<Comment> = state
        .db
        .measured(DbOp::ListComments, async {
            let client = state.db.client_for(database_id).await?;
            let rt = RecordTable::load(&*client, database_id, &table_id).await?;
            if !store::is_live(&*client, &rt.qualified, &record_id).await? {
                return Err(ApiError::NotFound);
            }
            let after = after.as_ref().map(|(at, id)| (*at, id.as_str()));
            Ok(comments::page(&*client, &table_id, &record_id, after, take + 1).await?)
        })
        .await?;
    let mut reply = serde_json::Map::new();
    if page.len() as i64 > take {
        page.truncate(take as usize);
        if let Some(last) = page.last() {
            let b = Bookmark {
                order,
                values: vec![Some(
                    last.created_at.to_rfc3339_opts(SecondsFormat::Micros, true),
                )],
                id: last.id.clone(),
            };
            reply.insert("bookmark".into(), Value::String(b.encode(&key)));
        }
    }
    reply.insert("comments".into(), json!(page));
    Ok(Json(Value::Object(reply)))
}
