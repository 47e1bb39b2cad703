//! The `views` catalog table: saved view-bar state of a table.

use chrono::{DateTime, Utc};
use deadpool_postgres::GenericClient;
use serde::Serialize;
use serde_json::Value;
use tokio_postgres::Row;

/// A view as the API returns it.
#[derive(Debug, Clone, Serialize)]
pub struct View {
    pub id: String,
    pub table_id: String,
    pub name: String,
    pub config: Value,
    pub position: i64,
    #[serde(serialize_with = "crate::json::ts")]
    pub created_at: DateTime<Utc>,
}

const COLUMNS: &str = "id, table_id, name, config, position, created_at";

fn from_row(row: &Row) -> Result<View, tokio_postgres::Error> {
    Ok(View {
        id: row.try_get("id")?,
        table_id: row.try_get("table_id")?,
        name: row.try_get("name")?,
        config: row.try_get("config")?,
        position: row.try_get("position")?,
        created_at: row.try_get("created_at")?,
    })
}

/// The table's views by `position`, `created_at`.
pub async fn list_for_table(
    c: &impl GenericClient,
    table_id: &str,
) -> Result<Vec<View>, tokio_postgres::Error> {
    let sql = format!(
        "SELECT {COLUMNS} FROM views WHERE table_id = $1 ORDER BY position, created_at, id"
    );
    let rows = c.query(&sql, &[&table_id]).await?;
    rows.iter().map(from_row).collect()
}

/// The view, only if it belongs to `database_id`.
pub async fn get(
    c: &impl GenericClient,
    database_id: &str,
    id: &str,
) -> Result<Option<View>, tokio_postgres::Error> {
    let sql = format!("SELECT {COLUMNS} FROM views WHERE id = $1 AND database_id = $2");
    let row = c.query_opt(&sql, &[&id, &database_id]).await?;
    row.as_ref().map(from_row).transpose()
}

/// Inserts at (max position of the table, or -1) + 1.
pub async fn insert(
    c: &impl GenericClient,
    id: &str,
    table_id: &str,
    database_id: &str,
    name: &str,
    config: &Value,
) -> Result<View, tokio_postgres::Error> {
    let sql = format!(
        "INSERT INTO views (id, table_id, database_id, name, config, position)
         VALUES ($1, $2, $3, $4, $5,
                 (SELECT coalesce(max(position), -1) + 1 FROM views WHERE table_id = $2))
         RETURNING {COLUMNS}"
    );
    let row = c
        .query_one(&sql, &[&id, &table_id, &database_id, &name, config])
        .await?;
    from_row(&row)
}

/// Sets the name and/or replaces the config; `None` when not found.
pub async fn update(
    c: &impl GenericClient,
    database_id: &str,
    id: &str,
    name: Option<&str>,
    config: Option<&Value>,
) -> Result<Option<View>, tokio_postgres::Error> {
    let sql = format!(
        "UPDATE views SET name = coalesce($3, name), config = coalesce($4, config)
         WHERE id = $1 AND database_id = $2
         RETURNING {COLUMNS}"
    );
    let row = c
        .query_opt(&sql, &[&id, &database_id, &name, &config])
        .await?;
    row.as_ref().map(from_row).transpose()
}

/// How many views the table has.
pub async fn count_for_table(
    c: &impl GenericClient,
    table_id: &str,
) -> Result<i64, tokio_postgres::Error> {
    let row = c
        .query_one(
            "SELECT count(*) FROM views WHERE table_id = $1",
            &[&table_id],
        )
        .await?;
    row.try_get(0)
}

pub async fn delete(c: &impl GenericClient, id: &str) -> Result<bool, tokio_postgres::Error> {
    Ok(c.execute("DELETE FROM views WHERE id = $1", &[&id]).await? == 1)
}

/// Locks the table's catalog row (serialises view create/delete of one
/// table); false when the table is not in `database_id`.
pub async fn lock_table(
    c: &impl GenericClient,
    database_id: &str,
    table_id: &str,
) -> Result<bool, tokio_postgres::Error> {
    let row = c
        .query_opt(
            "SELECT id FROM tables WHERE id = $1 AND database_id = $2 FOR UPDATE",
            &[&table_id, &database_id],
        )
        .await?;
    Ok(row.is_some())
}
