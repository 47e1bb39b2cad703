//! The delivery log, replays, the test route and pruning.

use cluster_protocol::error::forbidden;

use super::*;

/// Inserts `n` finished deliveries of `hook`, the i-th created `age(i)`
/// ago; returns their ids.
async fn finished_rows(
    h: &Harness,
    hook: &Hook,
    n: usize,
    age: impl Fn(usize) -> chrono::Duration,
) -> Vec<String> {
    let tag = ids::tag_of(Kind::Database, &h.database_id).unwrap();
    let mut out = Vec::new();
    for i in 0..n {
        let id = ids::new_tagged(Kind::Delivery, tag);
        let created = chrono::Utc::now() - age(i);
        h.app
            .pg
            .execute(
                "INSERT INTO deliveries (id, database_id, webhook_id, event, body, created_at,
                                         state, finished_at, attempts, last_status)
                 VALUES ($1, $2, $3, 'record.updated', '{}', $4, 'succeeded', $4, 1, 200)",
                &[&id, &h.database_id, &hook.id, &created],
            )
            .await
            .unwrap();
        out.push(id);
    }
    out
}

#[tokio::test]
async fn the_log_lists_the_50_most_recent_newest_first() {
    let h = harness(settings(&[], 5_000)).await;
    let hook = h.webhook("ok/log").await;
    let other = h.webhook("ok/other").await;
    let ids = finished_rows(&h, &hook, 55, |i| chrono::Duration::minutes(60 - i as i64)).await;
    finished_rows(&h, &other, 3, |_| chrono::Duration::minutes(1)).await;
    let pending = h.enqueue(&hook, 1).await;
    h.finished(&pending[0]).await;

    let viewer = member(
        &user_id(),
        &h.database_id,
        cluster_protocol::control::Role::Viewer,
    );
    let r = h
        .app
        .get(&format!("/api/webhooks/{}/deliveries", hook.id), &viewer)
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let log = r.body["deliveries"].as_array().unwrap();
    assert_eq!(log.len(), 50);
    let listed: Vec<&str> = log.iter().map(|d| d["id"].as_str().unwrap()).collect();
    let mut want = vec![pending[0].as_str()];
    want.extend(ids.iter().rev().take(49).map(String::as_str));
    assert_eq!(listed, want);
    let newest = &log[0];
    assert_eq!(newest["delivery_id"], newest["id"]);
    assert_eq!(newest["webhook_id"], hook.id.as_str());
    assert_eq!(newest["event"], "record.created");
    assert_eq!(newest["record_id"], "rec_AAAAA0000000");
    assert_eq!(newest["state"], "succeeded");
    assert_eq!(newest["attempts"], 1);
    assert_eq!(newest["status"], 200);
    assert_eq!(newest["response_body"], "ok");
    assert_eq!(newest["error"], Value::Null);
    assert!(newest["duration_ms"].is_number());
    assert_eq!(newest["next_attempt_at"], Value::Null);
    assert_ms_timestamp(&newest["created_at"]);
    assert_ms_timestamp(&newest["last_attempt_at"]);
    assert_ms_timestamp(&newest["finished_at"]);

    // Unknown webhook, or one of another database: 404.
    let tag = ids::tag_of(Kind::Database, &h.database_id).unwrap();
    let unknown = ids::new_tagged(Kind::Webhook, tag);
    let r = h
        .app
        .get(&format!("/api/webhooks/{unknown}/deliveries"), &h.owner)
        .await;
    assert_eq!(r.status, 404);
    let (_, stranger) = h.app.owned_database().await;
    let r = h
        .app
        .get(&format!("/api/webhooks/{}/deliveries", hook.id), &stranger)
        .await;
    assert_eq!(r.status, 404);
}

#[tokio::test]
async fn a_replay_resends_the_body_under_a_new_id_with_the_current_secret() {
    let h = harness(settings(&[], 5_000)).await;
    let hook = h.webhook("ok/replay").await;
    let other = h.webhook("ok/elsewhere").await;
    let ids = h.enqueue(&hook, 1).await;
    h.finished(&ids[0]).await;
    let first = h.receiver.hits_on("/ok/replay")[0].clone();

    // A regenerated secret signs the replay at once.
    let secret = new_secret();
    h.app
        .pg
        .execute(
            "UPDATE webhooks SET secret = $2 WHERE id = $1",
            &[&hook.id, &secret],
        )
        .await
        .unwrap();
    let path = format!("/api/webhooks/{}/deliveries/{}/replay", hook.id, ids[0]);
    let r = h.app.post(&path, &h.owner, json!({})).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let copy = r.body["delivery"]["id"].as_str().unwrap().to_string();
    assert_ne!(copy, ids[0]);
    assert!(ids::is_valid(Kind::Delivery, &copy));
    assert_eq!(
        ids::tag_of(Kind::Delivery, &copy),
        ids::tag_of(Kind::Database, &h.database_id)
    );
    assert_eq!(r.body["delivery"]["replay_of"], ids[0].as_str());
    assert_eq!(r.body["delivery"]["state"], "pending");
    assert_eq!(r.body["delivery"]["attempts"], 0);

    let hits = h
        .receiver
        .wait_until("the replay", |hits| hits.len() == 2)
        .await;
    let replayed = &hits[1];
    assert_signed(replayed, &secret, &copy, 1);
    let want = String::from_utf8(first.body.to_vec())
        .unwrap()
        .replace(&ids[0], &copy);
    assert_eq!(String::from_utf8(replayed.body.to_vec()).unwrap(), want);
    assert_eq!(h.finished(&copy).await.state, "succeeded");

    // Another webhook's delivery, an unknown one: 404.
    let r = h
        .app
        .post(
            &format!("/api/webhooks/{}/deliveries/{}/replay", other.id, ids[0]),
            &h.owner,
            json!({}),
        )
        .await;
    assert_eq!(r.status, 404);
    let r = h
        .app
        .post(
            &format!("/api/webhooks/{}/deliveries/dlv_nothing/replay", hook.id),
            &h.owner,
            json!({}),
        )
        .await;
    assert_eq!(r.status, 404);
    // Changes are refused below editor, and to read-only keys.
    let viewer = viewer(&h.database_id);
    let r = h.app.post(&path, &viewer, json!({})).await;
    assert_eq!(r.status, 403);
    assert_eq!(r.error_message(), forbidden::VIEWER);
    let r = h
        .app
        .post(&path, &read_only(h.owner.clone()), json!({}))
        .await;
    assert_eq!(r.status, 403);
    assert_eq!(r.error_message(), forbidden::KEY_READ_ONLY);
    let r = h.app.post(&path, &support(&h.database_id), json!({})).await;
    assert_eq!(r.status, 403);
    assert_eq!(r.error_message(), forbidden::SUPPORT_READ_ONLY);
    let log = h
        .app
        .get(&format!("/api/webhooks/{}/deliveries", hook.id), &h.owner)
        .await;
    assert_eq!(log.body["deliveries"].as_array().unwrap().len(), 2);
}

#[tokio::test]
async fn the_test_route_sends_one_signed_sample_and_records_nothing() {
    let h = harness(settings(&[100, 100], 5_000)).await;
    let table = h
        .app
        .create_table_id(&h.database_id, &h.owner, "Tasks")
        .await;
    for (name, kind) in [("Title", "single_line_text"), ("Done", "checkbox")] {
        let r = h
            .app
            .post(
                &format!("/api/tables/{table}/fields"),
                &h.owner,
                json!({"name": name, "type": kind}),
            )
            .await;
        assert_eq!(r.status, 200, "{:?}", r.body);
    }
    let url = h.receiver.url("ok/test");
    let hook = h.webhook_to(&url, Some(&table)).await;
    let r = h
        .app
        .post(
            &format!("/api/webhooks/{}/test", hook.id),
            &h.owner,
            json!({}),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.body["succeeded"], true);
    assert_eq!(r.body["status"], 200);
    assert_eq!(r.body["body"], "ok");
    assert_eq!(r.body["error"], Value::Null);
    assert!(r.body["duration_ms"].is_number());
    let delivery_id = r.body["delivery_id"].as_str().unwrap();
    let hits = h.receiver.hits();
    assert_eq!(hits.len(), 1);
    assert_signed(&hits[0], &hook.secret, delivery_id, 1);
    let sent = json_of(&hits[0]);
    assert_eq!(sent["event"], "webhook.test");
    assert_eq!(sent["test"], true);
    assert_eq!(sent["record_id"], Value::Null);
    assert_eq!(sent["delivery_id"], delivery_id);
    assert_eq!(sent["table"]["id"], table.as_str());
    assert_eq!(sent["table"]["name"], "Tasks");
    assert_eq!(sent["database"]["id"], h.database_id.as_str());
    let fields = sent["after"]["fields"].as_object().unwrap();
    assert!(fields.contains_key("Title") && fields.contains_key("Done"));
    assert_eq!(sent["field_ids"].as_object().unwrap().len(), fields.len());

    // A failing receiver: one attempt, no retry, no streak, no log entry.
    let failing = h.webhook("fail/test").await;
    let r = h
        .app
        .post(
            &format!("/api/webhooks/{}/test", failing.id),
            &h.owner,
            json!({}),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.body["succeeded"], false);
    assert_eq!(r.body["status"], 500);
    assert_eq!(r.body["body"], "nope");
    let whole = json_of(&h.receiver.hits_on("/fail/test")[0]);
    assert_eq!(whole["table"]["name"], "Example table");
    assert_eq!(whole["after"]["fields"]["Example field"], "Example value");
    let count: i64 = h
        .app
        .pg
        .query_one(
            "SELECT count(*) FROM deliveries WHERE database_id = $1",
            &[&h.database_id],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(count, 0);
    assert_eq!(h.webhook_state(&failing).await, (0, None, false));
    let r = h
        .app
        .post(
            &format!("/api/webhooks/{}/test", hook.id),
            &viewer(&h.database_id),
            json!({}),
        )
        .await;
    assert_eq!(r.status, 403);
    assert_eq!(r.error_message(), forbidden::VIEWER);
    let r = h
        .app
        .post("/api/webhooks/whk_nothing/test", &h.owner, json!({}))
        .await;
    assert_eq!(r.status, 404);
    // Exactly the two test requests reached the receiver.
    assert_eq!(h.receiver.hits().len(), 2);
}

#[tokio::test]
async fn pruning_keeps_the_latest_200_per_webhook_and_everything_recent() {
    let h = harness(settings(&[], 5_000)).await;
    let busy = h.webhook("ok/busy").await;
    let quiet = h.webhook("ok/quiet").await;
    let day = chrono::Duration::days(1);
    // busy: 10 recent and 250 old finished rows; quiet: 5 old ones.
    let recent = finished_rows(&h, &busy, 10, |i| chrono::Duration::minutes(i as i64 + 1)).await;
    let old = finished_rows(&h, &busy, 250, |i| {
        day * 40 + chrono::Duration::minutes(i as i64)
    })
    .await;
    let quiet_old = finished_rows(&h, &quiet, 5, |_| day * 90).await;
    // An old row still pending is never pruned.
    let tag = ids::tag_of(Kind::Database, &h.database_id).unwrap();
    let stuck = ids::new_tagged(Kind::Delivery, tag);
    h.app
        .pg
        .execute(
            "INSERT INTO deliveries (id, database_id, webhook_id, event, body, created_at, due_at)
             VALUES ($1, $2, $3, 'record.updated', '{}', now() - interval '60 days',
                     now() + interval '1 day')",
            &[&stuck, &h.database_id, &busy.id],
        )
        .await
        .unwrap();

    let removed = shard_node::webhooks::deliverer::prune(&h.app.db)
        .await
        .unwrap();
    let left = |hook: &Hook| {
        let pg = &h.app.pg;
        let id = hook.id.clone();
        async move {
            let rows = pg
                .query(
                    "SELECT id FROM deliveries WHERE webhook_id = $1 ORDER BY created_at DESC",
                    &[&id],
                )
                .await
                .unwrap();
            rows.iter()
                .map(|r| r.get::<_, String>(0))
                .collect::<Vec<_>>()
        }
    };
    let busy_left = left(&busy).await;
    // The 200 most recent (stuck is older than all of them) stay, plus stuck.
    let mut want: Vec<String> = recent.clone();
    want.extend(old.iter().take(190).cloned());
    want.push(stuck.clone());
    assert_eq!(busy_left, want);
    assert_eq!(left(&quiet).await.len(), quiet_old.len());
    assert_eq!(removed, 60);
}
