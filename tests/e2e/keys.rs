//! Part C key scope: revocation, suspension, read-only and narrowed keys,
//! and key updates taking effect at once.

use cluster_protocol::control::{Access, DatabaseScope, UpdateKey};
use cluster_protocol::error::forbidden;
use e2e_tests::{cluster, id, ids_in, unique, Person};
use serde_json::json;

#[tokio::test]
async fn a_revoked_key_is_refused_on_the_very_next_request() {
    let person = Person::new().await;
    // A tagged read too, so the key is warm on the router's hot path
    // (digest verified, access and placement cached).
    let table = warm_table_read(&person).await;
    person.api.get("/api/meta/whoami").await.expect_ok();
    cluster()
        .control_plane
        .revoke_key(&person.key_id)
        .await
        .expect("revoke");
    person
        .api
        .get("/api/meta/whoami")
        .await
        .expect_error(401, "unauthorized");
    person
        .api
        .get("/api/databases")
        .await
        .expect_error(401, "unauthorized");
    person
        .api
        .get(&table)
        .await
        .expect_error(401, "unauthorized");
}

/// Creates a database and table for `person` and reads the table twice;
/// returns the table's path.
async fn warm_table_read(person: &Person) -> String {
    let db = person.api.new_database("warm").await;
    let table = id(&person.api.create_table(&db, "t").await);
    let path = format!("/api/tables/{table}");
    person.api.get(&path).await.expect_ok();
    person.api.get(&path).await.expect_ok();
    path
}

#[tokio::test]
async fn a_suspended_account_gets_401_until_unsuspended() {
    let person = Person::new().await;
    let (_, second) = person
        .another_key(Access::ReadOnly, DatabaseScope::All)
        .await;
    let table = warm_table_read(&person).await;
    person.api.get("/api/databases").await.expect_ok();
    second.get("/api/databases").await.expect_ok();
    cluster()
        .control_plane
        .suspend_user(&person.user_id, true)
        .await
        .expect("suspend");
    person
        .api
        .get("/api/databases")
        .await
        .expect_error(401, "unauthorized");
    person
        .api
        .get(&table)
        .await
        .expect_error(401, "unauthorized");
    second
        .get("/api/meta/whoami")
        .await
        .expect_error(401, "unauthorized");
    cluster()
        .control_plane
        .suspend_user(&person.user_id, false)
        .await
        .expect("unsuspend");
    person.api.get("/api/databases").await.expect_ok();
    second.get("/api/meta/whoami").await.expect_ok();
    person.api.get(&table).await.expect_ok();
}

#[tokio::test]
async fn a_read_only_key_refuses_every_write_whatever_the_role() {
    let owner = Person::new().await;
    let db_id = &owner.api.new_database("ro").await;
    let table = owner.api.create_table(db_id, "Tasks").await;
    let (_, ro) = owner
        .another_key(Access::ReadOnly, DatabaseScope::All)
        .await;

    let who = ro.get("/api/meta/whoami").await;
    assert_eq!(who.expect_ok()["key"]["access"], "read_only");
    ro.get(&format!("/api/databases/{db_id}/tables"))
        .await
        .expect_ok();
    ro.get(&format!("/api/tables/{}", table["id"].as_str().unwrap()))
        .await
        .expect_ok();

    let writes = [
        ro.post("/api/databases", json!({"name": "x"})).await,
        ro.post(
            &format!("/api/databases/{db_id}/tables"),
            json!({"name": "x"}),
        )
        .await,
        ro.patch(&format!("/api/databases/{db_id}"), json!({"name": "x"}))
            .await,
        ro.patch(
            &format!("/api/tables/{}", table["id"].as_str().unwrap()),
            json!({"name": "x"}),
        )
        .await,
        ro.delete(&format!("/api/tables/{}", table["id"].as_str().unwrap()))
            .await,
    ];
    for r in writes {
        assert_eq!(r.expect_error(403, "forbidden"), forbidden::KEY_READ_ONLY);
    }
    let tables = owner
        .api
        .get(&format!("/api/databases/{db_id}/tables"))
        .await;
    assert_eq!(
        tables.expect_ok()["tables"].as_array().unwrap().len(),
        1,
        "nothing was written"
    );
}

#[tokio::test]
async fn a_narrowed_key_sees_only_its_databases_and_cannot_create_one() {
    let owner = Person::new().await;
    let a = owner.api.create_database(&unique("a")).await;
    let b = owner.api.create_database(&unique("b")).await;
    let a_id = a["id"].as_str().unwrap().to_string();
    let b_id = b["id"].as_str().unwrap();
    let (_, narrow) = owner
        .another_key(Access::ReadWrite, DatabaseScope::Only(vec![a_id.clone()]))
        .await;

    let who = narrow.get("/api/meta/whoami").await;
    assert_eq!(who.expect_ok()["key"]["databases"], json!([a_id]));
    let list = narrow.get("/api/databases").await;
    assert_eq!(ids_in(list.expect_ok(), "databases"), vec![a_id.clone()]);

    narrow
        .get(&format!("/api/databases/{a_id}/tables"))
        .await
        .expect_ok();
    narrow
        .get(&format!("/api/databases/{b_id}/tables"))
        .await
        .expect_error(404, "not_found");
    narrow
        .post(
            &format!("/api/databases/{b_id}/tables"),
            json!({"name":"t"}),
        )
        .await
        .expect_error(404, "not_found");
    narrow
        .post("/api/databases", json!({"name": "new"}))
        .await
        .expect_error(403, "forbidden");
}

#[tokio::test]
async fn key_updates_apply_without_a_new_secret() {
    let owner = Person::new().await;
    let db_id = &owner.api.new_database("upd").await;
    let cp = &cluster().control_plane;
    cp.update_key(
        &owner.key_id,
        &UpdateKey {
            name: None,
            access: Some(Access::ReadOnly),
            databases: None,
        },
    )
    .await
    .expect("update");
    let r = owner
        .api
        .post(
            &format!("/api/databases/{db_id}/tables"),
            json!({"name": "t"}),
        )
        .await;
    assert_eq!(r.expect_error(403, "forbidden"), forbidden::KEY_READ_ONLY);

    cp.update_key(
        &owner.key_id,
        &UpdateKey {
            name: None,
            access: Some(Access::ReadWrite),
            databases: Some(DatabaseScope::Only(vec!["db_000000000000".into()])),
        },
    )
    .await
    .expect("update");
    owner
        .api
        .get(&format!("/api/databases/{db_id}/tables"))
        .await
        .expect_error(404, "not_found");

    cp.update_key(
        &owner.key_id,
        &UpdateKey {
            name: None,
            access: None,
            databases: Some(DatabaseScope::All),
        },
    )
    .await
    .expect("update");
    owner
        .api
        .post(
            &format!("/api/databases/{db_id}/tables"),
            json!({"name": "t"}),
        )
        .await
        .expect_ok();
}
