//! `schema::cache::load`: the database's model from its four catalog reads,
//! sent together on one session, the same on a pooled session and inside a
//! read-only transaction, on the first call (statements prepared) and the
//! next ones (prepared statements reused), and 404 for a database this
//! shard does not hold.

use serde_json::{json, Value};
use shard_node::error::ApiError;
use shard_node::schema::cache::load;
use shard_node::schema::DatabaseSchema;

use crate::helpers::*;

/// Table ids, names and field ids in order, and webhook ids.
fn shape(s: &DatabaseSchema) -> Value {
    json!({
        "tables": s.tables.iter().map(|t| json!({
            "id": t.id, "name": t.name,
            "fields": t.fields.iter().map(|f| f.id.clone()).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
        "webhooks": s.webhooks.iter().map(|w| w.id.clone()).collect::<Vec<_>>(),
    })
}

#[tokio::test]
async fn the_model_loads_the_same_on_a_session_and_in_a_transaction_every_time() {
    let app = spawn_app().await;
    let (db, owner) = app.owned_database().await;
    let people = app.create_table_id(&db, &owner, "People").await;
    let items = app.create_table_id(&db, &owner, "Items").await;
    app.create_field_id(&people, &owner, "Name", "single_line_text")
        .await;
    app.create_field_id(&items, &owner, "Title", "single_line_text")
        .await;
    let r = app
        .post(
            &format!("/api/tables/{items}/fields"),
            &owner,
            json!({"name": "Owner", "type": "link", "options": {"target_table_id": people}}),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let r = app
        .post(
            &format!("/api/databases/{db}/webhooks"),
            &owner,
            json!({"url": "https://1.1.1.1/hook", "trigger_type": "record_created",
                   "table_id": items, "name": "New items"}),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let webhook = r.body["webhook"]["id"].as_str().unwrap().to_owned();

    // What the API says the database is.
    let mut tables = Vec::new();
    for id in [&people, &items] {
        let t = app.get(&format!("/api/tables/{id}"), &owner).await;
        assert_eq!(t.status, 200, "{:?}", t.body);
        let fields: Vec<Value> = t.body["table"]["fields"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["id"].clone())
            .collect();
        tables.push(json!({"id": id, "name": t.body["table"]["name"], "fields": fields}));
    }
    let expected = json!({"tables": tables, "webhooks": [webhook]});
    let version: i64 = app
        .pg
        .query_one("SELECT schema_version FROM databases WHERE id = $1", &[&db])
        .await
        .unwrap()
        .get(0);

    let mut client = app.db.client_for(&db).await.unwrap();
    for call in 0..3 {
        let s = load(&*client, &db).await.unwrap();
        assert_eq!(shape(&s), expected, "call {call} on the session");
        assert_eq!((s.version, s.timezone.as_str()), (version, "UTC"));
        let tx = client
            .build_transaction()
            .isolation_level(tokio_postgres::IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .await
            .unwrap();
        let s = load(&tx, &db).await.unwrap();
        tx.commit().await.unwrap();
        assert_eq!(shape(&s), expected, "call {call} in a transaction");
    }
    // Not held here: 404, and the session is still usable.
    assert!(matches!(
        load(&*client, "db_nothere1234").await,
        Err(ApiError::NotFound)
    ));
    assert_eq!(shape(&load(&*client, &db).await.unwrap()), expected);
}
