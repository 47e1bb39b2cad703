//! The control plane: the cluster's directory of users, API keys,
//! memberships, shards and database placement, served over an internal
//! HTTP API (`http`), backed by its own PostgreSQL catalog (`catalog`,
//! `migrate`) and announcing changes to routers through Redis (`liveness`).
//! The operator CLI (`cli`) lives in the same binary.

pub mod catalog;
pub mod cli;
pub mod config;
pub mod error;
pub mod http;
pub mod liveness;
pub mod metrics;
pub mod migrate;
pub mod mover;
pub mod pg_tls;
pub mod placement;
pub mod restore;
pub mod service;
pub mod shard_use;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tokio::net::TcpListener;

use crate::config::{Config, MoveConfig};
use crate::liveness::Liveness;

/// What every handler and background task shares.
#[derive(Clone)]
pub struct AppState {
    pub pool: deadpool_postgres::Pool,
    pub redis: Liveness,
    /// Each tier's token (`http::auth` checks them against `http::routes`).
    pub tokens: Arc<crate::config::Tokens>,
    pub creating_ttl: Duration,
    /// The mover's knobs (docs/moves.md).
    pub moves: Arc<MoveConfig>,
    /// Wakes the mover (a move was created or an abort requested).
    pub mover_wake: Arc<tokio::sync::Notify>,
    /// Wakes the restorer (a restore was recorded).
    pub restorer_wake: Arc<tokio::sync::Notify>,
    /// Renders `GET /metrics`; `None` answers it 404.
    pub metrics: Option<service_kit::metrics::PrometheusHandle>,
    /// Sign-up and sessions of the account pages.
    pub accounts: crate::config::AccountConfig,
}

impl AppState {
    /// A catalog session, its wait recorded (`metrics`).
    pub async fn session(&self) -> Result<deadpool_postgres::Object, deadpool_postgres::PoolError> {
        crate::metrics::timed_get(&self.pool).await
    }
}

/// Serves until SIGTERM or SIGINT, then drains in-flight requests.
pub async fn run(config: Config, listener: TcpListener) -> anyhow::Result<()> {
    run_until(config, listener, service_kit::shutdown::signal()).await
}

/// Migrates the catalog, starts the reaper, the mover and the restorer, and serves until `shutdown` resolves.
pub async fn run_until(
    config: Config,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let pool = catalog::pool(config.database_url.expose(), &config.moves.pg_tls)?;
    let applied = migrate::run(&pool).await.context("migrate catalog")?;
    tracing::info!(applied = ?applied, "catalog schema up to date");
    let state = AppState {
        pool,
        redis: Liveness::new(config.redis_url.expose()).context("configure redis")?,
        tokens: Arc::new(config.tokens.clone()),
        creating_ttl: config.creating_ttl,
        moves: Arc::new(config.moves.clone()),
        mover_wake: Arc::new(tokio::sync::Notify::new()),
        restorer_wake: Arc::new(tokio::sync::Notify::new()),
        metrics: config.metrics.clone(),
        accounts: config.accounts,
    };
    crate::metrics::describe();
    let reaper = tokio::spawn(service::databases::reaper_loop(
        state.clone(),
        config.reaper_interval,
    ));
    let mover = mover::spawn(state.clone(), config.database_url.clone());
    let restorer = restore::spawn(state.clone(), config.database_url.clone());
    let addr = listener.local_addr().ok();
    tracing::info!(?addr, "control plane listening");
    let served = service_kit::serve::until(listener, http::router(state), shutdown).await;
    reaper.abort();
    mover.abort();
    restorer.abort();
    served
}
