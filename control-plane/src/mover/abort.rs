//! `aborted`, from any state before the flip: the source serves as before
//! (`owned`), the hold is cleared, the target's placement, the replication
//! and the target's copy are dropped, and the move ends with its reason.
//! Each part is idempotent, so a failed abort is simply run again.

use cluster_protocol::control::MoveState;

use super::copy::{drop_target_copy, teardown};
use super::driver::Ctx;
use super::shard_catalog;
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
