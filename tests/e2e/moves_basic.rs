//! Database moves through the real cluster: a move of a database with
//! links (a connector table with an identity column), a formula, a lookup
//! and a unique field ends `done`, every record reads the same through the
//! router, writes go on, and nothing of the move is left on either shard;
//! an abort while copying leaves nothing behind and the database works on
//! its source.

use std::time::Duration;

use cluster_protocol::control::{CreateMove, Move, MoveState, Shard};
use e2e_tests::{cluster, id, Person};
use serde_json::{json, Value};

use crate::fixtures::{fixture, rec_ids};

/// Longest a test waits for a move to end.
const MOVE_TIMEOUT: Duration = Duration::from_secs(180);

async fn shards() -> Vec<Shard> {
    cluster()
        .control_plane
        .shards()
        .await
        .expect("list shards")
        .shards
}

/// The other shard than the database's.
async fn other_shard(database_id: &str) -> (String, String) {
    let from = cluster()
        .control_plane
        .database(database_id)
        .await
        .expect("database")
        .shard;
    let to = shards()
        .await
        .into_iter()
        .map(|s| s.name)
        .find(|n| *n != from)
        .expect("a cluster of at least two shards");
    (from, to)
}

/// A superuser session on a shard's instance (the dev cluster trusts
/// 127.0.0.1), to see slots and subscriptions.
async fn superuser(shard: &str) -> tokio_postgres::Client {
    let s = shards()
        .await
        .into_iter()
        .find(|s| s.name == shard)
        .expect("shard registered");
    let mut cfg: tokio_postgres::Config = s.postgres.parse().expect("shard DSN");
    cfg.user("postgres");
    let (client, conn) = cfg
        .connect(tokio_postgres::NoTls)
        .await
        .expect("shard postgres as superuser");
    tokio::spawn(conn);
    client
}

/// The publication, slot and subscription name of a move.
fn object_name(move_id: &str) -> String {
    let body = &move_id[move_id.len() - 12..];
    let hex: String = body.bytes().map(|b| format!("{b:02x}")).collect();
    format!("tmv_{hex}")
}

async fn wait_for(move_id: &str, done: impl Fn(&Move) -> bool) -> Move {
    let cp = &cluster().control_plane;
    let deadline = tokio::time::Instant::now() + MOVE_TIMEOUT;
    loop {
        let m = cp.get_move(move_id).await.expect("show move");
        if done(&m) {
            return m;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "move did not get there in time: {m:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn wait_finished(move_id: &str) -> Move {
    wait_for(move_id, |m| m.state.is_finished()).await
}

/// Asserts that no publication, slot or subscription of the move is left
/// on either shard, and returns nothing.
async fn assert_nothing_left(move_id: &str) {
    let name = object_name(move_id);
    for shard in shards().await {
        let c = superuser(&shard.name).await;
        let row = c
            .query_one(
                "SELECT (SELECT count(*) FROM pg_publication WHERE pubname = $1)
                      + (SELECT count(*) FROM pg_subscription WHERE subname = $1)
                      + (SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1)",
                &[&name],
            )
            .await
            .expect("look for the move's objects");
        let left: i64 = row.get(0);
        assert_eq!(left, 0, "{name} left on shard {}", shard.name);
    }
}

/// Whether a shard holds anything of the database (catalog row or schema).
async fn holds_copy(shard: &str, database_id: &str) -> bool {
    let c = superuser(shard).await;
    c.query_one(
        "SELECT EXISTS (SELECT 1 FROM databases WHERE id = $1)
             OR EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)",
        &[&database_id],
    )
    .await
    .expect("look for a copy")
    .get(0)
}

async fn all_records(api: &e2e_tests::Api, table: &str) -> Value {
    api.get(&format!("/api/tables/{table}/records?page_size=1000"))
        .await
        .expect_ok()
        .clone()
}

#[tokio::test]
async fn a_move_keeps_every_record_and_leaves_nothing_behind() {
    let fx = fixture().await;
    let api = &fx.person.api;
    let cp = &cluster().control_plane;
    let tasks_before = all_records(api, &fx.tasks).await;
    let people_before = all_records(api, &fx.people).await;
    let before = cp.database(&fx.db).await.expect("database");
    let (from, to) = other_shard(&fx.db).await;

    let m = cp
        .create_move(&CreateMove {
            database_id: fx.db.clone(),
            to: to.clone(),
            pause_budget_ms: Some(2_000),
            step_delay_ms: None,
            dry_run: false,
        })
        .await
        .expect("create move");
    assert_eq!(m.state, MoveState::Pending);
    assert_eq!(
        (m.from.as_str(), m.to.as_str()),
        (from.as_str(), to.as_str())
    );
    let again = cp
        .create_move(&CreateMove {
            database_id: fx.db.clone(),
            to: to.clone(),
            pause_budget_ms: None,
            step_delay_ms: None,
            dry_run: false,
        })
        .await
        .expect_err("a second move of a moving database is refused");
    assert_eq!(again.status(), Some(409));

    let m = wait_finished(&m.id).await;
    assert_eq!(m.state, MoveState::Done, "{m:?}");
    assert!(m.pause_ms.is_some(), "{m:?}");
    let after = cp.database(&fx.db).await.expect("database");
    assert_eq!(after.shard, to);
    assert_eq!(after.epoch, before.epoch + 1);

    assert_eq!(all_records(api, &fx.tasks).await, tasks_before);
    assert_eq!(all_records(api, &fx.people).await, people_before);

    // Writes go on on the target: a new task linked to Ann (the connector
    // table's identity continues from the source's).
    let made = api
        .post(
            &format!("/api/tables/{}/records", fx.tasks),
            json!({"records": [{"fields": {"Title": "After", "Points": 4, "Owner": [fx.ann]}}]}),
        )
        .await;
    let new_id = rec_ids(made.expect_ok())[0].clone();
    let got = api
        .get(&format!("/api/tables/{}/records/{new_id}", fx.tasks))
        .await;
    let got = &got.expect_ok()["record"]["fields"];
    assert_eq!(got["Double"], json!(8), "{got}");
    assert_eq!(got["Owner"][0]["id"], json!(fx.ann), "{got}");

    assert_nothing_left(&m.id).await;
    assert!(!holds_copy(&from, &fx.db).await, "the source copy is gone");
    assert!(holds_copy(&to, &fx.db).await);
}

#[tokio::test]
async fn an_abort_while_copying_leaves_nothing_and_the_source_serves() {
    let person = Person::new().await;
    let api = &person.api;
    let db = api.new_database("abort").await;
    let table = id(&api.create_table(&db, "Things").await);
    api.create_field(&table, json!({"name": "Name", "type": "single_line_text"}))
        .await;
    api.post(
        &format!("/api/tables/{table}/records"),
        json!({"records": [{"fields": {"Name": "one"}}, {"fields": {"Name": "two"}}]}),
    )
    .await
    .expect_ok();
    let cp = &cluster().control_plane;
    let before = cp.database(&db).await.expect("database");
    let (from, to) = other_shard(&db).await;

    let m = cp
        .create_move(&CreateMove {
            database_id: db.clone(),
            to: to.clone(),
            pause_budget_ms: None,
            step_delay_ms: Some(3_000),
            dry_run: false,
        })
        .await
        .expect("create move");
    wait_for(&m.id, |m| m.state == MoveState::Copying).await;
    let aborting = cp.abort_move(&m.id).await.expect("abort");
    assert!(!aborting.state.is_finished() || aborting.state == MoveState::Aborted);
    let m = wait_finished(&m.id).await;
    assert_eq!(m.state, MoveState::Aborted, "{m:?}");
    assert!(m.error.is_some());
    let again = cp
        .abort_move(&m.id)
        .await
        .expect_err("abort of an aborted move");
    assert_eq!(again.status(), Some(409));

    let after = cp.database(&db).await.expect("database");
    assert_eq!(
        (after.shard.as_str(), after.epoch),
        (from.as_str(), before.epoch)
    );
    assert_nothing_left(&m.id).await;
    assert!(!holds_copy(&to, &db).await, "no half copy on the target");
    let state: String = superuser(&from)
        .await
        .query_one(
            "SELECT state FROM placements WHERE database_id = $1",
            &[&db],
        )
        .await
        .expect("source placement")
        .get(0);
    assert_eq!(state, "owned");

    // The database works on its source: reads, writes, structure.
    let listed = all_records(api, &table).await;
    assert_eq!(rec_ids(&listed).len(), 2);
    api.post(
        &format!("/api/tables/{table}/records"),
        json!({"records": [{"fields": {"Name": "three"}}]}),
    )
    .await
    .expect_ok();
    api.create_field(&table, json!({"name": "More", "type": "number"}))
        .await;
}
