//! `GET /metrics`: only with the metrics token (never the operator's admin
//! token, nor the router's own control-plane token), and requests appear by
//! route template, never by raw path.

use super::*;

async fn scrape(e: &Env, token: Option<&str>) -> reqwest::Response {
    let mut req = e
        .http
        .get(format!("{}/metrics", e.router))
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

    // Refused without the token, with a wrong one, and with an API key:
    // the answers any unknown path gets.
    let r = scrape(&e, None).await;
    assert_eq!(r.status(), 401);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"]["code"], "unauthorized");
    assert_eq!(scrape(&e, Some("not-the-token")).await.status(), 401);
    let r = scrape(&e, Some(&token)).await;
    assert_eq!(r.status(), 404);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"]["code"], "not_found");

    // Neither the operator's admin token nor the router's control-plane
    // token opens the page on the public port: they are not API keys either.
    for other in [ADMIN_TOKEN, ROUTER_TOKEN] {
        let r = scrape(&e, Some(other)).await;
        assert_eq!(r.status(), 401, "{other}");
        let v: Value = r.json().await.unwrap();
        assert_eq!(v["error"]["code"], "unauthorized");
    }

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
    // The refused scrapes were counted under the fixed label.
    assert!(page.contains(r#"route="unknown""#), "{page}");
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
    ] {
        assert!(page.contains(series), "{series} missing in\n{page}");
    }
}

#[tokio::test]
async fn without_a_metrics_token_the_router_serves_no_page() {
    let e = env_with_config(100, 1000, redis_url(), |c| c.metrics_token = None).await;
    for token in [METRICS_TOKEN, ROUTER_TOKEN, ""] {
        let r = scrape(&e, Some(token)).await;
        assert_eq!(r.status(), 401, "{token:?}");
    }
}
