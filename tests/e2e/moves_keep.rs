//! A database move keeps everything a database has (ARCHITECTURE.md
//! "Database moves", issue 16): records with their links, lookups and
//! formulas (the records fixture), the trash (a trashed record stays
//! trashed and can be restored), views, a webhook with its delivery log
//! (a delivery made before the move is listed after it, and a write after
//! the move delivers from the new shard), attachments and their links, and
//! a list bookmark taken before the move, which still pages after it.

use e2e_tests::files::{assert_links_work, upload};
use e2e_tests::moves::{assert_nothing_left, database, move_done, shard_admin, shard_names};
use e2e_tests::receiver::Receiver;
use e2e_tests::stores::store_of_shard;
use e2e_tests::{id, Api};
use serde_json::{json, Value};

use crate::fixtures::{fixture, rec_ids, urlencode, Fx};

/// Another shard than `from` (the test cluster has two or more).
pub async fn other_shard(from: &str) -> String {
    shard_names()
        .await
        .into_iter()
        .find(|s| s != from)
        .expect("the test cluster has a second shard")
}

/// Everything read back, compared whole before and after the move.
#[derive(Debug, PartialEq)]
struct Seen {
    records: Value,
    people: Value,
    trash: Value,
    views: Value,
    by_view: Vec<String>,
    next_page: Vec<String>,
}

async fn seen(fx: &Fx, view: &str, bookmark: &str) -> Seen {
    let api = &fx.person.api;
    let get = |path: String| async move { api.get(&path).await.expect_ok().clone() };
    Seen {
        records: fx.list("page_size=1000").await["records"].clone(),
        people: get(format!("/api/tables/{}/records", fx.people)).await["records"].clone(),
        trash: get(format!("/api/tables/{}/trash", fx.tasks)).await["records"].clone(),
        views: get(format!("/api/tables/{}/views", fx.tasks)).await["views"].clone(),
        by_view: rec_ids(&fx.list(&format!("view={view}")).await),
        next_page: rec_ids(
            &fx.list(&format!("sort=Title&page_size=2&bookmark={bookmark}"))
                .await,
        ),
    }
}

/// Deliveries of a webhook's log, by id.
async fn log(api: &Api, hook: &str) -> Vec<Value> {
    let r = api.get(&format!("/api/webhooks/{hook}/deliveries")).await;
    r.expect_ok()["deliveries"]
        .as_array()
        .expect("a list")
        .clone()
}

#[tokio::test]
async fn a_move_keeps_links_lookups_formulas_trash_views_webhooks_files_and_bookmarks() {
    let fx = fixture().await;
    let api = &fx.person.api;
    let from = database(&fx.db).await.shard;
    let to = other_shard(&from).await;

    // Trash: "Plan_b" (r[4]) is trashed before the move.
    api.delete_with(&fx.records(), json!({"records": [fx.r[4]]}))
        .await
        .expect_ok();
    // A view.
    let view = api
        .post(
            &format!("/api/tables/{}/views", fx.tasks),
            json!({"name": "Pointed", "config": {
                "filters": {"join": "and", "conditions": [{"fieldId": fx.f["Points"], "op": "not_empty"}]},
                "sorts": [{"fieldId": fx.f["Points"], "dir": "desc"}]}}),
        )
        .await;
    let view = id(&view.expect_ok()["view"]);
    // A webhook, and one delivery through it before the move.
    let receiver = Receiver::start().await;
    let hook = api
        .post(
            &format!("/api/databases/{}/webhooks", fx.db),
            json!({"url": receiver.url("moves"), "trigger_type": "record_created", "table_id": fx.tasks}),
        )
        .await;
    let hook = id(&hook.expect_ok()["webhook"]);
    let before = api
        .post(
            &fx.records(),
            json!({"records": [{"fields": {"Title": "Before"}}]}),
        )
        .await;
    let before = rec_ids(before.expect_ok()).remove(0);
    receiver.wait_for_body(&before).await;
    let delivered = wait_logged(api, &hook, &before).await;
    // Attachments, when both shards share a blob store (a real cluster has
    // one store; deploy/test runs shard-1 local and shard-2 on S3, and the
    // chaos package moves files between two local shards).
    let same_store = store_of_shard(&from) == store_of_shard(&to);
    let files = if same_store {
        Some(upload(api, &fx.db).await)
    } else {
        eprintln!(
            "moves_keep: {from} and {to} use different blob stores: the attachment part \
             runs in chaos-tests (scale::a_move_between_shards_of_one_blob_store_keeps_attachment_links)"
        );
        None
    };
    // A bookmark into the listing sorted by Title.
    let first = fx.list("sort=Title&page_size=2").await;
    let bookmark = urlencode(first["bookmark"].as_str().expect("a second page"));

    let was = seen(&fx, &view, &bookmark).await;
    assert_eq!(was.next_page.len(), 2, "{was:?}");
    let m = move_done(&fx.db, &to).await;
    let now = seen(&fx, &view, &bookmark).await;
    assert_eq!(now, was, "the database reads the same after the move");

    // The delivery log came along; a write now delivers from the new shard.
    let listed = log(api, &hook).await;
    assert!(listed.contains(&delivered), "{listed:?} lacks {delivered}");
    let after = api
        .post(
            &fx.records(),
            json!({"records": [{"fields": {"Title": "After"}}]}),
        )
        .await;
    let after = rec_ids(after.expect_ok()).remove(0);
    receiver.wait_for_body(&after).await;
    assert_eq!(wait_logged(api, &hook, &after).await["state"], "succeeded");
    let on_target: i64 = shard_admin(&to)
        .await
        .query_one(
            "SELECT count(*) FROM deliveries WHERE database_id = $1 AND record_id = $2",
            &[&fx.db, &after],
        )
        .await
        .expect("count deliveries")
        .get(0);
    assert_eq!(on_target, 1, "the delivery of {after} is in {to}'s outbox");

    // The trashed record is still trashed, and restores.
    api.get(&format!("{}/{}", fx.records(), fx.r[4]))
        .await
        .expect_error(404, "not_found");
    api.post(
        &format!("/api/tables/{}/trash/restore", fx.tasks),
        json!({"ids": [fx.r[4]]}),
    )
    .await
    .expect_ok();
    let back = api.get(&format!("{}/{}", fx.records(), fx.r[4])).await;
    assert_eq!(back.expect_ok()["record"]["fields"]["Title"], "Plan_b");

    if let Some(up) = files {
        assert_links_work(api, &up).await;
    }
    // Structural changes are allowed again once the move is done.
    api.create_field(&fx.tasks, json!({"name": "Later", "type": "number"}))
        .await;
    assert_nothing_left(&m).await;
}

/// The log entry of the delivery for `record` once it is no longer
/// pending (60 s bound).
async fn wait_logged(api: &Api, hook: &str, record: &str) -> Value {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let entry = log(api, hook)
            .await
            .into_iter()
            .find(|d| d["record_id"] == record);
        if let Some(e) = entry.filter(|e| e["state"] != "pending") {
            return e;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no finished delivery for {record} in the log of {hook}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}
