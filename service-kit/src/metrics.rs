//! Prometheus metrics, the part the three services share: the recorder,
//! the names of the series every service has (HTTP requests by route
//! template, latency, requests in flight, pool usage and waits), and the
//! admin-token check that keeps `/metrics` private, and the measuring of
//! every request ([`Measured`], and [`measure`] for the axum services).
//! Each service's own `metrics` module adds its series and serves the page.
//!
//! The `metrics` facade records into one process-wide recorder. A binary
//! installs it once in `main` ([`install`]) and hands the returned handle to
//! its server, which renders it on `GET /metrics`; a server given no handle
//! answers `/metrics` like any unknown path, and its `metrics::*!` calls go
//! to the facade's no-op recorder. Test harnesses that start many servers
//! in one process call [`install_once`], which installs on first use only.

use std::borrow::Cow;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use axum::extract::{MatchedPath, Request};
use axum::middleware::Next;
use axum::response::Response;

use http::{HeaderMap, Method};
pub use metrics_exporter_prometheus::PrometheusHandle;
use metrics_exporter_prometheus::{BuildError, Matcher, PrometheusBuilder};
use subtle::ConstantTimeEq;

/// Requests answered, by `method`, `route` (a template, never a raw path)
/// and `status`. Counter.
pub const HTTP_REQUESTS: &str = "tabula_http_requests_total";
/// Time to answer (the response head), by `method` and `route`. Histogram.
pub const HTTP_DURATION: &str = "tabula_http_request_duration_seconds";
/// Requests being handled now. Gauge.
pub const HTTP_IN_FLIGHT: &str = "tabula_http_requests_in_flight";
/// Sessions of a PostgreSQL pool, by `pool` and `state`: `size` (open),
/// `available` (idle), `waiting` (callers waiting for one), `max`. Gauge,
/// read from deadpool's status when the page is rendered.
pub const POOL_CONNECTIONS: &str = "tabula_db_pool_connections";
/// Time to get a session from a pool, by `pool` and `outcome` (`ok`,
/// `error`: none in time or the connect failed). Histogram.
pub const POOL_WAIT: &str = "tabula_db_pool_wait_seconds";

/// The `route` of a request that matched no route.
pub const UNKNOWN_ROUTE: &str = "unknown";
/// The `route` of the page itself.
pub const METRICS_ROUTE: &str = "/metrics";
/// The page's `Content-Type` (Prometheus text format 0.0.4).
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Upper bounds of every `*_seconds` histogram: sub-millisecond Redis and
/// pool waits up to the router's 90 s shard timeout.
const SECONDS_BUCKETS: &[f64] = &[
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    5.0, 10.0, 30.0, 90.0,
];

fn builder() -> Result<PrometheusBuilder, BuildError> {
    PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), SECONDS_BUCKETS)
}

/// Installs the process's recorder; fails if one is installed already.
/// Call once, in `main`.
pub fn install() -> Result<PrometheusHandle, BuildError> {
    builder()?.install_recorder()
}

/// Installs the recorder on the first call and returns the same handle on
/// every later one: for test processes that start several servers.
pub fn install_once() -> PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    static LOCK: Mutex<()> = Mutex::new(());
    let _guard = LOCK.lock().unwrap_or_else(|p| p.into_inner());
    HANDLE
        .get_or_init(|| {
            builder()
                .and_then(PrometheusBuilder::install_recorder)
                .expect("install the metrics recorder")
        })
        .clone()
}

/// The page: drains histogram samples into their buckets, then renders.
pub fn render(handle: &PrometheusHandle) -> String {
    handle.run_upkeep();
    handle.render()
}

/// Whether `headers` carry `Authorization: Bearer <token>` (compared in
/// constant time). An empty token matches nothing.
pub fn bearer_is(headers: &HeaderMap, token: &str) -> bool {
    let presented = headers
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or("");
    !token.is_empty() && bool::from(presented.as_bytes().ct_eq(token.as_bytes()))
}

/// A bounded `method` label: the standard methods, else `other`.
pub fn method_label(method: &Method) -> &'static str {
    match *method {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::PATCH => "PATCH",
        Method::DELETE => "DELETE",
        Method::HEAD => "HEAD",
        Method::OPTIONS => "OPTIONS",
        _ => "other",
    }
}

/// Gives the shared series their `# HELP` lines (idempotent; nothing
/// without a recorder). Servers call it when they start.
pub fn describe() {
    use metrics::{describe_counter, describe_gauge, describe_histogram, Unit};
    describe_counter!(
        HTTP_REQUESTS,
        "Requests answered, by method, route template and status."
    );
    describe_histogram!(
        HTTP_DURATION,
        Unit::Seconds,
        "Time to the response head, by method and route template."
    );
    describe_gauge!(HTTP_IN_FLIGHT, "Requests being handled now.");
    describe_gauge!(
        POOL_CONNECTIONS,
        "Sessions of a PostgreSQL pool by state (size, available, waiting, max)."
    );
    describe_histogram!(
        POOL_WAIT,
        Unit::Seconds,
        "Time to get a session from a PostgreSQL pool, by outcome."
    );
}

/// Counts one answered request and its latency.
pub fn record_request(method: &'static str, route: &str, status: u16, elapsed: Duration) {
    let route = route.to_string();
    metrics::counter!(
        HTTP_REQUESTS,
        "method" => method,
        "route" => route.clone(),
        "status" => status.to_string()
    )
    .increment(1);
    metrics::histogram!(HTTP_DURATION, "method" => method, "route" => route)
        .record(elapsed.as_secs_f64());
}

/// Counts a request in flight while it lives (a dropped, unfinished
/// request too).
pub struct InFlight(());

impl InFlight {
    pub fn start() -> Self {
        metrics::gauge!(HTTP_IN_FLIGHT).increment(1.0);
        Self(())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        metrics::gauge!(HTTP_IN_FLIGHT).decrement(1.0);
    }
}

/// One request being measured: in flight until [`Measured::finish`] (or a
/// drop, which counts it out of flight but not as answered), then counted
/// by method, route and status with its latency.
pub struct Measured {
    method: &'static str,
    route: Cow<'static, str>,
    started: Instant,
    _in_flight: InFlight,
}

impl Measured {
    /// Starts measuring a request for `route` (a template, never a raw path).
    pub fn start(method: &Method, route: impl Into<Cow<'static, str>>) -> Self {
        Self {
            method: method_label(method),
            route: route.into(),
            started: Instant::now(),
            _in_flight: InFlight::start(),
        }
    }

    /// Counts the request as answered with `status`.
    pub fn finish(self, status: http::StatusCode) {
        record_request(
            self.method,
            &self.route,
            status.as_u16(),
            self.started.elapsed(),
        );
    }
}

/// Axum middleware: counts every request by method, matched route
/// ([`UNKNOWN_ROUTE`] when none matched) and status, its latency, and the
/// requests in flight. Layer it on the whole router, so it sees the route
/// axum matched.
pub async fn measure(request: Request, next: Next) -> Response {
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or(UNKNOWN_ROUTE, |m| m.as_str())
        .to_string();
    let measured = Measured::start(request.method(), route);
    let response = next.run(request).await;
    measured.finish(response.status());
    response
}

/// Sets the [`POOL_CONNECTIONS`] gauges of `pool` from deadpool's status
/// (`size`, `available`, `waiting`, `max`).
pub fn pool_status(pool: &'static str, size: usize, available: usize, waiting: usize, max: usize) {
    for (state, value) in [
        ("size", size),
        ("available", available),
        ("waiting", waiting),
        ("max", max),
    ] {
        metrics::gauge!(POOL_CONNECTIONS, "pool" => pool, "state" => state).set(value as f64);
    }
}

/// Records one wait for a session of `pool`.
pub fn pool_wait(pool: &'static str, ok: bool, elapsed: Duration) {
    let outcome = if ok { "ok" } else { "error" };
    metrics::histogram!(POOL_WAIT, "pool" => pool, "outcome" => outcome)
        .record(elapsed.as_secs_f64());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_must_match_exactly() {
        let mut h = HeaderMap::new();
        assert!(!bearer_is(&h, "tok"));
        h.insert(http::header::AUTHORIZATION, "Bearer tok".parse().unwrap());
        assert!(bearer_is(&h, "tok"));
        assert!(!bearer_is(&h, "tok2"));
        assert!(!bearer_is(&h, ""));
        h.insert(http::header::AUTHORIZATION, "bearer tok".parse().unwrap());
        assert!(!bearer_is(&h, "tok"));
    }
}
