//! Versioned catalog migrations: numbered `.sql` files embedded in the
//! binary, each applied in its own transaction and recorded in
//! `schema_migrations`. A session advisory lock serialises control planes
//! starting at the same time.

use anyhow::Context;
use deadpool_postgres::Pool;

/// Advisory lock id guarding migrations ("cpmigrat" as bytes).
const MIGRATION_LOCK: i64 = 0x63706d6967726174;

/// (id, name, sql), in order. Never edit an applied migration: add one.
pub const MIGRATIONS: &[(i32, &str, &str)] = &[
    (1, "init", include_str!("../migrations/0001_init.sql")),
    (2, "moves", include_str!("../migrations/0002_moves.sql")),
];

/// Applies every migration not yet recorded. Returns the ids it applied.
pub async fn run(pool: &Pool) -> anyhow::Result<Vec<i32>> {
    let mut client = pool.get().await.context("connect for migrations")?;
    client
        .execute("SELECT pg_advisory_lock($1)", &[&MIGRATION_LOCK])
        .await
        .context("take migration lock")?;
    let result = apply_pending(&mut client).await;
    let unlock = client
        .execute("SELECT pg_advisory_unlock($1)", &[&MIGRATION_LOCK])
        .await
        .context("release migration lock");
    let applied = result?;
    unlock?;
    Ok(applied)
}

async fn apply_pending(client: &mut deadpool_postgres::Object) -> anyhow::Result<Vec<i32>> {
    client
        .batch_execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations (
                id integer PRIMARY KEY,
                name text NOT NULL,
                applied_at timestamptz NOT NULL DEFAULT now()
            )",
        )
        .await
        .context("create schema_migrations")?;
    let done: Vec<i32> = client
        .query("SELECT id FROM schema_migrations", &[])
        .await
        .context("read schema_migrations")?
        .iter()
        .map(|r| r.try_get(0))
        .collect::<Result<_, _>>()?;
    let mut applied = Vec::new();
    for (id, name, sql) in MIGRATIONS {
        if done.contains(id) {
            continue;
        }
        let tx = client.transaction().await?;
        tx.batch_execute(sql)
            .await
            .with_context(|| format!("apply migration {id:04}_{name}"))?;
        tx.execute(
            "INSERT INTO schema_migrations (id, name) VALUES ($1, $2)",
            &[id, name],
        )
        .await
        .with_context(|| format!("record migration {id:04}_{name}"))?;
        tx.commit()
            .await
            .with_context(|| format!("commit migration {id:04}_{name}"))?;
        tracing::info!(id, name, "applied catalog migration");
        applied.push(*id);
    }
    Ok(applied)
}

#[cfg(test)]
mod tests {
    #[test]
    fn migration_ids_are_increasing() {
        let ids: Vec<i32> = super::MIGRATIONS.iter().map(|m| m.0).collect();
        assert!(ids.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(ids.first(), Some(&1));
    }
}
