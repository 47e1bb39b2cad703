//! One move's driver: holds the move's session advisory lock on the catalog
//! (so no two control planes drive it), then runs the current state's step
//! until the move is `done` or `aborted`. A step that fails for a
//! transient reason is retried with backoff, its error shown in the move;
//! one that cannot succeed ([`super::context::Fatal`]) asks for the move's
//! abort.

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use cluster_protocol::control::MoveState;

use super::context::{enter, fatal_message, Ctx};
use super::{abort, catchup, cleanup, copy, cutover};
use crate::catalog::moves;
use crate::config::Secret;
use crate::AppState;

const BACKOFF_MIN: Duration = Duration::from_millis(500);
const BACKOFF_MAX: Duration = Duration::from_secs(30);

/// Drives move `id` to its end, unless another control plane drives it;
/// true when this driver saw it finish.
pub async fn drive(state: AppState, catalog_dsn: Arc<Secret>, id: String) -> anyhow::Result<bool> {
    let mut cfg = tokio_postgres::Config::from_str(catalog_dsn.expose())
        .context("parse CONTROL_PLANE_DATABASE_URL")?;
    state.moves.pg_tls.apply(&mut cfg);
    // A lock session to a lost catalog primary fails fast; the move is
    // picked up again on a session to the new one.
    service_kit::pg_failover::harden(&mut cfg);
    let (lock, conn) = cfg
        .connect(state.moves.pg_tls.clone())
        .await
        .context("open the driver's catalog session")?;
    let conn = tokio::spawn(conn);
    let lock = Arc::new(lock);
    let result = drive_locked(&state, lock.clone(), &id).await;
    drop(lock);
    conn.abort();
    result
}

async fn drive_locked(
    state: &AppState,
    lock: Arc<tokio_postgres::Client>,
    id: &str,
) -> anyhow::Result<bool> {
    if !moves::try_lock_driver(&*lock, id).await? {
        return Ok(false);
    }
    // Which control plane drives which move (the chaos test of two
    // movers reads it to kill one that holds a move).
    tracing::info!(move_id = id, "mover: driving");
    let first = moves::get(&**state.session().await?, id)
        .await?
        .with_context(|| format!("move {id} vanished"))?;
    let ctx = Ctx::load(state, &first, lock.clone()).await?;
    let mut backoff = BACKOFF_MIN;
    loop {
        if lock.is_closed() {
            anyhow::bail!("lost the catalog session holding move {id}'s lock");
        }
        let m = match ctx.reload().await {
            Ok(m) => m,
            Err(e) => {
                tracing::warn!(
                    move_id = id,
                    error = format!("{e:#}"),
                    "mover: reload failed"
                );
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(BACKOFF_MAX);
                continue;
            }
        };
        if m.api.state.is_finished() || m.api.state == MoveState::Pending {
            return Ok(m.api.state.is_finished());
        }
        match step(&ctx, &m).await {
            Ok(()) => backoff = BACKOFF_MIN,
            Err(e) => {
                let message = format!("{e:#}");
                match fatal_message(&e) {
                    Some(reason) if m.api.state != MoveState::Cleanup => {
                        tracing::warn!(move_id = id, reason, "mover: aborting the move");
                        let c = ctx.catalog().await?;
                        moves::request_abort(&**c, id, &reason).await?;
                    }
                    _ => {
                        tracing::warn!(
                            move_id = id,
                            state = m.api.state.as_str(),
                            error = message,
                            "mover: step failed; retrying"
                        );
                        if let Ok(c) = ctx.catalog().await {
                            let shown = format!("{message} (retrying)");
                            let _ = moves::set_error(&**c, id, Some(&shown)).await;
                        }
                        tokio::time::sleep(backoff).await;
                        backoff = (backoff * 2).min(BACKOFF_MAX);
                    }
                }
            }
        }
    }
}

/// Runs the step of the move's current state once.
async fn step(ctx: &Ctx, m: &moves::MoveRow) -> anyhow::Result<()> {
    match m.api.state {
        MoveState::Pending | MoveState::Done | MoveState::Aborted => Ok(()),
        MoveState::Copying if m.abort_requested => abort::run(ctx, m).await,
        MoveState::Copying => {
            ctx.delay().await;
            if ctx.abort_requested().await? {
                return Ok(());
            }
            if copy::run(ctx).await? {
                enter(ctx, MoveState::CatchingUp).await?;
            }
            Ok(())
        }
        MoveState::CatchingUp if m.abort_requested => abort::run(ctx, m).await,
        MoveState::CatchingUp => {
            if !catchup::catch_up(ctx).await? {
                return Ok(());
            }
            let attempts = moves::begin_cutover(&**ctx.catalog().await?, &ctx.id).await?;
            ctx.delay().await;
            cutover::run(ctx, attempts).await
        }
        // Only a crash or a failed rollback leaves a move here: roll the
        // attempt back first, whatever comes next.
        MoveState::Cutover => {
            cutover::rollback(ctx).await?;
            if m.abort_requested {
                return abort::run(ctx, m).await;
            }
            cutover::after_failed_attempt(
                ctx,
                m.api.attempts,
                "the mover stopped during the cutover",
            )
            .await
        }
        MoveState::Cleanup => {
            ctx.delay().await;
            cleanup::run(ctx, m).await
        }
    }
}
