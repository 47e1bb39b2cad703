//! Point-in-time restore of one database (docs/restore.md) through the
//! operator CLI and the router: the records fixture (links, a lookup, a
//! formula, a unique field) and a comment are read at T; then the original
//! is changed (a record deleted, one renamed); the restore of T is run with
//! `databases restore --as-of T --wait --json`; the NEW database then reads, as its owner,
//! exactly what the original read at T with every id re-tagged, and the
//! original keeps its changes. Bad requests are refused with nothing made.
//!
//! The cluster's RESTORE_SCRATCH_COMMAND is the dev cluster's hook
//! (`deploy/dev-cluster scratch-restore`: pgBackRest's backups and archived
//! WAL of the shard, replayed up to T).

use std::time::Duration;

use chrono::{SecondsFormat, Utc};
use cluster_protocol::control::{Restore, RestoreState};
use e2e_tests::cluster;
use e2e_tests::moves::{cli, cli_command};
use serde_json::{json, Value};

use crate::fixtures::fixture;

/// Longest a test waits for a restore to end.
const RESTORE_TIMEOUT: Duration = Duration::from_secs(240);

const TAGGED_PREFIXES: [&str; 10] = [
    "db_", "tbl_", "fld_", "viw_", "rec_", "att_", "whk_", "dlv_", "cmt_", "shl_",
];

/// The test's own oracle of re-tagging: the old database id whole, then
/// every `<prefix><old tag>`.
fn retagged(v: &Value, old_db: &str, new_db: &str) -> Value {
    let mut text = v.to_string().replace(old_db, new_db);
    for p in TAGGED_PREFIXES {
        text = text.replace(
            &format!("{p}{}", &old_db[3..8]),
            &format!("{p}{}", &new_db[3..8]),
        );
    }
    serde_json::from_str(&text).expect("JSON stays JSON")
}

async fn read_all(api: &e2e_tests::Api, db: &str, tables: &[&str], comments: &str) -> Value {
    let mut records = serde_json::Map::new();
    for t in tables {
        let got = api
            .get(&format!("/api/tables/{t}/records?page_size=1000"))
            .await
            .expect_ok()
            .clone();
        records.insert((*t).to_string(), got);
    }
    json!({
        "tables": api.get(&format!("/api/databases/{db}/tables")).await.expect_ok().clone(),
        "records": records,
        "comments": api.get(comments).await.expect_ok().clone(),
    })
}

async fn restore_of(database_id: &str) -> Option<Restore> {
    cluster()
        .control_plane
        .restores()
        .await
        .expect("list restores")
        .restores
        .into_iter()
        .find(|r| r.database_id == database_id)
}

#[tokio::test]
async fn a_restore_brings_the_database_back_into_a_new_one() {
    let fx = fixture().await;
    let api = &fx.person.api;
    let comments = format!("/api/tables/{}/records/{}/comments", fx.tasks, fx.r[0]);
    api.post(&comments, json!({"text": format!("see {}", fx.r[1])}))
        .await
        .expect_ok();
    let tables = [fx.tasks.as_str(), fx.people.as_str()];
    let at_t = read_all(api, &fx.db, &tables, &comments).await;
    let t = Utc::now().to_rfc3339_opts(SecondsFormat::Micros, true);

    // After T the original changes; the restore must not see it.
    let records = format!("/api/tables/{}/records", fx.tasks);
    api.delete_with(&records, json!({"records": [fx.r[2]]}))
        .await
        .expect_ok();
    api.patch(
        &records,
        json!({"records": [{"id": fx.r[0], "fields": {"Title": "Changed after T"}}]}),
    )
    .await
    .expect_ok();
    let original_after = read_all(api, &fx.db, &tables, &comments).await;
    assert_ne!(original_after, at_t, "the changes show in the original");

    let child = cli_command(&[
        "databases",
        "restore",
        &fx.db,
        "--as-of",
        &t,
        "--wait",
        "--json",
    ])
    .spawn()
    .expect("run the CLI");
    let out = tokio::time::timeout(RESTORE_TIMEOUT, child.wait_with_output())
        .await
        .expect("the restore ends in time")
        .expect("the CLI's output");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "restore failed: {}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    let job: Restore = serde_json::from_str(stdout.trim()).expect("one restore object");
    assert_eq!(job.state, RestoreState::Done, "{job:?}");
    assert_eq!(job.database_id, fx.db);
    assert!(
        job.rows_copied >= 8 && job.rows_copied == job.rows_total,
        "{job:?}"
    );
    let new_db = job.new_database_id.clone();
    assert_ne!(&new_db[3..8], &fx.db[3..8], "a new tag");

    // The copy, read through the router as the owner, is the original at T.
    let new_tables: Vec<String> = tables
        .iter()
        .map(|t| {
            retagged(&json!(t), &fx.db, &new_db)
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    let new_refs: Vec<&str> = new_tables.iter().map(String::as_str).collect();
    let new_comments = retagged(&json!(comments), &fx.db, &new_db)
        .as_str()
        .unwrap()
        .to_string();
    let copy = read_all(api, &new_db, &new_refs, &new_comments).await;
    assert_eq!(copy, retagged(&at_t, &fx.db, &new_db));
    // Links point inside the copy; text naming a record was re-tagged.
    // (The first record with a link: the listing's order is not the test's.)
    let first = copy["records"][&new_tables[0]]["records"]
        .as_array()
        .expect("records")
        .iter()
        .find(|r| r["fields"]["Owner"][0]["id"].is_string())
        .unwrap_or_else(|| panic!("no record of the copy links an owner: {copy}"));
    let owner = first["fields"]["Owner"][0]["id"].as_str().unwrap();
    assert!(
        owner.starts_with(&format!("rec_{}", &new_db[3..8])),
        "{first}"
    );
    assert_eq!(
        copy["comments"]["comments"][0]["text"],
        json!(format!(
            "see {}",
            retagged(&json!(fx.r[1]), &fx.db, &new_db).as_str().unwrap()
        ))
    );
    // Its name and owner.
    let listed = api.get("/api/databases").await.expect_ok()["databases"].clone();
    let d = listed
        .as_array()
        .expect("databases")
        .iter()
        .find(|d| d["id"] == json!(new_db))
        .expect("the owner lists the new database")
        .clone();
    assert!(d["name"].as_str().unwrap().contains("(restored "), "{d}");
    assert_eq!(d["owner_id"], json!(fx.person.user_id));
    // The copy is writable: a new task linked to the copy's Ann.
    let ann = retagged(&json!(fx.ann), &fx.db, &new_db);
    api.post(
        &format!("/api/tables/{}/records", new_tables[0]),
        json!({"records": [{"fields": {"Title": "New", "Points": 2, "Owner": [ann]}}]}),
    )
    .await
    .expect_ok();

    // The original is as the changes left it.
    assert_eq!(
        read_all(api, &fx.db, &tables, &comments).await,
        original_after
    );

    // `restores show` prints the same job.
    let shown: Restore =
        serde_json::from_value(cli(&["restores", "show", &job.id, "--json"]).await.json())
            .expect("a restore object");
    assert_eq!((shown.id, shown.state), (job.id, RestoreState::Done));
}

#[tokio::test]
async fn bad_restores_are_refused_and_make_nothing() {
    let fx = fixture().await;
    let api = &fx.person.api;
    let count = || async {
        api.get("/api/databases").await.expect_ok()["databases"]
            .as_array()
            .expect("databases")
            .len()
    };
    let before = count().await;
    let future = (Utc::now() + chrono::Duration::hours(1)).to_rfc3339();
    let past = (Utc::now() - chrono::Duration::days(30)).to_rfc3339();
    for (db, as_of, words) in [
        (fx.db.as_str(), future.as_str(), "in the future"),
        (fx.db.as_str(), "yesterday", "RFC 3339"),
        (fx.db.as_str(), past.as_str(), "before the database existed"),
        ("db_nope0nope000", past.as_str(), "Unknown database"),
    ] {
        let run = cli(&["databases", "restore", db, "--as-of", as_of, "--json"]).await;
        let stderr = run.expect_refused();
        assert_eq!(run.code, Some(3), "{stderr}");
        assert!(stderr.contains(words), "{as_of}: {stderr}");
    }
    assert!(restore_of(&fx.db).await.is_none(), "no job recorded");
    assert_eq!(count().await, before, "no database made");
}
