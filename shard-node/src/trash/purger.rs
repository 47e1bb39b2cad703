//! The background purger: every `interval`, removes records trashed more
//! than `retention` ago from every table of every database served here
//! (placement `owned` or `moving`; part A: restorable for seven days).
//! Each table is its own statement, so one busy table never holds locks
//! on the others; the purged records' attachments and comments are deleted in
//! the same transaction.

use std::time::Duration;

use chrono::Utc;

use crate::catalog::placements::Need;
use crate::catalog::{attachments, comments, tables};
use crate::config::TrashSettings;
use crate::db::{fenced_transaction_on, Db, DbOp};
use crate::error::{ApiError, ApiResult};
use crate::records::store;
use crate::tenant_schema;

/// One pass: returns how many records were removed.
pub async fn purge_expired(db: &Db, retention: Duration) -> ApiResult<u64> {
    db.measured(DbOp::PurgeExpired, async {
        // Its own session: one pass may delete many rows from big tables.
        let mut client = db.maintenance_client().await?;
        let cutoff =
            Utc::now() - chrono::Duration::from_std(retention).unwrap_or(chrono::Duration::days(7));
        let tables = tables::served(&client).await?;
        let mut removed = 0;
        for (database_id, table_id) in &tables {
            let qualified = tenant_schema::table(database_id, table_id)?;
            // One pass opens every table of the shard: the session is
            // renewed every SHARD_SESSION_MAX_DATABASES databases.
            client = db.maintenance_serving(client, database_id).await?;
            // The records and their attachments in one transaction, behind
            // the write fence: a database moved away since the listing is
            // skipped (nothing written).
            let outcome =
                fenced_transaction_on(&mut client, database_id, Need::Write, async |tx| {
                    match store::purge_expired(tx, &qualified, cutoff).await {
                        Ok(ids) => {
                            let purged: Vec<&str> = ids.iter().map(String::as_str).collect();
                            attachments::delete_for_records(tx, table_id, &purged).await?;
                            comments::delete_for_records(tx, table_id, &purged).await?;
                            Ok(ids.len() as u64)
                        }
                        // A table dropped between the listing and the delete:
                        // the failed transaction's commit rolls it back.
                        Err(e)
                            if e.code()
                                == Some(&tokio_postgres::error::SqlState::UNDEFINED_TABLE) =>
                        {
                            Ok(0)
                        }
                        Err(e) => Err(e.into()),
                    }
                })
                .await;
            match outcome {
                Ok(n) => removed += n,
                Err(ApiError::Misplaced) => continue,
                Err(e) => return Err(e),
            }
        }
        Ok(removed)
    })
    .await
}

/// Runs [`purge_expired`] every `settings.interval` until the task is dropped.
pub fn spawn(db: Db, settings: TrashSettings) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(settings.interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            match purge_expired(&db, settings.retention).await {
                Ok(0) => {}
                Ok(n) => tracing::info!(removed = n, "trash purger removed expired records"),
                Err(e) => tracing::warn!(error = %e, "trash purger pass failed"),
            }
        }
    })
}
