use cluster_protocol::error::forbidden;
use serde_json::{json, Value};

use crate::helpers::*;

async fn real_columns(app: &TestApp, db: &str, table: &str) -> Vec<(String, String, String)> {
    app.pg
        .query(
            "SELECT column_name::text, data_type::text, is_nullable::text
             FROM information_schema.columns
             WHERE table_schema = $1 AND table_name = $2 ORDER BY ordinal_position",
            &[&db, &table],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect()
}

/// The collation of each column of `table` that has one other than the
/// database default.
pub async fn id_collations(app: &TestApp, db: &str, table: &str) -> Vec<(String, String)> {
    app.pg
        .query(
            "SELECT column_name::text, collation_name::text
             FROM information_schema.columns
             WHERE table_schema = $1 AND table_name = $2 AND collation_name IS NOT NULL
             ORDER BY ordinal_position",
            &[&db, &table],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect()
}

async fn database_json(app: &TestApp, db: &str, user: &str) -> Value {
    app.post(
        "/internal/databases/lookup",
        &bare(user),
        json!({"database_ids": [db]}),
    )
    .await
    .body["databases"][0]
        .clone()
}

#[tokio::test]
async fn create_table_makes_a_real_table() {
    let app = spawn_app().await;
    let (db, owner) = app.owned_database().await;
    let before = database_json(&app, &db, &owner.user_id).await;
    let ed = editor(&db);
    let r = app
        .post(
            &format!("/api/databases/{db}/tables"),
            &ed,
            json!({"name": "  Leads ", "position": 9}),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let t = &r.body["table"];
    let tid = t["id"].as_str().unwrap();
    assert!(
        tid.starts_with(&format!("tbl_{}", &db[3..8])),
        "{tid} carries the tag"
    );
    assert_eq!(tid.len(), 16);
    assert_eq!(t["database_id"], db.as_str());
    assert_eq!(t["name"], "  Leads ");
    assert_eq!(t["position"], 0);
    assert_eq!(t["display_field_id"], json!(null));
    assert_eq!(t["fields"], json!([]));
    assert_ms_timestamp(&t["created_at"]);
    assert_ms_timestamp(&t["updated_at"]);

    let cols = real_columns(&app, &db, tid).await;
    let expected: Vec<(String, String, String)> = [
        ("id", "text", "NO"),
        ("created_at", "timestamp with time zone", "NO"),
        ("updated_at", "timestamp with time zone", "NO"),
        ("created_by", "text", "YES"),
        ("deleted_at", "timestamp with time zone", "YES"),
    ]
    .iter()
    .map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string()))
    .collect();
    assert_eq!(cols, expected);
    assert_eq!(
        id_collations(&app, &db, tid).await,
        vec![("id".to_string(), "C".to_string())],
        "record ids compare byte by byte"
    );

    let after = database_json(&app, &db, &owner.user_id).await;
    assert_eq!(after["updated_by"], ed.user_id.as_str());
    assert!(after["updated_at"].as_str() > before["updated_at"].as_str());

    let second = app.create_table(&db, &ed, "Second").await;
    assert_eq!(second["position"], 1);
}

#[tokio::test]
async fn create_table_validation_and_refusals() {
    let app = spawn_app().await;
    let (db, owner) = app.owned_database().await;
    let path = format!("/api/databases/{db}/tables");
    for body in [
        json!({}),
        json!({"name": null}),
        json!({"name": 1}),
        json!({"name": " \n "}),
    ] {
        let r = app.post(&path, &owner, body.clone()).await;
        assert_eq!((r.status, r.error_code()), (400, "bad_request"), "{body}");
        assert!(r.error_message().contains("name"), "{body}");
    }
    let r = app
        .call("POST", &path, Signing::With(&owner), Body::Raw("{"))
        .await;
    assert_eq!(
        (r.status, r.error_message()),
        (400, "Request body must be valid JSON.")
    );
    let r = app
        .call("POST", &path, Signing::With(&owner), Body::Raw("3"))
        .await;
    assert_eq!(
        (r.status, r.error_message()),
        (400, "Request body must be a JSON object.")
    );
    for (p, message) in [
        (viewer(&db), forbidden::VIEWER),
        (support(&db), forbidden::SUPPORT_READ_ONLY),
        (read_only(editor(&db)), forbidden::KEY_READ_ONLY),
    ] {
        let r = app.post(&path, &p, json!({"name": "x"})).await;
        assert_eq!((r.status, r.error_message()), (403, message));
    }
    let r = app.get(&path, &owner).await;
    assert_eq!(r.body["tables"], json!([]));
}

#[tokio::test]
async fn at_most_200_tables_per_database() {
    let app = spawn_app().await;
    let (db, owner) = app.owned_database().await;
    app.pg
        .execute(
            "INSERT INTO tables (id, database_id, name, position)
             SELECT 'tbl_' || substr($1, 4, 5) || lpad(g::text, 7, '0'), $1, 'filler', g
             FROM generate_series(0, 198) AS g",
            &[&db],
        )
        .await
        .unwrap();
    let t = app.create_table(&db, &owner, "Two hundredth").await;
    assert_eq!(t["position"], 199);
    let r = app
        .post(
            &format!("/api/databases/{db}/tables"),
            &owner,
            json!({"name": "One too many"}),
        )
        .await;
    assert_eq!(r.status, 400);
    assert_eq!(r.error_message(), "A database can hold at most 200 tables.");
    let n: i64 = app
        .pg
        .query_one("SELECT count(*) FROM tables WHERE database_id = $1", &[&db])
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, 200);
}

#[tokio::test]
async fn concurrent_creates_get_distinct_positions() {
    let app = spawn_app().await;
    let (db, owner) = app.owned_database().await;
    let creates =
        (0..8).map(|i| app.create_table(&db, &owner, if i % 2 == 0 { "even" } else { "odd" }));
    let tables = futures::future::join_all(creates).await;
    let mut positions: Vec<i64> = tables
        .iter()
        .map(|t| t["position"].as_i64().unwrap())
        .collect();
    positions.sort();
    assert_eq!(positions, (0..8).collect::<Vec<_>>());
}

#[tokio::test]
async fn list_and_get_tables_with_fields() {
    let app = spawn_app().await;
    let (db, owner) = app.owned_database().await;
    let a = app.create_table(&db, &owner, "A").await;
    let b = app.create_table(&db, &owner, "B").await;
    let aid = a["id"].as_str().unwrap();
    for name in ["First", "Second"] {
        let r = app
            .post(
                &format!("/api/tables/{aid}/fields"),
                &owner,
                json!({"name": name, "type": "single_line_text", "options": {"unique": false}}),
            )
            .await;
        assert_eq!(r.status, 200, "{:?}", r.body);
    }
    for reader in [viewer(&db), support(&db), read_only(viewer(&db))] {
        let r = app
            .get(&format!("/api/databases/{db}/tables"), &reader)
            .await;
        assert_eq!(r.status, 200, "{:?}", r.body);
        let tables = r.body["tables"].as_array().unwrap();
        assert_eq!(tables.len(), 2);
        assert_eq!(tables[0]["id"], a["id"]);
        assert_eq!(tables[1]["id"], b["id"]);
        assert_eq!(tables[1]["fields"], json!([]));
        let names: Vec<&str> = tables[0]["fields"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["First", "Second"]);
    }
    let r = app.get(&format!("/api/tables/{aid}"), &viewer(&db)).await;
    assert_eq!(r.status, 200);
    let t = &r.body["table"];
    assert_eq!(t["database_id"], db.as_str());
    let f = &t["fields"][0];
    assert_eq!(
        f.as_object().unwrap().keys().collect::<Vec<_>>(),
        ["id", "name", "operators", "options", "position", "type"]
    );
    assert_eq!(f["type"], "single_line_text");
    assert_eq!(f["options"], json!({"unique": false}));
    assert_eq!(f["position"], 0);
    assert_eq!(
        f["operators"],
        json!([
            "is",
            "is_not",
            "contains",
            "not_contains",
            "empty",
            "not_empty"
        ])
    );
    assert_eq!(t["display_field_id"], f["id"]);
}

#[tokio::test]
async fn patch_table_renames_only() {
    let app = spawn_app().await;
    let (db, owner) = app.owned_database().await;
    let t = app.create_table(&db, &owner, "Old").await;
    let tid = t["id"].as_str().unwrap();
    let path = format!("/api/tables/{tid}");
    let before = database_json(&app, &db, &owner.user_id).await;
    let ed = editor(&db);
    let r = app
        .patch(
            &path,
            &ed,
            json!({"name": " New ", "position": 42, "display_field_id": "fld_x"}),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let got = &r.body["table"];
    assert!(
        got.get("fields").is_none(),
        "rename reply has no fields: {got}"
    );
    assert_eq!(got["name"], " New ");
    assert_eq!(got["position"], 0);
    assert_eq!(got["display_field_id"], json!(null));
    assert_eq!(got["database_id"], db.as_str());
    assert!(got["updated_at"].as_str() > t["updated_at"].as_str());
    let after = database_json(&app, &db, &owner.user_id).await;
    assert_eq!(after["updated_by"], ed.user_id.as_str());
    assert!(after["updated_at"].as_str() > before["updated_at"].as_str());

    for body in [
        json!({}),
        json!({"name": ""}),
        json!({"name": "  "}),
        json!({"name": 3}),
        json!({"position": 1}),
    ] {
        let r = app.patch(&path, &owner, body.clone()).await;
        assert_eq!((r.status, r.error_code()), (400, "bad_request"), "{body}");
    }
    let r = app.patch(&path, &viewer(&db), json!({"name": "v"})).await;
    assert_eq!((r.status, r.error_message()), (403, forbidden::VIEWER));
    let r = app.get(&path, &owner).await;
    assert_eq!(r.body["table"]["name"], " New ");
    assert_eq!(r.body["table"]["fields"], json!([]));
}

#[tokio::test]
async fn delete_table_is_owner_only_and_drops_the_real_table() {
    let app = spawn_app().await;
    let (db, owner) = app.owned_database().await;
    let t = app.create_table(&db, &owner, "Doomed").await;
    let tid = t["id"].as_str().unwrap();
    let path = format!("/api/tables/{tid}");
    for (p, message) in [
        (editor(&db), forbidden::OWNER_DELETE_TABLE),
        (viewer(&db), forbidden::VIEWER),
        (support(&db), forbidden::SUPPORT_READ_ONLY),
        (read_only(owner.clone()), forbidden::KEY_READ_ONLY),
    ] {
        let r = app.delete(&path, &p).await;
        assert_eq!((r.status, r.error_message()), (403, message));
    }
    assert_eq!(real_columns(&app, &db, tid).await.len(), 5);

    let before = database_json(&app, &db, &owner.user_id).await;
    let r = app.delete(&path, &owner).await;
    assert_eq!((r.status, r.body.clone()), (200, json!({"deleted": true})));
    assert!(real_columns(&app, &db, tid).await.is_empty());
    let after = database_json(&app, &db, &owner.user_id).await;
    assert!(after["updated_at"].as_str() > before["updated_at"].as_str());
    let r = app.get(&path, &owner).await;
    assert_eq!(r.status, 404);
    let r = app.delete(&path, &owner).await;
    assert_eq!(r.status, 404);
}
