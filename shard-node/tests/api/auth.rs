use cluster_protocol::error::UNAUTHORIZED_MESSAGE;
use cluster_protocol::ids;
use serde_json::json;

use crate::helpers::*;

#[tokio::test]
async fn unsigned_and_badly_signed_requests_are_401() {
    let app = spawn_app().await;
    let (db, owner) = app.owned_database().await;
    for path in [
        format!("/api/databases/{db}/tables"),
        "/api/no/such/route".to_string(),
    ] {
        let r = app.call("GET", &path, Signing::Unsigned, Body::None).await;
        assert_eq!(r.status, 401);
        assert_eq!(r.error_code(), "unauthorized");
        assert_eq!(r.error_message(), UNAUTHORIZED_MESSAGE);
    }
    let r = app
        .call(
            "GET",
            &format!("/api/databases/{db}/tables"),
            Signing::WrongSecret(&owner),
            Body::None,
        )
        .await;
    assert_eq!(r.status, 401);
    assert_eq!(r.error_message(), UNAUTHORIZED_MESSAGE);
    let r = app
        .call(
            "POST",
            "/internal/databases/lookup",
            Signing::Unsigned,
            Body::Json(json!({"database_ids": [db]})),
        )
        .await;
    assert_eq!(r.status, 401);
    let r = app
        .call(
            "POST",
            "/api/databases",
            Signing::Unsigned,
            Body::Json(json!({"name": "x"})),
        )
        .await;
    assert_eq!(r.status, 401);
}

#[tokio::test]
async fn health_is_unsigned() {
    let app = spawn_app().await;
    let r = app
        .call("GET", "/internal/health", Signing::Unsigned, Body::None)
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body, json!({"ok": true}));
}

#[tokio::test]
async fn health_is_503_when_postgres_is_gone() {
    let (url, name) = private_database().await;
    let app = spawn_app_on(url).await;
    force_drop_database(&name).await;
    let r = app
        .call("GET", "/internal/health", Signing::Unsigned, Body::None)
        .await;
    assert_eq!(r.status, 503);
}

#[tokio::test]
async fn database_not_held_here_is_421() {
    let app = spawn_app().await;
    let elsewhere = ids::new_database_id("ZZzz9");
    let p = owner(&user_id(), &elsewhere);
    let r = app
        .get(&format!("/api/databases/{elsewhere}/tables"), &p)
        .await;
    assert_eq!(r.status, cluster_protocol::MISPLACED_STATUS);
    assert!(!r.error_message().is_empty());
    assert!(!r.error_code().is_empty());
    let r = app
        .post(
            &format!("/api/databases/{elsewhere}/tables"),
            &p,
            json!({"name": "t"}),
        )
        .await;
    assert_eq!(r.status, 421);
}

#[tokio::test]
async fn non_member_and_foreign_ids_are_404() {
    let app = spawn_app().await;
    let (db, owner) = app.owned_database().await;
    let (other_db, other_owner) = app.owned_database().await;
    let table = app.create_table(&db, &owner, "Mine").await;
    let tid = table["id"].as_str().unwrap();

    let mut stranger = owner.clone();
    stranger.role = None;
    let r = app
        .get(&format!("/api/databases/{db}/tables"), &stranger)
        .await;
    assert_eq!((r.status, r.error_code()), (404, "not_found"));

    // A table of another database, asked through that database's principal.
    let r = app.get(&format!("/api/tables/{tid}"), &other_owner).await;
    assert_eq!(r.status, 404);
    let r = app
        .patch(
            &format!("/api/tables/{tid}"),
            &other_owner,
            json!({"name": "x"}),
        )
        .await;
    assert_eq!(r.status, 404);
    let r = app
        .delete(&format!("/api/tables/{tid}"), &other_owner)
        .await;
    assert_eq!(r.status, 404);
    // The path database must be the principal's.
    let r = app
        .get(&format!("/api/databases/{db}/tables"), &other_owner)
        .await;
    assert_eq!(r.status, 404);
    let r = app
        .patch(
            &format!("/api/databases/{other_db}"),
            &owner,
            json!({"name": "x"}),
        )
        .await;
    assert_eq!(r.status, 404);
    // Missing ids of any shape.
    for id in ["tbl_nope", "tbl_ZZZZZ1234567", "nothing"] {
        let r = app.get(&format!("/api/tables/{id}"), &owner).await;
        assert_eq!((r.status, r.error_code()), (404, "not_found"), "{id}");
    }
    // The table is untouched.
    let r = app.get(&format!("/api/tables/{tid}"), &owner).await;
    assert_eq!(r.body["table"]["name"], "Mine");
}

#[tokio::test]
async fn unknown_routes_and_methods_are_404() {
    let app = spawn_app().await;
    let (db, owner) = app.owned_database().await;
    for (method, path) in [
        ("GET", "/api/nothing".to_string()),
        ("GET", format!("/api/databases/{db}")),
        ("PUT", format!("/api/databases/{db}/tables")),
        ("POST", "/api/tables/tbl_x".to_string()),
        ("GET", "/".to_string()),
    ] {
        let r = app
            .call(method, &path, Signing::With(&owner), Body::None)
            .await;
        assert_eq!(r.status, 404, "{method} {path}");
        assert_eq!(r.error_code(), "not_found");
        assert_eq!(r.error_message(), "Not found.");
    }
}

#[tokio::test]
async fn lookup_returns_the_databases_held_here() {
    let app = spawn_app().await;
    let user = user_id();
    let a = app.create_database(&user, "A").await;
    let b = app.create_database(&user, "B").await;
    let missing = ids::new_database_id("QQqq1");
    let r = app
        .post(
            "/internal/databases/lookup",
            &bare(&user),
            json!({"database_ids": [b["id"], a["id"], missing]}),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let got = r.body["databases"].as_array().unwrap();
    assert_eq!(got.len(), 2);
    let mut expected = vec![a.clone(), b.clone()];
    expected.sort_by_key(|d| d["position"].as_i64());
    assert_eq!(got, &expected);
    let r = app
        .post(
            "/internal/databases/lookup",
            &bare(&user),
            json!({"database_ids": "x"}),
        )
        .await;
    assert_eq!(r.status, 400);
}
