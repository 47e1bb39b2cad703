//! A move whose source shard fails over (issue 30, 1 and 4): PostgreSQL 15
//! does not carry logical replication slots to a standby, so the new
//! primary has the move's publication but not its slot. The move must end
//! `aborted` with that reason, the database stay where it was with every
//! record readable through the router (those written after the slot was
//! lost too), nothing of the move left, and a second move of the database
//! must then succeed. Two ways to lose the slot while the move catches up:
//! by hand on the source (its walsender ended, the slot dropped: what a
//! failover leaves, on any cluster), and a real failover on an HA=1
//! cluster (`kill -9` of the source's primary member, its Patroni agent
//! and its PostgreSQL together, as a lost machine).

use std::time::{Duration, Instant};

use chaos_tests::{assert_no_replication_objects, ha, record_ids};
use cluster_protocol::control::{Move, MoveState};
use e2e_tests::cluster_ops::dev_cluster_up;
use e2e_tests::moves::{
    assert_nothing_left, database, move_done, replication_name, shard_admin, shard_names,
    start_move, wait_finished_within, wait_state,
};
use e2e_tests::{id, ids_in, Person};
use serde_json::json;

/// Records written in batches of this many (the API's largest batch).
const BATCH: usize = 100;
/// Longest wait for an instance's leader, or for its standby after
/// `dev-cluster up` brings the lost member back.
const HA_LIMIT: Duration = Duration::from_secs(180);

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
    assert_aborted_for_the_slot(&ended, &from, &slot);
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

/// Asserts the move ended `aborted` because the source lost its slot.
fn assert_aborted_for_the_slot(ended: &Move, from: &str, slot: &str) {
    assert_eq!(ended.state, MoveState::Aborted, "{ended:?}");
    let why = ended.error.clone().unwrap_or_default();
    assert!(
        why.contains(&format!("the source shard {from} failed over"))
            && why.contains(&format!("replication slot {slot} was lost"))
            && why.contains("start a new move once the shard is healthy"),
        "moves show says why: {why:?}"
    );
}

/// One batch written through the router, retried while the shard fails
/// over (a failed try may or may not have committed: only the ids of the
/// batch that was acknowledged are returned).
async fn write_batch_retrying(owner: &Person, records: &str, tag: &str) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut attempt = 0;
    loop {
        attempt += 1;
        let rows: Vec<_> = (0..BATCH)
            .map(|i| json!({"fields": {"Name": format!("{tag}-{attempt}-{i}")}}))
            .collect();
        let reply = owner.api.post(records, json!({ "records": rows })).await;
        if reply.status == 200 {
            return ids_in(&reply.body, "records");
        }
        assert!(
            Instant::now() < deadline,
            "writes do not resume after the failover: {} {}",
            reply.status,
            reply.body
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

#[tokio::test]
async fn a_move_whose_source_primary_dies_aborts_and_a_new_move_succeeds() {
    let owner = Person::new().await;
    let (db, records, written) = database_with_records(&owner, 5).await;
    let from = database(&db).await.shard;
    // deploy/test runs the chaos phase on an HA=1 cluster; the test above
    // covers a single instance.
    let Some(all) = ha::members_or_skip("a_move_whose_source_primary_dies") else {
        return;
    };
    let to = shard_names()
        .await
        .into_iter()
        .find(|s| *s != from)
        .expect("a second shard");
    let members = ha::of_instance(&all, &from);
    assert_eq!(members.len(), 2, "{from} has two members: {members:?}");
    let primary = ha::wait_leader(&all, &from, HA_LIMIT).await;

    let m = start_move(
        &db,
        &to,
        &["--step-delay-ms", "10000", "--pause-budget-ms", "30000"],
    )
    .await;
    wait_state(&m.id, MoveState::CatchingUp).await;
    let slot = replication_name(&m.id);
    ha::lose_machine(&primary);
    // Acknowledged after the failover, on the new primary only.
    let after = write_batch_retrying(&owner, &records, "after").await;

    let ended = wait_finished_within(&m.id, Duration::from_secs(240)).await;
    assert_aborted_for_the_slot(&ended, &from, &slot);
    assert_eq!(database(&db).await.shard, from, "placement unchanged");
    let read = record_ids(&owner, &records).await;
    for id in written.iter().chain(&after) {
        assert!(read.contains(id), "acknowledged record {id} is readable");
    }
    assert_nothing_left(&ended).await;
    assert_no_replication_objects().await;

    // The lost member back (Patroni rejoins it as a replica), then a new
    // move from the new primary.
    dev_cluster_up(None).await;
    ha::wait_healthy(&all, &from, HA_LIMIT).await;
    move_done(&db, &to).await;
    let moved = record_ids(&owner, &records).await;
    assert_eq!(moved, read, "the second move carried every record");
    assert_no_replication_objects().await;
}
