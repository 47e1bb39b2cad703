//! The deliverer of a shard node: sends the outbox's due deliveries, with
//! the retry schedule, the auto-pause and the delivery log of part C.
//!
//! One loop ([`Deliverer::run`]) does, over and over: record the attempts
//! that finished (one transaction for all of them), claim due rows up to
//! the free attempt slots (one statement, `FOR UPDATE SKIP LOCKED`, leasing
//! each row for the attempt's timeout plus [`LEASE_MARGIN`]), start one task
//! per claimed row, then sleep until a write notifies `webhook_deliveries`,
//! an attempt finishes, or the next row falls due (at most [`TICK`]). No
//! transaction is open while a request is out; a node killed mid-attempt
//! leaves its rows to be claimed again when their lease ends (at least once).
//!
//! Attempts in flight are bounded per webhook
//! (`WEBHOOK_CONCURRENCY_PER_WEBHOOK`: a claim skips webhooks at their cap,
//! so a receiver that hangs holds only its own slots), per database
//! (`WEBHOOK_CONCURRENCY_PER_DATABASE`, and at most
//! `WEBHOOK_ATTEMPTS_PER_DATABASE_PER_MINUTE` started: [`super::fairness`];
//! a claim goes round robin over the databases with due rows, so a
//! database with many webhooks at dead receivers never holds up another's)
//! and on the node
//! (`WEBHOOK_CONCURRENCY` attempts younger than [`SLOW_AFTER`], and
//! [`SLOW_CEILING`] times that in all: attempts stuck on dead receivers
//! stop taking the slots of live ones).
//!
//! A second task prunes the log ([`prune`]).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::Utc;
use tokio::sync::Notify;
use tokio::task::{Id, JoinSet};

use super::fairness::DatabaseShares;
use super::send::{self, Request};
use crate::catalog::databases::bump_schema_version;
use crate::catalog::deliveries::{self, After, Attempted, ClaimLimits, Claimed};
use crate::config::WebhookSettings;
use crate::db::{transaction_on, Db, DbOp};
use crate::egress::Egress;
use crate::error::ApiResult;

/// Longest sleep of an idle deliverer (a missed notification costs at most
/// this much delay).
pub const TICK: Duration = Duration::from_secs(1);
/// How much longer than the attempt's timeout a claim holds its row: time
/// to record the attempt before the row could be claimed again.
pub const LEASE_MARGIN: Duration = Duration::from_secs(5);
/// An attempt in flight this long stops counting against
/// `WEBHOOK_CONCURRENCY` ([`Deliverer`]'s slots).
pub const SLOW_AFTER: Duration = Duration::from_millis(500);
/// Attempts in flight at most, slow ones included, as a multiple of
/// `WEBHOOK_CONCURRENCY`.
pub const SLOW_CEILING: usize = 16;
/// Wait before retrying after the database failed the loop, and before
/// reopening the `LISTEN` session.
const BACKOFF: Duration = Duration::from_secs(1);
/// Most finished attempts recorded in one transaction.
const RECORD_BATCH: usize = 1000;

/// Part C: finished deliveries are pruned after 30 days...
pub const RETENTION: Duration = Duration::from_secs(30 * 24 * 3600);
/// ...keeping at least this many per webhook.
pub const KEEP_PER_WEBHOOK: i64 = 200;
/// How often the pruner runs.
pub const PRUNE_INTERVAL: Duration = Duration::from_secs(3600);

/// Starts the deliverer, its `LISTEN` session and the pruner; they run
/// until the runtime stops.
pub fn spawn(db: Db, egress: Egress, settings: Arc<WebhookSettings>) {
    let wake = Arc::new(Notify::new());
    tokio::spawn(listen(db.clone(), wake.clone()));
    tokio::spawn(prune_every(db.clone(), PRUNE_INTERVAL));
    tokio::spawn(Deliverer::new(db, egress, settings).run(wake));
}

/// What one [`Deliverer::step`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Round {
    /// Attempt slots free when it claimed.
    pub free: usize,
    /// Rows it claimed and started.
    pub claimed: usize,
}

impl Round {
    /// Every free slot was filled: more rows may be due.
    pub fn filled(&self) -> bool {
        self.free > 0 && self.claimed == self.free
    }
}

/// The delivery loop's state: attempts in flight and attempts finished but
/// not yet recorded.
pub struct Deliverer {
    db: Db,
    egress: Egress,
    settings: Arc<WebhookSettings>,
    attempts: JoinSet<Attempted>,
    /// The webhook and database of each attempt task (to free their slots
    /// even if it panics) and when it started.
    tasks: HashMap<Id, Task>,
    /// Attempts in flight per webhook.
    per_webhook: HashMap<String, i32>,
    /// Attempts in flight and started this minute per database.
    per_database: DatabaseShares,
    unrecorded: Vec<Attempted>,
}

impl Deliverer {
    pub fn new(db: Db, egress: Egress, settings: Arc<WebhookSettings>) -> Self {
        let per_database = DatabaseShares::new(
            settings.concurrency_per_database,
            settings.attempts_per_database_per_minute,
        );
        Deliverer {
            db,
            egress,
            per_database,
            settings,
            attempts: JoinSet::new(),
            tasks: HashMap::new(),
            per_webhook: HashMap::new(),
            unrecorded: Vec::new(),
        }
    }

    /// Attempts in flight.
    pub fn in_flight(&self) -> usize {
        self.attempts.len()
    }

    /// Attempts that may start now: `WEBHOOK_CONCURRENCY` less those in
    /// flight for under [`SLOW_AFTER`], within [`SLOW_CEILING`] times it in
    /// all. An attempt waiting on a slow or dead receiver stops counting
    /// against the first limit, so a few dead receivers (each holding at
    /// most its webhook's cap) never starve the others.
    fn free_slots(&self) -> usize {
        let now = Instant::now();
        let fast = self
            .tasks
            .values()
            .filter(|t| now.duration_since(t.started) < SLOW_AFTER)
            .count();
        let ceiling = self.settings.concurrency.saturating_mul(SLOW_CEILING);
        self.settings
            .concurrency
            .saturating_sub(fast)
            .min(ceiling.saturating_sub(self.attempts.len()))
    }

    /// With no free slot, how long until an attempt turns slow (and frees
    /// one); otherwise [`TICK`].
    fn until_slot_frees(&self) -> Duration {
        if self.free_slots() > 0 {
            return TICK;
        }
        let now = Instant::now();
        self.tasks
            .values()
            .map(|t| (t.started + SLOW_AFTER).saturating_duration_since(now))
            .filter(|left| !left.is_zero())
            .min()
            .unwrap_or(TICK)
            .min(TICK)
    }

    async fn run(mut self, wake: Arc<Notify>) {
        loop {
            let wait = match self.step().await {
                // Every free slot was filled and one is free again: more
                // may be due, claim again at once.
                Ok(round) if round.filled() && self.free_slots() > 0 => continue,
                Ok(round) if round.claimed > 0 => TICK,
                Ok(_) => self.until_next_due().await,
                Err(e) => {
                    tracing::warn!(error = %e, "webhook deliverer: database step failed");
                    BACKOFF
                }
            };
            let wait = wait.min(self.until_slot_frees());
            let joined = tokio::select! {
                _ = wake.notified() => None,
                joined = self.attempts.join_next_with_id(), if !self.attempts.is_empty() => joined,
                _ = tokio::time::sleep(wait) => None,
            };
            if let Some(joined) = joined {
                self.finished(joined);
            }
        }
    }

    /// One round: records what finished, then claims and starts what is
    /// due.
    pub async fn step(&mut self) -> ApiResult<Round> {
        while let Some(joined) = self.attempts.try_join_next_with_id() {
            self.finished(joined);
        }
        self.record().await?;
        let free = self.free_slots();
        if free == 0 {
            return Ok(Round { free, claimed: 0 });
        }
        let claimed = self.claim(free).await?;
        let round = Round {
            free,
            claimed: claimed.len(),
        };
        for row in claimed {
            self.start(row);
        }
        Ok(round)
    }

    /// Waits until every attempt in flight has finished and is recorded
    /// (tests drive the loop with [`Deliverer::step`] and this).
    pub async fn settle(&mut self) -> ApiResult<()> {
        while let Some(joined) = self.attempts.join_next_with_id().await {
            self.finished(joined);
        }
        self.record().await
    }

    async fn claim(&mut self, wanted: usize) -> ApiResult<Vec<Claimed>> {
        let (busy_webhooks, busy_counts) = self
            .per_webhook
            .iter()
            .map(|(w, n)| (w.clone(), *n))
            .unzip();
        let count = |n: usize| i32::try_from(n).unwrap_or(i32::MAX);
        let (databases, database_rooms) = self
            .per_database
            .rooms(Instant::now())
            .into_iter()
            .map(|(d, room)| (d, count(room)))
            .unzip();
        let limits = ClaimLimits {
            rows: i64::try_from(wanted).unwrap_or(i64::MAX),
            per_webhook: count(self.settings.concurrency_per_webhook),
            busy_webhooks,
            busy_counts,
            per_database: count(self.per_database.fresh_room()),
            databases,
            database_rooms,
            lease: self.settings.timeout + LEASE_MARGIN,
        };
        self.db
            .measured(DbOp::ClaimDeliveries, async {
                let client = self.db.deliverer_client().await?;
                Ok(deliveries::claim(&client, &limits).await?)
            })
            .await
    }

    fn start(&mut self, row: Claimed) {
        let started = Instant::now();
        *self.per_webhook.entry(row.webhook_id.clone()).or_default() += 1;
        self.per_database.started(&row.database_id, started);
        let task = Task {
            webhook_id: row.webhook_id.clone(),
            database_id: row.database_id.clone(),
            started,
        };
        let egress = self.egress.clone();
        let settings = self.settings.clone();
        let handle = self
            .attempts
            .spawn(async move { attempt(&egress, &settings, row).await });
        self.tasks.insert(handle.id(), task);
    }

    fn finished(&mut self, joined: Result<(Id, Attempted), tokio::task::JoinError>) {
        let id = match &joined {
            Ok((id, _)) => *id,
            Err(e) => e.id(),
        };
        if let Some(task) = self.tasks.remove(&id) {
            if let Some(n) = self.per_webhook.get_mut(&task.webhook_id) {
                *n -= 1;
                if *n <= 0 {
                    self.per_webhook.remove(&task.webhook_id);
                }
            }
            self.per_database.finished(&task.database_id);
        }
        match joined {
            Ok((_, done)) => {
                crate::metrics::webhook_attempt(&done.after);
                self.unrecorded.push(done)
            }
            // Its row is claimed again when the lease ends.
            Err(e) => tracing::error!(error = %e, "webhook delivery attempt task failed"),
        }
    }

    /// Records finished attempts; kept for the next round if the database
    /// fails (their rows stay leased meanwhile). The write fence is in the
    /// statement ([`deliveries::record_attempts`]): results of a database
    /// fenced or moved away meanwhile are dropped, and its new shard sends
    /// those deliveries again when their lease ends (at least once).
    async fn record(&mut self) -> ApiResult<()> {
        while !self.unrecorded.is_empty() {
            let n = self.unrecorded.len().min(RECORD_BATCH);
            let batch = &self.unrecorded[..n];
            self.db
                .measured(DbOp::RecordAttempts, async {
                    let mut client = self.db.deliverer_client().await?;
                    let paused = transaction_on(&mut client, async |tx| {
                        let paused = deliveries::record_attempts(tx, batch).await?;
                        for database_id in &paused {
                            bump_schema_version(tx, database_id).await?;
                        }
                        Ok(paused)
                    })
                    .await?;
                    if !paused.is_empty() {
                        tracing::warn!(
                            databases = ?paused,
                            "webhooks paused after {} consecutive exhausted deliveries",
                            deliveries::AUTO_PAUSE_AFTER
                        );
                    }
                    Ok(())
                })
                .await?;
            self.unrecorded.drain(..n);
        }
        Ok(())
    }

    /// How long to sleep when nothing was due: until the next row falls
    /// due, at most [`TICK`].
    async fn until_next_due(&self) -> Duration {
        let next = self
            .db
            .measured(DbOp::NextDelivery, async {
                let client = self.db.deliverer_client().await?;
                Ok(deliveries::next_due(&client).await?)
            })
            .await;
        match next {
            Ok(Some(at)) => (at - Utc::now()).to_std().unwrap_or_default().min(TICK),
            Ok(None) => TICK,
            Err(e) => {
                tracing::warn!(error = %e, "webhook deliverer: next due time unknown");
                TICK
            }
        }
    }
}

/// An attempt in flight: whose slots it holds, since when.
struct Task {
    webhook_id: String,
    database_id: String,
    started: Instant,
}

/// One attempt of a claimed row and where it leaves the delivery.
async fn attempt(egress: &Egress, settings: &WebhookSettings, row: Claimed) -> Attempted {
    let started_at = Utc::now();
    let outcome = send::send(
        egress,
        settings.timeout,
        Request {
            url: &row.url,
            secret: &row.secret.0,
            delivery_id: &row.id,
            attempt: row.attempt,
            body: &row.body,
        },
    )
    .await;
    let after = after_attempt(outcome.succeeded(), row.attempt, &settings.retry_delays);
    Attempted {
        status: outcome.status_code(),
        duration_ms: outcome.duration_ms,
        response_body: without_nul(outcome.response_body),
        error: outcome.error.map(without_nul),
        id: row.id,
        webhook_id: row.webhook_id,
        attempt: row.attempt,
        after,
        started_at,
    }
}

/// Success, or the retry schedule: attempt `n` (from 1) failing waits
/// `retry_delays[n - 1]`; with no delay left the delivery is exhausted.
pub fn after_attempt(succeeded: bool, attempt: i32, retry_delays: &[Duration]) -> After {
    if succeeded {
        return After::Succeeded;
    }
    let index = usize::try_from(attempt - 1).unwrap_or(usize::MAX);
    match retry_delays.get(index) {
        Some(delay) => After::RetryIn(*delay),
        None => After::Exhausted,
    }
}

/// PostgreSQL text cannot hold NUL; a reply may.
fn without_nul(text: String) -> String {
    if text.contains('\0') {
        text.replace('\0', "\u{fffd}")
    } else {
        text
    }
}

/// Keeps a `LISTEN webhook_deliveries` session open, waking the deliverer
/// on every notification (and once after each reconnect, for what it
/// missed). Reopens the session when it drops.
async fn listen(db: Db, wake: Arc<Notify>) {
    let connect = || db.dedicated_session();
    service_kit::listen::keep_listening(
        "webhook deliverer",
        deliveries::CHANNEL,
        connect,
        wake,
        BACKOFF,
    )
    .await
}

/// One pruning pass (part C: finished deliveries older than 30 days go,
/// the latest 200 of each webhook stay); returns how many rows went.
pub async fn prune(db: &Db) -> ApiResult<u64> {
    db.measured(DbOp::PruneDeliveries, async {
        let client = db.maintenance_client().await?;
        let cutoff = Utc::now()
            - chrono::Duration::from_std(RETENTION).unwrap_or(chrono::Duration::days(30));
        Ok(deliveries::prune(&client, cutoff, KEEP_PER_WEBHOOK).await?)
    })
    .await
}

async fn prune_every(db: Db, interval: Duration) {
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        match prune(&db).await {
            Ok(0) => {}
            Ok(n) => tracing::info!(removed = n, "delivery log pruned"),
            Err(e) => tracing::warn!(error = %e, "delivery log pruning failed"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_schedule_retries_then_exhausts() {
        let delays = [10, 60, 300].map(Duration::from_secs);
        assert_eq!(after_attempt(true, 1, &delays), After::Succeeded);
        assert_eq!(after_attempt(true, 4, &delays), After::Succeeded);
        assert_eq!(
            after_attempt(false, 1, &delays),
            After::RetryIn(Duration::from_secs(10))
        );
        assert_eq!(
            after_attempt(false, 3, &delays),
            After::RetryIn(Duration::from_secs(300))
        );
        assert_eq!(after_attempt(false, 4, &delays), After::Exhausted);
        assert_eq!(after_attempt(false, 1, &[]), After::Exhausted);
    }

    #[test]
    fn nul_is_replaced() {
        assert_eq!(without_nul("a\0b".into()), "a\u{fffd}b");
        assert_eq!(without_nul("ab".into()), "ab");
    }
}
