//! Cells: how each costume is read (a `jsonb` read expression per field)
//! and written (JSON in, a typed column value out).

pub mod read;
pub mod write;

use deadpool_postgres::GenericClient;

use super::reply::ReadField;
use super::table::RecordTable;
use crate::error::ApiResult;

/// The fields a reply carries, in column order, with their read SQL.
#[derive(Debug, Clone, Default)]
pub struct ReadSet {
    pub fields: Vec<ReadField>,
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
    Ok(ReadSet {
        fields: read::read_set(&schema, t, only),
    })
}

/// A unique-index violation as the 400 naming the field (the index name
/// carries the field id); any other error stays internal.
pub fn unique_violation(e: tokio_postgres::Error, _table: &RecordTable) -> crate::error::ApiError {
    if e.code() == Some(&tokio_postgres::error::SqlState::UNIQUE_VIOLATION) {
        let constraint = e
            .as_db_error()
            .and_then(|d| d.constraint())
            .unwrap_or_default()
            .to_owned();
        let field = constraint
            .find("fld_")
            .map(|i| constraint[i..].chars().take(16).collect::<String>())
            .unwrap_or(constraint);
        return crate::error::ApiError::bad_request(format!(
            "Field {field} must be unique: another record already holds this value."
        ));
    }
    e.into()
}
