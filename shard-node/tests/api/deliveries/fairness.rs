//! Fairness between databases (issue 27 section 4): one database with
//! many webhooks at a receiver that never answers holds at most
//! `WEBHOOK_CONCURRENCY_PER_DATABASE` attempts, so another database's
//! deliveries go out while they hang; and no database starts more than
//! `WEBHOOK_ATTEMPTS_PER_DATABASE_PER_MINUTE` attempts a minute, the rest
//! staying queued, due, with no attempt counted.

use super::*;

/// Attempts in flight the hanging database may hold.
const PER_DATABASE: usize = 8;

#[tokio::test]
async fn a_database_with_many_hanging_webhooks_never_holds_up_another() {
    // Two fresh slots and 32 attempts in flight at most on the node: before
    // per-database caps, the 100 hanging webhooks (4 attempts each) filled
    // all 32 and nothing else ever left.
    let h = harness(shard_node::config::WebhookSettings {
        concurrency: 2,
        concurrency_per_database: PER_DATABASE,
        ..settings(&[], 600_000)
    })
    .await;
    let mut stuck = Vec::new();
    for i in 0..100 {
        let hook = h.webhook(&format!("hang/{i}")).await;
        stuck.extend(h.enqueue(&hook, 2).await);
    }
    h.receiver
        .wait_until("the hanging database at its cap", |hits| {
            hits.len() >= PER_DATABASE
        })
        .await;
    let (other, _) = h.app.owned_database().await;
    let healthy = h
        .webhook_in(&other, &h.receiver.url("ok/other"), None)
        .await;
    let flowing = h.enqueue_in(&other, &healthy, 5).await;
    for id in &flowing {
        assert_eq!(h.finished(id).await.state, "succeeded");
    }
    // All the while the hanging database held its cap and no more, and
    // none of its attempts ended.
    assert_eq!(h.receiver.hits_on("/hang/").len(), PER_DATABASE);
    assert_eq!(h.receiver.hits_on("/ok/other").len(), flowing.len());
    let unfinished: i64 = h
        .app
        .pg
        .query_one(
            "SELECT count(*) FROM deliveries WHERE id = ANY($1) AND state = 'pending'",
            &[&stuck],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(unfinished, 200);
}

#[tokio::test]
async fn a_database_starts_at_most_its_attempts_per_minute() {
    let h = harness(shard_node::config::WebhookSettings {
        attempts_per_database_per_minute: 5,
        ..settings(&[], 10_000)
    })
    .await;
    let hook = h.webhook("ok/capped").await;
    let ids = h.enqueue(&hook, 12).await;
    h.receiver
        .wait_until("the minute's five attempts", |hits| hits.len() >= 5)
        .await;
    // Another database is not held back by the first one's cap...
    let (other, _) = h.app.owned_database().await;
    let free = h.webhook_in(&other, &h.receiver.url("ok/free"), None).await;
    for id in h.enqueue_in(&other, &free, 3).await {
        assert_eq!(h.finished(&id).await.state, "succeeded");
    }
    // ...while the first one's other seven wait, due, never attempted.
    assert_eq!(h.receiver.hits_on("/ok/capped").len(), 5);
    let mut waiting = 0;
    for id in &ids {
        let row = h.row(id).await;
        match row.state.as_str() {
            "succeeded" => assert_eq!(row.attempts, 1),
            "pending" => {
                assert_eq!((row.attempts, row.last_status), (0, None), "{row:?}");
                waiting += 1;
            }
            other => panic!("{id} is {other}: {row:?}"),
        }
    }
    assert_eq!(waiting, 7);
    let overdue: i64 = h
        .app
        .pg
        .query_one(
            "SELECT count(*) FROM deliveries
             WHERE id = ANY($1) AND finished_at IS NULL AND due_at <= now()",
            &[&ids],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(overdue, 7);
}
