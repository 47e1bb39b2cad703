//! Verification at a frozen point, before the pause that ends in the flip.
//!
//! Counting every row on both sides takes time that grows with the
//! database (a second and more at a million records on a small machine),
//! far over the pause budget, so it cannot run while the routers hold the
//! database's requests. Instead a first short pause freezes the database
//! exactly as the cutover does (hold, fence with a marker, the target
//! replays up to the marker), opens a `REPEATABLE READ` snapshot on each
//! side at that point (both then hold the same rows: the source is fenced,
//! so nothing follows the marker), and lets the source serve again. The
//! counts and samples of [`verify`] then run on the two snapshots while
//! requests flow; a mismatch aborts the move before any flip. The cutover
//! proper follows with its own short pause.

use anyhow::Context;
use tokio::time::Instant;

use super::admin::Admin;
use super::catchup::{new_marker, wait_marker};
use super::context::Ctx;
use super::ddl::SchemaCopy;
use super::freeze;
use super::{shard_catalog, verify};
use crate::catalog::moves;

/// What the frozen-point verification found.
pub enum Verified {
    Equal,
    /// The copies differ (the message names the tables).
    Mismatch(String),
    /// The freeze did not fit the pause budget (the reason).
    OverBudget(String),
}

/// Freezes, snapshots both sides, releases, compares. On `OverBudget` the
/// source may still be fenced and the hold set: the caller rolls back.
pub async fn run(ctx: &Ctx, source: &mut Admin, copy: &SchemaCopy) -> anyhow::Result<Verified> {
    // Sessions of their own for the snapshots, opened before the pause.
    let snap_source = ctx.source().await?;
    let snap_target = ctx.target().await?;
    let target = ctx.target().await?;

    let start = Instant::now();
    let pause = crate::metrics::Pause::start("verify");
    let deadline = start + ctx.budget;
    moves::set_hold(
        &**ctx.catalog().await?,
        &ctx.database_id,
        freeze::hold_ms(ctx),
    )
    .await?;
    ctx.state.redis.announce_placement(&ctx.database_id).await;
    let marker = new_marker("verify");
    if let Some(why) = freeze::fence(ctx, source, &marker, deadline).await? {
        return Ok(Verified::OverBudget(format!("verification: {why}")));
    }
    if !wait_marker(
        &*target,
        &ctx.database_id,
        &marker,
        ctx.knobs.poll,
        deadline,
    )
    .await?
    {
        return Ok(Verified::OverBudget(
            "verification: the target had not replayed the freeze within the budget".into(),
        ));
    }
    for side in [&snap_source, &snap_target] {
        side.batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY; SELECT 1")
            .await
            .context("open a verification snapshot")?;
    }
    release(ctx, source).await?;
    pause.ended("released");
    tracing::info!(
        move_id = ctx.id,
        database_id = ctx.database_id,
        pause_ms = start.elapsed().as_millis() as u64,
        "mover: frozen for verification"
    );

    let compared = verify::verify(&*snap_source, &*snap_target, &ctx.database_id, copy).await?;
    for side in [&snap_source, &snap_target] {
        side.batch_execute("COMMIT")
            .await
            .context("close a verification snapshot")?;
    }
    Ok(match compared {
        Some(mismatch) => Verified::Mismatch(mismatch),
        None => Verified::Equal,
    })
}

/// The source serves again and the routers stop holding.
async fn release(ctx: &Ctx, source: &Admin) -> anyhow::Result<()> {
    shard_catalog::unfence(&**source, &ctx.database_id, "moving").await?;
    moves::clear_hold(&**ctx.catalog().await?, &ctx.database_id).await?;
    ctx.state.redis.announce_placement(&ctx.database_id).await;
    Ok(())
}
