//! `cleanup`, after the flip: wait (bounded) until every live router has
//! acknowledged the new epoch, republishing the invalidation every second;
//! drop the replication; drop the source's placement and copy; `done`.

use std::collections::HashMap;
use std::time::Duration;

use cluster_protocol::control::redis_keys::ROUTER_LIVE_MS;
use cluster_protocol::control::MoveState;
use tokio::time::Instant;

use super::context::Ctx;
use super::copy::teardown;
use super::shard_catalog;
use crate::catalog::moves;

/// How often the acknowledgements are read.
const ACK_POLL: Duration = Duration::from_millis(50);
/// How often the invalidation is published again while waiting.
const REPUBLISH_EVERY: Duration = Duration::from_secs(1);
/// How long routers' acknowledgements of a database are kept.
const ACKS_TTL_SECS: i64 = 3600;

/// Whether every live router acknowledged `epoch` (or a later one).
pub fn converged(live: &[String], acks: &HashMap<String, i64>, epoch: i64) -> bool {
    live.iter()
        .all(|r| acks.get(r).is_some_and(|acked| *acked >= epoch))
}

pub async fn run(ctx: &Ctx, m: &moves::MoveRow) -> anyhow::Result<()> {
    let new_epoch = m
        .new_epoch
        .ok_or_else(|| anyhow::anyhow!("move {} is in cleanup without the flip's epoch", ctx.id))?;
    if m.api.convergence_ms.is_none() {
        let convergence = wait_for_routers(ctx, new_epoch, m.flipped_at).await;
        let c = ctx.catalog().await?;
        moves::set_convergence(&**c, &ctx.id, convergence).await?;
    }
    let source = ctx.source().await?;
    let target = ctx.target().await?;
    teardown(ctx, &source, &target).await?;
    drop(target);

    let mut source = source;
    let placed = ctx.placed_on().await?;
    if placed == ctx.from.name {
        anyhow::bail!(
            "refusing to drop database {} on shard {}: the catalog places it there",
            ctx.database_id,
            ctx.from.name
        );
    }
    shard_catalog::drop_copy(&mut source.client, &ctx.database_id).await?;
    let c = ctx.catalog().await?;
    moves::finish(&**c, &ctx.id, MoveState::Done, None).await?;
    tracing::info!(
        move_id = ctx.id,
        database_id = ctx.database_id,
        "mover: done"
    );
    Ok(())
}

/// Milliseconds from the flip until every live router acknowledged
/// `epoch`; `None` when `MOVE_ACK_TIMEOUT_MS` passed first (a warning).
async fn wait_for_routers(
    ctx: &Ctx,
    epoch: i64,
    flipped_at: Option<chrono::DateTime<chrono::Utc>>,
) -> Option<i32> {
    let redis = &ctx.state.redis;
    let start = Instant::now();
    let mut published = Instant::now();
    let mut last_error = None;
    loop {
        let since = chrono::Utc::now().timestamp_millis()
            - i64::try_from(ROUTER_LIVE_MS).unwrap_or(i64::MAX);
        let read = async {
            let live = redis.live_routers(since).await?;
            let acks = redis.placement_acks(&ctx.database_id).await?;
            anyhow::Ok((live, acks))
        };
        match read.await {
            Ok((live, acks)) if converged(&live, &acks, epoch) => {
                let _ = redis.expire_acks(&ctx.database_id, ACKS_TTL_SECS).await;
                let since_flip = flipped_at
                    .map(|f| (chrono::Utc::now() - f).num_milliseconds())
                    .unwrap_or_else(|| i64::try_from(start.elapsed().as_millis()).unwrap_or(0));
                return Some(i32::try_from(since_flip.max(0)).unwrap_or(i32::MAX));
            }
            Ok(_) => {}
            Err(e) => last_error = Some(format!("{e:#}")),
        }
        if start.elapsed() >= ctx.knobs.ack_timeout {
            tracing::warn!(
                move_id = ctx.id,
                database_id = ctx.database_id,
                epoch,
                redis_error = last_error,
                "mover: not every live router acknowledged the new placement in time; dropping the old copy anyway"
            );
            return None;
        }
        if published.elapsed() >= REPUBLISH_EVERY {
            redis.announce_placement(&ctx.database_id).await;
            published = Instant::now();
        }
        tokio::time::sleep(ACK_POLL).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_live_router_must_have_the_epoch() {
        let live = vec!["r1".to_string(), "r2".to_string()];
        let mut acks = HashMap::from([("r1".to_string(), 3)]);
        assert!(!converged(&live, &acks, 3));
        acks.insert("r2".into(), 2);
        assert!(!converged(&live, &acks, 3));
        acks.insert("r2".into(), 4);
        assert!(converged(&live, &acks, 3));
        assert!(converged(&[], &HashMap::new(), 3));
        acks.insert("gone".into(), 1);
        assert!(converged(&live, &acks, 3));
    }
}
