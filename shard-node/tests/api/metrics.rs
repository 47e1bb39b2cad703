//! `GET /metrics`: only with the metrics token; requests appear by route
//! template, never by raw path, next to the pool and outbox series.

use crate::helpers::*;

async fn scrape(app: &TestApp, token: Option<&str>) -> reqwest::Response {
    let mut req = app.http.get(format!("http://{}/metrics", app.addr));
    if let Some(t) = token {
        req = req.header("authorization", format!("Bearer {t}"));
    }
    req.send().await.unwrap()
}

#[tokio::test]
async fn metrics_need_the_metrics_token_and_name_routes_by_template() {
    let app = spawn_app().await;
    let (db, owner) = app.owned_database().await;
    let table = app.create_table_id(&db, &owner, "Tasks").await;
    let r = app
        .get(&format!("/api/tables/{table}/records"), &owner)
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);

    // The node's control-plane (shard) token is not a metrics credential.
    for token in [None, Some("not-the-token"), Some(SHARD_TOKEN)] {
        let r = scrape(&app, token).await;
        assert_eq!(r.status(), 401);
        let v: serde_json::Value = r.json().await.unwrap();
        assert_eq!(v["error"]["code"], "unauthorized");
    }

    let r = scrape(&app, Some(METRICS_TOKEN)).await;
    assert_eq!(r.status(), 200);
    let page = r.text().await.unwrap();
    assert!(
        page.lines()
            .any(|l| l.starts_with("tabula_http_requests_total{")
                && l.contains(r#"method="GET""#)
                && l.contains(r#"route="/api/tables/{id}/records""#)
                && l.contains(r#"status="200""#)),
        "no request series in\n{page}"
    );
    assert!(
        page.contains(r#"tabula_http_request_duration_seconds_bucket{method="POST",route="/api/databases/{id}/tables""#),
        "{page}"
    );
    for id in [&db, &table] {
        assert!(!page.contains(id.as_str()), "{id} in\n{page}");
    }
    for series in [
        "tabula_http_requests_in_flight",
        r#"tabula_db_pool_capacity{pool="requests"}"#,
        r#"tabula_db_pool_in_use{pool="requests"}"#,
        r#"tabula_db_pool_idle{pool="requests"}"#,
        r#"tabula_db_pool_waiting{pool="requests"}"#,
        "process_resident_memory_bytes ",
        "process_open_fds ",
        r#"tabula_db_pool_wait_seconds_bucket{pool="requests",outcome="ok""#,
        r#"tabula_db_operation_duration_seconds_bucket{op="list_records",outcome="ok""#,
        r#"tabula_webhook_deliveries_pending{shard="test-shard"}"#,
    ] {
        assert!(page.contains(series), "{series} missing in\n{page}");
    }
}
