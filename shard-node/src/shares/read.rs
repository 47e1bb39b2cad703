//! `GET /api/share/{token}/records`: the records of a shared view, for
//! whoever holds the token (no key; the router signs a share principal,
//! `roles::ShareReader`). The token is hashed and looked up on every
//! request, so a revoked link, or one whose view or table is gone
//! (cascade), is 404 at once.
//!
//! The reply is the records listing of the view exactly as
//! `GET /api/tables/{id}/records?view={view}` gives it (`records::list`):
//! the view's filter, sort and visible fields in column order, cells keyed
//! by name, `{records, bookmark?, field_ids}`. Only `page_size` and
//! `bookmark` may be sent (the bookmark sealed: `super::bookmark`); any other parameter is 400, so a client can
//! never widen what the view shows (no `fields`, `filter`, `search`,
//! `sort`, reply shapes).

use std::collections::HashMap;

use axum::extract::{Path, Query, State};

use super::bookmark::{replace_head_bookmark, SealKey};
use crate::auth::ShareReader;
use crate::catalog::share_links::{self, token_digest};
use crate::error::{ApiError, ApiResult};
use crate::records::list::{list, ListParams};
use crate::records::page::JsonBytes;
use crate::records::reply::Shape;
use crate::state::{AppState, DbOp};

/// The query parameters a shared view takes.
pub const ALLOWED: [&str; 2] = ["page_size", "bookmark"];

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
    let link = state
        .db
        .measured(DbOp::ReadShareLink, async {
            let client = state.db.client_for(database_id).await?;
            Ok(share_links::by_digest(&*client, database_id, &token_digest(&token)).await?)
        })
        .await?
        .ok_or(ApiError::NotFound)?;
    let params = ListParams {
        view: Some(link.view_id),
        filter: None,
        sort: None,
        search: None,
        fields: None,
        page_size,
        bookmark: query
            .get("bookmark")
            .map(|sealed| key.open(sealed))
            .transpose()?,
        shape: Shape::default(),
    };
    let JsonBytes(page) = list(&state, &access, &link.table_id, params).await?;
    Ok(JsonBytes(replace_head_bookmark(page, |b| key.seal(b))))
}
