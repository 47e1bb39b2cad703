//! Requests served per database, for the control plane's `usage`
//! (docs/operations.md, "Quotas and usage"): counted in memory by the
//! principal check (a 421 "misplaced" answer is not counted: the router
//! retries it elsewhere) and added to the catalog's 5-minute buckets every
//! [`FLUSH_INTERVAL`] by one background task, so a request costs a map
//! update and no statement. Counts not yet flushed when the node stops are
//! lost. Memory: one entry per database served since the last flush.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use crate::catalog::request_counts as sql;
use crate::db::Db;

/// How often counts reach the catalog.
pub const FLUSH_INTERVAL: Duration = Duration::from_secs(5);
/// Flushes between two prunes of old buckets (about every 10 minutes).
const PRUNE_EVERY: u32 = 120;

/// Requests per database since the last flush.
#[derive(Default)]
pub struct RequestCounts {
    pending: Mutex<HashMap<Box<str>, i64>>,
}

impl RequestCounts {
    /// Counts one request of `database_id`.
    pub fn count(&self, database_id: &str) {
        let mut pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
        match pending.get_mut(database_id) {
            Some(n) => *n += 1,
            None => {
                pending.insert(database_id.into(), 1);
            }
        }
    }

    /// Takes what was counted, leaving nothing.
    pub fn take(&self) -> (Vec<String>, Vec<i64>) {
        let taken =
            std::mem::take(&mut *self.pending.lock().unwrap_or_else(PoisonError::into_inner));
        taken.into_iter().map(|(d, n)| (d.into_string(), n)).unzip()
    }

    /// Puts counts back after a failed flush (added to what came since).
    fn restore(&self, database_ids: Vec<String>, requests: Vec<i64>) {
        let mut pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
        for (d, n) in database_ids.into_iter().zip(requests) {
            *pending.entry(d.into_boxed_str()).or_insert(0) += n;
        }
    }
}

/// Adds the pending counts to the catalog; on failure they stay pending.
pub async fn flush(db: &Db, counts: &RequestCounts) -> anyhow::Result<()> {
    let (ids, requests) = counts.take();
    if ids.is_empty() {
        return Ok(());
    }
    let result = async {
        let client = db.maintenance_client().await?;
        sql::add(&client, &ids, &requests).await?;
        anyhow::Ok(())
    }
    .await;
    if result.is_err() {
        counts.restore(ids, requests);
    }
    result
}

/// Flushes every [`FLUSH_INTERVAL`] and prunes old buckets now and then.
pub fn spawn(db: Db, counts: std::sync::Arc<RequestCounts>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut ticks = tokio::time::interval(FLUSH_INTERVAL);
        let mut round: u32 = 0;
        loop {
            ticks.tick().await;
            if let Err(e) = flush(&db, &counts).await {
                tracing::warn!(
                    error = format!("{e:#}"),
                    "request counts: flush failed; kept for the next"
                );
            }
            round = round.wrapping_add(1);
            if round.is_multiple_of(PRUNE_EVERY) {
                let pruned = async {
                    let client = db.maintenance_client().await?;
                    sql::prune(&client).await?;
                    anyhow::Ok(())
                }
                .await;
                if let Err(e) = pruned {
                    tracing::warn!(error = format!("{e:#}"), "request counts: prune failed");
                }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_add_up_and_a_take_empties() {
        let c = RequestCounts::default();
        c.count("db_a");
        c.count("db_a");
        c.count("db_b");
        let (ids, n) = c.take();
        let mut pairs: Vec<_> = ids.into_iter().zip(n).collect();
        pairs.sort();
        assert_eq!(pairs, [("db_a".to_string(), 2), ("db_b".to_string(), 1)]);
        assert_eq!(c.take().0.len(), 0);
        c.count("db_a");
        c.restore(vec!["db_a".into()], vec![5]);
        assert_eq!(c.take(), (vec!["db_a".to_string()], vec![6]));
    }
}
