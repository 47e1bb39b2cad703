//! Issue 29, section 2: account quotas and usage through the real
//! binaries. `control-plane quotas set` changes what the router publishes
//! in X-RateLimit-Limit and enforces, and the shard-side limits (tables
//! per database, fields per table, attachment bytes per database, carried
//! to new databases); a value below current use is refused with nothing
//! changed; `usage` reports known writes and requests.

use std::time::{Duration, Instant};

use e2e_tests::moves::{cli, CliRun};
use e2e_tests::{id, Api, Person, Reply};
use serde_json::{json, Value};

const BOUNDARY: &str = "----e2e-quotas-boundary";

/// `control-plane --json quotas set --user U ARGS...`.
async fn set(user: &str, args: &[&str]) -> CliRun {
    let mut all = vec!["--json", "quotas", "set", "--user", user];
    all.extend_from_slice(args);
    cli(&all).await
}

/// `quotas show --json`: the object printed.
async fn show(user: &str) -> Value {
    let run = cli(&["--json", "quotas", "show", "--user", user]).await;
    assert!(run.success, "{}", run.stderr);
    run.json()
}

fn limit(r: &Reply) -> Option<&str> {
    r.header("x-ratelimit-limit")
}

/// Requests whoami (at most `tries` times) until the published limit is
/// `want`; returns the replies.
async fn until_limit(api: &Api, want: &str, tries: usize) -> Vec<Reply> {
    let mut seen = Vec::new();
    for _ in 0..tries {
        let r = api.get("/api/meta/whoami").await;
        let done = limit(&r) == Some(want);
        seen.push(r);
        if done {
            return seen;
        }
    }
    panic!(
        "X-RateLimit-Limit never became {want}: {:?}",
        seen.iter().map(limit).collect::<Vec<_>>()
    );
}

#[tokio::test]
async fn requests_per_minute_is_published_and_enforced_then_reset() {
    let person = Person::new().await;
    let first = person.api.get("/api/meta/whoami").await;
    first.expect_ok();
    assert_eq!(limit(&first), Some("600"));

    let run = set(&person.user_id, &["--requests-per-minute", "4"]).await;
    assert!(run.success, "{}", run.stderr);
    let v = run.json();
    assert_eq!(v["overrides"]["requests_per_minute"], 4);
    assert_eq!(v["quotas"]["requests_per_minute"], 4);

    // The router re-reads the key (its version changed) within a request
    // or two; from then on the budget is 4 per minute.
    let mut replies = until_limit(&person.api, "4", 3).await;
    for _ in 0..5 {
        replies.push(person.api.get("/api/meta/whoami").await);
    }
    let over: Vec<&Reply> = replies
        .iter()
        .filter(|r| limit(r) == Some("4") && r.status == 429)
        .collect();
    assert!(
        !over.is_empty(),
        "a budget of 4 must refuse within 8 requests"
    );
    over[0].expect_error(429, "rate_limited");
    assert!(over[0].header("retry-after").is_some());
    assert!(over[0].header("x-ratelimit-remaining").is_some());

    // Back to the default: 600 again, and requests pass.
    let run = set(&person.user_id, &["--requests-per-minute", "default"]).await;
    assert!(run.success, "{}", run.stderr);
    assert!(run.json()["overrides"]["requests_per_minute"].is_null());
    let back = until_limit(&person.api, "600", 3).await;
    back.last().unwrap().expect_ok();
}

async fn upload(api: &Api, table: &str, field: &str, record: &str, bytes: &[u8]) -> Reply {
    let mut body = Vec::new();
    for (name, value) in [("field_id", field), ("record_id", record)] {
        body.extend_from_slice(
            format!("--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n{value}\r\n")
                .as_bytes(),
        );
    }
    body.extend_from_slice(
        format!("--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"f.txt\"\r\n\r\n")
            .as_bytes(),
    );
    body.extend_from_slice(bytes);
    body.extend_from_slice(format!("\r\n--{BOUNDARY}--\r\n").as_bytes());
    api.post_multipart(&format!("/api/tables/{table}/attachments"), BOUNDARY, body)
        .await
}

async fn text_field(api: &Api, table: &str, name: &str) -> Reply {
    api.post(
        &format!("/api/tables/{table}/fields"),
        json!({"name": name, "type": "single_line_text"}),
    )
    .await
}

/// A refused `quotas set`: non-zero exit, nothing on stdout, the reason
/// (containing `why`) on stderr.
fn refused(run: &CliRun, why: &str) {
    let err = run.expect_refused();
    assert!(run.stdout.trim().is_empty(), "{}", run.stdout);
    assert!(err.contains(why), "{err}");
}

#[tokio::test]
async fn shard_side_quotas_are_enforced_and_never_lowered_below_use() {
    let person = Person::new().await;
    let api = &person.api;
    let user = person.user_id.as_str();
    let db = api.new_database("quota").await;
    let t1 = id(&api.create_table(&db, "One").await);
    id(&api.create_table(&db, "Two").await);

    // Tables per database: not below the 2 in use; 3 is enforced.
    refused(
        &set(user, &["--tables-per-database", "1"]).await,
        "already has 2 tables",
    );
    assert!(show(user).await["overrides"]["tables_per_database"].is_null());
    assert!(set(user, &["--tables-per-database", "3"]).await.success);
    api.create_table(&db, "Three").await;
    let m = api
        .post(
            &format!("/api/databases/{db}/tables"),
            json!({"name": "Four"}),
        )
        .await
        .expect_error(400, "bad_request");
    assert!(m.contains("at most 3 tables"), "{m}");

    // Fields per table.
    text_field(api, &t1, "A").await.expect_ok();
    text_field(api, &t1, "B").await.expect_ok();
    refused(
        &set(user, &["--fields-per-table", "1"]).await,
        "already has 2 fields",
    );
    assert!(set(user, &["--fields-per-table", "4"]).await.success);
    text_field(api, &t1, "C").await.expect_ok();
    let files = id(&api
        .create_field(&t1, json!({"name": "Files", "type": "attachment"}))
        .await);
    let m = text_field(api, &t1, "E")
        .await
        .expect_error(400, "bad_request");
    assert!(m.contains("at most 4 fields"), "{m}");

    // Attachment bytes per database (original bytes; an upload is first
    // checked against its whole declared body, a few hundred bytes more).
    assert!(set(user, &["--attachment-bytes", "2000"]).await.success);
    let record = id(&api
        .post(
            &format!("/api/tables/{t1}/records"),
            json!({"records": [{"fields": {}}]}),
        )
        .await
        .expect_ok()["records"][0]);
    let file = vec![b'x'; 1200];
    upload(api, &t1, &files, &record, &file).await.expect_ok();
    let m = upload(api, &t1, &files, &record, &file)
        .await
        .expect_error(400, "bad_request");
    assert!(m.contains("2000 bytes limit of attachment storage"), "{m}");
    refused(
        &set(user, &["--attachment-bytes", "1000"]).await,
        "already has 1200 bytes of attachments",
    );

    // A new database gets the account's figures from its allocation.
    let db2 = api.new_database("quota2").await;
    for name in ["a", "b", "c"] {
        api.create_table(&db2, name).await;
    }
    api.post(
        &format!("/api/databases/{db2}/tables"),
        json!({"name": "d"}),
    )
    .await
    .expect_error(400, "bad_request");

    // Databases owned: 2 in use.
    refused(
        &set(user, &["--databases", "1"]).await,
        "already owns 2 databases",
    );
    assert!(set(user, &["--databases", "2"]).await.success);
    let m = api
        .post("/api/databases", json!({"name": "third"}))
        .await
        .expect_error(400, "bad_request");
    assert!(m.contains("limit of 2 databases"), "{m}");

    // The figures in force, as `show` prints them.
    let q = show(user).await;
    assert_eq!(q["quotas"]["tables_per_database"], 3);
    assert_eq!(q["quotas"]["fields_per_table"], 4);
    assert_eq!(q["quotas"]["attachment_bytes"], 2000);
    assert_eq!(q["quotas"]["databases"], 2);
    assert_eq!(q["quotas"]["requests_per_minute"], 600);
}

#[tokio::test]
async fn usage_counts_known_records_bytes_and_requests() {
    let person = Person::new().await;
    let api = &person.api;
    let db = api.new_database("usage").await;
    let table = id(&api.create_table(&db, "Rows").await);
    let files = id(&api
        .create_field(&table, json!({"name": "Files", "type": "attachment"}))
        .await);
    let made = api
        .post(
            &format!("/api/tables/{table}/records"),
            json!({"records": [{"fields": {}}, {"fields": {}}, {"fields": {}}]}),
        )
        .await;
    let record = id(&made.expect_ok()["records"][0]);
    upload(api, &table, &files, &record, b"0123456789abc")
        .await
        .expect_ok();
    for _ in 0..4 {
        api.get(&format!("/api/tables/{table}/records"))
            .await
            .expect_ok();
    }

    // Statistics and request buckets trail by a few seconds: poll.
    let deadline = Instant::now() + Duration::from_secs(60);
    let usage = loop {
        let run = cli(&["--json", "usage", "--user", &person.user_id]).await;
        assert!(run.success, "{}", run.stderr);
        let v = run.json();
        if v["records"] == 3 && v["requests_last_hour"].as_i64().unwrap_or(0) >= 8 {
            break v;
        }
        assert!(Instant::now() < deadline, "usage never caught up: {v}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    assert_eq!(usage["user_id"], person.user_id.as_str());
    assert_eq!(usage["database_count"], 1);
    assert_eq!(usage["attachment_bytes"], 13);
    assert!(
        usage["requests_last_day"].as_i64().unwrap()
            >= usage["requests_last_hour"].as_i64().unwrap()
    );
    let dbs = usage["databases"].as_array().unwrap();
    assert_eq!(dbs.len(), 1);
    assert_eq!(dbs[0]["database_id"], db.as_str());
    assert_eq!(dbs[0]["records"], 3);
    assert_eq!(dbs[0]["tables"], 1);
    assert_eq!(dbs[0]["attachment_bytes"], 13);
    let shown = cli(&["--json", "databases", "show", &db]).await.json();
    assert_eq!(dbs[0]["shard"], shown["shard"]);

    // The table form names the database.
    let run = cli(&["usage", "--user", &person.user_id]).await;
    assert!(run.success && run.stdout.contains(&db), "{}", run.stdout);

    // The fleet view: ranked, highest first, at most N.
    let run = cli(&["--json", "usage", "--top", "3", "--by", "records"]).await;
    assert!(run.success, "{}", run.stderr);
    let top = run.json();
    assert_eq!(top["by"], "records");
    let accounts = top["accounts"].as_array().unwrap();
    assert!(!accounts.is_empty() && accounts.len() <= 3, "{top}");
    let records: Vec<i64> = accounts
        .iter()
        .map(|a| a["records"].as_i64().unwrap())
        .collect();
    assert!(records.windows(2).all(|w| w[0] >= w[1]), "{records:?}");
    assert!(records[0] >= 3, "{top}");

    // Refusals exit non-zero with the reason on stderr.
    cli(&["--json", "usage", "--user", "usr_000000000000"])
        .await
        .expect_refused();
    cli(&["--json", "usage", "--top", "0"])
        .await
        .expect_refused();
    cli(&["--json", "usage", "--top", "3", "--by", "nothing"])
        .await
        .expect_refused();
}
