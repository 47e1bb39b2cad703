//! What the mover reads and writes in a shard's own catalog (migration
//! 0006 of the shard node): `placements`, `databases.move_marker`, and a
//! database's copy (its catalog rows and tenant schema).

use anyhow::Context;
use tokio_postgres::GenericClient;

use super::sql;

/// The shard-level catalog tables a move replicates, with the column that
/// names the database (publication row filter) and the key the
/// verification orders a sample by. Deleted in this order (children first).
pub const CATALOG_TABLES: &[(&str, &str, &str)] = &[
    ("share_links", "database_id", "id"),
    ("comments", "database_id", "id"),
    ("attachments", "database_id", "id"),
    ("webhook_matches", "database_id", "webhook_id, record_id"),
    ("deliveries", "database_id", "id"),
    ("webhooks", "database_id", "id"),
    ("views", "database_id", "id"),
    ("fields", "database_id", "id"),
    ("tables", "database_id", "id"),
    ("databases", "id", "id"),
];

/// `owned`, `moving` or `fenced`, and the epoch.
pub struct ShardPlacement {
    pub state: String,
    pub epoch: i64,
}

/// The database's placement row, locked (`FOR UPDATE` waits for the
/// writers holding `FOR KEY SHARE` on it).
pub async fn lock_placement(
    c: &impl GenericClient,
    database_id: &str,
) -> anyhow::Result<Option<ShardPlacement>> {
    let row = c
        .query_opt(
            "SELECT state, epoch FROM placements WHERE database_id = $1 FOR UPDATE",
            &[&database_id],
        )
        .await
        .context("lock the shard's placement")?;
    row.map(|r| {
        Ok(ShardPlacement {
            state: r.try_get(0)?,
            epoch: r.try_get(1)?,
        })
    })
    .transpose()
}

pub async fn set_placement_state(
    c: &impl GenericClient,
    database_id: &str,
    state: &str,
) -> anyhow::Result<u64> {
    c.execute(
        "UPDATE placements SET state = $2, updated_at = now() WHERE database_id = $1",
        &[&database_id, &state],
    )
    .await
    .context("set the shard's placement state")
}

/// Back to serving after a rolled back cutover or an abort: `to` from
/// `moving` or `fenced`.
pub async fn unfence(c: &impl GenericClient, database_id: &str, to: &str) -> anyhow::Result<u64> {
    c.execute(
        "UPDATE placements SET state = $2, updated_at = now()
         WHERE database_id = $1 AND state IN ('moving', 'fenced') AND state <> $2",
        &[&database_id, &to],
    )
    .await
    .context("unfence the shard's placement")
}

/// The target's placement at the flip: `owned` at `epoch`.
pub async fn own(c: &impl GenericClient, database_id: &str, epoch: i64) -> anyhow::Result<()> {
    c.execute(
        "INSERT INTO placements (database_id, epoch, state) VALUES ($1, $2, 'owned')
         ON CONFLICT (database_id) DO UPDATE SET epoch = $2, state = 'owned', updated_at = now()",
        &[&database_id, &epoch],
    )
    .await
    .context("place the database on the target")?;
    Ok(())
}

pub async fn delete_placement(c: &impl GenericClient, database_id: &str) -> anyhow::Result<u64> {
    c.execute(
        "DELETE FROM placements WHERE database_id = $1",
        &[&database_id],
    )
    .await
    .context("delete the shard's placement")
}

pub async fn set_marker(
    c: &impl GenericClient,
    database_id: &str,
    marker: &str,
) -> anyhow::Result<u64> {
    c.execute(
        "UPDATE databases SET move_marker = $2 WHERE id = $1",
        &[&database_id, &marker],
    )
    .await
    .context("write move marker")
}

pub async fn marker(c: &impl GenericClient, database_id: &str) -> anyhow::Result<Option<String>> {
    let row = c
        .query_opt(
            "SELECT move_marker FROM databases WHERE id = $1",
            &[&database_id],
        )
        .await
        .context("read move marker")?;
    Ok(match row {
        Some(r) => r.try_get(0)?,
        None => None,
    })
}

/// Drops a database's copy from this shard: its catalog rows (with
/// `session_replication_role = replica`, so the attachments' garbage
/// trigger does not queue the files' bytes, which the other copy still
/// uses) and its tenant schema. One transaction. Callers check first that
/// the control plane's catalog does not place the database here.
pub async fn drop_copy(c: &mut tokio_postgres::Client, database_id: &str) -> anyhow::Result<()> {
    let schema = sql::schema(database_id)?;
    let tx = c.transaction().await.context("begin dropping a copy")?;
    tx.batch_execute("SET LOCAL session_replication_role = replica")
        .await
        .context("enter replica role")?;
    tx.execute(
        "DELETE FROM placements WHERE database_id = $1",
        &[&database_id],
    )
    .await
    .context("delete placement of a copy")?;
    for (table, column, _) in CATALOG_TABLES {
        let q = format!(
            "DELETE FROM {} WHERE {} = $1",
            sql::quote_ident(table),
            sql::quote_ident(column)
        );
        tx.execute(&q, &[&database_id])
            .await
            .with_context(|| format!("delete the copy's {table} rows"))?;
    }
    tx.batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
        .await
        .context("drop the copy's schema")?;
    tx.commit().await.context("commit dropping a copy")
}

/// Whether anything of the database is on this shard (rows or schema).
pub async fn has_copy(c: &impl GenericClient, database_id: &str) -> anyhow::Result<bool> {
    let row = c
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM databases WHERE id = $1)
                 OR EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)",
            &[&database_id],
        )
        .await
        .context("look for a copy")?;
    Ok(row.try_get(0)?)
}
