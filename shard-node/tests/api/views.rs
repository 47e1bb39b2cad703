//! Part B, Views: list/create/update/delete, config verbatim, relative-date
//! validation, the only-view rule and the view-specific viewer refusal.

use cluster_protocol::error::forbidden;
use serde_json::json;

use crate::helpers::*;

#[tokio::test]
async fn views_crud_and_rules() {
    let app = spawn_app().await;
    let (db, owner) = app.owned_database().await;
    let table = app.create_table(&db, &owner, "T").await;
    let tid = table["id"].as_str().unwrap();
    let path = format!("/api/tables/{tid}/views");

    let r = app.get(&path, &owner).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body["views"], json!([]), "a table starts with no views");

    let config = json!({"type": "kanban", "mine": {"a": [1, {"relative": "today", "offset": 2}]}});
    let r = app
        .post(&path, &owner, json!({"name": "Grid", "config": config}))
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let v1 = r.body["view"].clone();
    assert!(v1["id"].as_str().unwrap().starts_with("viw_"));
    assert_eq!(v1["config"], config, "stored verbatim");
    assert_eq!(v1["position"], 0);
    let r = app.post(&path, &owner, json!({"name": "Grid"})).await;
    let v2 = r.body["view"].clone();
    assert_eq!(v2["config"], json!({}));
    assert_eq!(v2["position"], 1);

    for bad in [
        json!({}),
        json!({"name": ""}),
        json!({"name": " "}),
        json!({"name": 3}),
        json!({"name": "x", "config": [1]}),
        json!({"name": "x", "config": {"f": {"value": {"relative": "yesterday"}}}}),
        json!({"name": "x", "config": {"f": {"relative": "now", "offset": 367}}}),
    ] {
        let r = app.post(&path, &owner, bad.clone()).await;
        assert_eq!(r.status, 400, "{bad} -> {:?}", r.body);
    }

    let v1id = v1["id"].as_str().unwrap();
    let r = app
        .patch(
            &format!("/api/views/{v1id}"),
            &owner,
            json!({"config": {"b": 1}}),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(
        r.body["view"]["config"],
        json!({"b": 1}),
        "replaced wholesale"
    );
    assert_eq!(r.body["view"]["name"], "Grid");
    let r = app
        .patch(&format!("/api/views/{v1id}"), &owner, json!({}))
        .await;
    assert_eq!(r.status, 400);
    let r = app
        .patch(
            &format!("/api/views/{v1id}"),
            &owner,
            json!({"config": {"x": {"relative": "today", "unit": "year"}}}),
        )
        .await;
    assert_eq!(r.status, 400);

    let viewer = viewer(&db);
    let r = app.get(&path, &viewer).await;
    assert_eq!(r.body["views"].as_array().unwrap().len(), 2);
    let r = app.post(&path, &viewer, json!({"name": "v"})).await;
    assert_eq!(
        (r.status, r.error_message()),
        (403, forbidden::VIEWER_VIEWS)
    );
    let r = app.delete(&format!("/api/views/{v1id}"), &viewer).await;
    assert_eq!(
        (r.status, r.error_message()),
        (403, forbidden::VIEWER_VIEWS)
    );

    let r = app
        .delete(&format!("/api/views/{v1id}"), &editor(&db))
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let v2id = v2["id"].as_str().unwrap();
    let r = app.delete(&format!("/api/views/{v2id}"), &owner).await;
    assert_eq!(r.status, 400, "only view");
    let r = app.delete(&format!("/api/views/{v1id}"), &owner).await;
    assert_eq!(r.status, 404);

    // Another database's principal never sees it.
    let (_, stranger) = app.owned_database().await;
    let r = app.get(&path, &stranger).await;
    assert_eq!(r.status, 404);
    let r = app
        .patch(
            &format!("/api/views/{v2id}"),
            &stranger,
            json!({"name": "z"}),
        )
        .await;
    assert_eq!(r.status, 404);
}
