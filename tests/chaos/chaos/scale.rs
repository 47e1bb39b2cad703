//! Scale-out (issue 16, "Drain and rebalance"): growing the cluster to
//! three shards (`SHARDS=3 deploy/dev-cluster up`) and `rebalance --wait`
//! filling the new one; `shards drain N --wait` emptying a shard and
//! `shards activate N` undoing it; and an attachment moved between the two
//! shards that share the local blob store (deploy/test's chaos cluster runs
//! shard-1 and shard-3 on it, shard-2 on S3).

use std::collections::HashSet;

use chaos_tests::{
    assert_no_replication_objects, counts, ensure_shards, record_ids, small_database, store_of,
};
use cluster_protocol::control::{MoveState, ShardState};
use e2e_tests::files::{assert_links_work, upload};
use e2e_tests::moves::{
    assert_nothing_left, cli, cli_within, database, get_move, move_done, MOVE_DEADLINE,
};
use e2e_tests::{cluster, Person};

fn planned(reply: &serde_json::Value) -> Vec<(String, String, String)> {
    reply["moves"]
        .as_array()
        .expect("a plan under moves")
        .iter()
        .map(|m| {
            let s = |k: &str| m[k].as_str().expect("database_id, from, to").to_owned();
            (s("database_id"), s("from"), s("to"))
        })
        .collect()
}

#[tokio::test]
async fn growing_to_three_shards_and_rebalancing_fills_the_new_one() {
    // Some databases of our own, so the new shard has something to take.
    let owner = Person::new().await;
    let mut mine = Vec::new();
    for _ in 0..4 {
        mine.push(small_database(&owner, 5).await);
    }
    let shards = ensure_shards(3).await;
    let list = cluster().control_plane.shards().await.expect("shards list");
    let weights: HashSet<u32> = list.shards.iter().map(|s| s.weight).collect();
    assert_eq!(weights.len(), 1, "equal weights: {:?}", list.shards);
    // A drain test that failed half-way must not skew the plan.
    for s in list
        .shards
        .iter()
        .filter(|s| s.state == ShardState::Draining)
    {
        cli(&["shards", "activate", &s.name, "--json"]).await.json();
    }

    let before = counts().await;
    let total: usize = before.values().sum();
    let n = shards.len();
    let (low, high) = (total / n, total.div_ceil(n));
    let dry = cli(&["rebalance", "--dry-run", "--json"]).await.json();
    let plan = planned(&dry);
    assert_eq!(counts().await, before, "a dry run changes nothing");
    let surplus_max: usize = before.values().map(|c| c.saturating_sub(low)).sum();
    let surplus_min: usize = before.values().map(|c| c.saturating_sub(high)).sum();
    assert!(
        (surplus_min..=surplus_max).contains(&plan.len()),
        "{} moves for counts {before:?}: as few as evens them out",
        plan.len()
    );
    let moved: HashSet<&String> = plan.iter().map(|(db, _, _)| db).collect();
    assert_eq!(moved.len(), plan.len(), "each database planned once");
    for (db, from, to) in &plan {
        assert_ne!(from, to);
        assert!(
            before[to] < high,
            "{db} goes to {to}, already full: {before:?}"
        );
    }
    if before["shard-3"] < low {
        assert!(!plan.is_empty(), "an empty new shard gets databases");
    }

    let run = cli_within(&["rebalance", "--wait", "--json"], MOVE_DEADLINE * 4).await;
    let reply = run.json();
    let after = counts().await;
    assert!(
        after.values().all(|c| (low..=high).contains(c)),
        "evened out to {low}..={high}: {after:?} (plan {:?})",
        planned(&reply)
    );
    if before["shard-3"] < low {
        assert!(after["shard-3"] >= low, "shard-3 filled: {after:?}");
    }
    if let Some(started) = reply["started"].as_array() {
        for m in started {
            let m = get_move(m["id"].as_str().expect("a move id")).await;
            assert_eq!(m.state, MoveState::Done, "{m:?}");
            assert_nothing_left(&m).await;
        }
    }
    for (db, records, ids) in &mine {
        let mut ids = ids.clone();
        ids.sort();
        assert_eq!(
            &record_ids(&owner, records).await,
            &ids,
            "{db} kept its records"
        );
    }
    assert_no_replication_objects().await;
}

#[tokio::test]
async fn draining_a_shard_empties_it_and_activate_undoes_it() {
    let shards = ensure_shards(3).await;
    let owner = Person::new().await;
    let mut mine = Vec::new();
    for _ in 0..3 {
        mine.push(small_database(&owner, 5).await);
    }
    // Make sure the drained shard holds one of ours.
    let victim = shards.last().expect("a shard").clone();
    if database(&mine[0].0).await.shard != victim {
        move_done(&mine[0].0, &victim).await;
    }
    let run = cli_within(
        &["shards", "drain", &victim, "--wait", "--json"],
        MOVE_DEADLINE * 4,
    )
    .await;
    run.json();
    let after = counts().await;
    assert_eq!(after[&victim], 0, "{victim} emptied: {after:?}");
    let state = |name: String| async move {
        let list = cluster().control_plane.shards().await.expect("shards list");
        list.shards
            .into_iter()
            .find(|s| s.name == name)
            .expect("registered")
            .state
    };
    assert_eq!(state(victim.clone()).await, ShardState::Draining);
    // New databases are not placed on a draining shard.
    for _ in 0..3 {
        let db = owner.api.new_database("after-drain").await;
        assert_ne!(database(&db).await.shard, victim);
    }
    for (db, records, ids) in &mine {
        let mut ids = ids.clone();
        ids.sort();
        assert_ne!(database(db).await.shard, victim);
        assert_eq!(
            &record_ids(&owner, records).await,
            &ids,
            "{db} kept its records"
        );
    }
    cli(&["shards", "activate", &victim, "--json"]).await.json();
    assert_eq!(state(victim.clone()).await, ShardState::Active);
    // Eligible again: a move onto it is accepted and finishes.
    move_done(&mine[1].0, &victim).await;
    assert_no_replication_objects().await;
}

#[tokio::test]
async fn a_move_between_shards_of_one_blob_store_keeps_attachment_links() {
    let shards = ensure_shards(3).await;
    let local: Vec<&String> = shards.iter().filter(|s| store_of(s) == "local").collect();
    assert!(
        local.len() >= 2,
        "two shards on the local store (deploy/test's chaos cluster: local,s3,local): {shards:?}"
    );
    let owner = Person::new().await;
    let (db, _, _) = small_database(&owner, 3).await;
    // Start on a local-store shard, before any file exists.
    if store_of(&database(&db).await.shard) != "local" {
        move_done(&db, local[0]).await;
    }
    let from = database(&db).await.shard;
    let to = local
        .iter()
        .find(|s| ***s != from)
        .expect("another local shard");
    let up = upload(&owner.api, &db).await;
    let m = move_done(&db, to).await;
    assert_links_work(&owner.api, &up).await;
    assert_nothing_left(&m).await;
    // And back: the links still work.
    let back = move_done(&db, &from).await;
    assert_links_work(&owner.api, &up).await;
    assert_nothing_left(&back).await;
}
