//! `POST /api/views/{id}/shares` (editor): a new read-only link to the
//! view. Reply `{share:{id, view_id, table_id, token, url, created_at,
//! created_by}}`; the token is not stored (only its SHA-256) and never
//! shown again.

use axum::extract::{Path, State};
use axum::Json;
use cluster_protocol::ids::{self, Kind};
use serde_json::{json, Value};

use crate::auth::Editor;
use crate::catalog::share_links::{self, token_digest, New};
use crate::catalog::views;
use crate::db::DbOp;
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;

pub async fn handler(
    Editor(access): Editor,
    State(state): State<AppState>,
    Path(view_id): Path<String>,
) -> ApiResult<Json<Value>> {
    let database_id = access.database_id.as_str();
    let tag = ids::tag_of(Kind::Database, database_id)
        .ok_or_else(|| anyhow::anyhow!("database id without a tag"))?;
    let token = ids::new_share_token(tag);
    let id = ids::new_tagged(Kind::ShareLink, tag);
    let link = state
        .db
        .in_transaction(database_id, DbOp::CreateShareLink, async |tx| {
            let view = views::get(tx, database_id, &view_id)
                .await?
                .ok_or(ApiError::NotFound)?;
            let new = New {
                id: &id,
                database_id,
                table_id: &view.table_id,
                view_id: &view.id,
                token_sha256: &token_digest(&token),
                created_by: access.user_id(),
            };
            Ok(share_links::insert(tx, &new).await?)
        })
        .await?;
    let mut share = json!(link);
    share["token"] = json!(token);
    share["url"] = json!(format!(
        "{}/api/share/{token}/records",
        state.links.public_url()
    ));
    Ok(Json(json!({ "share": share })))
}
