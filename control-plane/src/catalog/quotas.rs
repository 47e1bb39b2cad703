//! `account_quotas`: per-account overrides of part C's limits (a missing
//! row or a NULL column: the default).

use anyhow::Context;
use cluster_protocol::control::quotas::QuotaFigures;
use tokio_postgres::Row;

use super::Db;

const COLUMNS: &str =
    "databases, requests_per_minute, attachment_bytes, tables_per_database, fields_per_table";

fn from_row(row: &Row) -> anyhow::Result<QuotaFigures> {
    Ok(QuotaFigures {
        databases: row.try_get("databases")?,
        requests_per_minute: row.try_get("requests_per_minute")?,
        attachment_bytes: row.try_get("attachment_bytes")?,
        tables_per_database: row.try_get("tables_per_database")?,
        fields_per_table: row.try_get("fields_per_table")?,
    })
}

/// The user's overrides (all `None` without a row).
pub async fn overrides(db: &impl Db, user_id: &str) -> anyhow::Result<QuotaFigures> {
    let sql = format!("SELECT {COLUMNS} FROM account_quotas WHERE user_id = $1");
    let row = db
        .query_opt(&sql, &[&user_id])
        .await
        .context("read account quotas")?;
    row.as_ref()
        .map(from_row)
        .transpose()
        .map(Option::unwrap_or_default)
}

/// The user's overrides, their row locked (created empty when missing) so
/// concurrent changes of one account serialise.
pub async fn lock(db: &impl Db, user_id: &str) -> anyhow::Result<QuotaFigures> {
    db.execute(
        "INSERT INTO account_quotas (user_id) VALUES ($1) ON CONFLICT (user_id) DO NOTHING",
        &[&user_id],
    )
    .await
    .context("create account quotas row")?;
    let sql = format!("SELECT {COLUMNS} FROM account_quotas WHERE user_id = $1 FOR UPDATE");
    let row = db
        .query_one(&sql, &[&user_id])
        .await
        .context("lock account quotas")?;
    from_row(&row)
}

/// Stores the overrides (every column, `None` as NULL).
pub async fn store(db: &impl Db, user_id: &str, q: &QuotaFigures) -> anyhow::Result<()> {
    db.execute(
        "UPDATE account_quotas SET databases = $2, requests_per_minute = $3, attachment_bytes = $4,
                tables_per_database = $5, fields_per_table = $6, updated_at = now()
         WHERE user_id = $1",
        &[
            &user_id,
            &q.databases,
            &q.requests_per_minute,
            &q.attachment_bytes,
            &q.tables_per_database,
            &q.fields_per_table,
        ],
    )
    .await
    .context("store account quotas")?;
    Ok(())
}

/// Each owned database with its shard, ordered by id.
pub async fn owned_databases(
    db: &impl Db,
    owner_id: &str,
) -> anyhow::Result<Vec<(String, String)>> {
    let rows = db
        .query(
            "SELECT id, shard FROM databases WHERE owner_id = $1 ORDER BY id",
            &[&owner_id],
        )
        .await
        .context("list owned databases")?;
    rows.iter()
        .map(|r| Ok((r.try_get(0)?, r.try_get(1)?)))
        .collect()
}

/// Every database's owner and shard (the fleet view).
pub async fn all_databases(db: &impl Db) -> anyhow::Result<Vec<(String, String, String)>> {
    let rows = db
        .query("SELECT id, owner_id, shard FROM databases ORDER BY id", &[])
        .await
        .context("list databases")?;
    rows.iter()
        .map(|r| Ok((r.try_get(0)?, r.try_get(1)?, r.try_get(2)?)))
        .collect()
}
