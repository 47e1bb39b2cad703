//! The router's Prometheus series and its `GET /metrics` page.
//!
//! The page is served on an internal listener of its own
//! (`ROUTER_METRICS_LISTEN`, [`Page::serve`]), never on the public port,
//! where `/metrics` is an unknown path like any other (401 without a valid
//! API key, else 404). It answers only a request that carries
//! `Authorization: Bearer <METRICS_TOKEN>` (a read-only credential of its
//! own: the router never holds the operator's admin token), else 401; any
//! other path there is 404. Without `METRICS_TOKEN` nothing is bound.
//!
//! Series (besides the shared ones of `service_kit::metrics`):
//! * [`REDIS_ROUND_TRIP`]: the limiter's one Redis round trip per request.
//! * [`CACHE_HITS`] / [`CACHE_MISSES`], by `cache` (`key`, `placement`,
//!   `access`): a miss is a read from the control plane (or, for keys, an
//!   argon2id verification).
//!
//! A request's `route` label comes from the route table, with the request's
//! classification (`routes::classify`).

use std::convert::Infallible;
use std::time::Duration;

use http::{header, HeaderValue, Method, Request, Response};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use service_kit::metrics::{self as shared, METRICS_ROUTE};
use tokio::net::TcpListener;

use crate::config::Secret;
use crate::errors::{full, ApiError, Body};

/// Redis round trip of the limiter's scripts, by `outcome` (`ok`, `error`:
/// failed or timed out). Histogram.
pub const REDIS_ROUND_TRIP: &str = "tabula_redis_round_trip_seconds";
/// Lookups answered from a cache, by `cache`. Counter.
pub const CACHE_HITS: &str = "tabula_router_cache_hits_total";
/// Lookups that had to ask the control plane, by `cache`. Counter.
pub const CACHE_MISSES: &str = "tabula_router_cache_misses_total";

/// Entries a router cache holds now, by `cache` (at most its
/// `ROUTER_*_CACHE_ENTRIES`). Gauge, set when an entry is added.
pub const CACHE_ENTRIES: &str = "tabula_router_cache_entries";

/// The router's caches.
#[derive(Debug, Clone, Copy)]
pub enum Cache {
    /// Verified API keys (`keys`).
    Key,
    /// Placements by routing tag (`placement`).
    Placement,
    /// Users' memberships and support grants (`access`).
    Access,
}

impl Cache {
    fn label(self) -> &'static str {
        match self {
            Cache::Key => "key",
            Cache::Placement => "placement",
            Cache::Access => "access",
        }
    }
}

/// The `# HELP` lines of the router's series (with the shared ones).
pub fn describe() {
    use ::metrics::{describe_counter, describe_histogram, Unit};
    shared::describe();
    describe_histogram!(
        REDIS_ROUND_TRIP,
        Unit::Seconds,
        "Round trip of the rate limiter's Redis script, by outcome."
    );
    describe_counter!(
        CACHE_HITS,
        "Lookups answered from a router cache (key, placement, access)."
    );
    ::metrics::describe_gauge!(
        CACHE_ENTRIES,
        "Entries a router cache holds (key, placement, access), at most its ROUTER_*_CACHE_ENTRIES."
    );
    describe_counter!(
        CACHE_MISSES,
        "Lookups a router cache could not answer: the control plane was asked."
    );
}

pub fn cache_hit(cache: Cache) {
    ::metrics::counter!(CACHE_HITS, "cache" => cache.label()).increment(1);
}

pub fn cache_miss(cache: Cache) {
    ::metrics::counter!(CACHE_MISSES, "cache" => cache.label()).increment(1);
}

pub fn cache_entries(cache: Cache, entries: usize) {
    ::metrics::gauge!(CACHE_ENTRIES, "cache" => cache.label()).set(entries as f64);
}

pub fn redis_round_trip(ok: bool, elapsed: Duration) {
    let outcome = if ok { "ok" } else { "error" };
    ::metrics::histogram!(REDIS_ROUND_TRIP, "outcome" => outcome).record(elapsed.as_secs_f64());
}

/// One request being measured (the same for every service).
pub use service_kit::metrics::Measured;

/// The internal listener's page: the recorder's handle and the token.
#[derive(Clone)]
pub struct Page {
    handle: shared::PrometheusHandle,
    token: Secret,
}

impl Page {
    pub fn new(handle: shared::PrometheusHandle, token: Secret) -> Self {
        Self { handle, token }
    }

    /// Serves `GET /metrics` on `listener` (an internal address) until the
    /// task is dropped.
    pub async fn serve(self, listener: TcpListener) {
        loop {
            let (stream, _) = match listener.accept().await {
                Ok(pair) => pair,
                Err(e) => {
                    tracing::warn!(error = %e, "metrics listener: accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            let page = self.clone();
            tokio::spawn(async move {
                let service = service_fn(move |req: Request<hyper::body::Incoming>| {
                    let page = page.clone();
                    async move { Ok::<_, Infallible>(page.answer(&req)) }
                });
                let _ = http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    }

    /// The page for `GET /metrics` with the token; 401 without it; 404 for
    /// any other request.
    pub fn answer<B>(&self, req: &Request<B>) -> Response<Body> {
        if req.method() != Method::GET || req.uri().path() != METRICS_ROUTE {
            return ApiError::NotFound.into_response();
        }
        let measured = Measured::start(req.method(), METRICS_ROUTE);
        let resp = if shared::bearer_is(req.headers(), &self.token.0) {
            let mut resp = Response::new(full(shared::render(&self.handle)));
            resp.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static(shared::CONTENT_TYPE),
            );
            resp
        } else {
            ApiError::Unauthorized.into_response()
        };
        measured.finish(resp.status());
        resp
    }
}
