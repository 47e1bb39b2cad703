//! What every step of one move shares: the move's context ([`Ctx`]: its
//! shards, names, budget and catalog sessions), the error no retry can fix
//! ([`Fatal`]) and entering a state. Below the driver and every step.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use cluster_protocol::control::{MoveState, Shard};

use super::admin::{self, Admin};
use super::sql;
use crate::catalog::{moves, shards};
use crate::config::MoveConfig;
use crate::AppState;

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

    pub(super) async fn load(
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
