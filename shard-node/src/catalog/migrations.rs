//! Catalog migrations: numbered `.sql` files, each applied once in its own
//! transaction, recorded in `schema_migrations`, serialised across nodes
//! sharing a PostgreSQL by an advisory lock.

use anyhow::Context;
use deadpool_postgres::Object;

/// Every migration, in order. Append only; never edit an applied file.
pub const MIGRATIONS: &[(&str, &str)] = &[
    (
        "0001_catalog",
        include_str!("../../migrations/0001_catalog.sql"),
    ),
    (
        "0002_fields",
        include_str!("../../migrations/0002_fields.sql"),
    ),
    (
        "0003_webhooks",
        include_str!("../../migrations/0003_webhooks.sql"),
    ),
    (
        "0004_delivery_claims",
        include_str!("../../migrations/0004_delivery_claims.sql"),
    ),
    (
        "0005_attachments",
        include_str!("../../migrations/0005_attachments.sql"),
    ),
    (
        "0006_moves",
        include_str!("../../migrations/0006_moves.sql"),
    ),
    (
        "0007_social",
        include_str!("../../migrations/0007_social.sql"),
    ),
    (
        "0008_match_clock_cursor",
        include_str!("../../migrations/0008_match_clock_cursor.sql"),
    ),
];

/// Advisory lock key of the migration run ("shardmig" in ASCII).
const MIGRATION_LOCK: i64 = 0x7368_6172_646d_6967;

/// Applies every pending migration; returns the ids applied now.
pub async fn run(client: &mut Object) -> anyhow::Result<Vec<&'static str>> {
    client
        .execute("SELECT pg_advisory_lock($1)", &[&MIGRATION_LOCK])
        .await
        .context("take the migration lock")?;
    let result = apply_pending(client).await;
    let unlock = client
        .execute("SELECT pg_advisory_unlock($1)", &[&MIGRATION_LOCK])
        .await
        .context("release the migration lock");
    let applied = result?;
    unlock?;
    Ok(applied)
}

async fn apply_pending(client: &mut Object) -> anyhow::Result<Vec<&'static str>> {
    client
        .batch_execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations (
                 id text PRIMARY KEY,
                 applied_at timestamptz NOT NULL DEFAULT now()
             )",
        )
        .await
        .context("create schema_migrations")?;
    let mut applied = Vec::new();
    for (id, sql) in MIGRATIONS {
        let tx = client.transaction().await.context("begin migration")?;
        let done = tx
            .query_opt("SELECT 1 FROM schema_migrations WHERE id = $1", &[id])
            .await
            .context("read schema_migrations")?
            .is_some();
        if done {
            continue;
        }
        tx.batch_execute(sql)
            .await
            .with_context(|| format!("apply migration {id}"))?;
        tx.execute("INSERT INTO schema_migrations (id) VALUES ($1)", &[id])
            .await
            .with_context(|| format!("record migration {id}"))?;
        tx.commit()
            .await
            .with_context(|| format!("commit migration {id}"))?;
        tracing::info!(migration = id, "applied catalog migration");
        applied.push(*id);
    }
    Ok(applied)
}
