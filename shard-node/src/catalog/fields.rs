//! The `fields` catalog table, plus the one webhook query fields need.

use std::collections::HashMap;

use deadpool_postgres::GenericClient;
use serde_json::{Map, Value};
use tokio_postgres::Row;

use crate::schema::{Costume, FieldRow};

const COLUMNS: &str = "id, table_id, name, type, options, position, sql_type, created_at";

fn from_row(row: &Row) -> anyhow::Result<FieldRow> {
    let costume: String = row.try_get("type")?;
    let options: Value = row.try_get("options")?;
    Ok(FieldRow {
        id: row.try_get("id")?,
        table_id: row.try_get("table_id")?,
        name: row.try_get("name")?,
        costume: Costume::parse(&costume)
            .ok_or_else(|| anyhow::anyhow!("catalog holds unknown costume {costume:?}"))?,
        options: match options {
            Value::Object(m) => m,
            _ => Map::new(),
        },
        position: row.try_get("position")?,
        sql_type: row.try_get("sql_type")?,
        created_at: row.try_get("created_at")?,
    })
}

/// Every field of the database grouped by table, each group in order.
pub async fn list_for_database(
    c: &impl GenericClient,
    database_id: &str,
) -> anyhow::Result<HashMap<String, Vec<FieldRow>>> {
    let sql = format!(
        "SELECT {COLUMNS} FROM fields WHERE database_id = $1
         ORDER BY table_id, position, created_at, id"
    );
    let statement = c.prepare_cached(&sql).await?;
    let rows = c.query(&statement, &[&database_id]).await?;
    let mut out: HashMap<String, Vec<FieldRow>> = HashMap::new();
    for row in &rows {
        let f = from_row(row)?;
        out.entry(f.table_id.clone()).or_default().push(f);
    }
    Ok(out)
}

pub async fn insert(
    c: &impl GenericClient,
    database_id: &str,
    f: &FieldRow,
) -> Result<(), tokio_postgres::Error> {
    let options = Value::Object(f.options.clone());
    c.execute(
        "INSERT INTO fields (id, table_id, database_id, name, type, options, position, sql_type)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        &[
            &f.id,
            &f.table_id,
            &database_id,
            &f.name,
            &f.costume.as_str(),
            &options,
            &f.position,
            &f.sql_type,
        ],
    )
    .await?;
    Ok(())
}

/// Rewrites name, costume, options and column type of a field.
pub async fn update(c: &impl GenericClient, f: &FieldRow) -> Result<(), tokio_postgres::Error> {
    let options = Value::Object(f.options.clone());
    c.execute(
        "UPDATE fields SET name = $2, type = $3, options = $4, sql_type = $5 WHERE id = $1",
        &[&f.id, &f.name, &f.costume.as_str(), &options, &f.sql_type],
    )
    .await?;
    Ok(())
}

pub async fn delete(c: &impl GenericClient, ids: &[String]) -> Result<(), tokio_postgres::Error> {
    c.execute("DELETE FROM fields WHERE id = ANY($1)", &[&ids])
        .await?;
    Ok(())
}

/// Removes `ids` from every webhook watch list of the database.
pub async fn strip_from_webhooks(
    c: &impl GenericClient,
    database_id: &str,
    ids: &[String],
) -> Result<(), tokio_postgres::Error> {
    c.execute(
        "UPDATE webhooks
         SET watched_field_ids = ARRAY(SELECT w FROM unnest(watched_field_ids) AS w
                                       WHERE w <> ALL($2))
         WHERE database_id = $1 AND watched_field_ids && $2",
        &[&database_id, &ids],
    )
    .await?;
    Ok(())
}

/// Whether a webhook of the database has this id.
pub async fn webhook_exists(
    c: &impl GenericClient,
    database_id: &str,
    id: &str,
) -> Result<bool, tokio_postgres::Error> {
    Ok(c.query_opt(
        "SELECT 1 FROM webhooks WHERE id = $1 AND database_id = $2",
        &[&id, &database_id],
    )
    .await?
    .is_some())
}
