//! Planner statistics of record tables, taken right after large writes.
//!
//! PostgreSQL plans a table with no statistics (one just created and
//! loaded through the API) as if it could be any size: until autovacuum
//! analyzes it, a minute or more later, the first page of 10,000 fresh rows
//! was a bitmap scan of every live row and a top-N sort (12 ms) instead of
//! an ordered index scan (0.6 ms). So the node counts the rows each record
//! write creates or changes, per table, and once a table has had enough of
//! them since its last analysis ([`due`]) it runs `ANALYZE` of that table
//! in the background, on a maintenance session, at most one per table at
//! a time. A write never waits for it.
//!
//! The counts live in memory: after a restart the first batch past the
//! threshold analyzes a table once more (cheap: `ANALYZE` samples at most
//! 30,000 rows), and autovacuum still covers whatever the node misses.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::db::{Db, DbOp};

/// Rows written since the last analysis before a table is analyzed again,
/// at least ...
pub const STALE_FROM_ROWS: u64 = 500;
/// ... and at least a tenth of the rows it had then: autovacuum's own
/// share (`autovacuum_analyze_scale_factor`), so the node's analyses come
/// sooner than autovacuum's would, not in addition to them.
const STALE_SHARE_INVERSE: u64 = 10;

/// Whether `written` rows since an analysis that saw `analyzed` rows make
/// a table's statistics stale.
pub fn due(written: u64, analyzed: u64) -> bool {
    written >= STALE_FROM_ROWS && written * STALE_SHARE_INVERSE >= analyzed
}

#[derive(Default)]
struct Tally {
    /// Rows written since the last analysis started.
    written: u64,
    /// Rows counted up to the last analysis started.
    analyzed: u64,
    running: bool,
}

/// The node's per-table counts (by quoted table name).
#[derive(Default, Clone)]
pub struct Statistics {
    tables: Arc<Mutex<HashMap<String, Tally>>>,
}

impl Statistics {
    /// Counts `rows` rows written to the real table `qualified` (quoted,
    /// `tenant_schema::table`) by a committed write; starts its `ANALYZE`
    /// in the background when that makes its statistics stale.
    pub fn written(&self, db: &Db, qualified: &str, rows: usize) {
        if !self.take_due(qualified, rows as u64) {
            return;
        }
        let (this, db, qualified) = (self.clone(), db.clone(), qualified.to_owned());
        tokio::spawn(async move {
            let analyzed = db
                .measured(DbOp::AnalyzeTable, async {
                    let client = db.maintenance_client().await?;
                    client
                        .batch_execute(&format!("ANALYZE {qualified}"))
                        .await?;
                    Ok(())
                })
                .await;
            // A table dropped or moved away meanwhile fails here; nothing
            // else can.
            if let Err(e) = analyzed {
                tracing::debug!(table = %qualified, error = %e, "ANALYZE after writes failed");
            }
            this.finished(&qualified);
        });
    }

    /// Adds `rows` to the table's count; when they are [`due`] and no
    /// analysis runs, marks one running and moves the count to `analyzed`.
    fn take_due(&self, qualified: &str, rows: u64) -> bool {
        let mut tables = self.tables.lock().unwrap_or_else(|p| p.into_inner());
        let tally = tables.entry(qualified.to_owned()).or_default();
        tally.written += rows;
        if tally.running || !due(tally.written, tally.analyzed) {
            return false;
        }
        tally.analyzed += tally.written;
        tally.written = 0;
        tally.running = true;
        true
    }

    fn finished(&self, qualified: &str) {
        let mut tables = self.tables.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(t) = tables.get_mut(qualified) {
            t.running = false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_table_is_due_from_the_threshold_then_by_a_tenth_of_its_rows() {
        assert!(!due(STALE_FROM_ROWS - 1, 0));
        assert!(due(STALE_FROM_ROWS, 0));
        assert!(due(STALE_FROM_ROWS, 5_000));
        assert!(!due(STALE_FROM_ROWS, 5_001));
        assert!(due(10_000, 100_000));
        assert!(!due(9_999, 100_000));
    }

    #[test]
    fn one_analysis_at_a_time_per_table_and_counts_carry_over() {
        let s = Statistics::default();
        assert!(!s.take_due("t", 400));
        assert!(s.take_due("t", 100), "500 rows on a new table");
        assert!(!s.take_due("t", 600), "one is running");
        s.finished("t");
        assert!(s.take_due("t", 0), "the 600 written meanwhile are due");
        s.finished("t");
        assert!(!s.take_due("t", 499));
        assert!(!s.take_due("u", 499), "tables count apart");
    }
}
