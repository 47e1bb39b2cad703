//! `POST /internal/databases/lookup` `{database_ids:[...]}` ->
//! `{databases:[Database]}` for the ones held here; the router merges the
//! answers of every shard into `GET /api/databases`.

use axum::extract::State;
use axum::Json;
use serde_json::{json, Value};

use crate::auth::Caller;
use crate::catalog::databases::{self, Database};
use crate::db::{Db, DbOp};
use crate::error::{ApiError, ApiResult};
use crate::http::body::{json_kind, JsonObject};
use crate::state::AppState;

pub async fn handler(
    _caller: Caller,
    State(state): State<AppState>,
    JsonObject(body): JsonObject,
) -> ApiResult<Json<Value>> {
    let ids = match body.get("database_ids") {
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| match v {
                Value::String(s) => Ok(s.clone()),
                other => Err(ApiError::bad_request(format!(
                    "database_ids must hold strings, not {}.",
                    json_kind(other)
                ))),
            })
            .collect::<ApiResult<Vec<String>>>()?,
        _ => {
            return Err(ApiError::bad_request(
                "database_ids is required: a list of database ids.",
            ))
        }
    };
    let found = held(&state.db, &ids).await?;
    Ok(Json(json!({ "databases": found })))
}

pub async fn held(db: &Db, ids: &[String]) -> ApiResult<Vec<Database>> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    db.measured(DbOp::LookupDatabases, async {
        let client = db.client().await?;
        Ok(databases::lookup(&*client, ids).await?)
    })
    .await
}
