//! Formula bookkeeping shared by update and delete: who depends on a
//! field, and rebuilding generated columns after a change they read.

use std::collections::HashSet;

use deadpool_postgres::Transaction;
use serde_json::Value;

use crate::catalog;
use crate::error::{ApiError, ApiResult};
use crate::fields::options::formula;
use crate::schema::{DatabaseSchema, Family, FieldRow, TableSchema};
use crate::tenant_schema;

fn references(f: &FieldRow) -> Vec<&str> {
    f.options
        .get("referenced_field_ids")
        .and_then(Value::as_array)
        .map(|l| l.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// Formula fields of `table` that read any of `ids`, directly or through
/// other formulas (which they inline), excluding `ids` themselves.
pub fn dependents(table: &TableSchema, ids: &[&str]) -> Vec<String> {
    let mut reached: HashSet<String> = ids.iter().map(|s| s.to_string()).collect();
    let mut out = Vec::new();
    loop {
        let before = out.len();
        for f in &table.fields {
            if f.costume.family() == Family::Formula
                && !reached.contains(&f.id)
                && references(f).iter().any(|r| reached.contains(*r))
            {
                reached.insert(f.id.clone());
                out.push(f.id.clone());
            }
        }
        if out.len() == before {
            return out;
        }
    }
}

/// Lookups and rollups anywhere in the database that surface `field_id`.
pub fn surfacing<'a>(schema: &'a DatabaseSchema, field_id: &str) -> Vec<&'a FieldRow> {
    schema
        .all_fields()
        .filter(|f| matches!(f.costume.family(), Family::Lookup | Family::Rollup))
        .filter(|f| f.option_str("target_field_id") == Some(field_id))
        .collect()
}

/// 400 naming the first lookup/rollup that relies on `field`'s type.
pub fn refuse_if_surfaced(schema: &DatabaseSchema, field: &FieldRow) -> ApiResult<()> {
    if let Some(l) = surfacing(schema, &field.id).first() {
        let table = schema
            .table(&l.table_id)
            .map(|t| t.name.as_str())
            .unwrap_or("");
        return Err(ApiError::bad_request(format!(
            "The {} field '{}' in table '{table}' relies on the type of '{}'; change or delete it first.",
            l.costume.as_str(),
            l.name,
            field.name
        )));
    }
    Ok(())
}

/// Recompiles the formulas `ids` against `work` (the table as it will be
/// after the change), rebuilds their generated columns and rewrites their
/// rows. A formula that no longer compiles, or whose type change a
/// lookup/rollup relies on, refuses the whole change naming it.
pub async fn rebuild(
    tx: &Transaction<'_>,
    schema: &DatabaseSchema,
    work: &mut TableSchema,
    ids: &[String],
) -> ApiResult<()> {
    for id in ids {
        let Some(old) = work.field(id).cloned() else {
            continue;
        };
        let expression = old.option_str("expression").unwrap_or("").to_owned();
        let compiled = formula::compile(&expression, work, Some(id)).map_err(|e| match e {
            ApiError::BadRequest(m) => ApiError::bad_request(format!(
                "This change would break the formula field '{}': {m}",
                old.name
            )),
            other => other,
        })?;
        let costume = formula::costume_of(compiled.result);
        let sql_type = compiled.result.sql_type().to_owned();
        let changed = costume != old.costume || old.sql_type.as_deref() != Some(&sql_type);
        if changed {
            refuse_if_surfaced(schema, &old)?;
        }
        let options = formula::settle(
            old.options.clone(),
            serde_json::Map::new(),
            &compiled,
            changed,
        )?;
        tenant_schema::drop_column(tx, &work.database_id, &work.id, id).await?;
        store_generated(
            tx,
            &work.database_id,
            &work.id,
            id,
            &sql_type,
            &compiled.sql,
            &old.name,
        )
        .await?;
        let new = FieldRow {
            costume,
            options,
            sql_type: Some(sql_type),
            ..old
        };
        catalog::fields::update(tx, &new).await?;
        if let Some(slot) = work.fields.iter_mut().find(|f| f.id == *id) {
            *slot = new;
        }
    }
    Ok(())
}

/// Adds a formula's generated column; the datastore's refusal becomes a
/// 400 without its text.
pub async fn store_generated(
    tx: &Transaction<'_>,
    database_id: &str,
    table_id: &str,
    field_id: &str,
    sql_type: &str,
    sql: &str,
    name: &str,
) -> ApiResult<()> {
    match tenant_schema::add_generated_column(tx, database_id, table_id, field_id, sql_type, sql)
        .await?
    {
        Ok(()) => Ok(()),
        Err(e) => {
            tracing::warn!(error = %e, field = field_id, "generated column refused");
            Err(ApiError::bad_request(format!(
                "The formula of '{name}' could not be stored as a column; simplify it."
            )))
        }
    }
}
