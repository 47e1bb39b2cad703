//! `GET /api/views/{id}/shares` (editor): the view's live links oldest
//! first, `{shares:[...]}`, without tokens (they are not stored).

use axum::extract::{Path, State};
use axum::Json;
use serde_json::{json, Value};

use crate::auth::Editor;
use crate::catalog::{share_links, views};
use crate::db::DbOp;
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;

pub async fn handler(
    Editor(access): Editor,
    State(state): State<AppState>,
    Path(view_id): Path<String>,
) -> ApiResult<Json<Value>> {
    let database_id = access.database_id.as_str();
    let shares = state
        .db
        .measured(DbOp::ListShareLinks, async {
            let client = state.db.client_for(database_id).await?;
            views::get(&*client, database_id, &view_id)
                .await?
                .ok_or(ApiError::NotFound)?;
            Ok(share_links::list_for_view(&*client, database_id, &view_id).await?)
        })
        .await?;
    Ok(Json(json!({ "shares": shares })))
}
