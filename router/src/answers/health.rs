//! `GET /api/health`: whether the control plane (the cluster's datastore of
//! record) answers, cached for about a second.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use http::{Response, StatusCode};

use cluster_protocol::control::client::ControlPlaneClient;

use crate::errors::{json, Body};

const TTL: Duration = Duration::from_secs(1);

#[derive(Default)]
pub struct HealthCache {
    last: Mutex<Option<(Instant, bool)>>,
}

/// The answer, from `cache` or (when stale) asking `control`. Takes the two
/// parts of the state it needs, not the state, which holds the cache.
pub async fn answer(cache: &HealthCache, control: &ControlPlaneClient) -> Response<Body> {
    let cached = *cache.last.lock().unwrap_or_else(|p| p.into_inner());
    let ok = match cached {
        Some((at, ok)) if at.elapsed() < TTL => ok,
        _ => {
            let ok = tokio::time::timeout(Duration::from_secs(2), control.health())
                .await
                .is_ok_and(|r| r.is_ok_and(|h| h.ok));
            *cache.last.lock().unwrap_or_else(|p| p.into_inner()) = Some((Instant::now(), ok));
            ok
        }
    };
    let body =
        serde_json::json!({"ok": ok, "name": cluster_protocol::SERVICE_NAME, "database": ok});
    let status = if ok {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    json(status, body.to_string())
}
