//! Prometheus metrics, the part the three services share: the recorder,
//! the names of the series every service has (HTTP requests by route
//! template, latency, requests in flight, pool capacity, use and waits,
//! build info, the process's figures of [`crate::process`]), the access
//! log's line of a request, and the
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
/// Sessions a PostgreSQL pool may open, by `pool`. Gauge, read from
/// deadpool's status when the page is rendered (as are the next three).
pub const POOL_CAPACITY: &str = "tabula_db_pool_capacity";
/// Sessions of a pool lent out now, by `pool`. Gauge.
pub const POOL_IN_USE: &str = "tabula_db_pool_in_use";
/// Open sessions of a pool not lent out, by `pool`. Gauge.
pub const POOL_IDLE: &str = "tabula_db_pool_idle";
/// Callers waiting for a session of a pool, by `pool`. Gauge.
pub const POOL_WAITING: &str = "tabula_db_pool_waiting";
/// `1`, by `service`, `version` and (when the build set `TABULA_COMMIT`)
/// `commit`. Gauge.
pub const BUILD_INFO: &str = "tabula_build_info";
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

/// Installs the process's recorder and sets [`BUILD_INFO`] of `service`;
/// fails if a recorder is installed already. Call once, in `main`.
pub fn install(service: &'static str) -> Result<PrometheusHandle, BuildError> {
    let handle = builder()?.install_recorder()?;
    build_info(service);
    Ok(handle)
}

/// Sets [`BUILD_INFO`] of `service` to 1.
pub fn build_info(service: &'static str) {
    let version = env!("CARGO_PKG_VERSION");
    match option_env!("TABULA_COMMIT").filter(|c| !c.is_empty()) {
        Some(commit) => metrics::gauge!(
            BUILD_INFO, "service" => service, "version" => version, "commit" => commit
        )
        .set(1.0),
        None => metrics::gauge!(BUILD_INFO, "service" => service, "version" => version).set(1.0),
    }
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

/// The page: reads the process's figures ([`crate::process`]), drains
/// histogram samples into their buckets, then renders.
pub fn render(handle: &PrometheusHandle) -> String {
    crate::process::record();
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
    describe_gauge!(POOL_CAPACITY, "Sessions a PostgreSQL pool may open.");
    describe_gauge!(POOL_IN_USE, "Sessions of a PostgreSQL pool lent out now.");
    describe_gauge!(
        POOL_IDLE,
        "Open sessions of a PostgreSQL pool not lent out."
    );
    describe_gauge!(
        POOL_WAITING,
        "Callers waiting for a session of a PostgreSQL pool."
    );
    describe_gauge!(
        BUILD_INFO,
        "1, labelled with the service, its version and commit."
    );
    crate::process::describe();
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
/// by method, route and status with its latency, and logged on the access
/// log ([`access_log`]) when it is on.
pub struct Measured {
    method: &'static str,
    route: Cow<'static, str>,
    database_id: Option<String>,
    started: Instant,
    _in_flight: InFlight,
}

impl Measured {
    /// Starts measuring a request for `route` (a template, never a raw path).
    pub fn start(method: &Method, route: impl Into<Cow<'static, str>>) -> Self {
        Self {
            method: method_label(method),
            route: route.into(),
            database_id: None,
            started: Instant::now(),
            _in_flight: InFlight::start(),
        }
    }

    /// Names the database the request is about, for the access log
    /// ([`database_id`] finds it in the path).
    pub fn database(mut self, database_id: Option<&str>) -> Self {
        self.database_id = database_id.map(str::to_owned);
        self
    }

    /// Counts the request as answered with `status` and logs it.
    pub fn finish(self, status: http::StatusCode) {
        let elapsed = self.started.elapsed();
        record_request(self.method, &self.route, status.as_u16(), elapsed);
        if crate::telemetry::access_log() {
            access_log(
                self.method,
                &self.route,
                status.as_u16(),
                elapsed,
                self.database_id.as_deref(),
            );
        }
    }
}

/// The access log's line of one request (target `access`, at info):
/// `method`, `route` (the template), `status`, `duration_ms`, and
/// `database_id` when the route names one. Inside the request's span, so a
/// JSON line carries its trace id.
pub fn access_log(
    method: &str,
    route: &str,
    status: u16,
    elapsed: Duration,
    database_id: Option<&str>,
) {
    let duration_ms = elapsed.as_micros() as f64 / 1000.0;
    tracing::info!(
        target: "access",
        method,
        route,
        status,
        duration_ms,
        database_id,
        "request"
    );
}

/// The database a request is about: the path segment where its route
/// template has `databases/{...}` (`/api/databases/{id}/tables`,
/// `/internal/databases/{id}`).
pub fn database_id<'p>(route: &str, path: &'p str) -> Option<&'p str> {
    let at = route
        .split('/')
        .collect::<Vec<_>>()
        .windows(2)
        .position(|w| w[0] == "databases" && w[1].starts_with('{'))?
        + 1;
    path.split('/').nth(at).filter(|s| !s.is_empty())
}

/// Axum middleware: counts every request by method, matched route
/// ([`UNKNOWN_ROUTE`] when none matched) and status, its latency, and the
/// requests in flight, and writes its access-log line. Layer it on the
/// whole router (inside [`crate::trace::server`]), so it sees the route
/// axum matched.
pub async fn measure(request: Request, next: Next) -> Response {
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or(UNKNOWN_ROUTE, |m| m.as_str())
        .to_string();
    let database = database_id(&route, request.uri().path()).map(str::to_owned);
    let measured = Measured::start(request.method(), route).database(database.as_deref());
    let response = next.run(request).await;
    measured.finish(response.status());
    response
}

/// Sets the pool series of `pool` ([`POOL_CAPACITY`], [`POOL_IN_USE`],
/// [`POOL_IDLE`], [`POOL_WAITING`]) from deadpool's status: `size` open
/// sessions, `available` of them idle, `waiting` callers, `max` capacity.
pub fn pool_status(pool: &'static str, size: usize, available: usize, waiting: usize, max: usize) {
    for (series, value) in [
        (POOL_CAPACITY, max),
        (POOL_IN_USE, size.saturating_sub(available)),
        (POOL_IDLE, available),
        (POOL_WAITING, waiting),
    ] {
        metrics::gauge!(series, "pool" => pool).set(value as f64);
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

    #[test]
    fn the_database_id_comes_from_the_databases_segment() {
        assert_eq!(
            database_id("/api/databases/{id}/tables", "/api/databases/db1/tables"),
            Some("db1")
        );
        assert_eq!(
            database_id("/internal/databases/{id}", "/internal/databases/db2"),
            Some("db2")
        );
        assert_eq!(database_id("/api/databases", "/api/databases"), None);
        assert_eq!(
            database_id("/api/tables/{id}/records", "/api/tables/t/records"),
            None
        );
        assert_eq!(database_id(UNKNOWN_ROUTE, "/api/databases/x"), None);
    }
}
