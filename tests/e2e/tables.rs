//! Part B, Tables: create, list, get, rename, delete, the cap, and the real
//! Postgres table behind each one.

use e2e_tests::{database_postgres, id, unique, Person};
use futures::future::join_all;
use serde_json::json;

#[tokio::test]
async fn a_table_is_a_real_postgres_table_with_the_five_internal_columns() {
    let person = Person::new().await;
    let db_id = &person.api.new_database("t").await;
    let table = person.api.create_table(db_id, "  Projects ").await;
    let tid = table["id"].as_str().unwrap();
    assert!(
        tid.starts_with("tbl_") && tid[4..9] == db_id[3..8],
        "table id carries the database's tag"
    );
    assert_eq!(table["name"], "  Projects ", "stored untrimmed");
    assert_eq!(table["database_id"], db_id.as_str());
    assert_eq!(table["position"], 0);
    assert_eq!(table["display_field_id"], json!(null));
    assert_eq!(table["fields"], json!([]));

    let pg = database_postgres(db_id).await;
    let cols: Vec<String> = pg
        .query(
            "SELECT column_name::text FROM information_schema.columns WHERE table_schema = $1 AND table_name = $2 ORDER BY column_name",
            &[&db_id, &tid],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(
        cols,
        vec!["created_at", "created_by", "deleted_at", "id", "updated_at"]
    );
}

#[tokio::test]
async fn list_get_rename_delete() {
    let person = Person::new().await;
    let db = person.api.create_database(&unique("t")).await;
    let db_id = &id(&db);
    let a = person.api.create_table(db_id, "A").await;
    let b = person.api.create_table(db_id, "B").await;
    assert_eq!(b["position"], 1);

    let list = person
        .api
        .get(&format!("/api/databases/{db_id}/tables"))
        .await;
    let tables = list.expect_ok()["tables"].as_array().unwrap().clone();
    assert_eq!(
        tables
            .iter()
            .map(|t| t["name"].as_str().unwrap())
            .collect::<Vec<_>>(),
        vec!["A", "B"]
    );
    assert!(tables.iter().all(|t| t["fields"] == json!([])));

    let a_id = a["id"].as_str().unwrap();
    let got = person.api.get(&format!("/api/tables/{a_id}")).await;
    assert_eq!(got.expect_ok()["table"]["id"], a_id);
    assert_eq!(got.body["table"]["fields"], json!([]));

    let renamed = person
        .api
        .patch(
            &format!("/api/tables/{a_id}"),
            json!({"name": " Alpha ", "position": 9, "display_field_id": "fld_x"}),
        )
        .await;
    let t = renamed.expect_ok()["table"].clone();
    assert_eq!(t["name"], " Alpha ");
    assert_eq!(t["position"], 0, "position is ignored");
    assert_eq!(t["display_field_id"], json!(null));
    assert!(
        t.get("fields").is_none(),
        "the rename response has no fields: {t}"
    );

    let dbs = person.api.get("/api/databases").await;
    let now = &dbs.expect_ok()["databases"][0];
    assert_ne!(
        now["updated_at"], db["updated_at"],
        "structural work bumps the database"
    );

    person
        .api
        .delete(&format!("/api/tables/{a_id}"))
        .await
        .expect_ok();
    assert_eq!(
        person
            .api
            .delete(&format!("/api/tables/{}", b["id"].as_str().unwrap()))
            .await
            .body,
        json!({"deleted": true})
    );
    person
        .api
        .get(&format!("/api/tables/{a_id}"))
        .await
        .expect_error(404, "not_found");
    let list = person
        .api
        .get(&format!("/api/databases/{db_id}/tables"))
        .await;
    assert_eq!(list.expect_ok()["tables"], json!([]));

    let pg = database_postgres(db_id).await;
    let left = pg
        .query(
            "SELECT 1 FROM information_schema.tables WHERE table_schema = $1",
            &[&db_id],
        )
        .await
        .unwrap();
    assert!(left.is_empty(), "dropped tables leave no Postgres table");
}

#[tokio::test]
async fn create_and_rename_validate_the_body() {
    let person = Person::new().await;
    let db_id = &person.api.new_database("t").await;
    let path = format!("/api/databases/{db_id}/tables");
    for body in [
        json!({}),
        json!({"name": ""}),
        json!({"name": "  "}),
        json!({"name": 1}),
        json!({"name": null}),
    ] {
        person
            .api
            .post(&path, body)
            .await
            .expect_error(400, "bad_request");
    }
    for raw in ["{", "[]", "1"] {
        person
            .api
            .post_raw(&path, raw)
            .await
            .expect_error(400, "bad_request");
    }
    let t = person.api.create_table(db_id, "T").await;
    let tpath = format!("/api/tables/{}", t["id"].as_str().unwrap());
    for body in [
        json!({}),
        json!({"name": ""}),
        json!({"name": " "}),
        json!({"name": 3}),
        json!({"position": 2}),
    ] {
        person
            .api
            .patch(&tpath, body)
            .await
            .expect_error(400, "bad_request");
    }
    person
        .api
        .patch_raw(&tpath, "nope")
        .await
        .expect_error(400, "bad_request");
    let list = person.api.get(&path).await;
    let tables = list.expect_ok()["tables"].as_array().unwrap().clone();
    assert_eq!(tables.len(), 1);
    assert_eq!(tables[0]["name"], "T");
}

#[tokio::test]
async fn a_database_holds_at_most_200_tables() {
    let person = Person::new().await;
    let db_id = &person.api.new_database("cap").await;
    let path = format!("/api/databases/{db_id}/tables");
    for chunk in (0..200).collect::<Vec<_>>().chunks(10) {
        for r in join_all(
            chunk
                .iter()
                .map(|i| person.api.post(&path, json!({"name": format!("t{i}")}))),
        )
        .await
        {
            r.expect_ok();
        }
    }
    let msg = person
        .api
        .post(&path, json!({"name": "t200"}))
        .await
        .expect_error(400, "bad_request");
    assert!(msg.contains("200"), "{msg}");
    let list = person.api.get(&path).await;
    let tables = list.expect_ok()["tables"].as_array().unwrap().clone();
    assert_eq!(tables.len(), 200);
    let mut positions: Vec<i64> = tables
        .iter()
        .map(|t| t["position"].as_i64().unwrap())
        .collect();
    positions.dedup();
    assert_eq!(
        positions,
        (0..200).collect::<Vec<i64>>(),
        "concurrent creates get distinct positions"
    );
}
