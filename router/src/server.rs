//! The accept loop: HTTP/1.1 keep-alive connections, a bound on requests in
//! flight (beyond it new requests are shed with 429 at once), and graceful
//! shutdown that stops accepting and drains in-flight requests.

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;

use crate::errors::ApiError;
use crate::handler;
use crate::state::AppState;

pub async fn serve(
    listener: TcpListener,
    state: Arc<AppState>,
    shutdown: impl Future<Output = ()>,
) {
    let graceful = GracefulShutdown::new();
    let grace = state.config.shutdown_grace;
    tokio::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(pair) => pair,
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    continue;
                }
            },
            _ = &mut shutdown => break,
        };
        let _ = stream.set_nodelay(true);
        let state = state.clone();
        let service = service_fn(move |req| {
            let state = state.clone();
            async move {
                let resp = match state.in_flight.try_acquire() {
                    Ok(permit) => {
                        let resp = handler::handle(&state, req, peer.ip()).await;
                        drop(permit);
                        resp
                    }
                    Err(_) => {
                        tracing::warn!("shedding load: too many requests in flight");
                        ApiError::RateLimited {
                            retry_after_ms: 1000,
                        }
                        .into_response()
                    }
                };
                Ok::<_, Infallible>(resp)
            }
        });
        let conn = http1::Builder::new()
            .timer(TokioTimer::new())
            .header_read_timeout(Duration::from_secs(30))
            .keep_alive(true)
            .serve_connection(TokioIo::new(stream), service);
        let conn = graceful.watch(conn);
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::debug!(error = %e, "connection ended with an error");
            }
        });
    }
    drop(listener);
    tracing::info!("shutting down: draining in-flight requests");
    tokio::select! {
        _ = graceful.shutdown() => tracing::info!("all connections drained"),
        _ = tokio::time::sleep(grace) => tracing::warn!("grace period over; closing remaining connections"),
    }
}
