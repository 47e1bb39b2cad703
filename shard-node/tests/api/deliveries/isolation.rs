//! A receiver that never answers holds only its own webhook's attempt
//! slots: other webhooks' deliveries go out while it hangs.

use super::*;

#[tokio::test]
async fn a_hanging_receiver_never_holds_up_another_webhook() {
    // A timeout far longer than the test: the hanging attempts stay open.
    let h = harness(settings(&[], 600_000)).await;
    let hanging = h.webhook("hang/stuck").await;
    let healthy = h.webhook("ok/flowing").await;
    let stuck = h.enqueue(&hanging, 100).await;
    let cap = shard_node::config::WebhookSettings::default().concurrency_per_webhook;
    h.receiver
        .wait_until("the hanging webhook's slots to fill", |hits| {
            hits.len() == cap
        })
        .await;
    let flowing = h.enqueue(&healthy, 20).await;
    for id in &flowing {
        assert_eq!(h.finished(id).await.state, "succeeded");
    }
    // All the while, the hanging webhook had exactly its cap in flight and
    // none of its attempts ended.
    assert_eq!(h.receiver.hits_on("/hang/").len(), cap);
    assert_eq!(h.receiver.hits_on("/ok/flowing").len(), flowing.len());
    let unfinished: i64 = h
        .app
        .pg
        .query_one(
            "SELECT count(*) FROM deliveries
             WHERE id = ANY($1) AND state = 'pending' AND last_attempt_at IS NULL",
            &[&stuck],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(unfinished, 100);
}

#[tokio::test]
async fn dead_receivers_filling_every_slot_never_hold_up_a_live_one() {
    // Four dead webhooks at their cap of 4 hold twice the node's 8 slots.
    let h = harness(shard_node::config::WebhookSettings {
        concurrency: 8,
        concurrency_per_webhook: 4,
        ..settings(&[], 600_000)
    })
    .await;
    for i in 0..4 {
        let dead = h.webhook(&format!("hang/dead-{i}")).await;
        h.enqueue(&dead, 10).await;
    }
    h.receiver
        .wait_until("every dead webhook at its cap", |hits| hits.len() == 16)
        .await;
    let healthy = h.webhook("ok/alive").await;
    let flowing = h.enqueue(&healthy, 20).await;
    for id in &flowing {
        assert_eq!(h.finished(id).await.state, "succeeded");
    }
    assert_eq!(h.receiver.hits_on("/hang/").len(), 16);
}
