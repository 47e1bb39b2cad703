use cluster_protocol::error::forbidden;
use serde_json::json;

use crate::helpers::*;

async fn schema_exists(app: &TestApp, id: &str) -> bool {
    app.pg
        .query_opt(
            "SELECT 1 FROM information_schema.schemata WHERE schema_name = $1",
            &[&id],
        )
        .await
        .unwrap()
        .is_some()
}

#[tokio::test]
async fn create_database_makes_row_and_schema() {
    let app = spawn_app().await;
    let user = user_id();
    let p = creator(&user);
    let alloc = p.new_database.clone().unwrap();
    let r = app
        .post(
            "/api/databases",
            &p,
            json!({"name": "  Sales  ", "extra": 1}),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let db = &r.body["database"];
    assert_eq!(db["id"], alloc.database_id.as_str());
    assert_eq!(db["name"], "  Sales  ");
    assert_eq!(db["color"], json!(null));
    assert_eq!(db["icon"], json!(null));
    assert_eq!(db["timezone"], "UTC");
    assert_eq!(db["week_start"], 1);
    assert_eq!(db["weekend"], json!([6, 7]));
    assert_eq!(db["archived_at"], json!(null));
    assert_eq!(db["position"], alloc.position);
    for k in ["owner_id", "created_by", "updated_by"] {
        assert_eq!(db[k], user.as_str(), "{k}");
    }
    assert_ms_timestamp(&db["created_at"]);
    assert_ms_timestamp(&db["updated_at"]);
    assert!(db.get("tag").is_none());
    assert_eq!(db.as_object().unwrap().len(), 14);
    assert!(schema_exists(&app, &alloc.database_id).await);

    // The same allocation twice is a conflict, not a second database.
    let r = app
        .post("/api/databases", &p, json!({"name": "again"}))
        .await;
    assert_eq!(r.status, 409);
}

#[tokio::test]
async fn create_database_rejects_bad_names_and_bodies() {
    let app = spawn_app().await;
    let user = user_id();
    for (body, needle) in [
        (json!({}), "name is required"),
        (json!({"name": null}), "name is required"),
        (json!({"name": 5}), "must be a string"),
        (json!({"name": "   "}), "must not be blank"),
        (json!([]), "JSON object"),
        (json!("name"), "JSON object"),
    ] {
        let p = creator(&user);
        let id = p.new_database.clone().unwrap().database_id;
        let r = app.post("/api/databases", &p, body.clone()).await;
        assert_eq!((r.status, r.error_code()), (400, "bad_request"), "{body}");
        assert!(
            r.error_message().contains(needle),
            "{body}: {}",
            r.error_message()
        );
        assert!(!schema_exists(&app, &id).await);
    }
    for raw in ["{\"name\":", "", "not json"] {
        let r = app
            .call(
                "POST",
                "/api/databases",
                Signing::With(&creator(&user)),
                Body::Raw(raw),
            )
            .await;
        assert_eq!(r.status, 400, "{raw:?}");
        assert_eq!(r.error_message(), "Request body must be valid JSON.");
    }
    let n: i64 = app
        .pg
        .query_one(
            "SELECT count(*) FROM databases WHERE owner_id = $1",
            &[&user],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, 0);
}

#[tokio::test]
async fn create_database_refusals() {
    let app = spawn_app().await;
    let p = read_only(creator(&user_id()));
    let r = app.post("/api/databases", &p, json!({"name": "x"})).await;
    assert_eq!(
        (r.status, r.error_message()),
        (403, forbidden::KEY_READ_ONLY)
    );
    let mut p = creator(&user_id());
    p.narrowed = true;
    let r = app.post("/api/databases", &p, json!({"name": "x"})).await;
    assert_eq!(
        (r.status, r.error_message()),
        (403, forbidden::NARROWED_KEY_CREATE)
    );
    let mut p = creator(&user_id());
    p.new_database.as_mut().unwrap().shard.name = "another-shard".into();
    let r = app.post("/api/databases", &p, json!({"name": "x"})).await;
    assert_eq!(r.status, 421);
    let r = app
        .post("/api/databases", &bare(&user_id()), json!({"name": "x"}))
        .await;
    assert_eq!(r.status, 500);
    assert_eq!(
        r.body,
        json!({"error": {"code": "internal", "message": "Something went wrong."}})
    );
}

#[tokio::test]
async fn oversized_body_is_400_naming_the_limit() {
    let app = spawn_app().await;
    let big = "x".repeat(11 * 1024 * 1024);
    let r = app
        .post(
            "/api/databases",
            &creator(&user_id()),
            json!({ "name": big }),
        )
        .await;
    assert_eq!(r.status, 400);
    assert!(
        r.error_message().contains("10 MiB"),
        "{}",
        r.error_message()
    );
}

async fn database_row(app: &TestApp, id: &str) -> (String, Option<String>, String) {
    let row = app
        .pg
        .query_one(
            "SELECT name, color, updated_by FROM databases WHERE id = $1",
            &[&id],
        )
        .await
        .unwrap();
    (row.get(0), row.get(1), row.get(2))
}

#[tokio::test]
async fn patch_database_name_and_colour() {
    let app = spawn_app().await;
    let (db, owner) = app.owned_database().await;
    let path = format!("/api/databases/{db}");
    let before = app
        .post(
            "/internal/databases/lookup",
            &bare(&owner.user_id),
            json!({"database_ids": [db]}),
        )
        .await
        .body["databases"][0]
        .clone();

    let ed = editor(&db);
    let r = app
        .patch(
            &path,
            &ed,
            json!({"name": " Renamed ", "color": "nile", "icon": "x"}),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let d = &r.body["database"];
    assert_eq!(d["name"], " Renamed ");
    assert_eq!(d["color"], "nile");
    assert_eq!(d["icon"], json!(null));
    assert_eq!(d["updated_by"], ed.user_id.as_str());
    assert_eq!(d["owner_id"], owner.user_id.as_str());
    assert_ms_timestamp(&d["updated_at"]);
    assert!(d["updated_at"].as_str() > before["updated_at"].as_str());

    // Colour only; null clears; name null counts as absent.
    let r = app
        .patch(&path, &owner, json!({"name": null, "color": null}))
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body["database"]["color"], json!(null));
    assert_eq!(r.body["database"]["name"], " Renamed ");
    // Empty string blanks the name.
    let r = app.patch(&path, &owner, json!({"name": ""})).await;
    assert_eq!(
        (r.status, r.body["database"]["name"].clone()),
        (200, json!(""))
    );
}

#[tokio::test]
async fn patch_database_validates_before_writing() {
    let app = spawn_app().await;
    let (db, owner) = app.owned_database().await;
    let path = format!("/api/databases/{db}");
    let before = database_row(&app, &db).await;
    for (body, needle) in [
        (json!({"name": "New", "color": 5}), "\"5\""),
        (json!({"name": "New", "color": "purple"}), "purple"),
        (json!({"name": "New", "color": true}), "\"true\""),
        (json!({}), "name"),
        (json!({"name": null}), "name"),
        (json!({"name": 7}), "name"),
        (json!({"icon": "x", "position": 3}), "name"),
    ] {
        let r = app.patch(&path, &owner, body.clone()).await;
        assert_eq!((r.status, r.error_code()), (400, "bad_request"), "{body}");
        assert!(
            r.error_message().contains(needle),
            "{body}: {}",
            r.error_message()
        );
        assert_eq!(
            database_row(&app, &db).await,
            before,
            "{body} changed something"
        );
    }
    let r = app
        .call("PATCH", &path, Signing::With(&owner), Body::Raw("[1,2]"))
        .await;
    assert_eq!(r.error_message(), "Request body must be a JSON object.");
}

#[tokio::test]
async fn database_write_refusals() {
    let app = spawn_app().await;
    let (db, owner) = app.owned_database().await;
    let path = format!("/api/databases/{db}");
    let body = json!({"name": "Nope"});
    let cases = [
        (read_only(owner.clone()), forbidden::KEY_READ_ONLY),
        (read_only(support(&db)), forbidden::KEY_READ_ONLY),
        (support(&db), forbidden::SUPPORT_READ_ONLY),
        (viewer(&db), forbidden::VIEWER),
    ];
    for (p, message) in &cases {
        let r = app.patch(&path, p, body.clone()).await;
        assert_eq!((r.status, r.error_message()), (403, *message));
        assert_eq!(r.error_code(), "forbidden");
    }
    assert_eq!(database_row(&app, &db).await.0, "Test");

    // No key may delete a database, whatever its role.
    let delete_cases = [
        (owner.clone(), forbidden::OWNER_DELETE_DATABASE),
        (editor(&db), forbidden::OWNER_DELETE_DATABASE),
        (viewer(&db), forbidden::VIEWER),
        (support(&db), forbidden::SUPPORT_READ_ONLY),
        (read_only(owner.clone()), forbidden::KEY_READ_ONLY),
    ];
    for (p, message) in &delete_cases {
        let r = app.delete(&path, p).await;
        assert_eq!((r.status, r.error_message()), (403, *message));
    }
    let r = app
        .post(
            "/internal/databases/lookup",
            &bare(&owner.user_id),
            json!({"database_ids": [db]}),
        )
        .await;
    assert_eq!(r.body["databases"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn purge_drops_schema_and_catalog_rows() {
    let app = spawn_app().await;
    let (db, owner) = app.owned_database().await;
    let t = app.create_table(&db, &owner, "T").await;
    let tid = t["id"].as_str().unwrap().to_string();
    app.pg
        .execute(
            "INSERT INTO fields (id, table_id, database_id, name, type, position)
             VALUES ($1, $2, $3, 'F', 'single_line_text', 0)",
            &[&format!("fld_{}", &tid[4..]), &tid, &db],
        )
        .await
        .unwrap();
    assert!(shard_node::databases::delete::purge(&app.db, &db)
        .await
        .unwrap());
    assert!(!schema_exists(&app, &db).await);
    for sql in [
        "SELECT count(*) FROM databases WHERE id = $1",
        "SELECT count(*) FROM tables WHERE database_id = $1",
        "SELECT count(*) FROM fields WHERE database_id = $1",
    ] {
        let n: i64 = app.pg.query_one(sql, &[&db]).await.unwrap().get(0);
        assert_eq!(n, 0, "{sql}");
    }
    assert!(!shard_node::databases::delete::purge(&app.db, &db)
        .await
        .unwrap());
    // Now the shard no longer holds it.
    let r = app
        .get(&format!("/api/databases/{db}/tables"), &owner)
        .await;
    assert_eq!(r.status, 421);
}
