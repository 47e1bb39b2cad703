//! `restores`: the persisted state of point-in-time restores
//! (docs/restore.md). One small function per query.

use anyhow::Context;
use chrono::{DateTime, Utc};
use cluster_protocol::control::{Restore, RestoreState};
use tokio_postgres::Row;

use super::Db;

/// Class of the session advisory locks a restorer holds on its restore.
pub const DRIVER_LOCK_CLASS: i32 = 0x72737472; // "rstr"

const COLUMNS: &str = "id, database_id, new_database_id, shard, as_of, into_name, state,
    scratch_dsn, rows_total, rows_copied, error, created_at, updated_at, finished_at";

/// A restore as the restorer sees it: the API's [`Restore`] and the
/// scratch instance's DSN.
#[derive(Debug, Clone)]
pub struct RestoreRow {
    pub api: Restore,
    pub scratch_dsn: Option<String>,
}

fn from_row(row: &Row) -> anyhow::Result<RestoreRow> {
    let raw: String = row.try_get("state")?;
    let state = RestoreState::parse(&raw)
        .with_context(|| format!("unknown restore state {raw:?} in catalog"))?;
    Ok(RestoreRow {
        api: Restore {
            id: row.try_get("id")?,
            database_id: row.try_get("database_id")?,
            new_database_id: row.try_get("new_database_id")?,
            shard: row.try_get("shard")?,
            as_of: row.try_get("as_of")?,
            into: row.try_get("into_name")?,
            state,
            rows_copied: row.try_get("rows_copied")?,
            rows_total: row.try_get("rows_total")?,
            error: row.try_get("error")?,
            created_at: row.try_get("created_at")?,
            updated_at: row.try_get("updated_at")?,
            finished_at: row.try_get("finished_at")?,
        },
        scratch_dsn: row.try_get("scratch_dsn")?,
    })
}

pub struct NewRestore<'a> {
    pub id: &'a str,
    pub database_id: &'a str,
    pub new_database_id: &'a str,
    pub shard: &'a str,
    pub as_of: DateTime<Utc>,
    pub into: Option<&'a str>,
}

/// Records a `pending` restore.
pub async fn insert(db: &impl Db, r: &NewRestore<'_>) -> anyhow::Result<RestoreRow> {
    let sql = format!(
        "INSERT INTO restores (id, database_id, new_database_id, shard, as_of, into_name, state)
         VALUES ($1, $2, $3, $4, $5, $6, 'pending')
         RETURNING {COLUMNS}"
    );
    let row = db
        .query_one(
            &sql,
            &[
                &r.id,
                &r.database_id,
                &r.new_database_id,
                &r.shard,
                &r.as_of,
                &r.into,
            ],
        )
        .await
        .context("insert restore")?;
    from_row(&row)
}

pub async fn get(db: &impl Db, id: &str) -> anyhow::Result<Option<RestoreRow>> {
    let sql = format!("SELECT {COLUMNS} FROM restores WHERE id = $1");
    db.query_opt(&sql, &[&id])
        .await
        .context("read restore")?
        .as_ref()
        .map(from_row)
        .transpose()
}

/// The newest `limit` restores, newest first.
pub async fn newest(db: &impl Db, limit: i64) -> anyhow::Result<Vec<RestoreRow>> {
    let sql = format!("SELECT {COLUMNS} FROM restores ORDER BY created_at DESC, id DESC LIMIT $1");
    db.query(&sql, &[&limit])
        .await
        .context("list restores")?
        .iter()
        .map(from_row)
        .collect()
}

/// Unfinished restores, oldest first.
pub async fn unfinished(db: &impl Db) -> anyhow::Result<Vec<RestoreRow>> {
    let sql = format!(
        "SELECT {COLUMNS} FROM restores WHERE state NOT IN ('done', 'failed')
         ORDER BY created_at, id"
    );
    db.query(&sql, &[])
        .await
        .context("list unfinished restores")?
        .iter()
        .map(from_row)
        .collect()
}

/// Tries the session lock that makes this connection the restore's one driver.
pub async fn try_lock_driver(db: &impl Db, id: &str) -> anyhow::Result<bool> {
    let row = db
        .query_one(
            "SELECT pg_try_advisory_lock($1, hashtext($2))",
            &[&DRIVER_LOCK_CLASS, &id],
        )
        .await
        .context("take restore driver lock")?;
    Ok(row.try_get(0)?)
}

/// Sets an unfinished state (see [`finish`]) and clears the error.
pub async fn set_state(db: &impl Db, id: &str, state: RestoreState) -> anyhow::Result<()> {
    db.execute(
        "UPDATE restores SET state = $2, error = NULL, updated_at = now() WHERE id = $1",
        &[&id, &state.as_str()],
    )
    .await
    .context("set restore state")?;
    Ok(())
}

/// Records the scratch instance (or forgets it: `None`).
pub async fn set_scratch(db: &impl Db, id: &str, dsn: Option<&str>) -> anyhow::Result<()> {
    db.execute(
        "UPDATE restores SET scratch_dsn = $2, updated_at = now() WHERE id = $1",
        &[&id, &dsn],
    )
    .await
    .context("record the scratch instance")?;
    Ok(())
}

pub async fn set_progress(db: &impl Db, id: &str, copied: i64, total: i64) -> anyhow::Result<()> {
    db.execute(
        "UPDATE restores SET rows_copied = $2, rows_total = $3, updated_at = now() WHERE id = $1",
        &[&id, &copied, &total],
    )
    .await
    .context("record restore progress")?;
    Ok(())
}

/// Shows why the current step failed (it is retried).
pub async fn set_error(db: &impl Db, id: &str, error: Option<&str>) -> anyhow::Result<()> {
    db.execute(
        "UPDATE restores SET error = $2, updated_at = now() WHERE id = $1",
        &[&id, &error],
    )
    .await
    .context("record restore error")?;
    Ok(())
}

/// Ends a restore `done` or `failed` (with `error` for the latter).
pub async fn finish(
    db: &impl Db,
    id: &str,
    state: RestoreState,
    error: Option<&str>,
) -> anyhow::Result<()> {
    db.execute(
        "UPDATE restores SET state = $2, error = $3, scratch_dsn = NULL,
                updated_at = now(), finished_at = now()
         WHERE id = $1",
        &[&id, &state.as_str(), &error],
    )
    .await
    .context("finish restore")?;
    Ok(())
}
