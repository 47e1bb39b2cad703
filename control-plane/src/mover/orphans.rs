//! The orphan sweep: any subscription, publication or slot named `tmv_%`
//! on a shard instance that no live step of its move needs is dropped (a
//! slot left behind keeps WAL on the source until its disk fills). That is
//! every object of a move that is finished or unknown, the slot and
//! publication of a move being aborted (its subscription is the abort's
//! own to drop: only the target knows the table-sync slots it names), and
//! an unfinished move's objects on the wrong shard (a slot or publication
//! anywhere but on its source, a subscription anywhere but on its target).
//! Run when the control plane starts, after every move, and every
//! `ORPHAN_SWEEP_INTERVAL`.

use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet};

use anyhow::Context;

use super::{admin, replication, sql};
use crate::catalog::moves::{self, MoveRow};
use crate::catalog::shards;
use crate::AppState;

/// Where a mover object lives while its move needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// A subscription: on the move's target.
    Target,
    /// A slot or publication: on the move's source.
    Source,
}

/// Whether an object of move `m` (`None`: the catalog does not know the
/// move) found on shard `shard` may be dropped.
pub fn is_orphan(m: Option<&MoveRow>, shard: &str, side: Side) -> bool {
    let Some(m) = m else {
        return true;
    };
    if m.api.state.is_finished() || (m.abort_requested && side == Side::Source) {
        return true;
    }
    match side {
        Side::Target => shard != m.api.to,
        Side::Source => shard != m.api.from,
    }
}

/// Drops every orphan on every registered shard; a shard that cannot be
/// reached is skipped with a warning (the next sweep tries again).
pub async fn sweep(state: &AppState) -> anyhow::Result<()> {
    let catalog = state.session().await.context("catalog connection")?;
    let all = shards::list(&**catalog).await?;
    let mut found = Vec::new();
    for shard in &all {
        match admin::connect(shard, &state.moves).await {
            Ok(c) => match replication::mover_objects(&*c).await {
                Ok(objects) => found.push((c, objects)),
                Err(e) => warn(&shard.name, &e),
            },
            Err(e) => warn(&shard.name, &e),
        }
    }
    // Every move named by an object, read once: `None` when unknown.
    let mut known: HashMap<String, Option<MoveRow>> = HashMap::new();
    for (_, objects) in &found {
        let names = objects
            .subscriptions
            .iter()
            .chain(&objects.slots)
            .chain(&objects.publications);
        for move_id in names.filter_map(|n| sql::move_of_object(n)) {
            if let Entry::Vacant(slot) = known.entry(move_id) {
                let m = moves::get(&**catalog, slot.key()).await?;
                slot.insert(m);
            }
        }
    }
    drop(catalog);
    let orphan = |name: &str, shard: &str, side: Side| match sql::move_of_object(name) {
        // `tmv_` but not a name the mover makes: not ours to judge.
        None => false,
        Some(id) => known
            .get(&id)
            .is_some_and(|m| is_orphan(m.as_ref(), shard, side)),
    };
    // Subscriptions first, everywhere: their slots can only go after.
    let mut sub_oids = Vec::new();
    for (c, objects) in &found {
        for name in &objects.subscriptions {
            if orphan(name, &c.shard, Side::Target) {
                tracing::info!(
                    shard = c.shard,
                    name,
                    "mover: dropping an orphan subscription"
                );
                if let Some(oid) = replication::drop_subscription(&**c, name).await? {
                    sub_oids.push((name.clone(), oid));
                }
            }
        }
    }
    for (c, objects) in &found {
        let slots: HashSet<&String> = objects
            .slots
            .iter()
            .filter(|name| orphan(name, &c.shard, Side::Source))
            .collect();
        for name in slots {
            tracing::info!(shard = c.shard, name, "mover: dropping an orphan slot");
            let oid = sub_oids.iter().find(|(n, _)| n == name).map(|(_, o)| *o);
            replication::drop_slots(&**c, name, oid).await?;
        }
        for name in &objects.publications {
            if orphan(name, &c.shard, Side::Source) {
                tracing::info!(
                    shard = c.shard,
                    name,
                    "mover: dropping an orphan publication"
                );
                replication::drop_publication(&**c, name).await?;
            }
        }
    }
    Ok(())
}

fn warn(shard: &str, e: &anyhow::Error) {
    tracing::warn!(
        shard,
        error = format!("{e:#}"),
        "mover: orphan sweep skipped a shard"
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use cluster_protocol::control::{Move, MoveState};

    fn a_move(state: MoveState, abort_requested: bool) -> MoveRow {
        let now = chrono::Utc::now();
        let api: Move = serde_json::from_value(serde_json::json!({
            "id": "mov_AbCdEf012345", "database_id": "db_Ab3dZ1234567",
            "from": "shard-1", "to": "shard-2", "state": state.as_str(),
            "created_at": now, "updated_at": now, "pause_ms": null, "error": null,
        }))
        .expect("a move object");
        MoveRow {
            api,
            abort_requested,
            abort_reason: None,
            step_delay_ms: 0,
            new_epoch: None,
            flipped_at: None,
        }
    }

    #[test]
    fn unknown_finished_and_aborting_moves_leave_nothing() {
        assert!(is_orphan(None, "shard-1", Side::Source));
        for state in [MoveState::Done, MoveState::Aborted] {
            let m = a_move(state, false);
            assert!(is_orphan(Some(&m), "shard-1", Side::Source));
            assert!(is_orphan(Some(&m), "shard-2", Side::Target));
        }
        // An abort requested while the target is unreachable: the source's
        // slot and publication go at once; the subscription is the abort's.
        for state in [
            MoveState::Copying,
            MoveState::CatchingUp,
            MoveState::Cutover,
        ] {
            let m = a_move(state, true);
            assert!(is_orphan(Some(&m), "shard-1", Side::Source), "{state:?}");
            assert!(!is_orphan(Some(&m), "shard-2", Side::Target), "{state:?}");
        }
    }

    #[test]
    fn a_live_move_keeps_its_objects_on_the_right_shards_only() {
        for state in [
            MoveState::Pending,
            MoveState::Copying,
            MoveState::CatchingUp,
            MoveState::Cutover,
            MoveState::Cleanup,
        ] {
            let m = a_move(state, false);
            assert!(!is_orphan(Some(&m), "shard-1", Side::Source), "{state:?}");
            assert!(!is_orphan(Some(&m), "shard-2", Side::Target), "{state:?}");
            assert!(is_orphan(Some(&m), "shard-2", Side::Source), "{state:?}");
            assert!(is_orphan(Some(&m), "shard-3", Side::Source), "{state:?}");
            assert!(is_orphan(Some(&m), "shard-1", Side::Target), "{state:?}");
        }
    }
}
