//! `record_matches`: only a transition into matching fires.

use serde_json::json;

use super::*;

#[tokio::test]
async fn record_matches_fires_on_transitions_only() {
    // Its own database: no other test's node runs a clock pass over it.
    let fx = fixture_on(private_app().await).await;
    let open = json!({"conditions": [{"field": "Status", "op": "is", "value": "Open"}]});
    let hook = fx
        .hook(Hook {
            conditions: Some(open.clone()),
            ..Hook::on(&fx.deals, "record_matches")
        })
        .await;
    // Created already matching: fires once (creation counts).
    let ids = fx
        .create(json!([
            {"fields": {"Name": "a", "Status": "Open"}},
            {"fields": {"Name": "b", "Status": "Won"}}
        ]))
        .await;
    let d = fx.deliveries(&hook).await;
    assert_eq!(record_ids(&d), vec![ids[0].clone()]);
    assert_eq!(d[0]["event"], "record.matches");
    assert_eq!(d[0]["before"], Value::Null);
    assert_eq!(d[0]["changed_field_ids"], json!([]));
    assert_eq!(d[0]["after"]["fields"]["Status"], "Open");
    assert_eq!(fx.memory(&hook).await, vec![ids[0].clone()]);
    // Continuing to match does not fire again.
    fx.update(json!([{"id": ids[0], "fields": {"Name": "a2"}}]))
        .await;
    assert_eq!(fx.deliveries(&hook).await.len(), 1);
    // b enters the set: fires, with what the write supplied and before.
    fx.update(json!([{"id": ids[1], "fields": {"Status": "Open"}}]))
        .await;
    let d = fx.deliveries(&hook).await;
    assert_eq!(d.len(), 2);
    assert_eq!(d[1]["record_id"], ids[1].as_str());
    assert_eq!(d[1]["changed_field_ids"], json!([fx.f["Status"]]));
    assert_eq!(d[1]["before"]["fields"]["Status"], "Won");
    // a leaves the set (forgotten), then comes back: fires again.
    fx.update(json!([{"id": ids[0], "fields": {"Status": "Won"}}]))
        .await;
    assert_eq!(fx.memory(&hook).await, vec![ids[1].clone()]);
    fx.update(json!([{"id": ids[0], "fields": {"Status": "Open"}}]))
        .await;
    let d = fx.deliveries(&hook).await;
    assert_eq!(d.len(), 3);
    assert_eq!(d[2]["record_id"], ids[0].as_str());
    // Trashed records leave the memory; restored ones count as created.
    fx.trash(&[ids[1].clone()]).await;
    assert_eq!(fx.memory(&hook).await, vec![ids[0].clone()]);
    assert_eq!(fx.deliveries(&hook).await.len(), 3);
    let r = fx.trash_call("restore", json!({"ids": [ids[1]]})).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let d = fx.deliveries(&hook).await;
    assert_eq!(d.len(), 4);
    assert_eq!(d[3]["record_id"], ids[1].as_str());
    // Purged records leave it too (a row left over for a trashed record,
    // as a paused webhook's memory may hold one).
    fx.trash(&[ids[1].clone()]).await;
    fx.app
        .pg
        .execute(
            "INSERT INTO webhook_matches (webhook_id, record_id, database_id) VALUES ($1, $2, $3)",
            &[&hook, &ids[1], &fx.db],
        )
        .await
        .unwrap();
    let r = fx.trash_call("purge", json!({"ids": [ids[1]]})).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(fx.memory(&hook).await, vec![ids[0].clone()]);

    // Before the first clock pass the memory does not know what matched:
    // a creation fires, and so does an update the write itself saw go from
    // not matching to matching; one that matched before the webhook's
    // change is only remembered. The memory still follows every write.
    let fresh = fx
        .hook(Hook {
            conditions: Some(open),
            recorded: false,
            ..Hook::on(&fx.deals, "record_matches")
        })
        .await;
    let more = fx
        .create(json!([
            {"fields": {"Name": "c", "Status": "Open"}},
            {"fields": {"Name": "d", "Status": "Won"}}
        ]))
        .await;
    fx.update(json!([{"id": more[1], "fields": {"Status": "Open"}}]))
        .await;
    // a matched before `fresh` existed: kept matching, no transition.
    fx.update(json!([{"id": ids[0], "fields": {"Name": "a3"}}]))
        .await;
    assert_eq!(
        record_ids(&fx.deliveries(&fresh).await),
        sorted(vec![more[0].clone(), more[1].clone()])
    );
    assert_eq!(
        fx.memory(&fresh).await,
        sorted(vec![ids[0].clone(), more[0].clone(), more[1].clone()])
    );
    // d keeps matching: no second delivery; leaves and comes back: fires.
    fx.update(json!([{"id": more[1], "fields": {"Name": "d2"}}]))
        .await;
    fx.update(json!([{"id": more[1], "fields": {"Status": "Won"}}]))
        .await;
    fx.update(json!([{"id": more[1], "fields": {"Status": "Open"}}]))
        .await;
    assert_eq!(
        record_ids(&fx.deliveries(&fresh).await),
        sorted(vec![more[0].clone(), more[1].clone(), more[1].clone()])
    );
    // 50 records: the memory follows, nothing fires.
    let fifty: Vec<Value> = (0..50)
        .map(|i| json!({"fields": {"Name": format!("n{i}"), "Status": "Open"}}))
        .collect();
    fx.create(json!(fifty)).await;
    // (`hook` took c's creation and d's two entries: 7 in all.)
    assert_eq!(fx.deliveries(&hook).await.len(), 7);
    assert_eq!(fx.memory(&hook).await.len(), 3 + 50);
}
