//! `PATCH /api/views/{id}`: `name` and/or `config` (replaced wholesale).

use axum::extract::{Path, State};
use axum::Json;
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
    let name = match body.get("name") {
        None => None,
        Some(_) => Some(required_name(&body, "name")?),
    };
    let config = match body.get("config") {
        None => None,
        Some(v) => Some(parse_config(Some(v))?),
    };
    if name.is_none() && config.is_none() {
        return Err(ApiError::bad_request("Send name and/or config."));
    }
    let view = update(&state.db, &access.database_id, &id, name, config.as_ref()).await?;
    if let Some(config) = &config {
        crate::views::sort_index::ensure(&state.db, &access.database_id, &view.table_id, config)
            .await;
    }
    Ok(Json(json!({ "view": view })))
}

pub async fn update(
    db: &Db,
    database_id: &str,
    id: &str,
    name: Option<&str>,
    config: Option<&Value>,
) -> ApiResult<View> {
    db.in_structural_transaction(database_id, DbOp::UpdateView, async |tx| {
        views::update(tx, database_id, id, name, config)
            .await?
            .ok_or(ApiError::NotFound)
    })
    .await
}
