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
//! The router has no route table with templates (`routes::classify` only
//! finds the routing tag), so [`route_template`] names a request by the
//! template of the public API it matches, from [`TEMPLATES`], with
//! [`UNKNOWN_ROUTE`] for everything else: ids never become label values.

use std::time::Duration;

use http::{header, HeaderMap, HeaderValue, Method, Response};
use service_kit::metrics::{self as shared, METRICS_ROUTE, UNKNOWN_ROUTE};

use crate::errors::{full, Body};
use crate::routes::{classify, Route};

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

/// Every templated path of the public API (`router/openapi.json`). A
/// `{...}` segment matches any one segment.
pub const TEMPLATES: &[&str] = &[
    "/api/databases/{id}",
    "/api/databases/{id}/import",
    "/api/databases/{id}/tables",
    "/api/databases/{id}/export",
    "/api/databases/{id}/webhooks",
    "/api/databases/{id}/members",
    "/api/databases/{id}/members/{user_id}",
    "/api/tables/{id}",
    "/api/tables/{id}/fields",
    "/api/tables/{id}/views",
    "/api/tables/{id}/records",
    "/api/tables/{id}/records/list",
    "/api/tables/{id}/records/{rid}",
    "/api/tables/{id}/records/{rid}/press",
    "/api/tables/{id}/records/{rid}/comments",
    "/api/tables/{id}/trash",
    "/api/tables/{id}/trash/restore",
    "/api/tables/{id}/trash/purge",
    "/api/tables/{id}/attachments",
    "/api/fields/{id}",
    "/api/views/{id}",
    "/api/views/{id}/shares",
    "/api/comments/{id}",
    "/api/shares/{id}",
    "/api/webhooks/{id}",
    "/api/webhooks/{id}/secret",
    "/api/webhooks/{id}/test",
    "/api/webhooks/{id}/deliveries",
    "/api/webhooks/{id}/deliveries/{delivery_id}/replay",
];

const FILE_TEMPLATE: &str = "/api/files/{attachment_id}/{variant}";

/// The route label of a request: a fixed string for the routes the router
/// answers itself, the matching template for a forwarded one, and
/// [`UNKNOWN_ROUTE`] for a path no route has.
pub fn route_template(method: &Method, path: &str) -> &'static str {
    match classify(method, path) {
        Route::Health => "/api/health",
        Route::OpenApi => "/api/openapi.json",
        Route::Whoami => "/api/meta/whoami",
        Route::ListDatabases | Route::CreateDatabase => "/api/databases",
        Route::File { tag: Some(_) } => FILE_TEMPLATE,
        Route::Share { tag: Some(_) } => "/api/share/{token}/records",
        Route::Tagged { .. } | Route::Members { .. } => TEMPLATES
            .iter()
            .copied()
            .find(|t| matches_template(t, path))
            .unwrap_or(UNKNOWN_ROUTE),
        Route::File { tag: None } | Route::Share { tag: None } | Route::NotFound => UNKNOWN_ROUTE,
    }
}

fn matches_template(template: &str, path: &str) -> bool {
    let mut t = template.split('/');
    let mut p = path.split('/');
    loop {
        match (t.next(), p.next()) {
            (None, None) => return true,
            (Some(ts), Some(ps)) if ts.starts_with('{') => {
                if ps.is_empty() {
                    return false;
                }
            }
            (Some(ts), Some(ps)) if ts == ps => {}
            _ => return false,
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_become_template_segments() {
        let t = |m: Method, p: &str| route_template(&m, p);
        assert_eq!(
            t(Method::GET, "/api/tables/tbl_Ab3dZ1234567/records"),
            "/api/tables/{id}/records"
        );
        assert_eq!(
            t(
                Method::GET,
                "/api/tables/tbl_Ab3dZ1234567/records/rec_Ab3dZ7654321"
            ),
            "/api/tables/{id}/records/{rid}"
        );
        assert_eq!(
            t(
                Method::POST,
                "/api/webhooks/whk_aaaaa1234567/deliveries/dlv_aaaaa7654321/replay"
            ),
            "/api/webhooks/{id}/deliveries/{delivery_id}/replay"
        );
        assert_eq!(
            t(Method::GET, "/api/files/att_Ab3dZ1234567/thumb-256"),
            FILE_TEMPLATE
        );
        assert_eq!(t(Method::POST, "/api/databases"), "/api/databases");
        assert_eq!(t(Method::GET, "/api/health"), "/api/health");
    }

    /// Every path of `router/openapi.json` gets its own template as label,
    /// so a route added there without a template here fails.
    #[test]
    fn every_documented_path_is_its_own_label() {
        let doc: serde_json::Value = serde_json::from_str(include_str!("../openapi.json")).unwrap();
        let paths = doc["paths"].as_object().unwrap();
        for (template, ops) in paths {
            // A sample path: each `{...}` segment becomes a tagged id.
            let sample = template
                .split('/')
                .enumerate()
                .map(|(i, seg)| match (seg.starts_with('{'), seg) {
                    (false, _) => seg.to_string(),
                    (true, "{variant}") => "thumb-256".into(),
                    (true, "{token}") => cluster_protocol::ids::new_share_token("Ab3dZ"),
                    (true, _) => {
                        let kind = template.split('/').nth(i - 1).unwrap_or("");
                        let prefix = match kind {
                            "databases" => "db_",
                            "tables" => "tbl_",
                            "fields" => "fld_",
                            "views" => "viw_",
                            "webhooks" => "whk_",
                            "records" => "rec_",
                            "deliveries" => "dlv_",
                            "files" => "att_",
                            "members" => "usr_",
                            "comments" => "cmt_",
                            "shares" => "shl_",
                            other => panic!("no id kind for {other} in {template}"),
                        };
                        format!("{prefix}Ab3dZ1234567")
                    }
                })
                .collect::<Vec<_>>()
                .join("/");
            for method in ops.as_object().unwrap().keys() {
                let m = Method::from_bytes(method.to_uppercase().as_bytes()).unwrap();
                let label = route_template(&m, &sample);
                assert_eq!(label, template, "{method} {sample}");
            }
        }
    }

    #[test]
    fn anything_else_is_one_fixed_label() {
        let t = |p: &str| route_template(&Method::GET, p);
        for path in [
            "/api/tables/tbl_Ab3dZ1234567/whatever",
            "/api/tables/tbl_Ab3dZ1234567/records/rec_x/y/z",
            "/api/tables/tbl_Ab3dZ1234567/records/",
            "/api/nothing/here",
            "/metrics",
            "/api/files/att_short/original",
            "/wp-admin/login.php",
        ] {
            assert_eq!(t(path), UNKNOWN_ROUTE, "{path}");
        }
    }
}
