//! The `fields` catalog table (read side only for now).

use std::collections::HashMap;

use deadpool_postgres::GenericClient;
use serde::Serialize;
use tokio_postgres::Row;

/// A field as table responses embed it.
#[derive(Debug, Clone, Serialize)]
pub struct Field {
    pub id: String,
    pub name: String,
    #[serde(rename = "type")]
    pub costume: String,
    pub options: serde_json::Value,
    pub position: i64,
    /// Filter operators the field accepts (filled in when fields land).
    pub operators: Vec<&'static str>,
}

const COLUMNS: &str = "id, table_id, name, type, options, position";

fn from_row(row: &Row) -> Result<(String, Field), tokio_postgres::Error> {
    Ok((
        row.try_get("table_id")?,
        Field {
            id: row.try_get("id")?,
            name: row.try_get("name")?,
            costume: row.try_get("type")?,
            options: row.try_get("options")?,
            position: row.try_get("position")?,
            operators: Vec::new(),
        },
    ))
}

/// The fields of one table, by `position` then `created_at`.
pub async fn list_for_table(
    c: &impl GenericClient,
    table_id: &str,
) -> Result<Vec<Field>, tokio_postgres::Error> {
    let sql = format!(
        "SELECT {COLUMNS} FROM fields WHERE table_id = $1 ORDER BY position, created_at, id"
    );
    let rows = c.query(&sql, &[&table_id]).await?;
    rows.iter().map(|r| from_row(r).map(|(_, f)| f)).collect()
}

/// Every field of the database grouped by table, each group in order.
pub async fn list_for_database(
    c: &impl GenericClient,
    database_id: &str,
) -> Result<HashMap<String, Vec<Field>>, tokio_postgres::Error> {
    let sql = format!(
        "SELECT {COLUMNS} FROM fields WHERE database_id = $1
         ORDER BY table_id, position, created_at, id"
    );
    let rows = c.query(&sql, &[&database_id]).await?;
    let mut by_table: HashMap<String, Vec<Field>> = HashMap::new();
    for row in &rows {
        let (table_id, field) = from_row(row)?;
        by_table.entry(table_id).or_default().push(field);
    }
    Ok(by_table)
}
