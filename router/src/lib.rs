//! The router: the stateless edge of the cluster. See `handler` for the
//! per-request pipeline and `auth` for the credential and rate-limit gate.

pub mod access;
pub mod attempts;
pub mod auth;
pub mod bearer;
pub mod body_budget;
pub mod config;
pub mod cores;
pub mod databases;
pub mod errors;
pub mod files;
pub mod forward;
pub mod handler;
pub mod health;
pub mod hold;
pub mod invalidate;
pub mod keys;
pub mod limiter;
pub mod limiter_lua;
pub mod link_target;
pub mod members;
pub mod metrics;
pub mod misplaced;
pub mod openapi;
pub mod placement;
pub mod principal_sign;
pub mod proxy;
pub mod redis_conn;
pub mod registry;
pub mod resp;
pub mod routes;
pub mod server;
pub mod shard_conn;
pub mod share;
pub mod state;
pub mod stream_body;
pub mod streamed;
pub mod trace;
pub mod upload_limit;
pub mod whoami;

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
