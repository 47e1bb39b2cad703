//! `GET /api/share/{token}/records`: the records of a shared view, for
//! whoever holds the token (no key; the router signs a share principal,
//! `roles::ShareReader`). The token is hashed and looked up on every
//! request, so a revoked link, or one whose view or table is gone
//! (cascade), is 404 at once.
//!
//! The reply is the records listing of the view as
//! `GET /api/tables/{id}/records?view={view}` gives it (`records::list`):
//! the view's filter, sort and visible fields in column order, cells keyed
//! by name, `{records, bookmark?, field_ids}`; a visible field derived from
//! a hidden one is left out too ([`shared_columns`]). Only `page_size` and
//! `bookmark` may be sent (the bookmark sealed: `super::bookmark`); any other parameter is 400, so a client can
//! never widen what the view shows (no `fields`, `filter`, `search`,
//! `sort`, reply shapes).

use std::collections::{HashMap, HashSet};

use axum::extract::{Path, Query, State};

use super::bookmark::{replace_head_bookmark, SealKey};
use crate::auth::ShareReader;
use crate::catalog::share_links::{self, token_digest};
use crate::catalog::views::{self, View};
use crate::db::DbOp;
use crate::error::{ApiError, ApiResult};
use crate::fields::formulas::dependents;
use crate::records::list::{list_held, view_columns, ListParams};
use crate::records::page::JsonBytes;
use crate::records::reply::Shape;
use crate::schema::TableSchema;
use crate::state::AppState;

/// The query parameters a shared view takes.
pub const ALLOWED: [&str; 2] = ["page_size", "bookmark"];

/// The columns a share read shows: the view's visible fields in column
/// order (`records::list::view_columns`), minus any that would show a
/// hidden field's data anyway: a formula reading a hidden field (directly
/// or through other formulas) and a lookup or rollup riding a hidden link.
pub fn shared_columns(view: &View, table: &TableSchema) -> Vec<String> {
    let visible = view_columns(view, table);
    let hidden: Vec<&str> = table
        .fields
        .iter()
        .map(|f| f.id.as_str())
        .filter(|id| !visible.iter().any(|v| v == id))
        .collect();
    let derived: HashSet<String> = dependents(table, &hidden).into_iter().collect();
    visible
        .into_iter()
        .filter(|id| {
            let Some(f) = table.field(id) else {
                return false;
            };
            let rides_hidden = f
                .option_str("link_field_id")
                .is_some_and(|link| hidden.contains(&link));
            !derived.contains(id) && !rides_hidden
        })
        .collect()
}

pub async fn handler(
    ShareReader(access): ShareReader,
    State(state): State<AppState>,
    Path(token): Path<String>,
    Query(query): Query<HashMap<String, String>>,
) -> ApiResult<JsonBytes> {
    if let Some(name) = query.keys().find(|k| !ALLOWED.contains(&k.as_str())) {
        return Err(ApiError::bad_request(format!(
            "A shared view takes only page_size and bookmark; '{name}' is not accepted."
        )));
    }
    let page_size =
        crate::records::page_size(query.get("page_size").map(|s| s.clone().into()).as_ref())?;
    let key = SealKey::derive(state.secret.expose().as_bytes());
    let database_id = access.database_id.as_str();
    let (link, columns) = state
        .db
        .measured(DbOp::ReadShareLink, async {
            let mut client = state.db.client_for(database_id).await?;
            let link = share_links::by_digest(&*client, database_id, &token_digest(&token))
                .await?
                .ok_or(ApiError::NotFound)?;
            let view = views::get(&*client, database_id, &link.view_id)
                .await?
                .ok_or(ApiError::NotFound)?;
            let schema = state
                .schemas
                .get_at(&mut client, database_id, access.schema_version)
                .await?;
            let table = schema.table(&link.table_id).ok_or(ApiError::NotFound)?;
            let columns = shared_columns(&view, table);
            Ok((link, columns))
        })
        .await?;
    let params = ListParams {
        view: Some(link.view_id),
        filter: None,
        sort: None,
        search: None,
        fields: Some(columns),
        page_size,
        bookmark: query
            .get("bookmark")
            .map(|sealed| key.open(sealed))
            .transpose()?,
        shape: Shape::default(),
    };
    let JsonBytes(page) = list_held(&state, &access, &link.table_id, &params).await?;
    Ok(JsonBytes(replace_head_bookmark(page, |b| key.seal(b))))
}
