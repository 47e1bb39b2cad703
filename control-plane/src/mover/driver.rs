//! One move's driver: holds the move's session advisory lock on the catalog
//! (so no two control planes drive it), then runs the current state's step
//! until the move is `done` or `aborted`. A step that fails for a
//! transient reason is retried with backoff, its error shown in the move;
//! one that cannot succeed ([`Fatal`]) asks for the move's abort.

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use cluster_protocol::control::{MoveState, Shard};

use super::admin::{self, Admin};
use super::{abort, catchup, cleanup, copy, cutover, sql};
use crate::catalog::{moves, shards};
use crate::config::{MoveConfig, Secret};
use crate::AppState;

const BACKOFF_MIN: Duration = Duration::from_millis(500);
const BACKOFF_MAX: Duration = Duration::from_secs(30);

/// An error no retry can fix: the move is aborted with its message.
#[derive(Debug)]
pub struct Fatal(pub String);

impl std::fmt::Display for Fatal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Fatal {}

pub fn fatal(message: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(Fatal(message.into()))
}

/// The fatal message in an error's chain, if any.
pub fn fatal_message(e: &anyhow::Error) -> Option<String> {
    e.chain()
        .find_map(|c| c.downcast_ref::<Fatal>())
        .map(|f| f.0.clone())
}

/// What every step of one move needs.
pub struct Ctx {
    pub state: AppState,
    pub knobs: Arc<MoveConfig>,
    pub id: String,
    pub database_id: String,
    pub from: Shard,
    pub to: Shard,
    /// Publication, slot and subscription name.
    pub name: String,
    pub budget: Duration,
    pub step_delay: Duration,
    /// The catalog session holding the move's advisory lock.
    lock: Arc<tokio_postgres::Client>,
}

impl Ctx {
    pub async fn source(&self) -> anyhow::Result<Admin> {
        admin::connect(&self.from, &self.knobs).await
    }

    pub async fn target(&self) -> anyhow::Result<Admin> {
        admin::connect(&self.to, &self.knobs).await
    }

    pub async fn catalog(&self) -> anyhow::Result<deadpool_postgres::Object> {
        self.state.session().await.context("catalog connection")
    }

    pub async fn reload(&self) -> anyhow::Result<moves::MoveRow> {
        moves::get(&**self.catalog().await?, &self.id)
            .await?
            .with_context(|| format!("move {} vanished from the catalog", self.id))
    }

    /// Whether an abort was requested; an error once this driver lost its
    /// lock (another control plane may drive the move now). Long waits
    /// call it on every round.
    pub async fn abort_requested(&self) -> anyhow::Result<bool> {
        if self.lock.is_closed() {
            anyhow::bail!("lost the catalog session holding move {}'s lock", self.id);
        }
        Ok(self.reload().await?.abort_requested)
    }

    /// The test hook: wait after entering a state and after the fence.
    pub async fn delay(&self) {
        if !self.step_delay.is_zero() {
            tokio::time::sleep(self.step_delay).await;
        }
    }

    /// The shard the catalog places the database on now.
    pub async fn placed_on(&self) -> anyhow::Result<String> {
        let placement = moves::placement(&**self.catalog().await?, &self.database_id).await?;
        Ok(placement
            .with_context(|| format!("database {} vanished from the catalog", self.database_id))?
            .0)
    }

    async fn load(
        state: &AppState,
        row: &moves::MoveRow,
        lock: Arc<tokio_postgres::Client>,
    ) -> anyhow::Result<Self> {
        let client = state.session().await.context("catalog connection")?;
        let all = shards::list(&**client).await?;
        let find = |name: &str| {
            all.iter()
                .find(|s| s.name == name)
                .cloned()
                .with_context(|| format!("shard {name} of move {} is not registered", row.api.id))
        };
        Ok(Self {
            state: state.clone(),
            knobs: state.moves.clone(),
            id: row.api.id.clone(),
            database_id: row.api.database_id.clone(),
            from: find(&row.api.from)?,
            to: find(&row.api.to)?,
            name: sql::object_name(&row.api.id)?,
            budget: Duration::from_millis(u64::try_from(row.api.pause_budget_ms).unwrap_or(0)),
            step_delay: Duration::from_millis(u64::try_from(row.step_delay_ms).unwrap_or(0)),
            lock,
        })
    }
}

/// Drives move `id` to its end, unless another control plane drives it;
/// true when this driver saw it finish.
pub async fn drive(state: AppState, catalog_dsn: Arc<Secret>, id: String) -> anyhow::Result<bool> {
    let mut cfg = tokio_postgres::Config::from_str(catalog_dsn.expose())
        .context("parse CONTROL_PLANE_DATABASE_URL")?;
    state.moves.pg_tls.apply(&mut cfg);
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

/// Enters `state` (clearing the error), then the test delay.
pub async fn enter(ctx: &Ctx, state: MoveState) -> anyhow::Result<()> {
    moves::set_state(&**ctx.catalog().await?, &ctx.id, state).await?;
    ctx.delay().await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fatal_errors_are_found_through_context() {
        let e: anyhow::Result<()> = Err(fatal("table t has no primary key"));
        let e = e.context("introspect").context("copy").unwrap_err();
        assert_eq!(
            fatal_message(&e).as_deref(),
            Some("table t has no primary key")
        );
        let transient = anyhow::anyhow!("connection refused").context("connect");
        assert_eq!(fatal_message(&transient), None);
    }
}
