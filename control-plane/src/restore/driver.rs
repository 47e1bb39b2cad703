//! One restore's driver: holds the restore's session advisory lock on the
//! catalog (so no two control planes drive it) and runs its state's step
//! until it is `done` or `failed`:
//!
//! * `pending -> restoring_scratch`;
//! * `restoring_scratch`: drops a scratch an earlier try may have left,
//!   restores a new one, records its DSN, `-> copying`;
//! * `copying`: copies into the new database on its shard in one
//!   transaction there, activates it in the catalog, drops the scratch,
//!   `-> done`. Run again after a crash it first drops what an earlier try
//!   committed on the shard while the database is still `creating`; once
//!   the database is active, only the scratch's drop is left.
//!
//! A step that cannot succeed (the scratch command refuses, the backup has
//! no such database, ...) or fails [`MAX_TRIES`] times in a row fails the
//! restore: the new database's copy and allocation are removed, the
//! scratch dropped.

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use cluster_protocol::control::{DatabaseInfo, DatabaseState, RestoreState, Shard};

use super::copy::{self, NewDatabase};
use super::retag::Retag;
use super::scratch;
use crate::catalog::restores::{self, RestoreRow};
use crate::catalog::{databases, quotas, shards};
use crate::config::Secret;
use crate::error::ApiError;
use crate::mover::admin;
use crate::mover::context::{fatal, fatal_message};
use crate::AppState;

const BACKOFF_MIN: Duration = Duration::from_millis(500);
const BACKOFF_MAX: Duration = Duration::from_secs(30);
/// Failures of one step in a row before the restore fails.
pub const MAX_TRIES: u32 = 5;

/// What the driver does after a step's failure.
#[derive(Debug, PartialEq, Eq)]
pub enum AfterFailure {
    Retry,
    Fail(String),
}

/// A fatal error fails at once; others are retried until the `tries`-th.
pub fn after_failure(e: &anyhow::Error, tries: u32) -> AfterFailure {
    match fatal_message(e) {
        Some(reason) => AfterFailure::Fail(reason),
        None if tries >= MAX_TRIES => {
            AfterFailure::Fail(format!("failed {tries} times in a row, last: {e:#}"))
        }
        None => AfterFailure::Retry,
    }
}

/// The state after `state`'s step succeeded (`copying` ends in `done`).
pub fn next(state: RestoreState) -> RestoreState {
    match state {
        RestoreState::Pending => RestoreState::RestoringScratch,
        RestoreState::RestoringScratch => RestoreState::Copying,
        RestoreState::Copying | RestoreState::Done => RestoreState::Done,
        RestoreState::Failed => RestoreState::Failed,
    }
}

/// Drives restore `id` to its end, unless another control plane drives
/// it; true when this driver saw it finish.
pub async fn drive(state: AppState, catalog_dsn: Arc<Secret>, id: String) -> anyhow::Result<bool> {
    let mut cfg = tokio_postgres::Config::from_str(catalog_dsn.expose())
        .context("parse CONTROL_PLANE_DATABASE_URL")?;
    state.moves.pg_tls.apply(&mut cfg);
    let (lock, conn) = cfg
        .connect(state.moves.pg_tls.clone())
        .await
        .context("open the restorer's catalog session")?;
    let conn = tokio::spawn(conn);
    let result = drive_locked(&state, &lock, &id).await;
    drop(lock);
    conn.abort();
    result
}

async fn reload(state: &AppState, id: &str) -> anyhow::Result<RestoreRow> {
    restores::get(&**state.session().await?, id)
        .await?
        .with_context(|| format!("restore {id} vanished from the catalog"))
}

async fn drive_locked(
    state: &AppState,
    lock: &tokio_postgres::Client,
    id: &str,
) -> anyhow::Result<bool> {
    if !restores::try_lock_driver(lock, id).await? {
        return Ok(false);
    }
    let mut backoff = BACKOFF_MIN;
    let mut tries = 0;
    // Set once the restore must fail; its cleanup is retried until it ends.
    let mut failing: Option<String> = None;
    loop {
        if lock.is_closed() {
            anyhow::bail!("lost the catalog session holding restore {id}'s lock");
        }
        let r = reload(state, id).await?;
        if r.api.state.is_finished() {
            return Ok(true);
        }
        let result = match &failing {
            Some(reason) => fail(state, &r, reason).await,
            None => step(state, &r).await,
        };
        let e = match result {
            Ok(()) => {
                tries = 0;
                backoff = BACKOFF_MIN;
                continue;
            }
            Err(e) => e,
        };
        let message = format!("{e:#}");
        if failing.is_some() {
            tracing::warn!(
                restore_id = id,
                error = message,
                "restorer: cleaning up a failed restore failed; retrying"
            );
        } else {
            tries += 1;
            match after_failure(&e, tries) {
                AfterFailure::Fail(reason) => {
                    tracing::warn!(restore_id = id, reason, "restorer: failing the restore");
                    failing = Some(reason);
                    continue;
                }
                AfterFailure::Retry => {
                    tracing::warn!(
                        restore_id = id,
                        state = r.api.state.as_str(),
                        error = message,
                        "restorer: step failed; retrying"
                    );
                    if let Ok(c) = state.session().await {
                        let shown = format!("{message} (retrying)");
                        let _ = restores::set_error(&**c, id, Some(&shown)).await;
                    }
                }
            }
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(BACKOFF_MAX);
    }
}

fn command(state: &AppState) -> anyhow::Result<&str> {
    state
        .moves
        .restore_scratch_command
        .as_deref()
        .ok_or_else(|| fatal("point-in-time restore is not configured (RESTORE_SCRATCH_COMMAND)"))
}

async fn enter(state: &AppState, id: &str, to: RestoreState) -> anyhow::Result<()> {
    restores::set_state(&**state.session().await?, id, to).await
}

/// Runs the step of the restore's current state once.
async fn step(state: &AppState, r: &RestoreRow) -> anyhow::Result<()> {
    let id = &r.api.id;
    match r.api.state {
        RestoreState::Pending => enter(state, id, next(r.api.state)).await,
        RestoreState::RestoringScratch => {
            let program = command(state)?;
            let name = scratch::name(id)?;
            if let Err(e) = scratch::drop(program, &name).await {
                tracing::warn!(
                    restore_id = id,
                    error = format!("{e:#}"),
                    "restorer: dropping an earlier scratch failed"
                );
            }
            let dsn = scratch::restore(program, &r.api.shard, r.api.as_of, &name).await?;
            let c = state.session().await?;
            restores::set_scratch(&**c, id, Some(&dsn)).await?;
            restores::set_state(&**c, id, next(r.api.state)).await
        }
        RestoreState::Copying => copying(state, r).await,
        RestoreState::Done | RestoreState::Failed => Ok(()),
    }
}

/// The new database's shard, from the catalog.
async fn shard_of(
    state: &AppState,
    database_id: &str,
) -> anyhow::Result<Option<(Shard, DatabaseInfo)>> {
    let c = state.session().await?;
    let Some(info) = databases::get(&**c, database_id).await? else {
        return Ok(None);
    };
    let shard = shards::get(&**c, &info.shard)
        .await?
        .with_context(|| format!("shard {} is not registered", info.shard))?;
    Ok(Some((shard, info)))
}

async fn copying(state: &AppState, r: &RestoreRow) -> anyhow::Result<()> {
    let id = &r.api.id;
    let new_id = &r.api.new_database_id;
    let Some((shard, info)) = shard_of(state, new_id).await? else {
        return Err(fatal(format!(
            "the new database {new_id} vanished from the catalog"
        )));
    };
    if info.state == DatabaseState::Creating {
        let Some(dsn) = r.scratch_dsn.as_deref() else {
            return enter(state, id, RestoreState::RestoringScratch).await;
        };
        let limits = {
            let c = state.session().await?;
            quotas::overrides(&**c, &info.owner_id)
                .await?
                .database_limits()
        };
        let retag = Retag::new(&r.api.database_id, new_id)?;
        let (scratch, task) = copy::connect_scratch(dsn, state).await?;
        let new = NewDatabase {
            restore_id: id,
            as_of: r.api.as_of,
            into: r.api.into.as_deref(),
            owner_id: &info.owner_id,
            position: info.position,
            epoch: info.epoch,
            limits,
            shard: &shard,
        };
        let copied = copy::run(state, &scratch, &retag, &new).await;
        drop(scratch);
        task.abort();
        copied?;
        crate::service::databases::confirm(state, new_id)
            .await
            .map_err(|e| anyhow::anyhow!("activate the new database: {e}"))?;
    }
    let dropped = drop_scratch(state, id).await.err();
    let c = state.session().await?;
    restores::finish(
        &**c,
        id,
        RestoreState::Done,
        dropped
            .map(|e| format!("done, but the scratch instance was not dropped: {e:#}"))
            .as_deref(),
    )
    .await?;
    tracing::info!(restore_id = id, new_database_id = new_id, "restore done");
    Ok(())
}

async fn drop_scratch(state: &AppState, id: &str) -> anyhow::Result<()> {
    let program = command(state)?;
    scratch::drop(program, &scratch::name(id)?).await
}

/// Removes the new database's copy from its shard and its allocation from
/// the catalog (while it is still `creating`), drops the scratch, and ends
/// the restore `failed`.
async fn fail(state: &AppState, r: &RestoreRow, reason: &str) -> anyhow::Result<()> {
    let new_id = &r.api.new_database_id;
    if let Some((shard, info)) = shard_of(state, new_id).await? {
        if info.state == DatabaseState::Creating {
            let mut target = admin::connect(&shard, &state.moves).await?;
            copy::drop_leftovers(&mut target, new_id).await?;
            match crate::service::databases::release(state, new_id).await {
                Ok(()) | Err(ApiError::NotFound(_)) => {}
                Err(e) => anyhow::bail!("release the new database's allocation: {e}"),
            }
        }
    }
    if let Err(e) = drop_scratch(state, &r.api.id).await {
        tracing::warn!(
            restore_id = r.api.id,
            error = format!("{e:#}"),
            "restorer: dropping the scratch failed"
        );
    }
    let c = state.session().await?;
    restores::finish(&**c, &r.api.id, RestoreState::Failed, Some(reason)).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_advance_in_order_and_end_done() {
        let mut s = RestoreState::Pending;
        let mut seen = vec![s];
        while !s.is_finished() {
            s = next(s);
            seen.push(s);
        }
        assert_eq!(
            seen,
            vec![
                RestoreState::Pending,
                RestoreState::RestoringScratch,
                RestoreState::Copying,
                RestoreState::Done
            ]
        );
        assert_eq!(next(RestoreState::Failed), RestoreState::Failed);
    }

    #[test]
    fn fatal_errors_fail_at_once_and_others_after_max_tries() {
        let fatal_err = fatal("no backup covers 2026-01-01").context("restore the scratch");
        assert_eq!(
            after_failure(&fatal_err, 1),
            AfterFailure::Fail("no backup covers 2026-01-01".into())
        );
        let transient = anyhow::anyhow!("connection refused");
        assert_eq!(after_failure(&transient, 1), AfterFailure::Retry);
        assert_eq!(
            after_failure(&transient, MAX_TRIES - 1),
            AfterFailure::Retry
        );
        match after_failure(&transient, MAX_TRIES) {
            AfterFailure::Fail(m) => assert!(m.contains("connection refused"), "{m}"),
            other => panic!("{other:?}"),
        }
    }
}
