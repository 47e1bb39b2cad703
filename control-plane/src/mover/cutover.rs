//! `cutover`, in the order of docs/moves.md: (e) verification first, at a
//! frozen point of its own (a short pause of its own, then the counts on
//! snapshots while requests flow: [`frozen_verify`]), the replication
//! backlog of that time replayed (probes, as in `catching_up`), then (a) hold, (b)
//! fence with the marker, (c) the fence LSN, (d) the target polled for the
//! marker, (f) sequences, (g) the target's placement, (h) the flip in one
//! catalog transaction, (i) the invalidation. Over budget before (h), the
//! attempt is rolled back and the move returns to `catching_up`.

use anyhow::Context;
use cluster_protocol::control::MoveState;
use tokio::time::Instant;

use super::admin::Admin;
use super::catchup::{new_marker, until_fits, wait_marker};
use super::context::{fatal, Ctx};
use super::freeze::{fence, hold_ms, ms};
use super::frozen_verify::{self, Verified};
use super::{schema_copy, shard_catalog, slot_check};
use crate::catalog::moves;

enum Outcome {
    Flipped,
    /// Rolled back and retried later (the reason is shown).
    OverBudget(String),
    /// The copies differ: the move is aborted.
    Mismatch(String),
    /// `moves abort` came first: rolled back, the driver then aborts.
    AbortRequested,
}

/// Runs attempt `attempts` of the cutover (the move is in `cutover`).
pub async fn run(ctx: &Ctx, attempts: i32) -> anyhow::Result<()> {
    match attempt(ctx).await {
        Ok(Outcome::Flipped) => Ok(()),
        Ok(Outcome::OverBudget(why)) => {
            rollback(ctx).await?;
            after_failed_attempt(ctx, attempts, &why).await
        }
        Ok(Outcome::AbortRequested) => rollback(ctx).await,
        Ok(Outcome::Mismatch(why)) => {
            rollback(ctx).await?;
            moves::request_abort(&**ctx.catalog().await?, &ctx.id, &why).await
        }
        Err(e) => {
            if let Err(r) = rollback(ctx).await {
                tracing::warn!(
                    move_id = ctx.id,
                    error = format!("{r:#}"),
                    "mover: rollback failed; retried"
                );
            }
            Err(e)
        }
    }
}

/// After a rolled back attempt: back to `catching_up`, or aborted once the
/// attempts are used up.
pub async fn after_failed_attempt(ctx: &Ctx, attempts: i32, why: &str) -> anyhow::Result<()> {
    let catalog = ctx.catalog().await?;
    if attempts >= ctx.knobs.cutover_attempts {
        let reason = format!(
            "cutover did not fit the pause budget of {} ms in {attempts} attempts (last: {why})",
            ctx.budget.as_millis()
        );
        return moves::request_abort(&**catalog, &ctx.id, &reason).await;
    }
    moves::set_state(&**catalog, &ctx.id, MoveState::CatchingUp).await?;
    moves::set_error(
        &**catalog,
        &ctx.id,
        Some(&format!("cutover attempt {attempts} rolled back: {why}")),
    )
    .await
}

async fn attempt(ctx: &Ctx) -> anyhow::Result<Outcome> {
    if ctx.abort_requested().await? {
        return Ok(Outcome::AbortRequested);
    }
    let mut source = ctx.source().await?;
    let target = ctx.target().await?;
    let copy = schema_copy::introspect(&*source, &ctx.database_id).await?;
    let identity = schema_copy::identity_columns(&ctx.database_id, &copy)?;
    let (shard, epoch) = moves::placement(&**ctx.catalog().await?, &ctx.database_id)
        .await?
        .context("database vanished from the catalog")?;
    if shard != ctx.from.name {
        return Err(fatal(format!(
            "the catalog places the database on {shard}, not on the move's source {}",
            ctx.from.name
        )));
    }
    let new_epoch = epoch + 1;

    // (e) verification, at a frozen point of its own before this pause
    // (frozen_verify: counting every row does not fit a pause).
    match frozen_verify::run(ctx, &mut source, &copy).await? {
        Verified::Equal => {}
        Verified::Mismatch(why) => return Ok(Outcome::Mismatch(why)),
        Verified::OverBudget(why) => return Ok(Outcome::OverBudget(why)),
    }
    if !until_fits(ctx, &source, &target).await? {
        return Ok(Outcome::AbortRequested);
    }

    // (a) routers hold the database's requests.
    let start = Instant::now();
    let write_pause = crate::metrics::Pause::start("cutover");
    let deadline = start + ctx.budget;
    moves::set_hold(&**ctx.catalog().await?, &ctx.database_id, hold_ms(ctx)).await?;
    ctx.state.redis.announce_placement(&ctx.database_id).await;

    // (b) the fence; (c) only then the WAL position.
    let marker = new_marker("fence");
    if let Some(why) = fence(ctx, &mut source, &marker, deadline).await? {
        return Ok(Outcome::OverBudget(why));
    }
    let lsn: String = source
        .query_one("SELECT pg_current_wal_lsn()::text", &[])
        .await
        .context("read the fence LSN")?
        .try_get(0)?;
    moves::set_fence_lsn(&**ctx.catalog().await?, &ctx.id, &lsn).await?;
    ctx.delay().await;

    // (d) the target replays up to the marker.
    if !wait_marker(
        &*target,
        &ctx.database_id,
        &marker,
        ctx.knobs.poll,
        deadline,
    )
    .await?
    {
        // A marker that never comes: the source may have failed over and
        // lost the slot (a fatal error: rolled back, then aborted).
        slot_check::ensure(ctx, &source, &target).await?;
        return Ok(Outcome::OverBudget(format!(
            "the target had not replayed the fence (LSN {lsn}) within the budget"
        )));
    }
    // (f) identity sequences; (g) the target's placement.
    copy_sequences(&source, &target, &identity).await?;
    shard_catalog::own(&*target, &ctx.database_id, new_epoch).await?;
    if Instant::now() >= deadline {
        return Ok(Outcome::OverBudget(format!(
            "sequences and placement took the budget ({} ms)",
            ms(start.elapsed())
        )));
    }
    // (h) the flip; (i) the invalidation.
    let pause = i32::try_from(ms(start.elapsed())).unwrap_or(i32::MAX);
    if !flip(ctx, epoch, new_epoch, pause).await? {
        return Ok(Outcome::AbortRequested);
    }
    ctx.state.redis.announce_placement(&ctx.database_id).await;
    write_pause.ended("flipped");
    wake_deliverer(&target).await;
    tracing::info!(
        move_id = ctx.id,
        database_id = ctx.database_id,
        pause_ms = ms(start.elapsed()),
        "mover: flipped"
    );
    Ok(Outcome::Flipped)
}

/// The target's webhook deliverer sleeps until its next due delivery among
/// the databases it served so far: the moved database's pending deliveries
/// wake it now (its `LISTEN` channel). Best effort: its periodic pass finds
/// them otherwise.
async fn wake_deliverer(target: &Admin) {
    const DELIVERER_CHANNEL: &str = "webhook_deliveries";
    if let Err(e) = target
        .execute("SELECT pg_notify($1, '')", &[&DELIVERER_CHANNEL])
        .await
    {
        tracing::warn!(error = %e, "mover: could not wake the target's deliverer");
    }
}

/// Sets each identity sequence on the target to the source's value.
async fn copy_sequences(
    source: &Admin,
    target: &Admin,
    identity: &[(String, String)],
) -> anyhow::Result<()> {
    for (table, column) in identity {
        let value: Option<i64> = source
            .query_one(
                "SELECT pg_sequence_last_value(pg_get_serial_sequence($1, $2)::regclass)",
                &[table, column],
            )
            .await
            .context("read a sequence on the source")?
            .try_get(0)?;
        if let Some(v) = value {
            target
                .execute(
                    "SELECT setval(pg_get_serial_sequence($1, $2), $3, true)",
                    &[table, column, &v],
                )
                .await
                .context("set a sequence on the target")?;
        }
    }
    Ok(())
}

/// One catalog transaction: the database's shard and epoch, the hold
/// cleared, the move in `cleanup`; false (nothing changed) when an abort
/// was requested first. A lost commit reply is checked against the
/// catalog, so a flip that happened is never rolled back.
async fn flip(ctx: &Ctx, epoch: i64, new_epoch: i64, pause_ms: i32) -> anyhow::Result<bool> {
    let result: anyhow::Result<bool> = async {
        let mut client = ctx.catalog().await?;
        let tx = client.transaction().await.context("begin the flip")?;
        let current = moves::placement_for_update(&*tx, &ctx.database_id).await?;
        if current != Some((ctx.from.name.clone(), epoch)) {
            return Err(fatal(format!(
                "the database's placement changed during the cutover: {current:?}"
            )));
        }
        if !moves::set_flipped(&*tx, &ctx.id, pause_ms, new_epoch).await? {
            return Ok(false);
        }
        moves::flip_placement(&*tx, &ctx.database_id, &ctx.to.name, new_epoch).await?;
        tx.commit().await.context("commit the flip")?;
        Ok(true)
    }
    .await;
    match result {
        Err(e) if ctx.placed_on().await.ok().as_deref() == Some(ctx.to.name.as_str()) => {
            tracing::debug!(error = format!("{e:#}"), "mover: the flip committed");
            Ok(true)
        }
        other => other,
    }
}

/// Undoes an attempt that did not flip: the source serves again
/// (`moving`), the hold is cleared and announced, the target's placement
/// goes. Does nothing once the catalog places the database on the target.
pub async fn rollback(ctx: &Ctx) -> anyhow::Result<()> {
    if ctx.placed_on().await? == ctx.to.name {
        return Ok(());
    }
    let source = ctx.source().await?;
    shard_catalog::unfence(&*source, &ctx.database_id, "moving").await?;
    moves::clear_hold(&**ctx.catalog().await?, &ctx.database_id).await?;
    ctx.state.redis.announce_placement(&ctx.database_id).await;
    let target = ctx.target().await?;
    shard_catalog::delete_placement(&*target, &ctx.database_id).await?;
    Ok(())
}
