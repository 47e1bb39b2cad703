//! Conditions decide, and never fail the write.

use serde_json::json;

use super::*;

#[tokio::test]
async fn conditions_decide_and_never_fail_the_write() {
    let fx = fixture().await;
    let open = fx
        .hook(Hook {
            conditions: Some(
                json!({"conditions": [{"field": "Status", "op": "is", "value": "Open"}]}),
            ),
            ..Hook::on(&fx.deals, "record_created")
        })
        .await;
    let by_id = fx
        .hook(Hook {
            conditions: Some(json!({"join": "or", "conditions": [
                {"field": fx.f["Amount"], "op": "greater", "value": 10},
                {"conditions": [{"field": "Owner", "op": "has_any", "value": [fx.ann]}]}
            ]})),
            ..Hook::on(&fx.deals, "record_created")
        })
        .await;
    // Unevaluable: a field that does not exist, a deeper nesting than two
    // levels, a value of the wrong kind, a choice renamed away (the
    // sentinel: positive operators match nothing).
    let missing = fx
        .hook(Hook {
            conditions: Some(json!({"conditions": [{"field": "Nope", "op": "empty"}]})),
            ..Hook::on(&fx.deals, "record_created")
        })
        .await;
    let deep = fx
        .hook(Hook {
            conditions: Some(json!({"conditions": [{"conditions": [{"conditions": [
                {"field": "Name", "op": "not_empty"}]}]}]})),
            ..Hook::on(&fx.deals, "record_created")
        })
        .await;
    let wrong = fx
        .hook(Hook {
            conditions: Some(
                json!({"conditions": [{"field": "Amount", "op": "is", "value": "x"}]}),
            ),
            ..Hook::on(&fx.deals, "record_created")
        })
        .await;
    let gone_choice = fx
        .hook(Hook {
            conditions: Some(
                json!({"conditions": [{"field": "Status", "op": "is", "value": "Lost"}]}),
            ),
            ..Hook::on(&fx.deals, "record_created")
        })
        .await;
    let none = fx
        .hook(Hook {
            conditions: Some(json!({"conditions": []})),
            ..Hook::on(&fx.deals, "record_created")
        })
        .await;
    let ids = fx
        .create(json!([
            {"fields": {"Name": "a", "Status": "Open"}},
            {"fields": {"Name": "b", "Status": "Won", "Amount": 11}},
            {"fields": {"Name": "c", "Owner": [fx.ann]}},
            {"fields": {"Name": "d"}}
        ]))
        .await;
    assert_eq!(ids.len(), 4);
    assert_eq!(
        record_ids(&fx.deliveries(&open).await),
        vec![ids[0].clone()]
    );
    assert_eq!(
        record_ids(&fx.deliveries(&by_id).await),
        sorted(vec![ids[1].clone(), ids[2].clone()])
    );
    for h in [&missing, &deep, &wrong, &gone_choice] {
        assert_eq!(fx.deliveries(h).await.len(), 0);
    }
    assert_eq!(fx.deliveries(&none).await.len(), 4);

    // record_updated: conditions read the record after the write, and a
    // watched field must be touched as well.
    let won = fx
        .hook(Hook {
            conditions: Some(
                json!({"conditions": [{"field": "Status", "op": "is", "value": "Won"}]}),
            ),
            watched: Some(vec![fx.f["Status"].clone()]),
            ..Hook::on(&fx.deals, "record_updated")
        })
        .await;
    fx.update(json!([
        {"id": ids[0], "fields": {"Status": "Won"}},
        {"id": ids[1], "fields": {"Name": "b2"}},
        {"id": ids[2], "fields": {"Status": "Open"}}
    ]))
    .await;
    let d = fx.deliveries(&won).await;
    assert_eq!(record_ids(&d), vec![ids[0].clone()]);
    assert_eq!(d[0]["before"]["fields"]["Status"], "Open");
}

/// A statement that fails inside the write's transaction (what a condition
/// stopped by the time limit does) is undone by the savepoint, and the
/// transaction carries on.
#[tokio::test]
async fn a_failing_condition_statement_leaves_the_transaction_usable() {
    let app = spawn_app().await;
    let mut client = app.db.maintenance_client().await.unwrap();
    let tx = client.transaction().await.unwrap();
    tx.batch_execute(
        "CREATE TEMP TABLE t_guard (x int) ON COMMIT DROP; INSERT INTO t_guard VALUES (1)",
    )
    .await
    .unwrap();
    let failed = shard_node::webhooks::outbox::guarded(
        &tx,
        tx.query_typed("SELECT 1 / (x - 1) FROM t_guard", &[]),
    )
    .await
    .unwrap();
    assert!(failed.is_none());
    let ok =
        shard_node::webhooks::outbox::guarded(&tx, tx.query_typed("SELECT x FROM t_guard", &[]))
            .await
            .unwrap()
            .unwrap();
    assert_eq!(ok.len(), 1);
    tx.batch_execute("INSERT INTO t_guard VALUES (2)")
        .await
        .unwrap();
    tx.commit().await.unwrap();
}
