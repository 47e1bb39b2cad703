//! Field routes: list and create under a table, update and delete by id.
//!
//! Fields are real schema: each stored costume is a column of the table's
//! real table (named by the field id), a link pair shares one connector
//! table, a formula is a generated stored column, and lookups and rollups
//! have no column. Every change is one structural transaction
//! ([`crate::schema::structural`]): catalog rows, DDL, and the database's
//! `updated_at` and `schema_version` together.
//!
//! Deleting a field that a formula references is refused (400 naming the
//! formula): a formula column cannot outlive the column it reads, and
//! silently blanking a user's formula would lose their work. Deleting a
//! link deletes its mirror and every lookup/rollup riding either side;
//! deleting a field that a lookup/rollup surfaces deletes that lookup/rollup
//! too (it could show nothing). See `delete.rs`.

pub mod create;
pub mod delete;
pub mod formulas;
pub mod list;
pub mod options;
pub mod update;

use std::future::Future;

use axum::Json;
use chrono::Utc;
use deadpool_postgres::GenericClient;
use serde_json::{json, Map, Value};

use crate::catalog;
use crate::db::DbOp;
use crate::error::{ApiError, ApiResult};
use crate::fields::options::button;
use crate::http::body::json_kind;
use crate::schema::DatabaseSchema;
use crate::state::AppState;

/// Runs a field write (timed as `op`) and answers `{"field": ...}`: the
/// tail every field route that returns a field shares.
pub async fn field_reply(
    state: &AppState,
    op: DbOp,
    write: impl Future<Output = ApiResult<Value>>,
) -> ApiResult<Json<Value>> {
    let field = state.db.measured(op, write).await?;
    Ok(Json(json!({ "field": field })))
}

/// The filter environment of the database (its timezone, now), against
/// which field settings with relative dates are checked.
pub fn filter_env(schema: &DatabaseSchema) -> ApiResult<filter_lang::Env> {
    Ok(filter_lang::Env::new(&schema.timezone, Utc::now())
        .map_err(|e| anyhow::anyhow!("database timezone: {e}"))?)
}

/// A button's settings to store; 404 when they name a webhook the
/// database does not have.
pub async fn settle_button(
    c: &impl GenericClient,
    database_id: &str,
    sent: &Map<String, Value>,
) -> ApiResult<Map<String, Value>> {
    let (opts, webhook) = button::settle(sent)?;
    if let Some(w) = webhook {
        if !catalog::fields::webhook_exists(c, database_id, &w).await? {
            return Err(ApiError::NotFound);
        }
    }
    Ok(opts)
}

/// `Field name 'x' is already taken` (409).
pub fn name_taken(name: &str) -> ApiError {
    ApiError::Conflict(format!(
        "A field named '{name}' already exists in this table."
    ))
}

/// A string member of a body: `None` when absent; 400 when not a string.
pub fn string_member<'a>(
    body: &'a serde_json::Map<String, Value>,
    key: &str,
) -> ApiResult<Option<&'a str>> {
    match body.get(key) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(other) => Err(ApiError::bad_request(format!(
            "{key} must be a string, not {}.",
            json_kind(other)
        ))),
    }
}
