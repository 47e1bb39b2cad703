//! Part B, Fields, through the real router: create/list/update/delete, the
//! real columns, formulas computed by the shard's PostgreSQL, links with
//! their mirror and connector, roles.

use cluster_protocol::control::Role;
use e2e_tests::{cluster, shard_postgres, unique, Person};
use serde_json::{json, Value};

fn id(v: &Value) -> String {
    v["id"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn formula_columns_compute_in_postgres() {
    let person = Person::new().await;
    let db = person.api.create_database(&unique("f")).await;
    let db_id = id(&db);
    let table = person.api.create_table(&db_id, "Orders").await;
    let tid = id(&table);
    let path = format!("/api/tables/{tid}/fields");
    let price = person.api.post(&path, json!({"name": " Price ", "type": "number"})).await;
    let price = price.expect_ok()["field"].clone();
    assert_eq!(price["name"], "Price");
    assert_eq!(price["operators"][2], "greater");
    let qty = person.api.post(&path, json!({"name": "Qty", "type": "number"})).await.expect_ok()["field"].clone();
    let total = person
        .api
        .post(&path, json!({"name": "Total", "type": "formula", "options": {"expression": "{Price} * Qty"}}))
        .await;
    let total = total.expect_ok()["field"].clone();
    assert_eq!(total["type"], "formula_number");
    assert_eq!(total["options"]["expression"], "{Price} * {Qty}");
    assert_eq!(total["options"]["referenced_field_ids"], json!([id(&price), id(&qty)]));

    let shard = cluster().control_plane.database(&db_id).await.unwrap().shard;
    let pg = shard_postgres(&shard).await;
    pg.execute(
        &format!("INSERT INTO \"{db_id}\".\"{tid}\" (id, \"{}\", \"{}\") VALUES ('rec_e2e', 2.5, 4)", id(&price), id(&qty)),
        &[],
    )
    .await
    .unwrap();
    let v: String = pg
        .query_one(&format!("SELECT \"{}\"::text FROM \"{db_id}\".\"{tid}\"", id(&total)), &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(v, "10");

    let bad = person.api.post(&path, json!({"name": "Bad", "type": "formula", "options": {"expression": "UPPER(1)"}})).await;
    let msg = bad.expect_error(400, "bad_request");
    assert!(msg.contains("character 7"), "{msg}");

    // Table responses carry operators and the display field.
    let t = person.api.get(&format!("/api/tables/{tid}")).await.expect_ok()["table"].clone();
    assert_eq!(t["display_field_id"], price["id"]);
    assert_eq!(t["fields"].as_array().unwrap().len(), 3);
    assert!(t["fields"][2]["operators"].is_array());

    // Update: no operators in the reply; the rename rewrites the formula.
    let r = person.api.patch(&format!("/api/fields/{}", id(&price)), json!({"name": "Unit price"})).await;
    assert!(r.expect_ok()["field"].get("operators").is_none());
    let fields = person.api.get(&path).await.expect_ok()["fields"].clone();
    assert_eq!(fields[2]["options"]["expression"], "{Unit price} * {Qty}");
    // Deleting a field a formula reads is refused, naming the formula.
    let r = person.api.delete(&format!("/api/fields/{}", id(&qty))).await;
    assert!(r.expect_error(400, "bad_request").contains("'Total'"));
    person.api.delete(&format!("/api/fields/{}", id(&total))).await.expect_ok();
    person.api.delete(&format!("/api/fields/{}", id(&qty))).await.expect_ok();
}

#[tokio::test]
async fn links_mirror_and_roles() {
    let owner = Person::new().await;
    let db = owner.api.create_database(&unique("l")).await;
    let db_id = id(&db);
    let a = id(&owner.api.create_table(&db_id, "People").await);
    let b = id(&owner.api.create_table(&db_id, "Tasks").await);
    let viewer = Person::new().await;
    viewer.join(&db_id, Role::Viewer).await;
    let stranger = Person::new().await;

    let body = json!({"name": "Tasks", "type": "link", "options": {"target_table_id": b}});
    let r = viewer.api.post(&format!("/api/tables/{a}/fields"), body.clone()).await;
    r.expect_error(403, "forbidden");
    let r = stranger.api.post(&format!("/api/tables/{a}/fields"), body.clone()).await;
    r.expect_error(404, "not_found");
    let link = owner.api.post(&format!("/api/tables/{a}/fields"), body.clone()).await.expect_ok()["field"].clone();
    let mirror_id = link["options"]["pair_field_id"].as_str().unwrap().to_owned();
    let listed = viewer.api.get(&format!("/api/tables/{b}/fields")).await.expect_ok()["fields"].clone();
    assert_eq!(listed[0]["id"], mirror_id.as_str());
    assert_eq!(listed[0]["name"], "People");
    assert_eq!(listed[0]["options"]["direction"], "reverse");
    // The same link again clashes with the mirror's name on the target.
    let r = owner.api.post(&format!("/api/tables/{a}/fields"), json!({"name": "T2", "type": "link", "options": {"target_table_id": b}})).await;
    r.expect_error(409, "conflict");

    let shard = cluster().control_plane.database(&db_id).await.unwrap().shard;
    let pg = shard_postgres(&shard).await;
    let connector = format!("lnk_{}", id(&link));
    let pk: i64 = pg
        .query_one(
            "SELECT count(*) FROM information_schema.table_constraints
             WHERE table_schema = $1 AND table_name = $2 AND constraint_type = 'PRIMARY KEY'",
            &[&db_id, &connector],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(pk, 1, "the connector has a primary key");

    let r = owner.api.patch(&format!("/api/fields/{}", id(&link)), json!({"options": {"target_table_id": a}})).await;
    assert!(r.expect_error(400, "bad_request").contains("target_table_id"));
    let r = owner.api.patch(&format!("/api/fields/{}", id(&link)), json!({"type": "formula"})).await;
    r.expect_error(400, "bad_request");

    viewer.api.delete(&format!("/api/fields/{}", id(&link))).await.expect_error(403, "forbidden");
    owner.api.delete(&format!("/api/fields/{}", id(&link))).await.expect_ok();
    let listed = owner.api.get(&format!("/api/tables/{b}/fields")).await.expect_ok()["fields"].clone();
    assert_eq!(listed, json!([]));
    let gone: i64 = pg
        .query_one(
            "SELECT count(*) FROM information_schema.tables WHERE table_schema = $1 AND table_name = $2",
            &[&db_id, &connector],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(gone, 0);
}
