//! `catching_up`: a probe marker is written on the source and timed until
//! the target has it; once the replication delay fits a quarter of the
//! pause budget, the move goes to cutover. A slot lost to a failover of
//! the source aborts the move ([`super::slot_check`]).

use std::time::Duration;

use anyhow::Context;
use tokio::time::Instant;
use tokio_postgres::GenericClient;

use super::admin::Admin;
use super::context::{fatal, Ctx};
use super::{replication, shard_catalog, slot_check};
use crate::catalog::moves;

/// Longest wait for one probe before it is written again.
const PROBE_TIMEOUT: Duration = Duration::from_secs(30);
/// Pause between probes that did not fit.
const PROBE_PAUSE: Duration = Duration::from_millis(200);

/// A fresh marker value (`kind:random`).
pub fn new_marker(kind: &str) -> String {
    format!("{kind}:{}", cluster_protocol::ids::random_token(16))
}

/// Polls the target every `poll` until it holds `marker` or `until` passes.
pub async fn wait_marker(
    target: &impl GenericClient,
    database_id: &str,
    marker: &str,
    poll: Duration,
    until: Instant,
) -> anyhow::Result<bool> {
    loop {
        if shard_catalog::marker(target, database_id).await?.as_deref() == Some(marker) {
            return Ok(true);
        }
        if Instant::now() >= until {
            return Ok(false);
        }
        tokio::time::sleep(poll).await;
    }
}

/// Returns true when the delay fits, false when an abort was requested.
pub async fn catch_up(ctx: &Ctx) -> anyhow::Result<bool> {
    ctx.delay().await;
    let source = ctx.source().await?;
    let target = ctx.target().await?;
    until_fits(ctx, &source, &target).await
}

/// Probes until the replication delay fits a quarter of the pause budget;
/// false when an abort was requested. The cutover runs it again after the
/// verification, whose reads slow the target's replay on a busy machine,
/// so that the backlog is replayed before the pause, not inside it.
pub async fn until_fits(ctx: &Ctx, source: &Admin, target: &Admin) -> anyhow::Result<bool> {
    let fits = ctx.budget / 4;
    loop {
        if ctx.abort_requested().await? {
            return Ok(false);
        }
        slot_check::ensure(ctx, source, target).await?;
        let marker = new_marker("probe");
        if shard_catalog::set_marker(&**source, &ctx.database_id, &marker).await? == 0 {
            return Err(fatal(format!(
                "the source shard {} lost database {}'s row",
                ctx.from.name, ctx.database_id
            )));
        }
        let written = Instant::now();
        let seen = wait_marker(
            &**target,
            &ctx.database_id,
            &marker,
            ctx.knobs.poll,
            written + PROBE_TIMEOUT,
        )
        .await?;
        let delay = written.elapsed();
        let lag = replication::lag_bytes(&**source, &ctx.name).await?;
        moves::set_lag(&**ctx.catalog().await?, &ctx.id, lag)
            .await
            .context("record lag")?;
        if seen && delay <= fits {
            return Ok(true);
        }
        tracing::debug!(move_id = ctx.id, ?delay, seen, "mover: catching up");
        tokio::time::sleep(PROBE_PAUSE).await;
    }
}
