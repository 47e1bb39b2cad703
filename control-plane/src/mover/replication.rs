//! Logical replication of one database between two shard instances: the
//! publication on the source (the tenant schema and the database's rows of
//! the shard catalog, by row filter), the subscription on the target, its
//! progress, and dropping all of it safely whether or not the source is up.

use std::time::Duration;

use anyhow::Context;
use tokio_postgres::GenericClient;

use super::shard_catalog::CATALOG_TABLES;
use super::sql::{self, quote_ident, quote_literal};

/// `CREATE PUBLICATION` text: `FOR TABLES IN SCHEMA` the tenant schema and
/// each catalog table with a row filter on the (checked) database id.
pub fn publication_sql(name: &str, database_id: &str) -> anyhow::Result<String> {
    let id = sql::database_literal(database_id)?;
    let tables: Vec<String> = CATALOG_TABLES
        .iter()
        .map(|(table, column, _)| {
            format!(
                "TABLE {} WHERE ({} = {id})",
                quote_ident(table),
                quote_ident(column)
            )
        })
        .collect();
    Ok(format!(
        "CREATE PUBLICATION {} FOR TABLES IN SCHEMA {}, {}",
        quote_ident(name),
        sql::schema(database_id)?,
        tables.join(", ")
    ))
}

/// `CREATE SUBSCRIPTION` text: copies the rows, creates the slot (same name).
pub fn subscription_sql(name: &str, conninfo_literal: &str) -> String {
    format!(
        "CREATE SUBSCRIPTION {n} CONNECTION {conninfo_literal} PUBLICATION {n}
         WITH (copy_data = true, create_slot = true, slot_name = {slot}, binary = true)",
        n = quote_ident(name),
        slot = quote_literal(name),
    )
}

pub async fn create_publication(
    source: &impl GenericClient,
    name: &str,
    database_id: &str,
) -> anyhow::Result<()> {
    source
        .batch_execute(&publication_sql(name, database_id)?)
        .await
        .context("create the publication on the source")
}

pub async fn create_subscription(
    target: &impl GenericClient,
    name: &str,
    conninfo_literal: &str,
) -> anyhow::Result<()> {
    target
        .batch_execute(&subscription_sql(name, conninfo_literal))
        .await
        .context("create the subscription on the target")
}

/// Tables in the subscription and how many of them are `ready`.
pub async fn sync_progress(target: &impl GenericClient, name: &str) -> anyhow::Result<(i64, i64)> {
    let row = target
        .query_one(
            "SELECT count(*), count(*) FILTER (WHERE r.srsubstate = 'r')
               FROM pg_subscription s JOIN pg_subscription_rel r ON r.srsubid = s.oid
              WHERE s.subname = $1",
            &[&name],
        )
        .await
        .context("read the subscription's progress")?;
    Ok((row.try_get(0)?, row.try_get(1)?))
}

/// Errors the subscription's workers have met so far (they retry).
pub async fn worker_errors(target: &impl GenericClient, name: &str) -> anyhow::Result<i64> {
    let row = target
        .query_opt(
            "SELECT (apply_error_count + sync_error_count)::bigint
               FROM pg_stat_subscription_stats WHERE subname = $1",
            &[&name],
        )
        .await
        .context("read the subscription's errors")?;
    Ok(match row {
        Some(r) => r.try_get(0)?,
        None => 0,
    })
}

/// WAL the slot's consumer still has to confirm, in bytes.
pub async fn lag_bytes(source: &impl GenericClient, name: &str) -> anyhow::Result<Option<i64>> {
    let row = source
        .query_opt(
            "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn)::bigint
               FROM pg_replication_slots WHERE slot_name = $1",
            &[&name],
        )
        .await
        .context("read the slot's lag")?;
    Ok(match row {
        Some(r) => r.try_get(0)?,
        None => None,
    })
}

/// Drops the subscription without touching the source (which may be
/// down): disable, detach from its slot, drop. Returns its oid (the
/// source's table-sync slots are named by it), `None` when it was gone.
pub async fn drop_subscription(
    target: &impl GenericClient,
    name: &str,
) -> anyhow::Result<Option<u32>> {
    let oid: Option<u32> = target
        .query_opt(
            "SELECT oid FROM pg_subscription WHERE subname = $1",
            &[&name],
        )
        .await
        .context("look up the subscription")?
        .map(|r| r.try_get(0))
        .transpose()?;
    if oid.is_none() {
        return Ok(None);
    }
    let n = quote_ident(name);
    target
        .batch_execute(&format!("ALTER SUBSCRIPTION {n} DISABLE"))
        .await
        .context("disable the subscription")?;
    target
        .batch_execute(&format!("ALTER SUBSCRIPTION {n} SET (slot_name = NONE)"))
        .await
        .context("detach the subscription from its slot")?;
    target
        .batch_execute(&format!("DROP SUBSCRIPTION IF EXISTS {n}"))
        .await
        .context("drop the subscription")?;
    Ok(oid)
}

/// How long dropping a slot waits for its walsender to let go.
const SLOT_RELEASE: Duration = Duration::from_secs(10);

/// Drops the move's slot and the table-sync slots of subscription
/// `sub_oid` (left behind when a subscription is dropped mid-copy) on the
/// source. A slot still held by a walsender that is going away is retried.
pub async fn drop_slots(
    source: &impl GenericClient,
    name: &str,
    sub_oid: Option<u32>,
) -> anyhow::Result<()> {
    let sync_prefix = sub_oid.map(|o| format!("pg_{o}_sync_")).unwrap_or_default();
    let deadline = tokio::time::Instant::now() + SLOT_RELEASE;
    loop {
        let result = source
            .query(
                "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots
                  WHERE (slot_name = $1 OR ($2 <> '' AND starts_with(slot_name, $2)))
                    AND active_pid IS NOT NULL",
                &[&name, &sync_prefix],
            )
            .await
            .context("stop walsenders of the move's slots");
        let dropped = match result {
            Ok(_) => source
                .query(
                    "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots
                      WHERE (slot_name = $1 OR ($2 <> '' AND starts_with(slot_name, $2)))",
                    &[&name, &sync_prefix],
                )
                .await
                .context("drop the move's replication slots"),
            Err(e) => Err(e),
        };
        match dropped {
            Ok(_) => return Ok(()),
            Err(e) if tokio::time::Instant::now() >= deadline => return Err(e),
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
}

pub async fn drop_publication(source: &impl GenericClient, name: &str) -> anyhow::Result<()> {
    source
        .batch_execute(&format!("DROP PUBLICATION IF EXISTS {}", quote_ident(name)))
        .await
        .context("drop the publication")
}

/// Names starting `tmv_` on an instance: subscriptions, publications, slots.
pub async fn mover_objects(c: &impl GenericClient) -> anyhow::Result<MoverObjects> {
    let names = |rows: Vec<tokio_postgres::Row>| -> anyhow::Result<Vec<String>> {
        rows.iter().map(|r| Ok(r.try_get(0)?)).collect()
    };
    let pattern = format!("{}%", sql::OBJECT_PREFIX);
    Ok(MoverObjects {
        subscriptions: names(
            c.query(
                "SELECT subname::text FROM pg_subscription WHERE subname LIKE $1",
                &[&pattern],
            )
            .await
            .context("list subscriptions")?,
        )?,
        publications: names(
            c.query(
                "SELECT pubname::text FROM pg_publication WHERE pubname LIKE $1",
                &[&pattern],
            )
            .await
            .context("list publications")?,
        )?,
        slots: names(
            c.query(
                "SELECT slot_name::text FROM pg_replication_slots WHERE slot_name LIKE $1",
                &[&pattern],
            )
            .await
            .context("list replication slots")?,
        )?,
    })
}

#[derive(Debug, Default)]
pub struct MoverObjects {
    pub subscriptions: Vec<String>,
    pub publications: Vec<String>,
    pub slots: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn publication_filters_catalog_rows_by_database() {
        let sql = publication_sql("tmv_aa", "db_Ab3dZ1234567").unwrap();
        assert!(sql.starts_with(
            "CREATE PUBLICATION \"tmv_aa\" FOR TABLES IN SCHEMA \"db_Ab3dZ1234567\", TABLE \"share_links\" WHERE (\"database_id\" = 'db_Ab3dZ1234567')"
        ));
        assert!(sql.contains("TABLE \"comments\" WHERE (\"database_id\" = 'db_Ab3dZ1234567')"));
        assert!(sql.ends_with("TABLE \"databases\" WHERE (\"id\" = 'db_Ab3dZ1234567')"));
        assert_eq!(sql.matches("TABLE ").count(), CATALOG_TABLES.len());
        assert!(publication_sql("tmv_aa", "db_x' OR true --").is_err());
    }

    #[test]
    fn subscription_names_its_slot() {
        let sql = subscription_sql("tmv_aa", "'host=''h'''");
        assert!(sql.contains("CONNECTION 'host=''h''' PUBLICATION \"tmv_aa\""));
        assert!(sql.contains("slot_name = 'tmv_aa'"));
        assert!(sql.contains("copy_data = true"));
    }
}
