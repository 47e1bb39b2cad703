//! `POST /api/tables/{id}/views`: `{name, config?}`.

use axum::extract::{Path, State};
use axum::Json;
use cluster_protocol::ids::{self, Kind};
use serde_json::{json, Value};

use crate::catalog::views::{self, View};
use crate::db::{Db, DbOp};
use crate::error::{ApiError, ApiResult};
use crate::http::body::{required_name, JsonObject};
use crate::state::AppState;
use crate::views::{parse_config, ViewEditor};

pub async fn handler(
    ViewEditor(access): ViewEditor,
    State(state): State<AppState>,
    Path(id): Path<String>,
    JsonObject(body): JsonObject,
) -> ApiResult<Json<Value>> {
    let name = required_name(&body, "name")?;
    let config = parse_config(body.get("config"))?;
    let view = create(&state.db, &access.database_id, &id, name, &config).await?;
    crate::views::sort_index::ensure(&state.db, &access.database_id, &id, &config).await;
    Ok(Json(json!({ "view": view })))
}

pub async fn create(
    db: &Db,
    database_id: &str,
    table_id: &str,
    name: &str,
    config: &Value,
) -> ApiResult<View> {
    db.in_structural_transaction(database_id, DbOp::CreateView, async |tx| {
        if !views::lock_table(tx, database_id, table_id).await? {
            return Err(ApiError::NotFound);
        }
        let tag = ids::tag_of(Kind::Table, table_id)
            .ok_or_else(|| anyhow::anyhow!("table id without a tag"))?;
        let id = ids::new_tagged(Kind::View, tag);
        let view = views::insert(tx, &id, table_id, database_id, name, config).await?;
        Ok(view)
    })
    .await
}
