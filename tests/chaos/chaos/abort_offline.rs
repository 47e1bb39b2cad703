//! A move aborted while its target's PostgreSQL is down (issue 27, 6):
//! the source's replication slot holds WAL for as long as it exists, so
//! the abort drops it and the publication at once, without the target;
//! the rest of the abort (the target's subscription and copy) follows once
//! the target is back. The source instance caps what a slot may hold
//! (`max_slot_wal_keep_size`, as in deploy/k8s).

use std::time::{Duration, Instant};

use chaos_tests::{assert_no_replication_objects, record_ids, small_database};
use cluster_protocol::control::MoveState;
use e2e_tests::cluster_ops::{dev_cluster_up, stop_postgres};
use e2e_tests::moves::{
    assert_nothing_left, cli, database, replication_name, shard_admin, shard_names, start_move,
    wait_finished_within, wait_state,
};
use e2e_tests::Person;

/// Every logical replication slot on an instance (the chaos tests run
/// alone). Physical slots are not a move's: under HA=1 Patroni keeps one
/// per standby.
async fn slots(pg: &tokio_postgres::Client) -> Vec<String> {
    pg.query(
        "SELECT slot_name::text FROM pg_replication_slots WHERE slot_type = 'logical'",
        &[],
    )
    .await
    .expect("read pg_replication_slots")
    .iter()
    .map(|r| r.get(0))
    .collect()
}

#[tokio::test]
async fn abort_with_the_target_down_frees_the_source_slot_at_once() {
    let owner = Person::new().await;
    let (db, records, mut written) = small_database(&owner, 5).await;
    written.sort();
    let from = database(&db).await.shard;
    let to = shard_names()
        .await
        .into_iter()
        .find(|s| *s != from)
        .expect("a second shard");
    // Sits 10 s in each state: the abort lands in `catching_up`.
    let m = start_move(
        &db,
        &to,
        &["--step-delay-ms", "10000", "--pause-budget-ms", "30000"],
    )
    .await;
    wait_state(&m.id, MoveState::CatchingUp).await;
    let name = replication_name(&m.id);
    let source = shard_admin(&from).await;
    assert!(
        slots(&source).await.contains(&name),
        "the move's slot is on the source"
    );
    let keep: String = source
        .query_one("SHOW max_slot_wal_keep_size", &[])
        .await
        .expect("SHOW max_slot_wal_keep_size")
        .get(0);
    assert_ne!(keep, "-1", "a slot's WAL is capped on shard instances");

    stop_postgres(&to);
    cli(&["moves", "abort", &m.id, "--json"])
        .await
        .move_object();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let left = slots(&source).await;
        let publications: i64 = source
            .query_one(
                "SELECT count(*) FROM pg_publication WHERE pubname = $1",
                &[&name],
            )
            .await
            .expect("read pg_publication")
            .get(0);
        if left.is_empty() && publications == 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "with the target down, the aborted move left on the source: slots {left:?}, publications {publications}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let waiting = cli(&["moves", "show", &m.id, "--json"]).await.move_object();
    assert_eq!(
        waiting.state,
        MoveState::CatchingUp,
        "the abort waits for the target: {waiting:?}"
    );

    dev_cluster_up(None).await;
    let ended = wait_finished_within(&m.id, Duration::from_secs(180)).await;
    assert_eq!(ended.state, MoveState::Aborted, "{ended:?}");
    assert_eq!(database(&db).await.shard, from);
    assert_eq!(record_ids(&owner, &records).await, written);
    assert_nothing_left(&ended).await;
    assert_no_replication_objects().await;
}
