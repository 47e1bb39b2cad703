//! `POST /api/databases/{id}/tables`: catalog row, real table and the
//! database's `updated_at` bump in one transaction, under the database
//! row's lock so concurrent creates see each other's count and position.

use axum::extract::{Path, State};
use axum::Json;
use cluster_protocol::ids::{self, Kind};
use serde_json::{json, Value};

use crate::auth::Editor;
use crate::catalog::tables::Table;
use crate::catalog::{databases, tables};
use crate::db::{Db, DbOp};
use crate::error::{ApiError, ApiResult};
use crate::http::body::{required_name, JsonObject};
use crate::schema::structural;
use crate::state::AppState;
use crate::tenant_schema;

pub async fn handler(
    Editor(access): Editor,
    State(state): State<AppState>,
    Path(id): Path<String>,
    JsonObject(body): JsonObject,
) -> ApiResult<Json<Value>> {
    let database_id = access.database(&id)?;
    let name = required_name(&body, "name")?;
    let table = create(&state.db, database_id, access.user_id(), name).await?;
    Ok(Json(json!({ "table": table })))
}

pub async fn create(db: &Db, database_id: &str, user_id: &str, name: &str) -> ApiResult<Table> {
    let mut table = db
        .in_structural_transaction(database_id, DbOp::CreateTable, async |tx| {
            let tag = structural::begin(tx, database_id).await?;
            let (count, max_position) = tables::count_and_max_position(tx, database_id).await?;
            // The owner's quota (`databases.max_tables`) or the default.
            let cap = databases::limits(tx, database_id, 0).await?.tables;
            if count >= cap {
                return Err(ApiError::bad_request(format!(
                    "A database can hold at most {cap} tables."
                )));
            }
            let table_id = ids::new_tagged(Kind::Table, &tag);
            let table = tables::insert(tx, &table_id, database_id, name, max_position + 1).await?;
            tenant_schema::create_table(tx, database_id, &table_id).await?;
            structural::finish(tx, database_id, user_id).await?;
            Ok(table)
        })
        .await?;
    table.fields = Some(Vec::new());
    Ok(table)
}
