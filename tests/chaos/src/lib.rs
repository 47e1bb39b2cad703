//! Chaos tests of database moves (issue 16, "Tests and chaos"). They kill
//! and restart the test cluster's processes and grow it, so they run after
//! the e2e suite, one at a time (`deploy/test` runs `cargo test -p
//! chaos-tests -- --test-threads=1`). The helpers they share with the e2e
//! suite live in `e2e_tests::{moves, cluster_ops, files}`; these are the
//! chaos-only ones.

pub mod ha;
pub mod write_load;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use e2e_tests::cluster_ops::dev_cluster_up;
use e2e_tests::moves::{all_replication_objects, env_file, shard_names};
use e2e_tests::{cluster, id, Person};
use serde_json::json;

/// A small database of `owner`: table Items (Name) with `n` records.
/// Returns the database, the records path and the record ids.
pub async fn small_database(owner: &Person, n: usize) -> (String, String, Vec<String>) {
    let api = &owner.api;
    let db = api.new_database("chaos").await;
    let table = id(&api.create_table(&db, "Items").await);
    api.create_field(&table, json!({"name": "Name", "type": "single_line_text"}))
        .await;
    let records = format!("/api/tables/{table}/records");
    let rows: Vec<_> = (0..n)
        .map(|i| json!({"fields": {"Name": format!("r{i}")}}))
        .collect();
    let made = api.post(&records, json!({ "records": rows })).await;
    let ids = e2e_tests::ids_in(made.expect_ok(), "records");
    (db, records, ids)
}

/// The record ids of a table (up to 1000), retried for 60 s while the
/// cluster recovers from a restart; panics with the last reply.
pub async fn record_ids(owner: &Person, records: &str) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let r = owner.api.get(&format!("{records}?page_size=1000")).await;
        if r.status == 200 {
            let mut ids = e2e_tests::ids_in(&r.body, "records");
            ids.sort();
            return ids;
        }
        assert!(
            Instant::now() < deadline,
            "the records stay unreadable after the restart: {} {}",
            r.status,
            r.body
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Grows the cluster to `n` shards (`SHARDS=n deploy/dev-cluster up`)
/// unless it has that many; returns the shard names.
pub async fn ensure_shards(n: usize) -> Vec<String> {
    if shard_names().await.len() < n {
        dev_cluster_up(Some(n as u32)).await;
    }
    let names = shard_names().await;
    assert!(
        names.len() >= n,
        "{n} shards registered after up: {names:?}"
    );
    names
}

/// The blob store of a shard, from the env file as `up` last wrote it.
pub fn store_of(shard: &str) -> String {
    let env = env_file();
    let index: usize = shard
        .trim_start_matches("shard-")
        .parse()
        .expect("shard-<i>");
    env.get("SHARD_BLOB_STORES")
        .and_then(|l| l.split(',').nth(index - 1).map(|s| s.trim().to_owned()))
        .filter(|s| !s.is_empty())
        .or_else(|| env.get("BLOB_STORE").cloned())
        .unwrap_or_else(|| "local".to_owned())
}

/// Databases per shard, from `databases list --shard` of each.
pub async fn counts() -> HashMap<String, usize> {
    let mut out = HashMap::new();
    for shard in shard_names().await {
        let list = cluster()
            .control_plane
            .databases(Some(&shard))
            .await
            .expect("databases list --shard");
        out.insert(shard, list.databases.len());
    }
    out
}

/// Once every move has finished, no shard has a `tmv_` publication, slot
/// or subscription (polled for 30 s: orphans are dropped after moves).
pub async fn assert_no_replication_objects() {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let found = all_replication_objects().await;
        if found.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "replication objects left (publications, slots, subscriptions): {found:?}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}
