//! `GET /api/tables/{id}/fields`: every field in order, with operators.
//! `writable=true` omits formula, lookup, rollup, button and attachment
//! fields and gives each select choice `label`/`value` aliases.

use std::collections::HashMap;

use axum::extract::{Path, Query, State};
use axum::Json;
use serde_json::{json, Value};

use crate::auth::Reader;
use crate::db::DbOp;
use crate::error::{ApiError, ApiResult};
use crate::fields::options::select;
use crate::schema::Family;
use crate::state::AppState;

pub async fn handler(
    Reader(access): Reader,
    State(state): State<AppState>,
    Path(id): Path<String>,
    Query(query): Query<HashMap<String, String>>,
) -> ApiResult<Json<Value>> {
    let writable = query.get("writable").map(String::as_str) == Some("true");
    let schema = state
        .db
        .measured(DbOp::LoadSchema, async {
            let mut client = state.db.client_for(&access.database_id).await?;
            state.schemas.get(&mut client, &access.database_id).await
        })
        .await?;
    let table = schema.table(&id).ok_or(ApiError::NotFound)?;
    let fields: Vec<Value> = table
        .fields
        .iter()
        .filter(|f| !writable || f.costume.is_writable())
        .map(|f| {
            let mut v = f.to_json(Some(schema.operators(f)));
            if writable && f.costume.family() == Family::Select {
                if let Some(Value::Object(o)) = v.get_mut("options") {
                    select::with_aliases(o);
                }
            }
            v
        })
        .collect();
    Ok(Json(json!({ "fields": fields })))
}
