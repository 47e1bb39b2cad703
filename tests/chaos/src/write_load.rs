//! Writers that create records through the router, one API key each (the
//! per-key budget is 600 a minute: each writer sends about 7 a second),
//! and keep what every write answered: the ids of the acknowledged ones
//! (200) and the count of each other status, with the time each write was
//! sent and answered, so a test can measure how long a shard refused.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use e2e_tests::{id, Api, Person};
use serde_json::json;

/// The pause between two writes of one writer.
const PACE: Duration = Duration::from_millis(150);
/// A write not answered in this long fails the test (a hang is a defect).
const WRITE_TIMEOUT: Duration = Duration::from_secs(30);

/// One write's answer.
#[derive(Debug, Clone)]
pub struct Write {
    pub sent: Instant,
    pub answered: Instant,
    pub status: u16,
    /// The record's id when the write was acknowledged.
    pub id: Option<String>,
}

/// Writers on one table, running until [`Load::stop`].
pub struct Load {
    pub records: String,
    writes: Arc<Mutex<Vec<Write>>>,
    stop: Arc<AtomicBool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

/// A table `Items` (one text field `Name`) in `database_id`; returns its
/// records path.
pub async fn items_table(owner: &Person, database_id: &str) -> String {
    let table = id(&owner.api.create_table(database_id, "Items").await);
    owner
        .api
        .create_field(&table, json!({"name": "Name", "type": "single_line_text"}))
        .await;
    format!("/api/tables/{table}/records")
}

impl Load {
    /// Starts `writers` writers on `records`, each with a key of its own
    /// of `owner`.
    pub async fn start(owner: &Person, records: &str, writers: usize) -> Load {
        let writes = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let mut tasks = Vec::new();
        for w in 0..writers {
            let (_, api) = owner
                .another_key(
                    cluster_protocol::control::Access::ReadWrite,
                    cluster_protocol::control::DatabaseScope::All,
                )
                .await;
            let api = Api {
                http: reqwest::Client::builder()
                    .timeout(WRITE_TIMEOUT)
                    .build()
                    .expect("an HTTP client"),
                ..api
            };
            let (writes, stop, records) = (writes.clone(), stop.clone(), records.to_owned());
            tasks.push(tokio::spawn(async move {
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    n += 1;
                    let sent = Instant::now();
                    let name = format!("w{w}-{n}");
                    let r = api
                        .post(&records, json!({"records": [{"fields": {"Name": name}}]}))
                        .await;
                    let id =
                        (r.status == 200).then(|| e2e_tests::ids_in(&r.body, "records")[0].clone());
                    writes
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .push(Write {
                            sent,
                            answered: Instant::now(),
                            status: r.status,
                            id,
                        });
                    tokio::time::sleep(PACE).await;
                }
            }));
        }
        Load {
            records: records.to_owned(),
            writes,
            stop,
            tasks,
        }
    }

    /// The writes answered so far.
    pub fn writes(&self) -> Vec<Write> {
        self.writes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Waits until a write sent at or after `since` was acknowledged;
    /// returns when it was answered, or `None` after `limit`.
    pub async fn first_ack_sent_after(&self, since: Instant, limit: Duration) -> Option<Instant> {
        let deadline = Instant::now() + limit;
        loop {
            let found = self
                .writes()
                .iter()
                .filter(|w| w.status == 200 && w.sent >= since)
                .map(|w| w.answered)
                .min();
            if found.is_some() {
                return found;
            }
            if Instant::now() >= deadline {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Stops the writers and returns every write's answer (a writer that
    /// panicked, e.g. on a write not answered in time, fails the test).
    pub async fn stop(self) -> Vec<Write> {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.tasks {
            t.await.expect("a writer ran to the end");
        }
        let writes = self
            .writes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        writes
    }
}

/// How many writes answered each status.
pub fn statuses(writes: &[Write]) -> BTreeMap<u16, usize> {
    let mut out = BTreeMap::new();
    for w in writes {
        *out.entry(w.status).or_insert(0) += 1;
    }
    out
}

/// Every record id of a table, paged by bookmark; retried for 60 s while
/// the shard recovers (a page that is not 200 restarts the read).
pub async fn all_record_ids(api: &Api, records: &str) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(60);
    'read: loop {
        let mut ids = Vec::new();
        let mut bookmark: Option<String> = None;
        loop {
            let path = match &bookmark {
                Some(b) => format!("{records}?page_size=1000&bookmark={}", urlencode(b)),
                None => format!("{records}?page_size=1000"),
            };
            let r = api.get(&path).await;
            if r.status != 200 {
                assert!(
                    Instant::now() < deadline,
                    "the records stay unreadable: {} {}",
                    r.status,
                    r.body
                );
                tokio::time::sleep(Duration::from_millis(250)).await;
                continue 'read;
            }
            ids.extend(e2e_tests::ids_in(&r.body, "records"));
            match r.body["bookmark"].as_str() {
                Some(b) => bookmark = Some(b.to_owned()),
                None => return ids,
            }
        }
    }
}

fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Asserts that every acknowledged write of `writes` is readable in
/// `records`: zero acknowledged writes lost. Returns how many there were.
pub async fn assert_no_acknowledged_write_lost(
    api: &Api,
    records: &str,
    writes: &[Write],
) -> usize {
    let present: std::collections::HashSet<String> =
        all_record_ids(api, records).await.into_iter().collect();
    let acked: Vec<&String> = writes.iter().filter_map(|w| w.id.as_ref()).collect();
    let lost: Vec<&&String> = acked.iter().filter(|id| !present.contains(**id)).collect();
    assert!(
        lost.is_empty(),
        "{} of {} acknowledged writes are lost: {lost:?}",
        lost.len(),
        acked.len()
    );
    acked.len()
}
