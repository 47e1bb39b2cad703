//! The router: the stateless edge of the cluster. See `handler` for the
//! per-request pipeline and `auth` for the credential and rate-limit gate.

pub mod answers;
pub mod config;
pub mod cores;
pub mod edge;
pub mod errors;
pub mod forward;
pub mod gate;
pub mod invalidate;
pub mod registry;
pub mod server;
pub mod state;

// `config` reads `HashLimits` by its path before the layer folders.
use gate::keys;

use std::future::Future;
use std::sync::Arc;

pub use config::Config;
use tokio::net::TcpListener;

/// Serves on `listener`, on the calling runtime, until `shutdown` resolves,
/// then drains. The binary serves with [`cores::run`] instead.
pub async fn run(
    config: Config,
    listener: TcpListener,
    shutdown: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    let state = Arc::new(state::AppState::new(config)?);
    let subscriber = tokio::spawn(invalidate::run(state.clone()));
    let heartbeat = tokio::spawn(state.registry.clone().heartbeat());
    server::serve(listener, state.clone(), shutdown).await;
    subscriber.abort();
    heartbeat.abort();
    state.registry.leave().await;
    Ok(())
}
