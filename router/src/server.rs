//! The accept loop: HTTP/1.1 keep-alive connections, a bound on requests in
//! flight (beyond it new requests are shed with 429 at once), a bound on
//! open connections (beyond it new ones wait in the listen backlog), an idle
//! timeout, and graceful shutdown that stops accepting and drains in-flight
//! requests.
//!
//! hyper 1.x has no separate keep-alive idle timeout: its header read
//! timeout starts as soon as a connection waits for a request head (the
//! first one, or the next one after a response), so it bounds idle
//! keep-alive time and a slowly sent head alike. That is
//! `ROUTER_IDLE_TIMEOUT_SECS`. Slow bodies are bounded where they are read
//! (`forward`; on the streamed routes, by an idle timeout per piece in
//! `stream_body`), and a slow shard by the shard pool's response timeout.

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;

use crate::edge::{handler, metrics, routes};
use crate::errors::ApiError;
use crate::state::AppState;

pub async fn serve(
    listener: TcpListener,
    state: Arc<AppState>,
    shutdown: impl Future<Output = ()>,
) {
    let graceful = GracefulShutdown::new();
    let grace = state.config.shutdown_grace;
    let idle_timeout = state.config.connections.idle_timeout;
    tokio::pin!(shutdown);
    loop {
        let slot = match state.connections.clone().try_acquire_owned() {
            Ok(slot) => slot,
            Err(_) => {
                tracing::warn!("connection cap reached: new connections wait");
                tokio::select! {
                    slot = state.connections.clone().acquire_owned() => match slot {
                        Ok(slot) => slot,
                        Err(_) => break,
                    },
                    _ = &mut shutdown => break,
                }
            }
        };
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
                        let route = routes::classify(req.method(), req.uri().path()).label;
                        metrics::Measured::start(req.method(), route)
                            .finish(http::StatusCode::TOO_MANY_REQUESTS);
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
            .header_read_timeout(idle_timeout)
            .keep_alive(true)
            .serve_connection(TokioIo::new(stream), service);
        let conn = graceful.watch(conn);
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::debug!(error = %e, "connection ended with an error");
            }
            drop(slot);
        });
    }
    drop(listener);
    tracing::info!("shutting down: draining in-flight requests");
    tokio::select! {
        _ = graceful.shutdown() => tracing::info!("all connections drained"),
        _ = tokio::time::sleep(grace) => tracing::warn!("grace period over; closing remaining connections"),
    }
}
