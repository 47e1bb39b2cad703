//! The orphan sweep: any subscription, publication or slot named `tmv_%`
//! on a shard instance whose move is finished or unknown is dropped (a slot
//! left behind keeps WAL on the source until its disk fills). Run when the
//! control plane starts and after every move.

use std::collections::HashSet;

use anyhow::Context;

use super::{admin, replication, sql};
use crate::catalog::{moves, shards};
use crate::AppState;

/// Whether objects named for `move_id` may be dropped.
async fn is_orphan(state: &AppState, name: &str) -> anyhow::Result<bool> {
    let Some(move_id) = sql::move_of_object(name) else {
        // `tmv_` but not a name the mover makes: not ours to judge.
        return Ok(false);
    };
    let client = state.session().await.context("catalog connection")?;
    Ok(match moves::get(&**client, &move_id).await? {
        None => true,
        Some(m) => m.api.state.is_finished(),
    })
}

/// Drops every orphan on every registered shard; a shard that cannot be
/// reached is skipped with a warning (the next sweep tries again).
pub async fn sweep(state: &AppState) -> anyhow::Result<()> {
    let all = shards::list(&**state.session().await.context("catalog connection")?).await?;
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
    // Subscriptions first, everywhere: their slots can only go after.
    let mut sub_oids = Vec::new();
    for (c, objects) in &found {
        for name in &objects.subscriptions {
            if is_orphan(state, name).await? {
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
        let mut slots: HashSet<&String> = HashSet::new();
        for name in &objects.slots {
            if is_orphan(state, name).await? {
                slots.insert(name);
            }
        }
        for name in slots {
            tracing::info!(shard = c.shard, name, "mover: dropping an orphan slot");
            let oid = sub_oids.iter().find(|(n, _)| n == name).map(|(_, o)| *o);
            replication::drop_slots(&**c, name, oid).await?;
        }
        for name in &objects.publications {
            if is_orphan(state, name).await? {
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
