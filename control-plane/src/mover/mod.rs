//! The mover: the task of `control-plane serve` that drives database moves
//! (docs/moves.md, "Control plane: the move"). It starts `pending` moves
//! when their shards and the cluster have a free slot, and runs one
//! driver per unfinished move, resuming every one after a restart. A
//! driver holds a session advisory lock on its move, so two control planes
//! never drive the same move; slots are handed out under a transaction
//! lock, so together they never exceed `MOVES_PER_SHARD` / `MOVES_MAX`.
//! A driver that ends wakes the loop at once (its slots are free), and
//! the orphan sweep runs in a task of its own, so neither a full cluster's
//! sweep nor the one-second tick holds back the next move.
//!
//! * `driver`: one move's loop, retries and abort requests.
//! * `context`: what every step shares (`Ctx`, `fatal`, `enter`).
//! * `copy`, `catchup`, `cutover`, `cleanup`, `abort`: the states' steps;
//!   `freeze`: the hold and fence that verification and cutover begin with.
//! * `schema_copy` + `ddl`: the tenant schema on the target.
//! * `replication`: publication, subscription, slots; `slot_check`: a
//!   slot lost to a failover of the source aborts the move.
//! * `verify`: counts and sampled checksums before the flip.
//! * `shard_catalog`: placements, markers and copies on shard instances.
//! * `admin`, `sql`: admin connections, quoting and names.
//! * `orphans`: the sweep of `tmv_%` leftovers.

pub mod abort;
pub mod admin;
pub mod catchup;
pub mod cleanup;
pub mod context;
pub mod copy;
pub mod cutover;
pub mod ddl;
pub mod driver;
pub mod freeze;
pub mod frozen_verify;
pub mod orphans;
pub mod replication;
pub mod schema_copy;
pub mod shard_catalog;
pub mod slot_check;
pub mod sql;
pub mod verify;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use cluster_protocol::control::MoveState;
use tokio::task::JoinHandle;

use crate::catalog::moves::{self, MoveRow};
use crate::config::{Secret, ORPHAN_SWEEP_INTERVAL};
use crate::AppState;

/// How often the mover looks for work when nobody wakes it.
const TICK: Duration = Duration::from_secs(1);

/// Moves under way per shard and in the cluster (every unfinished move
/// that is not `pending` holds a slot on both its shards).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Slots {
    per_shard: HashMap<String, usize>,
    total: usize,
}

impl Slots {
    pub fn of(moves: &[MoveRow]) -> Self {
        let mut s = Self::default();
        for m in moves {
            let st = m.api.state;
            if st != MoveState::Pending && !st.is_finished() {
                s.take(&m.api.from, &m.api.to);
            }
        }
        s
    }

    pub fn fits(&self, from: &str, to: &str, per_shard: usize, max: usize) -> bool {
        let used = |s: &str| self.per_shard.get(s).copied().unwrap_or(0);
        self.total < max && used(from) < per_shard && used(to) < per_shard
    }

    pub fn take(&mut self, from: &str, to: &str) {
        *self.per_shard.entry(from.to_string()).or_default() += 1;
        *self.per_shard.entry(to.to_string()).or_default() += 1;
        self.total += 1;
    }
}

/// Starts the mover; it runs until the returned task is aborted.
pub fn spawn(state: AppState, catalog_dsn: Secret) -> JoinHandle<()> {
    tokio::spawn(run(state, Arc::new(catalog_dsn)))
}

async fn run(state: AppState, catalog_dsn: Arc<Secret>) {
    if state.moves.admin_password.is_some() && state.moves.replication_passfile.is_none() {
        tracing::warn!(
            "mover: MOVE_ADMIN_PASSWORD is set but MOVE_REPLICATION_PASSFILE is not: a move's subscription connects to its source without a password (docs/moves.md)"
        );
    }
    if let Err(e) = orphans::sweep(&state).await {
        tracing::warn!(error = format!("{e:#}"), "mover: orphan sweep failed");
    }
    let mut swept = tokio::time::Instant::now();
    let mut sweeping: Option<JoinHandle<()>> = None;
    let mut driving: HashMap<String, JoinHandle<bool>> = HashMap::new();
    let mut sweep_owed = false;
    loop {
        let ended: Vec<String> = driving
            .iter()
            .filter(|(_, h)| h.is_finished())
            .map(|(id, _)| id.clone())
            .collect();
        let mut finished_any = false;
        for id in ended {
            if let Some(h) = driving.remove(&id) {
                finished_any |= h.await.unwrap_or(false);
            }
        }
        sweep_owed |= finished_any || swept.elapsed() >= ORPHAN_SWEEP_INTERVAL;
        // One sweep at a time, off this loop: it visits every shard.
        if sweep_owed && sweeping.as_ref().is_none_or(|h| h.is_finished()) {
            sweep_owed = false;
            swept = tokio::time::Instant::now();
            let s = state.clone();
            sweeping = Some(tokio::spawn(async move {
                if let Err(e) = orphans::sweep(&s).await {
                    tracing::warn!(error = format!("{e:#}"), "mover: orphan sweep failed");
                }
            }));
        }
        if let Err(e) = tick(&state, &catalog_dsn, &mut driving).await {
            tracing::warn!(error = format!("{e:#}"), "mover: could not read the moves");
        }
        tokio::select! {
            _ = state.mover_wake.notified() => {}
            _ = tokio::time::sleep(TICK) => {}
        }
    }
}

/// Starts what fits and makes sure every started move has a driver.
async fn tick(
    state: &AppState,
    catalog_dsn: &Arc<Secret>,
    driving: &mut HashMap<String, JoinHandle<bool>>,
) -> anyhow::Result<()> {
    start_pending(state).await?;
    let client = state.session().await.context("catalog connection")?;
    for m in moves::unfinished(&**client).await? {
        if m.api.state == MoveState::Pending || driving.contains_key(&m.api.id) {
            continue;
        }
        let id = m.api.id.clone();
        let (s, dsn, key) = (state.clone(), catalog_dsn.clone(), id.clone());
        let handle = tokio::spawn(async move {
            let wake = s.mover_wake.clone();
            let finished = match driver::drive(s, dsn, key.clone()).await {
                Ok(finished) => finished,
                Err(e) => {
                    tracing::warn!(
                        move_id = key,
                        error = format!("{e:#}"),
                        "mover: driver stopped"
                    );
                    false
                }
            };
            // Its slots are free: start what waits for them now, not at
            // the next tick.
            if finished {
                wake.notify_one();
            }
            finished
        });
        driving.insert(id, handle);
    }
    Ok(())
}

/// `pending -> copying` for each pending move (oldest first) that fits the
/// slots, decided under a catalog lock so control planes agree.
async fn start_pending(state: &AppState) -> anyhow::Result<()> {
    let mut client = state.session().await.context("catalog connection")?;
    let tx = client.transaction().await.context("begin slot decision")?;
    let unfinished = moves::unfinished(&*tx).await?;
    if !unfinished.iter().any(|m| m.api.state == MoveState::Pending) {
        return Ok(());
    }
    moves::lock_slots(&*tx).await?;
    let unfinished = moves::unfinished(&*tx).await?;
    let mut slots = Slots::of(&unfinished);
    let knobs = &state.moves;
    let now = chrono::Utc::now();
    // A move's test delay applies to `pending` too: it starts only once it
    // has sat there that long (the chaos and abort tests act in `pending`).
    let delay_over = |m: &&moves::MoveRow| {
        now.signed_duration_since(m.api.created_at)
            .num_milliseconds()
            >= i64::from(m.step_delay_ms)
    };
    for m in unfinished
        .iter()
        .filter(|m| m.api.state == MoveState::Pending)
        .filter(delay_over)
    {
        if slots.fits(&m.api.from, &m.api.to, knobs.per_shard, knobs.max)
            && moves::start(&*tx, &m.api.id).await?
        {
            slots.take(&m.api.from, &m.api.to);
            tracing::info!(
                move_id = m.api.id,
                from = m.api.from,
                to = m.api.to,
                "mover: starting"
            );
        }
    }
    tx.commit().await.context("commit slot decision")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_count_both_shards_and_the_cluster() {
        let mut s = Slots::default();
        assert!(s.fits("a", "b", 2, 4));
        s.take("a", "b");
        s.take("a", "c");
        assert!(!s.fits("a", "d", 2, 4), "a is full");
        assert!(!s.fits("d", "a", 2, 4), "a is full as a target too");
        assert!(s.fits("b", "c", 2, 4));
        s.take("b", "c");
        assert!(!s.fits("d", "e", 2, 3), "cluster limit");
        assert!(s.fits("d", "e", 2, 4));
        assert!(!Slots::default().fits("a", "b", 0, 4));
    }
}
