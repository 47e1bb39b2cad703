//! `copying`: the source's placement becomes `moving`; leftovers of an
//! earlier try are dropped; the schema is made on the target; the
//! publication and subscription copy the rows; secondary indexes and
//! statistics follow. Run from its start after any failure or crash.

use std::time::Duration;

use anyhow::Context;

use super::admin::Admin;
use super::catchup::new_marker;
use super::context::{fatal, Ctx};
use super::{admin, replication, schema_copy, shard_catalog, slot_check};
use crate::catalog::moves;

/// How often the copy's progress is read.
const PROGRESS_EVERY: Duration = Duration::from_millis(250);
/// How long marking the source `moving` waits for writers in flight.
const MOVING_LOCK_TIMEOUT: &str = "10s";

/// Returns false when an abort was requested before the copy finished.
pub async fn run(ctx: &Ctx) -> anyhow::Result<bool> {
    let mut source = ctx.source().await?;
    let mut target = ctx.target().await?;
    // A retry after the source failed over: the subscription of the
    // earlier try still names a slot the new primary does not have.
    slot_check::ensure(ctx, &source, &target).await?;
    mark_moving(ctx, &mut source).await?;
    teardown(ctx, &source, &target).await?;
    drop_target_copy(ctx, &mut target).await?;

    let copy = schema_copy::introspect(&*source, &ctx.database_id).await?;
    schema_copy::create_before_copy(&mut target.client, &ctx.database_id, &copy).await?;
    replication::create_publication(&*source, &ctx.name, &ctx.database_id).await?;
    let conninfo = admin::conninfo_literal(&ctx.from.postgres, &ctx.knobs)?;
    replication::create_subscription(&*target, &ctx.name, &conninfo).await?;
    if !wait_copied(ctx, &source, &target).await? {
        return Ok(false);
    }
    schema_copy::create_after_copy(&*target, &ctx.database_id, &copy).await?;
    Ok(true)
}

/// Source placement `owned -> moving` (`FOR UPDATE` first: writers and
/// structural changes in flight finish before it).
async fn mark_moving(ctx: &Ctx, source: &mut Admin) -> anyhow::Result<()> {
    let tx = source
        .client
        .transaction()
        .await
        .context("begin marking the source moving")?;
    tx.batch_execute(&format!("SET LOCAL lock_timeout = '{MOVING_LOCK_TIMEOUT}'"))
        .await
        .context("set lock timeout")?;
    let Some(p) = shard_catalog::lock_placement(&tx, &ctx.database_id).await? else {
        return Err(fatal(format!(
            "shard {} does not serve database {} (no placement row)",
            ctx.from.name, ctx.database_id
        )));
    };
    if p.state != "moving" {
        shard_catalog::set_placement_state(&tx, &ctx.database_id, "moving").await?;
    }
    tx.commit()
        .await
        .context("commit marking the source moving")
}

/// Drops the move's subscription (target), slots and publication (source).
pub async fn teardown(ctx: &Ctx, source: &Admin, target: &Admin) -> anyhow::Result<()> {
    let oid = replication::drop_subscription(&**target, &ctx.name).await?;
    replication::drop_slots(&**source, &ctx.name, oid).await?;
    replication::drop_publication(&**source, &ctx.name).await
}

/// Drops whatever the target holds of the database, unless the catalog
/// places the database there.
pub async fn drop_target_copy(ctx: &Ctx, target: &mut Admin) -> anyhow::Result<()> {
    if ctx.placed_on().await? == ctx.to.name {
        anyhow::bail!(
            "refusing to drop database {} on shard {}: the catalog places it there",
            ctx.database_id,
            ctx.to.name
        );
    }
    shard_catalog::drop_copy(&mut target.client, &ctx.database_id).await
}

/// Waits until every table of the subscription is `ready`, recording the
/// progress; false when an abort was requested meanwhile.
///
/// A table whose initial copy is done becomes `ready` only once the apply
/// worker has received a change past the copy's end. On a source with no
/// other traffic nothing would come, so every round writes a probe marker
/// (a published change to this database's row) on the source.
async fn wait_copied(ctx: &Ctx, source: &Admin, target: &Admin) -> anyhow::Result<bool> {
    let mut errors_before = None;
    loop {
        let (total, ready) = replication::sync_progress(&**target, &ctx.name).await?;
        let catalog = ctx.catalog().await?;
        moves::set_progress(
            &**catalog,
            &ctx.id,
            i32::try_from(total).unwrap_or(i32::MAX),
            i32::try_from(ready).unwrap_or(i32::MAX),
            None,
        )
        .await?;
        if total > 0 && ready == total {
            return Ok(true);
        }
        if ctx.abort_requested().await? {
            return Ok(false);
        }
        slot_check::ensure(ctx, source, target).await?;
        let errors = replication::worker_errors(&**target, &ctx.name).await?;
        let first = *errors_before.get_or_insert(errors);
        if errors > first {
            let shown = format!(
                "the subscription's workers on shard {} failed {} times so far; they retry (see that instance's log)",
                ctx.to.name,
                errors - first
            );
            moves::set_error(&**catalog, &ctx.id, Some(&shown)).await?;
        }
        drop(catalog);
        shard_catalog::set_marker(&**source, &ctx.database_id, &new_marker("copy"))
            .await
            .context("write a probe marker on the source")?;
        tokio::time::sleep(PROGRESS_EVERY).await;
    }
}
