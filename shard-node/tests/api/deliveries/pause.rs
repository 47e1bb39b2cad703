//! Part C: after 20 consecutive exhausted deliveries the webhook pauses;
//! nothing more is sent until it is resumed.

use super::*;

async fn schema_version(h: &Harness) -> i64 {
    h.app
        .pg
        .query_one(
            "SELECT schema_version FROM databases WHERE id = $1",
            &[&h.database_id],
        )
        .await
        .unwrap()
        .get(0)
}

/// (failed, pending never attempted, pending attempted) deliveries of `hook`.
async fn counts(h: &Harness, hook: &Hook) -> (i64, i64, i64) {
    let r = h
        .app
        .pg
        .query_one(
            "SELECT count(*) FILTER (WHERE state = 'failed'),
                    count(*) FILTER (WHERE state = 'pending' AND attempts = 0),
                    count(*) FILTER (WHERE state = 'pending' AND attempts > 0)
             FROM deliveries WHERE webhook_id = $1",
            &[&hook.id],
        )
        .await
        .unwrap();
    (r.get(0), r.get(1), r.get(2))
}

#[tokio::test]
async fn twenty_exhausted_deliveries_pause_the_webhook_until_resumed() {
    let h = harness(shard_node::config::WebhookSettings {
        concurrency_per_webhook: 1,
        ..settings(&[], 5_000)
    })
    .await;
    let hook = h.webhook("fail/pause").await;
    let healthy = h.webhook("ok/unaffected").await;
    let version = schema_version(&h).await;
    let ids = h.enqueue(&hook, 25).await;
    let deadline = Instant::now() + Duration::from_secs(60);
    while !h.webhook_state(&hook).await.2 {
        assert!(Instant::now() < deadline, "never paused");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(h.webhook_state(&hook).await, (20, Some(500), true));
    assert_eq!(counts(&h, &hook).await, (20, 5, 0));
    // Writes see the pause at once: the schema model moved on with it.
    assert!(schema_version(&h).await > version);
    assert_eq!(h.receiver.hits_on("/fail/pause").len(), 20);

    // Another webhook keeps delivering; the paused one sends nothing more.
    let other = h.enqueue(&healthy, 1).await;
    assert_eq!(h.finished(&other[0]).await.state, "succeeded");
    tokio::time::sleep(shard_node::webhooks::deliverer::TICK * 2).await;
    assert_eq!(counts(&h, &hook).await, (20, 5, 0));
    assert_eq!(h.receiver.hits_on("/fail/pause").len(), 20);

    // Resume, pointing the webhook at a receiver that answers.
    let r = h
        .app
        .patch(
            &format!("/api/webhooks/{}", hook.id),
            &h.owner,
            json!({"resume": true, "url": h.receiver.url("ok/resumed")}),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.body["webhook"]["paused_at"], Value::Null);
    assert_eq!(r.body["webhook"]["consecutive_failures"], 0);
    for id in &ids[20..] {
        assert_eq!(h.finished(id).await.state, "succeeded");
    }
    assert_eq!(h.receiver.hits_on("/ok/resumed").len(), 5);
    assert_eq!(h.webhook_state(&hook).await, (0, Some(200), false));
}
