//! The blob sweeper: deletes from the blob store the bytes of attachments
//! whose registry rows are gone. The `attachments_garbage` trigger
//! (migration 0005) queues them in `blob_garbage` in the deleting
//! transaction, whatever deleted the row (a cell write, purge, a field,
//! table or database delete), and notifies `blob_garbage`; the bytes go
//! only after that transaction committed.
//!
//! Woken by the notification and every [`INTERVAL`], a [`pass`] claims due
//! rows (`FOR UPDATE SKIP LOCKED`, leased by moving `due_at` forward, on
//! the maintenance pool), deletes every variant, then the row; a failure
//! is logged, counted and retried later with a growing delay. Each interval
//! it also deletes uploads never placed within `UNPLACED_TTL` (their bytes
//! follow through the trigger) and, for the local store, temporary files
//! left by writes that crashed.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use blobstore::BlobStore;
use tokio::sync::Notify;

use super::limits::UNPLACED_TTL;
use crate::catalog::attachments as registry;
use crate::db::{Db, DbOp};
use crate::error::ApiResult;

/// The channel the trigger notifies.
pub const CHANNEL: &str = "blob_garbage";
/// How often the sweeper runs without being woken.
pub const INTERVAL: Duration = Duration::from_secs(60);
/// Rows claimed per statement.
const BATCH: i64 = 100;
/// How long a claimed row is the claimer's before another sweeper may
/// take it (a sweeper that crashed midway).
const LEASE: Duration = Duration::from_secs(300);
/// Local temporary files (`.tmp-...`) older than this are from crashed
/// writes.
pub const STALE_TEMP: Duration = Duration::from_secs(3600);
/// Prefix of the local store's temporary files (`blobstore::local`).
const TEMP_PREFIX: &str = ".tmp-";

/// What one [`pass`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Swept {
    /// Attachments whose bytes were deleted.
    pub deleted: usize,
    /// Attachments whose delete failed (retried later).
    pub failed: usize,
}

/// The wait before retry `attempts + 1` of a failed delete.
pub fn backoff(attempts: i32) -> Duration {
    let exp = attempts.clamp(0, 12) as u32;
    (Duration::from_secs(10) * 2u32.pow(exp)).min(Duration::from_secs(3600))
}

/// Deletes the bytes of every due queued attachment, batch by batch.
pub async fn pass(db: &Db, blobs: &BlobStore) -> ApiResult<Swept> {
    let mut swept = Swept::default();
    loop {
        let claimed = db
            .measured(DbOp::SweepBlobs, async {
                let client = db.maintenance_client().await?;
                Ok(registry::claim_garbage(&client, BATCH, LEASE).await?)
            })
            .await?;
        if claimed.is_empty() {
            return Ok(swept);
        }
        for g in &claimed {
            let outcome = blobs
                .delete_attachment(&g.database_id, &g.attachment_id)
                .await;
            let client = db.maintenance_client().await?;
            match outcome {
                Ok(()) => {
                    registry::garbage_done(&client, &g.attachment_id).await?;
                    swept.deleted += 1;
                }
                Err(e) => {
                    tracing::warn!(
                        attachment_id = %g.attachment_id,
                        database_id = %g.database_id,
                        attempts = g.attempts + 1,
                        error = %e,
                        "blob sweeper could not delete an attachment's bytes; will retry"
                    );
                    let retry = backoff(g.attempts);
                    registry::garbage_failed(&client, &g.attachment_id, &e.to_string(), retry)
                        .await?;
                    swept.failed += 1;
                }
            }
        }
        if claimed.len() < BATCH as usize {
            return Ok(swept);
        }
    }
}

/// Deletes the registry rows of uploads no cell took in time.
pub async fn expire_unplaced(db: &Db) -> ApiResult<u64> {
    db.measured(DbOp::SweepBlobs, async {
        let client = db.maintenance_client().await?;
        Ok(registry::delete_unplaced(&client, UNPLACED_TTL).await?)
    })
    .await
}

/// Removes the local store's temporary files older than `older_than`
/// (`<root>/.tmp-*`, `<root>/<db>/<att>/.tmp-*`); returns how many.
pub fn remove_stale_temp_files(root: &Path, older_than: Duration) -> usize {
    let now = SystemTime::now();
    let stale = |path: &Path| {
        std::fs::metadata(path)
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| now.duration_since(t).ok())
            .is_some_and(|age| age > older_than)
    };
    let entries = |dir: &Path| -> Vec<std::path::PathBuf> {
        std::fs::read_dir(dir)
            .map(|rd| rd.filter_map(Result::ok).map(|e| e.path()).collect())
            .unwrap_or_default()
    };
    let is_temp = |p: &Path| {
        p.file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with(TEMP_PREFIX))
    };
    let remove =
        |p: &Path| is_temp(p) && p.is_file() && stale(p) && std::fs::remove_file(p).is_ok();
    let mut removed = 0;
    for top in entries(root) {
        if top.is_dir() {
            for attachment in entries(&top).into_iter().filter(|p| p.is_dir()) {
                let here = entries(&attachment).iter().filter(|f| remove(f)).count();
                removed += here;
                // Gone when the crashed write was its only file. A directory
                // that had no stale file is left alone: an upload may have
                // just made it and be about to create its file.
                if here > 0 {
                    let _ = std::fs::remove_dir(&attachment);
                }
            }
        } else if remove(&top) {
            removed += 1;
        }
    }
    removed
}

/// Starts the sweeper and its `LISTEN` session; they run until the runtime
/// stops.
pub fn spawn(db: Db, blobs: BlobStore) {
    let wake = Arc::new(Notify::new());
    tokio::spawn(listen(db.clone(), wake.clone()));
    tokio::spawn(run(db, blobs, wake));
}

async fn run(db: Db, blobs: BlobStore, wake: Arc<Notify>) {
    let mut tick = tokio::time::interval(INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let periodic = tokio::select! {
            _ = tick.tick() => true,
            _ = wake.notified() => false,
        };
        if periodic {
            match expire_unplaced(&db).await {
                Ok(0) => {}
                Ok(n) => tracing::info!(removed = n, "blob sweeper removed unplaced uploads"),
                Err(e) => tracing::warn!(error = %e, "blob sweeper: unplaced uploads pass failed"),
            }
            if let BlobStore::Local(local) = &blobs {
                let root = local.root().to_owned();
                let removed =
                    tokio::task::spawn_blocking(move || remove_stale_temp_files(&root, STALE_TEMP))
                        .await
                        .unwrap_or(0);
                if removed > 0 {
                    tracing::info!(removed, "blob sweeper removed stale temporary files");
                }
            }
        }
        match pass(&db, &blobs).await {
            Ok(Swept {
                deleted: 0,
                failed: 0,
            }) => {}
            Ok(s) => tracing::debug!(deleted = s.deleted, failed = s.failed, "blob sweeper pass"),
            Err(e) => tracing::warn!(error = %e, "blob sweeper pass failed"),
        }
    }
}

/// Keeps a `LISTEN blob_garbage` session open, waking the sweeper on every
/// notification (and once after each reconnect). Reopens it when it drops.
async fn listen(db: Db, wake: Arc<Notify>) {
    let connect = || db.dedicated_session();
    service_kit::listen::keep_listening(
        "blob sweeper",
        CHANNEL,
        connect,
        wake,
        Duration::from_secs(1),
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_back_off_up_to_an_hour() {
        assert_eq!(backoff(0), Duration::from_secs(10));
        assert_eq!(backoff(1), Duration::from_secs(20));
        assert_eq!(backoff(3), Duration::from_secs(80));
        assert_eq!(backoff(20), Duration::from_secs(3600));
        assert_eq!(backoff(-1), Duration::from_secs(10));
    }

    #[test]
    fn only_stale_temporary_files_are_removed() {
        let root = std::env::temp_dir().join(format!(
            "tabula-sweeper-{}",
            cluster_protocol::ids::random_token(8)
        ));
        let att = root.join("db_Ab3dZ1234567").join("att_Ab3dZ7654321");
        std::fs::create_dir_all(&att).unwrap();
        std::fs::write(att.join("original"), b"kept").unwrap();
        std::fs::write(att.join(".tmp-crashed"), b"left").unwrap();
        std::fs::write(root.join(".tmp-check-x"), b"").unwrap();
        // Nothing is an hour old yet.
        assert_eq!(remove_stale_temp_files(&root, STALE_TEMP), 0);
        assert!(att.join(".tmp-crashed").exists());
        // Everything is older than zero seconds; only temp files go.
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(remove_stale_temp_files(&root, Duration::ZERO), 2);
        assert!(att.join("original").exists());
        assert!(!att.join(".tmp-crashed").exists());
        std::fs::remove_dir_all(&root).unwrap();
    }

    /// An upload makes its attachment's directory, then its temporary file:
    /// a pass in between must not take the directory from under it. One
    /// whose only file was a stale temporary file goes.
    #[test]
    fn an_empty_directory_of_a_write_in_flight_is_kept() {
        let root = std::env::temp_dir().join(format!(
            "tabula-sweeper-{}",
            cluster_protocol::ids::random_token(8)
        ));
        let fresh = root.join("db_Ab3dZ1234567").join("att_Ab3dZ0000001");
        let crashed = root.join("db_Ab3dZ1234567").join("att_Ab3dZ0000002");
        std::fs::create_dir_all(&fresh).unwrap();
        std::fs::create_dir_all(&crashed).unwrap();
        std::fs::write(crashed.join(".tmp-crashed"), b"left").unwrap();
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(remove_stale_temp_files(&root, Duration::ZERO), 1);
        assert!(fresh.is_dir());
        assert!(!crashed.exists());
        std::fs::remove_dir_all(&root).unwrap();
    }
}
