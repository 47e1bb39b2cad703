//! The match clock works in keyset batches with a budget per database per
//! pass (issue 27 section 4): a pass looks at no more than
//! `MATCH_CLOCK_ROWS_PER_PASS` ids, the next one carries on from the
//! cursor, and every transition fires exactly once across the passes.
//! The passes are driven here one by one (`webhooks::clock::pass`) on a
//! node whose own clock never ticks during the test.

use std::collections::HashSet;

use serde_json::json;
use shard_node::webhooks::clock;

use super::*;

/// Records per batch and ids per database per pass, tiny on purpose.
const BATCH: usize = 4;
const BUDGET: usize = 10;

fn small_passes() -> WebhookSettings {
    WebhookSettings {
        match_clock_interval: Duration::from_secs(3600),
        match_clock_batch: BATCH,
        match_clock_rows_per_pass: BUDGET,
        ..WebhookSettings::default()
    }
}

async fn recorded(fx: &Fx, hook: &str) -> bool {
    fx.app
        .pg
        .query_one(
            "SELECT matches_recorded FROM webhooks WHERE id = $1",
            &[&hook],
        )
        .await
        .unwrap()
        .get(0)
}

#[tokio::test]
async fn a_pass_is_bounded_and_the_next_carries_on_firing_each_transition_once() {
    let (url, _) = private_database().await;
    let fx = fixture_on(spawn_app_webhooks(url.clone(), small_passes()).await).await;
    field(
        &fx.app,
        &fx.p,
        &fx.deals,
        json!({"name": "At", "type": "date", "options": {"include_time": true}}),
    )
    .await;
    let past =
        json!({"conditions": [{"field": "At", "op": "before", "value": {"relative": "now"}}]});
    // 23 records already matching before the webhook exists.
    let old: Vec<Value> = (0..23)
        .map(|i| json!({"fields": {"Name": format!("old {i}"), "At": "2020-01-01T00:00:00Z"}}))
        .collect();
    let old = fx.create(Value::Array(old)).await;
    let hook = fx
        .hook(Hook {
            conditions: Some(past),
            recorded: false,
            ..Hook::on(&fx.deals, "record_matches")
        })
        .await;

    // The first sweep records silently, BUDGET ids a pass: 10, 10, then
    // the last 3 end it.
    let state = node_state(&url, small_passes());
    for expected in [10, 20] {
        let o = clock::pass(&state).await.unwrap();
        assert_eq!((o.rows, o.deliveries, o.sweeps), (BUDGET, 0, 0), "{o:?}");
        assert_eq!(fx.memory(&hook).await.len(), expected);
        assert!(!recorded(&fx, &hook).await);
    }
    let o = clock::pass(&state).await.unwrap();
    assert_eq!((o.rows, o.deliveries, o.sweeps), (3, 0, 1), "{o:?}");
    assert!(recorded(&fx, &hook).await);
    assert_eq!(fx.memory(&hook).await, sorted(old.clone()));
    assert!(fx.deliveries(&hook).await.is_empty());

    // 12 records that come to match with no write: created in the future,
    // a moment later in the past.
    let soon = (chrono::Utc::now() + chrono::Duration::seconds(2))
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    let new: Vec<Value> = (0..12)
        .map(|i| json!({"fields": {"Name": format!("new {i}"), "At": soon}}))
        .collect();
    let new = fx.create(Value::Array(new)).await;
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert!(fx.deliveries(&hook).await.is_empty());

    // The next sweep goes over 35 ids in four passes or more (a batch
    // finding the webhook row locked, by the deliverer recording an
    // attempt, is skipped until the next pass), each within the budget; a
    // restarted node (a state of its own) carries on from the cursor the
    // last one left.
    let mut passes = Vec::new();
    while passes
        .iter()
        .map(|o: &clock::PassOutcome| o.sweeps)
        .sum::<usize>()
        == 0
    {
        assert!(passes.len() < 40, "the sweep never ended: {passes:?}");
        let state = if passes.len() % 2 == 0 {
            node_state(&url, small_passes())
        } else {
            state.clone()
        };
        let o = clock::pass(&state).await.unwrap();
        assert!(o.rows <= BUDGET && o.deliveries <= BUDGET, "{o:?}");
        passes.push(o);
    }
    assert!(passes.len() >= 4, "{passes:?}");
    assert_eq!(passes.iter().map(|o| o.rows).sum::<usize>(), 35);
    assert_eq!(passes.iter().map(|o| o.deliveries).sum::<usize>(), 12);
    let fired = fx.deliveries(&hook).await;
    assert_eq!(record_ids(&fired), sorted(new.clone()));
    let distinct: HashSet<&str> = fired
        .iter()
        .map(|d| d["delivery_id"].as_str().unwrap())
        .collect();
    assert_eq!(distinct.len(), 12);

    // Continuing to match fires nothing on the next sweep.
    for _ in 0..4 {
        clock::pass(&state).await.unwrap();
    }
    assert_eq!(fx.deliveries(&hook).await.len(), 12);
    let mut all = old;
    all.extend(new);
    assert_eq!(fx.memory(&hook).await, sorted(all));
}
