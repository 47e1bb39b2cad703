//! The router: the stateless edge of the cluster, in four layers: [`edge`]
//! (accept, classify once from `cluster_protocol::routes`, trace, metrics;
//! `edge::handler` is the per-request pipeline), [`gate`] (API keys,
//! access, rate limits), [`forward`] (to the shard that owns the routing
//! tag) and [`answers`] (what the router answers itself).

pub mod account;
pub mod answers;
pub mod bounded;
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
