//! What quotas and usage read and write in a shard's own catalog, over the
//! mover's administrator connection (`mover::admin`): current use (the
//! floor a lowered quota may not go under), the per-database limits the
//! shard enforces (`databases.max_*`, shard migration 0009), and usage
//! figures. Nothing here scans a tenant table: record counts are
//! PostgreSQL's live-row statistics, attachment bytes the shard's running
//! total, requests its 5-minute buckets (`request_counts`).

use anyhow::Context;
use cluster_protocol::control::quotas::{DatabaseLimits, DatabaseUsage};
use cluster_protocol::control::Shard;
use tokio_postgres::GenericClient;

use crate::config::MoveConfig;
use crate::mover::admin::{self, Admin};

/// Time limit of every statement on a shard's session opened here.
const STATEMENT_TIMEOUT: &str = "5s";

/// An administrator session on `shard`, every statement time-limited.
pub async fn connect(shard: &Shard, knobs: &MoveConfig) -> anyhow::Result<Admin> {
    let admin = admin::connect(shard, knobs).await?;
    admin
        .batch_execute(&format!("SET statement_timeout = '{STATEMENT_TIMEOUT}'"))
        .await
        .context("set the statement timeout")?;
    Ok(admin)
}

/// The largest use among some databases on one shard: (what, figure).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Use {
    /// The database with the most tables.
    pub tables: Option<(String, i64)>,
    /// The table with the most fields.
    pub fields: Option<(String, i64)>,
    /// The database with the most attachment bytes.
    pub attachment_bytes: Option<(String, i64)>,
}

/// The largest use among `database_ids` (those on this shard). Reads the
/// catalog only (indexed by database).
pub async fn largest_use(c: &impl GenericClient, database_ids: &[String]) -> anyhow::Result<Use> {
    Ok(Use {
        tables: top(
            c,
            database_ids,
            "SELECT database_id, count(*) FROM tables WHERE database_id = ANY($1)
             GROUP BY database_id ORDER BY 2 DESC, 1 LIMIT 1",
        )
        .await
        .context("count tables")?,
        fields: top(
            c,
            database_ids,
            "SELECT table_id, count(*) FROM fields WHERE database_id = ANY($1)
             GROUP BY table_id ORDER BY 2 DESC, 1 LIMIT 1",
        )
        .await
        .context("count fields")?,
        attachment_bytes: top(
            c,
            database_ids,
            "SELECT id, attachment_bytes FROM databases WHERE id = ANY($1)
             ORDER BY 2 DESC, 1 LIMIT 1",
        )
        .await
        .context("read attachment bytes")?,
    })
}

/// The one `(name, figure)` row `sql` (over `$1` = the ids) reads.
async fn top(
    c: &impl GenericClient,
    database_ids: &[String],
    sql: &str,
) -> anyhow::Result<Option<(String, i64)>> {
    let row = c.query_opt(sql, &[&database_ids]).await?;
    row.map(|r| Ok((r.try_get(0)?, r.try_get(1)?))).transpose()
}

/// Locks the catalog rows of `database_ids` (a table or field created
/// meanwhile waits: structural changes lock their database's row).
pub async fn lock_databases(c: &impl GenericClient, database_ids: &[String]) -> anyhow::Result<()> {
    c.query(
        "SELECT id FROM databases WHERE id = ANY($1) ORDER BY id FOR UPDATE",
        &[&database_ids],
    )
    .await
    .context("lock the databases")?;
    Ok(())
}

/// Stores the limits every one of `database_ids` on this shard enforces.
pub async fn set_limits(
    c: &impl GenericClient,
    database_ids: &[String],
    limits: &DatabaseLimits,
) -> anyhow::Result<u64> {
    c.execute(
        "UPDATE databases SET max_tables = $2, max_fields_per_table = $3, max_attachment_bytes = $4
         WHERE id = ANY($1)",
        &[
            &database_ids,
            &limits.tables_per_database,
            &limits.fields_per_table,
            &limits.attachment_bytes,
        ],
    )
    .await
    .context("store the databases' limits")
}

/// Usage of `database_ids` (those on this shard; others are left out),
/// `shard` naming it in the rows.
pub async fn usage(
    c: &impl GenericClient,
    shard: &str,
    database_ids: &[String],
) -> anyhow::Result<Vec<DatabaseUsage>> {
    let rows = c
        .query(
            "SELECT d.id, d.attachment_bytes,
                    (SELECT count(*) FROM tables t WHERE t.database_id = d.id) AS tables,
                    (SELECT coalesce(sum(s.n_live_tup), 0)::bigint FROM pg_stat_user_tables s
                      WHERE s.schemaname = d.id AND s.relname LIKE 'tbl\\_%') AS records,
                    (SELECT coalesce(sum(r.requests), 0)::bigint FROM request_counts r
                      WHERE r.database_id = d.id AND r.bucket > now() - interval '1 hour') AS hour,
                    (SELECT coalesce(sum(r.requests), 0)::bigint FROM request_counts r
                      WHERE r.database_id = d.id AND r.bucket > now() - interval '1 day') AS day
             FROM databases d WHERE d.id = ANY($1) ORDER BY d.id",
            &[&database_ids],
        )
        .await
        .context("read usage")?;
    rows.iter().map(|r| usage_row(r, shard)).collect()
}

/// Usage of every database on this shard (the fleet view): one pass over
/// the catalog's `databases`, the statistics view and the buckets.
pub async fn usage_of_all(
    c: &impl GenericClient,
    shard: &str,
) -> anyhow::Result<Vec<DatabaseUsage>> {
    let rows = c
        .query(
            "WITH recs AS (
                 SELECT schemaname AS id, sum(n_live_tup)::bigint AS n FROM pg_stat_user_tables
                 WHERE schemaname LIKE 'db\\_%' AND relname LIKE 'tbl\\_%' GROUP BY schemaname),
             reqs AS (
                 SELECT database_id AS id,
                        sum(requests) FILTER (WHERE bucket > now() - interval '1 hour')::bigint AS hour,
                        sum(requests)::bigint AS day
                 FROM request_counts WHERE bucket > now() - interval '1 day' GROUP BY database_id),
             tabs AS (SELECT database_id AS id, count(*) AS n FROM tables GROUP BY database_id)
             SELECT d.id, d.attachment_bytes, coalesce(recs.n, 0) AS records,
                    coalesce(reqs.hour, 0) AS hour, coalesce(reqs.day, 0) AS day,
                    coalesce(tabs.n, 0) AS tables
             FROM databases d LEFT JOIN recs USING (id) LEFT JOIN reqs USING (id)
                  LEFT JOIN tabs USING (id)
             ORDER BY d.id",
            &[],
        )
        .await
        .context("read the shard's usage")?;
    rows.iter().map(|r| usage_row(r, shard)).collect()
}

/// One database's usage as both usage reads name their columns.
fn usage_row(r: &tokio_postgres::Row, shard: &str) -> anyhow::Result<DatabaseUsage> {
    Ok(DatabaseUsage {
        database_id: r.try_get("id")?,
        shard: shard.to_string(),
        records: r.try_get("records")?,
        attachment_bytes: r.try_get("attachment_bytes")?,
        requests_last_hour: r.try_get("hour")?,
        requests_last_day: r.try_get("day")?,
        tables: r.try_get("tables")?,
    })
}
