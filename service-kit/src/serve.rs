//! Serving an axum app on a listener until a shutdown future resolves,
//! draining in-flight requests: the shape of every axum service's
//! `run`/`run_until`.

use std::future::Future;

use anyhow::Context;
use tokio::net::TcpListener;

/// Serves `app` on `listener` until `shutdown` resolves, then waits for the
/// requests in flight to finish.
pub async fn until(
    listener: TcpListener,
    app: axum::Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown)
        .await
        .context("serve")
}

/// [`until`] SIGINT or SIGTERM ([`crate::shutdown::signal`]).
pub async fn until_signal(listener: TcpListener, app: axum::Router) -> anyhow::Result<()> {
    until(listener, app, crate::shutdown::signal()).await
}
