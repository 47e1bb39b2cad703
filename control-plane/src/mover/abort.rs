//! `aborted`, from any state before the flip: the source serves as before
//! (`owned`), the hold is cleared, the target's placement, the replication
//! and the target's copy are dropped, and the move ends with its reason.
//! Each part is idempotent, so a failed abort is simply run again.
//!
//! The source's side of the replication (the move's slot and publication)
//! goes before the target is even contacted: a slot holds the source's WAL
//! for as long as it exists, and an unreachable target must not keep it.

use cluster_protocol::control::MoveState;

use super::admin::Admin;
use super::context::Ctx;
use super::copy::{drop_target_copy, teardown};
use super::{replication, shard_catalog};
use crate::catalog::moves;

pub async fn run(ctx: &Ctx, m: &moves::MoveRow) -> anyhow::Result<()> {
    if ctx.placed_on().await? == ctx.to.name {
        anyhow::bail!(
            "move {} cannot be aborted: the catalog already places the database on {}",
            ctx.id,
            ctx.to.name
        );
    }
    let reason = m
        .abort_reason
        .clone()
        .unwrap_or_else(|| "aborted".to_string());
    let source = ctx.source().await?;
    shard_catalog::unfence(&*source, &ctx.database_id, "owned").await?;
    moves::clear_hold(&**ctx.catalog().await?, &ctx.database_id).await?;
    ctx.state.redis.announce_placement(&ctx.database_id).await;
    drop_source_side(ctx, &source).await?;

    let mut target = ctx.target().await?;
    shard_catalog::delete_placement(&*target, &ctx.database_id).await?;
    teardown(ctx, &source, &target).await?;
    drop_target_copy(ctx, &mut target).await?;
    moves::finish(
        &**ctx.catalog().await?,
        &ctx.id,
        MoveState::Aborted,
        Some(&reason),
    )
    .await?;
    tracing::info!(
        move_id = ctx.id,
        database_id = ctx.database_id,
        reason,
        "mover: aborted"
    );
    Ok(())
}

/// Drops the move's slot and publication on the source, whatever state the
/// target is in. The table-sync slots of a subscription dropped mid-copy
/// are named by the subscription's oid, known only to the target: they go
/// with the rest of the teardown once the target answers.
async fn drop_source_side(ctx: &Ctx, source: &Admin) -> anyhow::Result<()> {
    replication::drop_slots(&**source, &ctx.name, None).await?;
    replication::drop_publication(&**source, &ctx.name).await
}
