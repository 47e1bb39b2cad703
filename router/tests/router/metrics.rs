//! `GET /metrics`: on the internal listener only (`ROUTER_METRICS_LISTEN`;
//! on the public port it is an unknown path), only with the metrics token
//! (never the operator's admin token, nor the router's own control-plane
//! token), and requests appear by route template, never by raw path.

use super::*;

/// `GET /metrics` on the internal listener.
async fn scrape(e: &Env, token: Option<&str>) -> reqwest::Response {
    let page = e
        .metrics
        .as_deref()
        .expect("the metrics listener is served");
    get_metrics(e, page, token).await
}

/// `GET /metrics` on the public port.
async fn public_metrics(e: &Env, token: Option<&str>) -> reqwest::Response {
    get_metrics(e, &e.router, token).await
}

async fn get_metrics(e: &Env, base: &str, token: Option<&str>) -> reqwest::Response {
    let mut req = e
        .http
        .get(format!("{base}/metrics"))
        .header("x-forwarded-for", &e.address);
    if let Some(t) = token {
        req = req.header("authorization", format!("Bearer {t}"));
    }
    req.send().await.unwrap()
}

#[tokio::test]
async fn metrics_need_the_metrics_token_and_name_routes_by_template() {
    let e = env(100, 1000).await;
    let shard = Arc::new(Shard::default());
    let url = spawn_shard(shard.clone()).await;
    let (db, tag) = e.database(&[&url]);
    let (user_id, _, token) = e.user_with_key(Access::ReadWrite, DatabaseScope::All);
    e.member(&user_id, &db, Role::Editor);
    let table = new_tagged(Kind::Table, &tag);
    let record = new_tagged(Kind::Record, &tag);
    let path = format!("/api/tables/{table}/records/{record}");
    assert_eq!(e.get(&path, Some(&token)).await.status(), 200);

    // The public port serves no page, even for the metrics token: the
    // answers any unknown path gets (401 without an API key, 404 with one).
    for t in [None, Some(METRICS_TOKEN)] {
        let r = public_metrics(&e, t).await;
        assert_eq!(r.status(), 401, "{t:?}");
        let v: Value = r.json().await.unwrap();
        assert_eq!(v["error"]["code"], "unauthorized");
    }
    let r = public_metrics(&e, Some(&token)).await;
    assert_eq!(r.status(), 404);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"]["code"], "not_found");

    // The internal listener refuses no token, a wrong one, an API key, the
    // operator's admin token and the router's control-plane token.
    for other in [
        None,
        Some("not-the-token"),
        Some(token.as_str()),
        Some(ADMIN_TOKEN),
        Some(ROUTER_TOKEN),
    ] {
        let r = scrape(&e, other).await;
        assert_eq!(r.status(), 401, "{other:?}");
        let v: Value = r.json().await.unwrap();
        assert_eq!(v["error"]["code"], "unauthorized");
    }
    // Any other path there is unknown.
    let page = e.metrics.as_deref().unwrap();
    let r = e
        .http
        .get(format!("{page}/api/health"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);

    let r = scrape(&e, Some(METRICS_TOKEN)).await;
    assert_eq!(r.status(), 200);
    assert!(header(&r, "content-type")
        .unwrap()
        .starts_with("text/plain"));
    let page = r.text().await.unwrap();
    let line = page
        .lines()
        .find(|l| {
            l.starts_with("tabula_http_requests_total{")
                && l.contains(r#"route="/api/tables/{id}/records/{rid}""#)
                && l.contains(r#"method="GET""#)
                && l.contains(r#"status="200""#)
        })
        .unwrap_or_else(|| panic!("no request series in\n{page}"));
    assert!(line.rsplit(' ').next().unwrap().parse::<f64>().unwrap() >= 1.0);
    assert!(
        page.contains(r#"tabula_http_request_duration_seconds_bucket{method="GET",route="/api/tables/{id}/records/{rid}""#),
        "{page}"
    );
    // The public port's refused requests were counted under the fixed
    // label, the internal listener's under the page's.
    assert!(page.contains(r#"route="unknown""#), "{page}");
    assert!(
        page.contains(r#"tabula_http_requests_total{method="GET",route="/metrics",status="401"}"#),
        "{page}"
    );
    // Ids never become label values.
    for id in [&table, &record, &db, &tag] {
        assert!(!page.contains(id.as_str()), "{id} in\n{page}");
    }
    for series in [
        "tabula_http_requests_in_flight",
        "tabula_redis_round_trip_seconds_bucket",
        r#"tabula_router_cache_hits_total{cache="key"}"#,
        r#"tabula_router_cache_misses_total{cache="key"}"#,
        r#"tabula_router_cache_misses_total{cache="placement"}"#,
        r#"tabula_router_cache_misses_total{cache="access"}"#,
        "process_resident_memory_bytes ",
        "process_cpu_seconds_total ",
        "process_open_fds ",
        "process_start_time_seconds ",
    ] {
        assert!(page.contains(series), "{series} missing in\n{page}");
    }
}

#[tokio::test]
async fn without_a_metrics_token_the_router_serves_no_page() {
    let e = env_with_config(100, 1000, redis_url(), |c| c.metrics_token = None).await;
    assert!(e.metrics.is_none());
    for token in [METRICS_TOKEN, ROUTER_TOKEN, ""] {
        let r = public_metrics(&e, Some(token)).await;
        assert_eq!(r.status(), 401, "{token:?}");
    }
}
