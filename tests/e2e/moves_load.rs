//! A database move under continuous load through the router (issue 16):
//! writer tasks create, update and read back records for the whole move
//! and a little after it, and a lister pages the table. Every write the
//! router acknowledged (2xx) is there afterwards with its last
//! acknowledged value, every read saw the last acknowledged value, and the
//! clients saw no error status at all: the cutover's hold and the router's
//! 421 retries show as latency only.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use cluster_protocol::control::{Access, DatabaseScope, MoveState};
use e2e_tests::moves::{assert_nothing_left, database, start_move, wait_finished};
use e2e_tests::{id, Api, Person};
use serde_json::json;

use crate::moves_keep::other_shard;

const WRITERS: usize = 3;
/// Between two requests of one task: each task has its own key, and this
/// keeps it well under the router's 600 requests per key and minute.
const PACE: Duration = Duration::from_millis(120);

/// What one task saw.
#[derive(Default)]
struct Outcome {
    /// record id -> last acknowledged `N`.
    acked: HashMap<String, i64>,
    /// Every non-2xx reply: method, path, status, body.
    errors: Vec<String>,
    /// Reads that returned another value than the last acknowledged one.
    stale: Vec<String>,
    requests: usize,
}

impl Outcome {
    fn check(&mut self, what: &str, r: &e2e_tests::Reply) -> bool {
        self.requests += 1;
        let ok = (200..300).contains(&r.status);
        if !ok {
            self.errors.push(format!("{what}: {} {}", r.status, r.body));
        }
        ok
    }
}

/// Creates, updates and reads back its own records until `stop`.
async fn writer(api: Api, records: String, task: usize, stop: Arc<AtomicBool>) -> Outcome {
    let mut out = Outcome::default();
    let mut mine: Vec<String> = Vec::new();
    let mut i: i64 = 0;
    while !stop.load(Ordering::Relaxed) {
        i += 1;
        let body = json!({"records": [{"fields": {"Name": format!("w{task}-{i}"), "N": i}}]});
        let r = api.post(&records, body).await;
        if out.check("create", &r) {
            let rec = id(&r.body["records"][0]);
            out.acked.insert(rec.clone(), i);
            mine.push(rec);
        }
        tokio::time::sleep(PACE).await;
        if let Some(rec) = mine.get(i as usize * 7 % mine.len().max(1)).cloned() {
            let value = -i;
            let r = api
                .patch(
                    &records,
                    json!({"records": [{"id": rec, "fields": {"N": value}}]}),
                )
                .await;
            if out.check("update", &r) {
                out.acked.insert(rec.clone(), value);
            }
            tokio::time::sleep(PACE).await;
            let r = api.get(&format!("{records}/{rec}")).await;
            if out.check("read", &r) {
                let seen = r.body["record"]["fields"]["N"].as_i64();
                if seen != out.acked.get(&rec).copied() {
                    out.stale
                        .push(format!("{rec}: read {seen:?}, acked {:?}", out.acked[&rec]));
                }
            }
            tokio::time::sleep(PACE).await;
        }
    }
    out
}

/// Lists the table (a page of 100) until `stop`.
async fn lister(api: Api, records: String, stop: Arc<AtomicBool>) -> Outcome {
    let mut out = Outcome::default();
    while !stop.load(Ordering::Relaxed) {
        let r = api.get(&format!("{records}?page_size=100&sort=N")).await;
        out.check("list", &r);
        tokio::time::sleep(PACE * 2).await;
    }
    out
}

#[tokio::test]
async fn a_move_under_load_loses_no_acknowledged_write_and_shows_no_error() {
    let owner = Person::new().await;
    let api = &owner.api;
    let db = api.new_database("load").await;
    let table = id(&api.create_table(&db, "Items").await);
    api.create_field(&table, json!({"name": "Name", "type": "single_line_text"}))
        .await;
    api.create_field(&table, json!({"name": "N", "type": "number"}))
        .await;
    let records = format!("/api/tables/{table}/records");
    let seed: Vec<_> = (0..50)
        .map(|i| json!({"fields": {"Name": format!("seed-{i}"), "N": 1000 + i}}))
        .collect();
    api.post(&records, json!({ "records": seed }))
        .await
        .expect_ok();
    let from = database(&db).await.shard;
    let to = other_shard(&from).await;

    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for task in 0..WRITERS {
        let (_, key) = owner
            .another_key(Access::ReadWrite, DatabaseScope::All)
            .await;
        tasks.push(tokio::spawn(writer(
            key,
            records.clone(),
            task,
            stop.clone(),
        )));
    }
    let (_, key) = owner
        .another_key(Access::ReadWrite, DatabaseScope::All)
        .await;
    tasks.push(tokio::spawn(lister(key, records.clone(), stop.clone())));

    // Load before, during and after the move.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let m = start_move(&db, &to, &[]).await;
    let finished = wait_finished(&m.id).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    stop.store(true, Ordering::Relaxed);
    let mut acked = HashMap::new();
    let (mut errors, mut stale, mut requests) = (Vec::new(), Vec::new(), 0);
    for t in tasks {
        let out = t.await.expect("a load task");
        acked.extend(out.acked);
        errors.extend(out.errors);
        stale.extend(out.stale);
        requests += out.requests;
    }
    assert_eq!(finished.state, MoveState::Done, "{finished:?}");
    assert_eq!(database(&db).await.shard, to);
    assert!(
        errors.is_empty(),
        "{} of {requests} requests got an error status during the move: {errors:#?}",
        errors.len()
    );
    assert!(stale.is_empty(), "stale reads: {stale:#?}");
    assert!(
        acked.len() >= WRITERS,
        "the writers wrote ({requests} requests)"
    );

    // Every acknowledged write, with its last acknowledged value, on the target.
    let mut listed = HashMap::new();
    let mut bookmark: Option<String> = None;
    loop {
        let mut q = format!("{records}?page_size=1000");
        if let Some(b) = &bookmark {
            q.push_str(&format!("&bookmark={}", crate::fixtures::urlencode(b)));
        }
        let page = api.get(&q).await.expect_ok().clone();
        for r in page["records"].as_array().expect("records") {
            listed.insert(id(r), r["fields"]["N"].as_i64());
        }
        match page["bookmark"].as_str() {
            Some(b) => bookmark = Some(b.to_owned()),
            None => break,
        }
    }
    let lost: Vec<String> = acked
        .iter()
        .filter(|(rec, n)| listed.get(*rec) != Some(&Some(**n)))
        .map(|(rec, n)| format!("{rec}: acked {n}, now {:?}", listed.get(rec)))
        .collect();
    assert!(lost.is_empty(), "lost or changed writes: {lost:#?}");
    assert_eq!(
        listed.len(),
        50 + acked.len(),
        "no record appeared twice or from nowhere"
    );
    assert_nothing_left(&finished).await;
}
