//! The router's Prometheus series and its `GET /metrics` page.
//!
//! The page is served on the public port, so it answers only a request that
//! carries `Authorization: Bearer <METRICS_TOKEN>` (a read-only credential
//! of its own: the router never holds the operator's admin token); any other
//! request for it, and every request when `METRICS_TOKEN` is unset, goes
//! through the usual pipeline and gets the answer any unknown path gets (401
//! without a valid API key, else 404).
//!
//! Series (besides the shared ones of `service_kit::metrics`):
//! * [`REDIS_ROUND_TRIP`]: the limiter's one Redis round trip per request.
//! * [`CACHE_HITS`] / [`CACHE_MISSES`], by `cache` (`key`, `placement`,
//!   `access`): a miss is a read from the control plane (or, for keys, an
//!   argon2id verification).
//!
//! A request's `route` label comes from the route table, with the request's
//! classification (`routes::classify`).

use std::time::Duration;

use http::{header, HeaderMap, HeaderValue, Method, Response};
use service_kit::metrics::{self as shared, METRICS_ROUTE};

use crate::errors::{full, Body};

/// Redis round trip of the limiter's scripts, by `outcome` (`ok`, `error`:
/// failed or timed out). Histogram.
pub const REDIS_ROUND_TRIP: &str = "tabula_redis_round_trip_seconds";
/// Lookups answered from a cache, by `cache`. Counter.
pub const CACHE_HITS: &str = "tabula_router_cache_hits_total";
/// Lookups that had to ask the control plane, by `cache`. Counter.
pub const CACHE_MISSES: &str = "tabula_router_cache_misses_total";

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

pub fn redis_round_trip(ok: bool, elapsed: Duration) {
    let outcome = if ok { "ok" } else { "error" };
    ::metrics::histogram!(REDIS_ROUND_TRIP, "outcome" => outcome).record(elapsed.as_secs_f64());
}

/// One request being measured (the same for every service).
pub use service_kit::metrics::Measured;

/// Whether this request is for the page and carries the metrics token.
pub fn is_scrape(
    method: &Method,
    path: &str,
    headers: &HeaderMap,
    token: Option<&crate::config::Secret>,
) -> bool {
    method == Method::GET
        && path == METRICS_ROUTE
        && token.is_some_and(|t| shared::bearer_is(headers, &t.0))
}

/// The page, or 404 when no recorder was installed (library use).
pub fn page(handle: Option<&shared::PrometheusHandle>) -> Response<Body> {
    let Some(handle) = handle else {
        return crate::errors::ApiError::NotFound.into_response();
    };
    let mut resp = Response::new(full(shared::render(handle)));
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(shared::CONTENT_TYPE),
    );
    resp
}
