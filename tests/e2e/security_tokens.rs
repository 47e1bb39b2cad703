//! One credential per tier (README, "Between the tiers"), on the running
//! cluster: the router's `/metrics`, on its internal listener only, takes
//! only the metrics token, never the operator's; the control plane refuses the router's and shard
//! nodes' tokens outside their scope and hands shard passwords to the
//! operator only; each service process holds only its own token.

use e2e_tests::{cluster, Api};
use reqwest::Method;

fn var(name: &str) -> String {
    cluster()
        .var(name)
        .unwrap_or_else(|| panic!("the cluster's env file lacks {name}"))
        .to_string()
}

#[tokio::test]
async fn router_metrics_take_the_metrics_token_and_nothing_else() {
    // The public port serves no page: `/metrics` is an unknown path there,
    // the metrics token no API key.
    for token in [
        "METRICS_TOKEN",
        "CONTROL_PLANE_TOKEN",
        "CONTROL_PLANE_ROUTER_TOKEN",
        "CONTROL_PLANE_SHARD_TOKEN",
    ] {
        Api::with_token(&var(token))
            .get("/metrics")
            .await
            .expect_error(401, "unauthorized");
    }
    // The internal listener (ROUTER_METRICS_LISTEN) takes the metrics token only.
    let internal = var("ROUTER_METRICS_URL");
    for other in [
        "CONTROL_PLANE_TOKEN",
        "CONTROL_PLANE_ROUTER_TOKEN",
        "CONTROL_PLANE_SHARD_TOKEN",
    ] {
        let (status, _) = call(&internal, Method::GET, "/metrics", &var(other)).await;
        assert_eq!(status, 401, "{other}");
    }
    let (status, page) = call(&internal, Method::GET, "/metrics", &var("METRICS_TOKEN")).await;
    assert_eq!(status, 200, "{page}");
    assert_build_and_process(&page, "router");
}

/// The page has the service's build info and the process's figures.
fn assert_build_and_process(page: &str, service: &str) {
    let build = format!("tabula_build_info{{service=\"{service}\",version=\"");
    assert!(page.contains(&build), "{build} missing in\n{page}");
    for series in [
        "process_resident_memory_bytes ",
        "process_cpu_seconds_total ",
        "process_open_fds ",
        "process_start_time_seconds ",
    ] {
        assert!(page.contains(series), "{series} missing in\n{page}");
    }
}

async fn call(base: &str, method: Method, path: &str, token: &str) -> (u16, String) {
    let r = reqwest::Client::new()
        .request(method, format!("{base}{path}"))
        .bearer_auth(token)
        // Harmless should a refusal ever fail: a rebalance would only plan.
        .json(&serde_json::json!({"dry_run": true}))
        .send()
        .await
        .expect("reachable");
    (r.status().as_u16(), r.text().await.expect("body"))
}

#[tokio::test]
async fn shard_metrics_take_the_metrics_token_and_nothing_else() {
    let shard = var("SHARD_URLS")
        .split_whitespace()
        .next()
        .expect("a shard url")
        .to_string();
    for other in [
        "CONTROL_PLANE_TOKEN",
        "CONTROL_PLANE_ROUTER_TOKEN",
        "CONTROL_PLANE_SHARD_TOKEN",
    ] {
        let (status, _) = call(&shard, Method::GET, "/metrics", &var(other)).await;
        assert_eq!(status, 401, "{other}");
    }
    let (status, page) = call(&shard, Method::GET, "/metrics", &var("METRICS_TOKEN")).await;
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("tabula_http_requests_total"), "{page}");
    assert_build_and_process(&page, "shard-node");
    assert!(
        page.contains(r#"tabula_db_pool_capacity{pool="requests"}"#),
        "{page}"
    );
    let base = var("CONTROL_PLANE_URL");
    let (status, page) = call(&base, Method::GET, "/metrics", &var("METRICS_TOKEN")).await;
    assert_eq!(status, 200, "{page}");
    assert_build_and_process(&page, "control-plane");
    assert!(
        page.contains(r#"tabula_db_pool_in_use{pool="catalog"}"#),
        "{page}"
    );
}

#[tokio::test]
async fn control_plane_keeps_operator_routes_and_passwords_to_the_admin_token() {
    let base = var("CONTROL_PLANE_URL");
    let shards = cluster()
        .control_plane
        .shards()
        .await
        .expect("the admin lists shards");
    let secret = shards.shards.iter().find_map(|s| {
        // A multi-host DSN (HA=1) is no URL to reqwest; tokio-postgres reads both.
        let cfg: tokio_postgres::Config = s.postgres.parse().ok()?;
        cfg.get_password()
            .map(|p| String::from_utf8_lossy(p).into_owned())
    });
    for tier in [
        "CONTROL_PLANE_ROUTER_TOKEN",
        "CONTROL_PLANE_SHARD_TOKEN",
        "METRICS_TOKEN",
    ] {
        let token = var(tier);
        for (method, path) in [
            (Method::GET, "/internal/shards"),
            (Method::POST, "/internal/keys"),
            (Method::POST, "/internal/users"),
            (Method::POST, "/internal/members"),
            (Method::POST, "/internal/moves"),
            (Method::POST, "/internal/shards/no-such-shard/drain"),
            (Method::POST, "/internal/rebalance"),
        ] {
            let (status, body) = call(&base, method.clone(), path, &token).await;
            assert_eq!(status, 403, "{tier} on {method} {path}: {body}");
            assert!(body.contains("\"forbidden\""), "{body}");
            if let Some(secret) = &secret {
                assert!(
                    !body.contains(secret.as_str()),
                    "{tier}: password in {body}"
                );
            }
        }
    }
    // What the router and the shard nodes do read still answers them.
    let (status, body) = call(
        &base,
        Method::POST,
        "/internal/placements/lookup",
        &var("CONTROL_PLANE_SHARD_TOKEN"),
    )
    .await;
    assert_eq!(
        status, 400,
        "a lookup without ids is refused as such: {body}"
    );
    let db = e2e_tests::Person::new()
        .await
        .api
        .new_database("tokens")
        .await;
    let r = reqwest::Client::new()
        .post(format!("{base}/internal/placements/lookup"))
        .bearer_auth(var("CONTROL_PLANE_ROUTER_TOKEN"))
        .json(&serde_json::json!({"database_ids": [db]}))
        .send()
        .await
        .expect("reachable");
    assert_eq!(r.status(), 200);
    let text = r.text().await.expect("body");
    assert!(text.contains(&db), "{text}");
    if let Some(secret) = &secret {
        assert!(!text.contains(secret.as_str()), "password in {text}");
    }
}

/// The process environment of a dev-cluster service, by its pid file.
fn environ(service: &str) -> Vec<String> {
    let dir = var("DEV_CLUSTER_DIR");
    let pid = std::fs::read_to_string(format!("{dir}/run/{service}.pid"))
        .unwrap_or_else(|e| panic!("{service}'s pid file: {e}"));
    let raw = std::fs::read(format!("/proc/{}/environ", pid.trim()))
        .unwrap_or_else(|e| panic!("{service}'s environment: {e}"));
    raw.split(|b| *b == 0)
        .filter_map(|kv| std::str::from_utf8(kv).ok())
        .filter_map(|kv| kv.split_once('=').map(|(k, _)| k.to_string()))
        .collect()
}

#[tokio::test]
async fn each_service_holds_only_its_own_tokens() {
    let all = [
        "CONTROL_PLANE_TOKEN",
        "CONTROL_PLANE_ROUTER_TOKEN",
        "CONTROL_PLANE_SHARD_TOKEN",
        "METRICS_TOKEN",
    ];
    for (service, own) in [
        (
            "router",
            &["CONTROL_PLANE_ROUTER_TOKEN", "METRICS_TOKEN"][..],
        ),
        (
            "shard-1",
            &["CONTROL_PLANE_SHARD_TOKEN", "METRICS_TOKEN"][..],
        ),
        ("control-plane", &all[..]),
    ] {
        let env = environ(service);
        for name in all {
            assert_eq!(
                env.iter().any(|k| k == name),
                own.contains(&name),
                "{service} and {name}"
            );
        }
    }
}
