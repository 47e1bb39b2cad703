//! Thread per core (`router::cores`): one port for every core's listener,
//! requests answered whichever core accepts them, a second router refused on
//! a port in use, and a graceful shutdown that drains a request in flight.
//! The control plane is a fake whose health check answers slowly, so a
//! request is in flight when shutdown starts. Redis is the test Redis
//! (TEST_REDIS_URL) as in `router.rs`.

// Test code: an unwrap that fails is a failed test with its location.
#![allow(clippy::unwrap_used)]

use std::net::SocketAddr;
use std::time::Duration;

use axum::routing::get;
use axum::{Json, Router};
use serde_json::json;

const SLOW: Duration = Duration::from_millis(400);

fn redis_url() -> String {
    std::env::var("TEST_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into())
}

async fn slow_control_plane() -> SocketAddr {
    let app = Router::new().route(
        "/internal/health",
        get(|| async {
            tokio::time::sleep(SLOW).await;
            Json(json!({"ok": true}))
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    addr
}

fn config(cp: SocketAddr) -> router::Config {
    router::Config {
        listen: "127.0.0.1:0".parse().unwrap(),
        control_plane_url: format!("http://{cp}"),
        control_plane_token: router::config::Secret("t".into()),
        metrics_token: None,
        metrics_listen: "127.0.0.1:0".parse().unwrap(),
        redis_url: redis_url(),
        cluster_secret: router::config::Secret("s".into()),
        key_limit_per_min: 600,
        address_limit_per_min: 3000,
        anon_limit_per_min: 100_000,
        files_limit_per_min: 10_000,
        max_in_flight: 1000,
        pool_max_idle_per_host: 16,
        shutdown_grace: Duration::from_secs(5),
        hash_limits: router::gate::keys::HashLimits::default(),
        caches: router::config::CacheLimits::default(),
        threads: 2,
        connections: Default::default(),
        metrics: None,
        accounts: Default::default(),
    }
}

/// `GET /api/health` on a connection of its own, from a random address.
async fn health(addr: SocketAddr) -> reqwest::Result<reqwest::Response> {
    let n = || rand::random::<u8>();
    reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .unwrap()
        .get(format!("http://{addr}/api/health"))
        .header("x-forwarded-for", format!("10.{}.{}.{}", n(), n(), n()))
        .send()
        .await
}

#[tokio::test]
async fn cores_share_a_port_and_drain_on_shutdown() {
    let cp = slow_control_plane().await;
    let listeners = router::cores::bind("127.0.0.1:0".parse().unwrap(), 2).unwrap();
    assert_eq!(listeners.len(), 2);
    let addr = listeners[0].local_addr().unwrap();
    assert_eq!(listeners[1].local_addr().unwrap(), addr);
    assert!(
        router::cores::bind(addr, 2).is_err(),
        "a second router must not join a port in use"
    );

    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let served = tokio::spawn(router::cores::serve(listeners, config(cp), async {
        let _ = stop_rx.await;
    }));

    // Many connections: the kernel spreads them over both listeners, and
    // each is answered (the first waits for the slow health check).
    let answers = futures::future::join_all((0..24).map(|_| health(addr))).await;
    for answer in answers {
        let answer = answer.expect("answered");
        assert_eq!(answer.status(), 200);
        let body: serde_json::Value = answer.json().await.unwrap();
        assert_eq!(body["ok"], true);
    }

    // Past the health cache's second, a request waits on the control plane
    // again; shut down while it does.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let in_flight = tokio::spawn(health(addr));
    tokio::time::sleep(SLOW / 4).await;
    stop_tx.send(()).unwrap();
    let drained = tokio::time::timeout(Duration::from_secs(5), served)
        .await
        .expect("shutdown finishes within the grace period")
        .unwrap();
    drained.expect("every core served and drained");
    let answer = in_flight
        .await
        .unwrap()
        .expect("the request in flight is answered");
    assert_eq!(answer.status(), 200);
    assert!(
        health(addr).await.is_err(),
        "nothing accepts connections after shutdown"
    );
}
