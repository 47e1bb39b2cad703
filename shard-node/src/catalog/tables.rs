//! The `tables` catalog table.

use chrono::{DateTime, Utc};
use deadpool_postgres::GenericClient;
use serde::Serialize;
use tokio_postgres::Row;

/// A table as the API returns it. `fields` is present on list, get and
/// create responses and absent from the rename response.
#[derive(Debug, Clone, Serialize)]
pub struct Table {
    pub id: String,
    pub database_id: String,
    pub name: String,
    pub position: i64,
    pub display_field_id: Option<String>,
    #[serde(serialize_with = "crate::json::ts")]
    pub created_at: DateTime<Utc>,
    #[serde(serialize_with = "crate::json::ts")]
    pub updated_at: DateTime<Utc>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fields: Option<Vec<serde_json::Value>>,
}

const COLUMNS: &str = "id, database_id, name, position, display_field_id, created_at, updated_at";

fn from_row(row: &Row) -> Result<Table, tokio_postgres::Error> {
    Ok(Table {
        id: row.try_get("id")?,
        database_id: row.try_get("database_id")?,
        name: row.try_get("name")?,
        position: row.try_get("position")?,
        display_field_id: row.try_get("display_field_id")?,
        created_at: row.try_get("created_at")?,
        updated_at: row.try_get("updated_at")?,
        fields: None,
    })
}

/// How many tables the database holds and the highest position (-1 if none).
pub async fn count_and_max_position(
    c: &impl GenericClient,
    database_id: &str,
) -> Result<(i64, i64), tokio_postgres::Error> {
    let row = c
        .query_one(
            "SELECT count(*) AS n, coalesce(max(position), -1) AS max_position
             FROM tables WHERE database_id = $1",
            &[&database_id],
        )
        .await?;
    Ok((row.try_get("n")?, row.try_get("max_position")?))
}

pub async fn insert(
    c: &impl GenericClient,
    id: &str,
    database_id: &str,
    name: &str,
    position: i64,
) -> Result<Table, tokio_postgres::Error> {
    let sql = format!(
        "INSERT INTO tables (id, database_id, name, position) VALUES ($1, $2, $3, $4)
         RETURNING {COLUMNS}"
    );
    let row = c
        .query_one(&sql, &[&id, &database_id, &name, &position])
        .await?;
    from_row(&row)
}

/// The table, only if it belongs to `database_id`.
pub async fn get(
    c: &impl GenericClient,
    database_id: &str,
    id: &str,
) -> Result<Option<Table>, tokio_postgres::Error> {
    let sql = format!("SELECT {COLUMNS} FROM tables WHERE id = $1 AND database_id = $2");
    let row = c.query_opt(&sql, &[&id, &database_id]).await?;
    row.as_ref().map(from_row).transpose()
}

/// Every table of the database, by `position` then `created_at`.
pub async fn list(
    c: &impl GenericClient,
    database_id: &str,
) -> Result<Vec<Table>, tokio_postgres::Error> {
    let sql = format!(
        "SELECT {COLUMNS} FROM tables WHERE database_id = $1 ORDER BY position, created_at, id"
    );
    let statement = c.prepare_cached(&sql).await?;
    let rows = c.query(&statement, &[&database_id]).await?;
    rows.iter().map(from_row).collect()
}

/// Renames the table if it belongs to `database_id`; `None` otherwise.
pub async fn rename(
    c: &impl GenericClient,
    database_id: &str,
    id: &str,
    name: &str,
) -> Result<Option<Table>, tokio_postgres::Error> {
    let sql = format!(
        "UPDATE tables SET name = $3, updated_at = now()
         WHERE id = $1 AND database_id = $2
         RETURNING {COLUMNS}"
    );
    let row = c.query_opt(&sql, &[&id, &database_id, &name]).await?;
    row.as_ref().map(from_row).transpose()
}

/// Deletes the row if it belongs to `database_id`; fields and views cascade.
pub async fn delete(
    c: &impl GenericClient,
    database_id: &str,
    id: &str,
) -> Result<bool, tokio_postgres::Error> {
    let n = c
        .execute(
            "DELETE FROM tables WHERE id = $1 AND database_id = $2",
            &[&id, &database_id],
        )
        .await?;
    Ok(n == 1)
}

/// Sets (or clears) the table's display field.
pub async fn set_display_field(
    c: &impl GenericClient,
    id: &str,
    field_id: Option<&str>,
) -> Result<(), tokio_postgres::Error> {
    c.execute(
        "UPDATE tables SET display_field_id = $2 WHERE id = $1",
        &[&id, &field_id],
    )
    .await?;
    Ok(())
}

/// `(database_id, table_id)` of every table of the databases served here
/// (placement `owned` or `moving`), for background passes over records.
pub async fn served(
    c: &impl GenericClient,
) -> Result<Vec<(String, String)>, tokio_postgres::Error> {
    let rows = c
        .query(
            "SELECT t.database_id, t.id FROM tables t
             JOIN placements pl ON pl.database_id = t.database_id
             WHERE pl.state IN ('owned', 'moving')
             ORDER BY t.database_id, t.id",
            &[],
        )
        .await?;
    rows.iter()
        .map(|r| Ok((r.try_get(0)?, r.try_get(1)?)))
        .collect()
}
