//! Cells: how each costume is read (a `jsonb` read expression per field;
//! on list pages plain columns written straight into the reply, [`wire`])
//! and written (JSON in, a typed column value out).

pub mod read;
pub mod wire;
pub mod write;

use deadpool_postgres::GenericClient;

use super::reply::ReadField;
use super::table::RecordTable;
use crate::error::ApiResult;

/// The fields a reply carries, in column order, with their read SQL and
/// the values that SQL binds as `$1`, `$2`, ... (conditions of lookups and
/// rollups): a statement selecting the expressions passes `values` first
/// and numbers its own parameters after them.
#[derive(Debug, Clone, Default)]
pub struct ReadSet {
    pub fields: Vec<ReadField>,
    pub values: Vec<filter_lang::SqlValue>,
}

impl ReadSet {
    pub fn exprs(&self) -> Vec<String> {
        self.fields.iter().map(|f| f.expr.clone()).collect()
    }
}

/// Every field of the table (or only `only`, by id, in that order).
pub async fn read_fields(
    c: &impl GenericClient,
    table: &RecordTable,
    only: Option<&[String]>,
) -> ApiResult<ReadSet> {
    let schema = crate::schema::cache::load(c, &table.database_id).await?;
    let t = schema
        .table(&table.table_id)
        .ok_or(crate::error::ApiError::NotFound)?;
    Ok(read::read_set(&schema, t, only))
}

/// A unique-index violation as the 400 naming the field by name (the
/// index name carries the field id); any other error passes through.
pub fn unique_violation(
    e: crate::error::ApiError,
    table: &crate::schema::TableSchema,
) -> crate::error::ApiError {
    let crate::error::ApiError::Internal(cause) = &e else {
        return e;
    };
    let Some(db) = cause
        .downcast_ref::<tokio_postgres::Error>()
        .filter(|pg| pg.code() == Some(&tokio_postgres::error::SqlState::UNIQUE_VIOLATION))
        .and_then(|pg| pg.as_db_error())
    else {
        return e;
    };
    let constraint = db.constraint().unwrap_or_default();
    let field = table
        .fields
        .iter()
        .find(|f| constraint.contains(f.id.as_str()))
        .map(|f| format!("'{}'", f.name))
        .unwrap_or_else(|| "a unique field".to_owned());
    crate::error::ApiError::bad_request(format!(
        "Field {field} must be unique: another record already holds this value."
    ))
}
