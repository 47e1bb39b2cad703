//! `DELETE /api/fields/{id}` (editor), and the cascade table deletion
//! shares.
//!
//! What goes with a field:
//! * its column (and unique index), or for a link its connector table and
//!   its mirror field on the other table;
//! * every lookup/rollup riding a deleted link, and every lookup/rollup
//!   surfacing a deleted field (it could show nothing);
//! * its id from every webhook watch list and from links' picker lists;
//! * the display field moves to the next field (by position) that can name
//!   a record, or becomes null.
//!
//! A field that a formula of its table references is NOT deleted: 400
//! naming the formula (dropping the column would break the formula's
//! generated column, and blanking the formula would silently lose what the
//! user wrote). Delete or edit the formula first.

use std::collections::HashSet;

use axum::extract::{Path, State};
use axum::Json;
use deadpool_postgres::Transaction;
use serde_json::{json, Value};

use crate::auth::Editor;
use crate::catalog::placements::Need;
use crate::catalog::{self, tables};
use crate::db::{fenced_transaction_on, DbOp};
use crate::error::{ApiError, ApiResult};
use crate::fields::formulas;
use crate::schema::{structural, Costume, DatabaseSchema, Family};
use crate::state::AppState;
use crate::tenant_schema;

pub async fn handler(
    Editor(access): Editor,
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> ApiResult<Json<Value>> {
    state
        .db
        .measured(
            DbOp::DeleteField,
            delete(&state, &access.database_id, access.user_id(), &id),
        )
        .await?;
    Ok(Json(json!({ "deleted": true })))
}

pub async fn delete(
    state: &AppState,
    database_id: &str,
    user_id: &str,
    field_id: &str,
) -> ApiResult<()> {
    let mut client = state.db.client_for(database_id).await?;
    fenced_transaction_on(&mut client, database_id, Need::Structure, async |tx| {
        structural::begin(tx, database_id).await?;
        let schema = state.schemas.get_locked(tx, database_id).await?;
        if schema.field(field_id).is_none() {
            return Err(ApiError::NotFound);
        }
        let doomed = cascade(&schema, &[field_id.to_owned()]);
        refuse_if_formula_reads(&schema, &doomed)?;
        drop_fields(tx, &schema, &doomed, None).await?;
        structural::finish(tx, database_id, user_id).await?;
        Ok(())
    })
    .await
}

/// `start` plus everything that goes with it: link mirrors, and the
/// lookups/rollups riding a deleted link or surfacing a deleted field.
pub fn cascade(schema: &DatabaseSchema, start: &[String]) -> HashSet<String> {
    let mut doomed: HashSet<String> = start.iter().cloned().collect();
    loop {
        let before = doomed.len();
        for f in schema.all_fields() {
            if doomed.contains(&f.id) {
                if f.costume == Costume::Link {
                    if let Some(pair) = f.option_str("pair_field_id") {
                        doomed.insert(pair.to_owned());
                    }
                }
                continue;
            }
            if matches!(f.costume.family(), Family::Lookup | Family::Rollup) {
                let rides = f
                    .option_str("link_field_id")
                    .is_some_and(|l| doomed.contains(l));
                let surfaces = f
                    .option_str("target_field_id")
                    .is_some_and(|t| doomed.contains(t));
                if rides || surfaces {
                    doomed.insert(f.id.clone());
                }
            }
        }
        if doomed.len() == before {
            return doomed;
        }
    }
}

/// 400 naming a surviving formula that reads a doomed field.
fn refuse_if_formula_reads(schema: &DatabaseSchema, doomed: &HashSet<String>) -> ApiResult<()> {
    for table in &schema.tables {
        let ids: Vec<&str> = table
            .fields
            .iter()
            .filter(|f| doomed.contains(&f.id))
            .map(|f| f.id.as_str())
            .collect();
        if ids.is_empty() {
            continue;
        }
        for dep in formulas::dependents(table, &ids) {
            if doomed.contains(&dep) {
                continue;
            }
            let name = table.field(&dep).map(|f| f.name.as_str()).unwrap_or("");
            return Err(ApiError::bad_request(format!(
                "The formula field '{name}' uses this field; edit or delete that formula first."
            )));
        }
    }
    Ok(())
}

/// Drops the doomed fields' storage and rows, and tidies what pointed at
/// them. `dropping_table` is a table being dropped whole (its columns are
/// not dropped one by one, its own display field is not recomputed).
pub async fn drop_fields(
    tx: &Transaction<'_>,
    schema: &DatabaseSchema,
    doomed: &HashSet<String>,
    dropping_table: Option<&str>,
) -> ApiResult<()> {
    let db = schema.database_id.as_str();
    for f in schema.all_fields().filter(|f| doomed.contains(&f.id)) {
        if f.costume == Costume::Link {
            if let Some(owner) = f.connector_owner() {
                tenant_schema::drop_connector(tx, db, owner).await?;
            }
        } else if f.sql_type.is_some() && dropping_table != Some(f.table_id.as_str()) {
            tenant_schema::drop_column(tx, db, &f.table_id, &f.id).await?;
        }
    }
    let ids: Vec<String> = doomed.iter().cloned().collect();
    catalog::fields::delete(tx, &ids).await?;
    catalog::fields::strip_from_webhooks(tx, db, &ids).await?;
    for table in &schema.tables {
        if dropping_table == Some(table.id.as_str()) {
            continue;
        }
        // Links whose picker lists name a doomed field.
        for f in table.fields.iter().filter(|f| !doomed.contains(&f.id)) {
            let Some(Value::Array(pickers)) = f.options.get("picker_field_ids") else {
                continue;
            };
            if pickers
                .iter()
                .any(|p| p.as_str().is_some_and(|p| doomed.contains(p)))
            {
                let mut g = f.clone();
                let kept: Vec<Value> = pickers
                    .iter()
                    .filter(|p| !p.as_str().is_some_and(|p| doomed.contains(p)))
                    .cloned()
                    .collect();
                g.options
                    .insert("picker_field_ids".into(), Value::Array(kept));
                catalog::fields::update(tx, &g).await?;
            }
        }
        let display_doomed = table
            .display_field_id
            .as_deref()
            .is_some_and(|d| doomed.contains(d));
        if display_doomed {
            let next = table
                .fields
                .iter()
                .find(|f| !doomed.contains(&f.id) && f.costume.can_name_record())
                .map(|f| f.id.as_str());
            tables::set_display_field(tx, &table.id, next).await?;
        }
    }
    Ok(())
}
