//! `GET /metrics`: only with the metrics or the admin token; requests appear by route
//! template, never by raw path, next to the pool and move series.

use crate::helpers::*;

#[tokio::test]
async fn metrics_need_the_metrics_token_and_name_routes_by_template() {
    if skip() {
        return;
    }
    let app = spawn_app().await;
    let user = app.user().await;
    app.client.user_access(&user).await.expect("user access");
    let http = reqwest::Client::new();
    let url = format!("{}/metrics", app.base);

    let r = http.get(&url).send().await.unwrap();
    assert_eq!(r.status(), 401);
    let v: serde_json::Value = r.json().await.unwrap();
    assert_eq!(v["error"]["code"], "unauthorized");
    let r = http.get(&url).bearer_auth("wrong").send().await.unwrap();
    assert_eq!(r.status(), 401);

    // Another tier's token is refused; the metrics token reads the page.
    for other in [ROUTER_TOKEN, SHARD_TOKEN] {
        let r = http.get(&url).bearer_auth(other).send().await.unwrap();
        assert_eq!(r.status(), 403, "{other}");
    }
    let r = http
        .get(&url)
        .bearer_auth(METRICS_TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let r = http.get(&url).bearer_auth(TOKEN).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let page = r.text().await.unwrap();
    assert!(
        page.lines()
            .any(|l| l.starts_with("tabula_http_requests_total{")
                && l.contains(r#"method="GET""#)
                && l.contains(r#"route="/internal/users/{user_id}/access""#)
                && l.contains(r#"status="200""#)),
        "no request series in\n{page}"
    );
    assert!(!page.contains(&user), "{user} in\n{page}");
    for series in [
        r#"tabula_http_request_duration_seconds_bucket{method="POST",route="/internal/users""#,
        "tabula_http_requests_in_flight",
        r#"tabula_db_pool_capacity{pool="catalog"}"#,
        r#"tabula_db_pool_idle{pool="catalog"}"#,
        r#"tabula_db_pool_in_use{pool="catalog"}"#,
        "process_cpu_seconds_total ",
        "process_start_time_seconds ",
        r#"tabula_db_pool_wait_seconds_bucket{pool="catalog",outcome="ok""#,
        r#"tabula_moves{state="copying"} 0"#,
        r#"tabula_moves{state="done"}"#,
    ] {
        assert!(page.contains(series), "{series} missing in\n{page}");
    }
    app.finish().await;
}
