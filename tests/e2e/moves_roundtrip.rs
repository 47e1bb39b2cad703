//! A move there and back (issue 16): `move --wait` to the other shard and
//! back again, each flip bumping the placement's epoch by one, the records
//! identical at every stop, writes between the two moves kept, and nothing
//! left behind on either shard after each.

use cluster_protocol::control::MoveState;
use e2e_tests::moves::{assert_nothing_left, cli, database, move_done};
use e2e_tests::{id, Api, Person};
use serde_json::{json, Value};

use crate::moves_keep::other_shard;

/// The records of a listing path.
async fn listed(api: &Api, path: &str) -> Value {
    api.get(path).await.expect_ok()["records"].clone()
}

#[tokio::test]
async fn a_move_there_and_back_keeps_every_record_and_bumps_the_epoch() {
    let owner = Person::new().await;
    let api = &owner.api;
    let db = api.new_database("roundtrip").await;
    let people = id(&api.create_table(&db, "People").await);
    api.create_field(&people, json!({"name": "Name", "type": "single_line_text"}))
        .await;
    let tasks = id(&api.create_table(&db, "Tasks").await);
    api.create_field(
        &tasks,
        json!({"name": "Title", "type": "single_line_text", "options": {"unique": true}}),
    )
    .await;
    api.create_field(
        &tasks,
        json!({"name": "Who", "type": "link", "options": {"target_table_id": people}}),
    )
    .await;
    let folks = api
        .post(
            &format!("/api/tables/{people}/records"),
            json!({"records": [{"fields": {"Name": "Ann"}}, {"fields": {"Name": "Bob"}}]}),
        )
        .await;
    let folks = e2e_tests::ids_in(folks.expect_ok(), "records");
    let rows: Vec<Value> = (0..120)
        .map(|i| json!({"fields": {"Title": format!("t{i}"), "Who": [folks[i % 2]]}}))
        .collect();
    for chunk in rows.chunks(100) {
        api.post(
            &format!("/api/tables/{tasks}/records"),
            json!({ "records": chunk }),
        )
        .await
        .expect_ok();
    }
    let path = format!("/api/tables/{tasks}/records?page_size=1000&sort=Title");

    let start = database(&db).await;
    let there = other_shard(&start.shard).await;
    let before = listed(api, &path).await;
    let first = move_done(&db, &there).await;
    assert_eq!(first.from, start.shard);
    assert!(
        first.pause_ms.is_some(),
        "a done move reports its pause: {first:?}"
    );
    assert!(first.finished_at.is_some(), "{first:?}");
    let moved = database(&db).await;
    assert_eq!(moved.epoch, start.epoch + 1);
    assert_eq!(listed(api, &path).await, before);
    assert_nothing_left(&first).await;

    // A write and a structural change on the new shard, then back.
    api.post(
        &format!("/api/tables/{tasks}/records"),
        json!({"records": [{"fields": {"Title": "between", "Who": [folks[1]]}}]}),
    )
    .await
    .expect_ok();
    api.create_field(&tasks, json!({"name": "Points", "type": "number"}))
        .await;
    // The unique constraint came along: a duplicate is still refused.
    api.post(
        &format!("/api/tables/{tasks}/records"),
        json!({"records": [{"fields": {"Title": "t7"}}]}),
    )
    .await
    .expect_error(400, "bad_request");
    let between = listed(api, &path).await;
    let second = move_done(&db, &start.shard).await;
    assert_eq!(
        (second.from.as_str(), second.to.as_str()),
        (there.as_str(), start.shard.as_str())
    );
    assert_eq!(database(&db).await.epoch, start.epoch + 2);
    assert_eq!(listed(api, &path).await, between);
    assert_eq!(between.as_array().map(Vec::len), Some(121));
    assert_nothing_left(&second).await;

    // Both moves are listed, newest first, and `moves show` agrees.
    let all = cli(&["moves", "list", "--json"]).await.json();
    let mine: Vec<String> = all["moves"]
        .as_array()
        .expect("moves")
        .iter()
        .filter(|m| m["database_id"] == db)
        .map(id)
        .collect();
    assert_eq!(mine, vec![second.id.clone(), first.id.clone()]);
    let shown = cli(&["moves", "show", &first.id, "--json"])
        .await
        .move_object();
    assert_eq!(shown.state, MoveState::Done);
    assert_eq!(shown.database_id, db);
    let db_json = cli(&["databases", "show", &db, "--json"]).await.json();
    assert_eq!(db_json["shard"], start.shard);
    assert_eq!(db_json["epoch"], start.epoch + 2);
}
