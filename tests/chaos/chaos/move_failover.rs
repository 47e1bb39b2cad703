//! A move whose source shard fails over (issue 30, 1 and 4): PostgreSQL 15
//! does not carry logical replication slots to a standby, so the new
//! primary has the move's publication but not its slot. The test takes the
//! slot away on the source by hand, as a failover would (terminating its
//! walsender and dropping it), while the move catches up, with writes
//! going on: the move must end `aborted` with that reason, the database
//! stay where it was with every record readable through the router
//! (those written after the slot was lost too), nothing of the move left,
//! and a second move of the database must then succeed.

use std::time::{Duration, Instant};

use chaos_tests::{assert_no_replication_objects, record_ids};
use cluster_protocol::control::MoveState;
use e2e_tests::moves::{
    assert_nothing_left, database, move_done, replication_name, shard_admin, shard_names,
    start_move, wait_finished_within, wait_state,
};
use e2e_tests::{id, ids_in, Person};
use serde_json::json;

/// Records written in batches of this many (the API's largest batch).
const BATCH: usize = 100;

/// A database of `owner` with table Items (Name, Notes) holding `batches`
/// times [`BATCH`] records with a few hundred bytes each. Returns the
/// database, the records path and the record ids.
async fn database_with_records(owner: &Person, batches: usize) -> (String, String, Vec<String>) {
    let api = &owner.api;
    let db = api.new_database("failover").await;
    let table = id(&api.create_table(&db, "Items").await);
    for (name, kind) in [("Name", "single_line_text"), ("Notes", "long_text")] {
        api.create_field(&table, json!({"name": name, "type": kind}))
            .await;
    }
    let records = format!("/api/tables/{table}/records");
    let mut ids = Vec::new();
    for b in 0..batches {
        ids.extend(write_batch(owner, &records, &format!("b{b}")).await);
    }
    (db, records, ids)
}

/// One batch of [`BATCH`] records through the router; their ids.
async fn write_batch(owner: &Person, records: &str, tag: &str) -> Vec<String> {
    let rows: Vec<_> = (0..BATCH)
        .map(|i| {
            json!({"fields": {
                "Name": format!("{tag}-{i}"),
                "Notes": format!("{tag}-{i} ").repeat(40),
            }})
        })
        .collect();
    let made = owner.api.post(records, json!({ "records": rows })).await;
    ids_in(made.expect_ok(), "records")
}

/// Takes the move's slot away on the source as a failover would: its
/// walsender is ended (the subscription reconnects to a primary without
/// the slot) and the slot dropped, retried while a reconnecting walsender
/// holds it.
async fn lose_slot(source: &tokio_postgres::Client, slot: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let _ = source
            .execute(
                "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots
                  WHERE slot_name = $1 AND active_pid IS NOT NULL",
                &[&slot],
            )
            .await;
        let dropped = source
            .execute(
                "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots
                  WHERE slot_name = $1",
                &[&slot],
            )
            .await;
        let left: i64 = source
            .query_one(
                "SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1",
                &[&slot],
            )
            .await
            .expect("read pg_replication_slots")
            .get(0);
        if left == 0 {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "could not drop the move's slot {slot}: {dropped:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn a_move_whose_source_loses_its_slot_aborts_and_a_new_move_succeeds() {
    let owner = Person::new().await;
    // 700 records, 100 more later: record_ids reads one page of up to 1,000.
    let (db, records, mut written) = database_with_records(&owner, 7).await;
    let from = database(&db).await.shard;
    let to = shard_names()
        .await
        .into_iter()
        .find(|s| *s != from)
        .expect("a second shard");

    // Sits 10 s in each state: the slot is lost while the move catches up.
    let m = start_move(
        &db,
        &to,
        &["--step-delay-ms", "10000", "--pause-budget-ms", "30000"],
    )
    .await;
    wait_state(&m.id, MoveState::CatchingUp).await;
    let slot = replication_name(&m.id);
    let source = shard_admin(&from).await;
    lose_slot(&source, &slot).await;
    // Written on the source after the slot is gone: no subscription can
    // carry these to the target any more.
    written.extend(write_batch(&owner, &records, "after").await);
    written.sort();
    assert_eq!(written.len(), 8 * BATCH);

    let ended = wait_finished_within(&m.id, Duration::from_secs(180)).await;
    assert_eq!(ended.state, MoveState::Aborted, "{ended:?}");
    let why = ended.error.clone().unwrap_or_default();
    assert!(
        why.contains(&format!("the source shard {from} failed over"))
            && why.contains(&format!("replication slot {slot} was lost"))
            && why.contains("start a new move once the shard is healthy"),
        "moves show says why: {why:?}"
    );
    assert_eq!(database(&db).await.shard, from, "placement unchanged");
    assert_eq!(
        record_ids(&owner, &records).await,
        written,
        "every record is readable through the router"
    );
    assert_nothing_left(&ended).await;
    assert_no_replication_objects().await;

    // The shard is healthy again (it never stopped here): a new move runs
    // from a fresh copy and ends `done`, every record on the target.
    move_done(&db, &to).await;
    assert_eq!(
        record_ids(&owner, &records).await,
        written,
        "every record is readable after the second move"
    );
    assert_no_replication_objects().await;
}
