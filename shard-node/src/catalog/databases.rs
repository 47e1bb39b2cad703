//! The `databases` catalog table.

use chrono::{DateTime, Utc};
use deadpool_postgres::GenericClient;
use serde::Serialize;
use tokio_postgres::Row;

/// A database as the API returns it: its catalog row, unfiltered (but
/// without the internal routing tag).
#[derive(Debug, Clone, Serialize)]
pub struct Database {
    pub id: String,
    pub name: String,
    pub color: Option<String>,
    pub icon: Option<String>,
    pub timezone: String,
    pub week_start: i32,
    pub weekend: serde_json::Value,
    #[serde(serialize_with = "crate::json::ts_opt")]
    pub archived_at: Option<DateTime<Utc>>,
    pub position: i64,
    pub owner_id: String,
    pub created_by: String,
    pub updated_by: String,
    #[serde(serialize_with = "crate::json::ts")]
    pub created_at: DateTime<Utc>,
    #[serde(serialize_with = "crate::json::ts")]
    pub updated_at: DateTime<Utc>,
}

const COLUMNS: &str = "id, name, color, icon, timezone, week_start, weekend, archived_at, \
     position, owner_id, created_by, updated_by, created_at, updated_at";

fn from_row(row: &Row) -> Result<Database, tokio_postgres::Error> {
    Ok(Database {
        id: row.try_get("id")?,
        name: row.try_get("name")?,
        color: row.try_get("color")?,
        icon: row.try_get("icon")?,
        timezone: row.try_get("timezone")?,
        week_start: row.try_get("week_start")?,
        weekend: row.try_get("weekend")?,
        archived_at: row.try_get("archived_at")?,
        position: row.try_get("position")?,
        owner_id: row.try_get("owner_id")?,
        created_by: row.try_get("created_by")?,
        updated_by: row.try_get("updated_by")?,
        created_at: row.try_get("created_at")?,
        updated_at: row.try_get("updated_at")?,
    })
}

/// What a new catalog row is made from.
pub struct NewDatabase<'a> {
    pub id: &'a str,
    pub tag: &'a str,
    pub name: &'a str,
    pub position: i64,
    pub user_id: &'a str,
    /// The owner's overrides of this database's limits (from the allocation).
    pub limits: cluster_protocol::control::quotas::DatabaseLimits,
}

/// Inserts the row; `None` when a database with this id already exists.
pub async fn insert(
    c: &impl GenericClient,
    new: &NewDatabase<'_>,
) -> Result<Option<Database>, tokio_postgres::Error> {
    let sql = format!(
        "INSERT INTO databases (id, tag, name, position, owner_id, created_by, updated_by,
                                max_tables, max_fields_per_table, max_attachment_bytes)
         VALUES ($1, $2, $3, $4, $5, $5, $5, $6, $7, $8)
         ON CONFLICT DO NOTHING
         RETURNING {COLUMNS}"
    );
    let row = c
        .query_opt(
            &sql,
            &[
                &new.id,
                &new.tag,
                &new.name,
                &new.position,
                &new.user_id,
                &new.limits.tables_per_database,
                &new.limits.fields_per_table,
                &new.limits.attachment_bytes,
            ],
        )
        .await?;
    row.as_ref().map(from_row).transpose()
}

pub async fn get(
    c: &impl GenericClient,
    id: &str,
) -> Result<Option<Database>, tokio_postgres::Error> {
    let sql = format!("SELECT {COLUMNS} FROM databases WHERE id = $1");
    let row = c.query_opt(&sql, &[&id]).await?;
    row.as_ref().map(from_row).transpose()
}

/// The limits in force for one database: its owner's overrides
/// (`max_*`, set by the control plane) or the defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub tables: i64,
    pub fields_per_table: i64,
    pub attachment_bytes: i64,
}

/// The limits of `id` (the defaults when this shard has no row for it);
/// `attachment_bytes` is the node's default storage quota.
pub async fn limits(
    c: &impl GenericClient,
    id: &str,
    attachment_bytes: i64,
) -> Result<Limits, tokio_postgres::Error> {
    let defaults = Limits {
        tables: crate::config::MAX_TABLES_PER_DATABASE,
        fields_per_table: crate::config::MAX_FIELDS_PER_TABLE,
        attachment_bytes,
    };
    let row = c
        .query_opt(
            "SELECT max_tables, max_fields_per_table, max_attachment_bytes
             FROM databases WHERE id = $1",
            &[&id],
        )
        .await?;
    let Some(row) = row else {
        return Ok(defaults);
    };
    Ok(Limits {
        tables: row.try_get::<_, Option<i64>>(0)?.unwrap_or(defaults.tables),
        fields_per_table: row
            .try_get::<_, Option<i64>>(1)?
            .unwrap_or(defaults.fields_per_table),
        attachment_bytes: row
            .try_get::<_, Option<i64>>(2)?
            .unwrap_or(defaults.attachment_bytes),
    })
}

/// The database's owner (`owner_id`, set once at creation), or `None`
/// when this shard has no row for it. Read once per database and kept
/// (`crate::owners`).
pub async fn owner_of(
    c: &impl GenericClient,
    id: &str,
) -> Result<Option<String>, tokio_postgres::Error> {
    let statement = c
        .prepare_cached("SELECT owner_id FROM databases WHERE id = $1")
        .await?;
    let row = c.query_opt(&statement, &[&id]).await?;
    row.map(|r| r.try_get(0)).transpose()
}

/// The `schema_version` of the database when this shard serves it: its
/// placement here is not `fenced` and, when the router named the epoch it
/// routed by (`epoch`), at that epoch (docs/moves.md, "Held check").
/// `None` otherwise (the caller answers 421). Run on every authorized
/// request, so the statement is prepared once per pooled connection: one
/// round trip, no parse or plan.
pub async fn held_version(
    c: &impl GenericClient,
    id: &str,
    epoch: Option<i64>,
) -> Result<Option<i64>, tokio_postgres::Error> {
    let statement = c
        .prepare_cached(
            "SELECT d.schema_version FROM databases d
             JOIN placements pl ON pl.database_id = d.id
             WHERE d.id = $1 AND pl.state <> 'fenced'
               AND ($2::int8 IS NULL OR pl.epoch = $2::int8)",
        )
        .await?;
    let row = c.query_opt(&statement, &[&id, &epoch]).await?;
    row.map(|r| r.try_get(0)).transpose()
}

/// The databases among `ids` served here (placed, not `fenced`: a moved
/// database's old copy is not listed), by `position` then `created_at`.
pub async fn lookup(
    c: &impl GenericClient,
    ids: &[String],
) -> Result<Vec<Database>, tokio_postgres::Error> {
    let sql = format!(
        "SELECT {COLUMNS} FROM databases
         WHERE id = ANY($1)
           AND EXISTS (SELECT 1 FROM placements pl
                       WHERE pl.database_id = databases.id AND pl.state <> 'fenced')
         ORDER BY position, created_at, id"
    );
    let rows = c.query(&sql, &[&ids]).await?;
    rows.iter().map(from_row).collect()
}

/// Locks the row for structural work inside the database; returns its tag.
pub async fn lock(
    c: &impl GenericClient,
    id: &str,
) -> Result<Option<String>, tokio_postgres::Error> {
    let row = c
        .query_opt("SELECT tag FROM databases WHERE id = $1 FOR UPDATE", &[&id])
        .await?;
    row.map(|r| r.try_get("tag")).transpose()
}

pub async fn set_name(
    c: &impl GenericClient,
    id: &str,
    name: &str,
    user_id: &str,
) -> Result<bool, tokio_postgres::Error> {
    let n = c
        .execute(
            "UPDATE databases SET name = $2, updated_at = now(), updated_by = $3 WHERE id = $1",
            &[&id, &name, &user_id],
        )
        .await?;
    Ok(n == 1)
}

pub async fn set_color(
    c: &impl GenericClient,
    id: &str,
    color: Option<&str>,
    user_id: &str,
) -> Result<bool, tokio_postgres::Error> {
    let n = c
        .execute(
            "UPDATE databases SET color = $2, updated_at = now(), updated_by = $3 WHERE id = $1",
            &[&id, &color, &user_id],
        )
        .await?;
    Ok(n == 1)
}

/// Bumps `updated_at`/`updated_by` after structural work inside the database.
pub async fn touch(
    c: &impl GenericClient,
    id: &str,
    user_id: &str,
) -> Result<(), tokio_postgres::Error> {
    c.execute(
        "UPDATE databases SET updated_at = now(), updated_by = $2 WHERE id = $1",
        &[&id, &user_id],
    )
    .await?;
    Ok(())
}

/// Deletes the row; tables, fields and views cascade.
pub async fn delete(c: &impl GenericClient, id: &str) -> Result<bool, tokio_postgres::Error> {
    Ok(c.execute("DELETE FROM databases WHERE id = $1", &[&id])
        .await?
        == 1)
}

/// Bumps `updated_at`/`updated_by` and `schema_version` after a structural
/// change (the schema cache of every node reloads on the new version).
pub async fn touch_structure(
    c: &impl GenericClient,
    id: &str,
    user_id: &str,
) -> Result<(), tokio_postgres::Error> {
    c.execute(
        "UPDATE databases SET updated_at = now(), updated_by = $2,
             schema_version = schema_version + 1
         WHERE id = $1",
        &[&id, &user_id],
    )
    .await?;
    Ok(())
}

/// Bumps `schema_version` alone, after a change of the webhook rules the
/// write path reads from the cached schema model (migration 0003). Takes no
/// lock that record writes' `FOR KEY SHARE` waits for.
pub async fn bump_schema_version(
    c: &impl GenericClient,
    id: &str,
) -> Result<(), tokio_postgres::Error> {
    c.execute(
        "UPDATE databases SET schema_version = schema_version + 1 WHERE id = $1",
        &[&id],
    )
    .await?;
    Ok(())
}

/// The database's `schema_version`; `None` when not held here.
pub async fn schema_version(
    c: &impl GenericClient,
    id: &str,
) -> Result<Option<i64>, tokio_postgres::Error> {
    let statement = c
        .prepare_cached("SELECT schema_version FROM databases WHERE id = $1")
        .await?;
    let row = c.query_opt(&statement, &[&id]).await?;
    row.map(|r| r.try_get(0)).transpose()
}

/// `schema_version` (and the name, which webhook payloads carry) under
/// `FOR KEY SHARE`: a record write holds it to its commit, so structural
/// work (which locks the row `FOR UPDATE`) waits for in-flight writes and a
/// write never runs against a half-changed schema. Writes do not block
/// each other.
pub async fn schema_version_key_share(
    c: &impl GenericClient,
    id: &str,
) -> Result<Option<(i64, String)>, tokio_postgres::Error> {
    let statement = c
        .prepare_cached("SELECT schema_version, name FROM databases WHERE id = $1 FOR KEY SHARE")
        .await?;
    let row = c.query_opt(&statement, &[&id]).await?;
    row.map(|r| Ok((r.try_get(0)?, r.try_get(1)?))).transpose()
}

/// `schema_version` and `timezone`; `None` when not held here.
pub async fn schema_version_and_timezone(
    c: &impl GenericClient,
    id: &str,
) -> Result<Option<(i64, String)>, tokio_postgres::Error> {
    let statement = c
        .prepare_cached("SELECT schema_version, timezone FROM databases WHERE id = $1")
        .await?;
    let row = c.query_opt(&statement, &[&id]).await?;
    row.map(|r| Ok((r.try_get(0)?, r.try_get(1)?))).transpose()
}
