//! `POST /api/tables/{id}/records`: up to 100 new records in one
//! transaction; the reply reads them back inside it.

use std::collections::HashMap;

use axum::extract::{Path, Query, State};
use axum::Json;
use cluster_protocol::ids::{self, Kind};
use serde_json::{Map, Value};

use super::reply::{self, ReadField, Shape};
use super::table::RecordTable;
use super::{batch, events, store};
use crate::auth::Editor;
use crate::error::{ApiError, ApiResult};
use crate::http::body::JsonObject;
use crate::state::{AppState, Db, DbOp};

pub async fn handler(
    Editor(access): Editor,
    State(state): State<AppState>,
    Path(id): Path<String>,
    Query(query): Query<HashMap<String, String>>,
    JsonObject(body): JsonObject,
) -> ApiResult<Json<Map<String, Value>>> {
    let shape = Shape::from_query(&query)?;
    let items = batch(&body, "records")?;
    let reply = create(
        &state.db,
        &access.database_id,
        &id,
        access.user_id(),
        items,
        shape,
    )
    .await?;
    Ok(Json(reply))
}

pub async fn create(
    db: &Db,
    database_id: &str,
    table_id: &str,
    user_id: &str,
    items: &[Value],
    shape: Shape,
) -> ApiResult<Map<String, Value>> {
    db.measured(DbOp::CreateRecords, async {
        let mut client = db.client().await?;
        let tx = client.transaction().await?;
        let table = RecordTable::load(&tx, database_id, table_id).await?;
        for (i, item) in items.iter().enumerate() {
            let Some(obj) = item.as_object() else {
                return Err(ApiError::bad_request(format!(
                    "records[{i}] must be an object."
                )));
            };
            match obj.get("fields") {
                None | Some(Value::Null) => {}
                Some(Value::Object(cells)) => {
                    if let Some(k) = cells.keys().next() {
                        return Err(ApiError::bad_request(format!("Unknown field '{k}'.")));
                    }
                }
                Some(_) => {
                    return Err(ApiError::bad_request(format!(
                        "records[{i}].fields must be an object."
                    )))
                }
            }
        }
        let ids: Vec<String> = items
            .iter()
            .map(|_| ids::new_tagged(Kind::Record, &table.tag))
            .collect();
        store::insert_bare(&tx, &table, &ids, user_id).await?;
        events::record_events(&tx, &table, events::RecordEvent::Created, &ids, items.len()).await?;
        let fields: Vec<ReadField> = Vec::new();
        let exprs: Vec<String> = fields.iter().map(|f| f.expr.clone()).collect();
        let rows = store::by_ids(&tx, &table, &exprs, &[], &ids).await?;
        tx.commit().await?;
        let records = rows
            .into_iter()
            .map(|r| reply::record_json(r, &fields, shape, &[]))
            .collect();
        Ok(reply::records_reply(records, &fields, shape))
    })
    .await
}
