//! Each write path's deliveries: kinds, keying, before and after,
//! switched-off webhooks, the 50-record rule, rollbacks, buttons.

use serde_json::json;

use super::*;

#[tokio::test]
async fn create_enqueues_record_created_keyed_by_name() {
    let fx = fixture().await;
    let hook = fx.hook(Hook::on(&fx.deals, "record_created")).await;
    let ids = fx
        .create(json!([
            {"fields": {"Name": "Big", "Status": "Open", "Amount": 5, "Owner": [fx.ann]}},
            {"fields": {"Name": "Small"}}
        ]))
        .await;
    let d = fx.deliveries(&hook).await;
    assert_eq!(d.len(), 2, "{d:?}");
    assert_eq!(record_ids(&d), sorted(ids.clone()));
    let big = d
        .iter()
        .find(|x| x["record_id"] == ids[0].as_str())
        .unwrap();
    let tag = &fx.db[3..8];
    assert!(big["delivery_id"]
        .as_str()
        .unwrap()
        .starts_with(&format!("dlv_{tag}")));
    assert_eq!(big["delivery_id"].as_str().unwrap().len(), 16);
    assert_eq!(big["event"], "record.created");
    assert_ms_timestamp(&big["occurred_at"]);
    assert_eq!(big["database"], json!({"id": fx.db, "name": "Test"}));
    assert_eq!(big["table"], json!({"id": fx.deals, "name": "Deals"}));
    assert_eq!(big["changed_field_ids"], json!([]));
    assert_eq!(big["before"], Value::Null);
    assert_eq!(big["test"], false);
    assert!(big.get("field_names").is_none());
    assert_eq!(big["field_ids"]["Status"], fx.f["Status"].as_str());
    assert_eq!(big["field_ids"].as_object().unwrap().len(), 5);
    assert_eq!(
        big["after"],
        json!({"fields": {"Name": "Big", "Status": "Open", "Amount": 5, "Due": null,
                          "Owner": [{"id": fx.ann, "display": "Ann"}]}})
    );
    // The same record as the read API shows it.
    let read = fx
        .app
        .get(&format!("{}/{}", fx.records(), ids[0]), &fx.p)
        .await;
    assert_eq!(big["after"]["fields"], read.body["record"]["fields"]);
    let small = d
        .iter()
        .find(|x| x["record_id"] == ids[1].as_str())
        .unwrap();
    assert_eq!(small["after"]["fields"]["Owner"], json!([]));
    assert_eq!(small["after"]["fields"]["Status"], Value::Null);
    // Written due at once (the deliverer, running here too, may already
    // have claimed them: its lease moves `due_at` on).
    let due: i64 = fx
        .app
        .pg
        .query_one(
            "SELECT count(*) FROM deliveries WHERE webhook_id = $1 AND due_at >= created_at",
            &[&hook],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(due, 2);

    // The reply (built from the rows the outbox read) keeps its own shape.
    let r = fx
        .app
        .post(
            &format!("{}?key_by=id&cell_format=ids", fx.records()),
            &fx.p,
            json!({"records": [{"fields": {"Name": "Shaped", "Status": "Open"}}]}),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let rec = &r.body["records"][0];
    assert_eq!(rec["fields"][&fx.f["Name"]], "Shaped");
    assert!(rec["fields"][&fx.f["Status"]].as_str().unwrap().len() == 8);
    assert_eq!(r.body["field_names"][&fx.f["Name"]], "Name");
    assert_ms_timestamp(&rec["created_at"]);
    let d = fx.deliveries(&hook).await;
    assert_eq!(d.len(), 3);
    assert_eq!(d[2]["after"]["fields"]["Status"], "Open");
}

#[tokio::test]
async fn payload_keyed_by_id() {
    let fx = fixture().await;
    let hook = fx
        .hook(Hook {
            payload_key: "id",
            ..Hook::on(&fx.deals, "record_created")
        })
        .await;
    fx.create(json!([{"fields": {"Name": "A", "Status": "Won"}}]))
        .await;
    let d = fx.deliveries(&hook).await;
    assert_eq!(d.len(), 1);
    assert!(d[0].get("field_ids").is_none());
    assert_eq!(d[0]["field_names"][&fx.f["Name"]], "Name");
    assert_eq!(d[0]["after"]["fields"][&fx.f["Name"]], "A");
    // Select cells still read as names (the read shape), keyed by id.
    assert_eq!(d[0]["after"]["fields"][&fx.f["Status"]], "Won");
    assert!(d[0]["after"]["fields"].get("Name").is_none());
}

#[tokio::test]
async fn update_carries_before_after_and_supplied_fields() {
    let fx = fixture().await;
    let all = fx.hook(Hook::on(&fx.deals, "record_updated")).await;
    let watch_amount = fx
        .hook(Hook {
            watched: Some(vec![fx.f["Amount"].clone()]),
            ..Hook::on(&fx.deals, "record_updated")
        })
        .await;
    let empty_watch = fx
        .hook(Hook {
            watched: Some(vec![]),
            ..Hook::on(&fx.deals, "record_updated")
        })
        .await;
    let whole_db = fx
        .hook(Hook {
            table: None,
            ..Hook::on(&fx.deals, "record_updated")
        })
        .await;
    let created = fx.hook(Hook::on(&fx.deals, "record_created")).await;
    let ids = fx
        .create(json!([{"fields": {"Name": "A", "Amount": 1}}]))
        .await;
    assert_eq!(fx.deliveries(&all).await.len(), 0);
    assert_eq!(fx.deliveries(&created).await.len(), 1);

    // Names a field, with its existing value too: both are "supplied".
    fx.update(json!([{"id": ids[0], "fields": {"Name": "A", "Status": "Open"}}]))
        .await;
    let d = fx.deliveries(&all).await;
    assert_eq!(d.len(), 1);
    assert_eq!(d[0]["event"], "record.updated");
    assert_eq!(
        d[0]["changed_field_ids"],
        json!([fx.f["Name"], fx.f["Status"]])
    );
    assert_eq!(d[0]["before"]["fields"]["Status"], Value::Null);
    assert_eq!(d[0]["before"]["fields"]["Amount"], 1);
    assert_eq!(d[0]["after"]["fields"]["Status"], "Open");
    assert_eq!(d[0]["after"]["fields"]["Name"], "A");
    // Not touching the watched field: no delivery for that webhook.
    assert_eq!(fx.deliveries(&watch_amount).await.len(), 0);
    // An empty watch list watches every field.
    assert_eq!(fx.deliveries(&empty_watch).await.len(), 1);
    assert_eq!(fx.deliveries(&whole_db).await.len(), 1);

    fx.update(json!([{"id": ids[0], "fields": {"Amount": 2}}]))
        .await;
    let d = fx.deliveries(&watch_amount).await;
    assert_eq!(d.len(), 1);
    assert_eq!(d[0]["changed_field_ids"], json!([fx.f["Amount"]]));
    assert_eq!(d[0]["before"]["fields"]["Amount"], 1);
    assert_eq!(d[0]["after"]["fields"]["Amount"], 2);
    // A link cell is supplied too.
    fx.update(json!([{"id": ids[0], "fields": {"Owner": [fx.ann]}}]))
        .await;
    let d = fx.deliveries(&all).await;
    assert_eq!(d.len(), 3);
    assert_eq!(d[2]["changed_field_ids"], json!([fx.f["Owner"]]));
    assert_eq!(d[2]["before"]["fields"]["Owner"], json!([]));
    assert_eq!(
        d[2]["after"]["fields"]["Owner"],
        json!([{"id": fx.ann, "display": "Ann"}])
    );
    // Whole-database webhooks see other tables' writes.
    let r = fx
        .app
        .patch(
            &format!("/api/tables/{}/records", fx.people),
            &fx.p,
            json!({"records": [{"id": fx.ann, "fields": {"Who": "Anna"}}]}),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let d = fx.deliveries(&whole_db).await;
    assert_eq!(d.len(), 4);
    assert_eq!(d[3]["table"]["name"], "People");
    assert_eq!(d[3]["after"]["fields"]["Who"], "Anna");
    assert_eq!(fx.deliveries(&all).await.len(), 3);
}

#[tokio::test]
async fn inactive_and_paused_webhooks_take_nothing() {
    let fx = fixture().await;
    let off = fx
        .hook(Hook {
            active: false,
            ..Hook::on(&fx.deals, "record_created")
        })
        .await;
    let paused = fx
        .hook(Hook {
            paused: true,
            ..Hook::on(&fx.deals, "record_created")
        })
        .await;
    let other_table = fx.hook(Hook::on(&fx.people, "record_created")).await;
    fx.create(json!([{"fields": {"Name": "x"}}])).await;
    for h in [&off, &paused, &other_table] {
        assert_eq!(fx.deliveries(h).await.len(), 0);
    }
    // Paused after the node read its rules (no schema version bump, as an
    // auto-pause might do): still nothing enqueued.
    let late = fx.hook(Hook::on(&fx.deals, "record_created")).await;
    fx.app
        .pg
        .execute(
            "UPDATE webhooks SET paused_at = now() WHERE id = $1",
            &[&late],
        )
        .await
        .unwrap();
    fx.create(json!([{"fields": {"Name": "y"}}])).await;
    assert_eq!(fx.deliveries(&late).await.len(), 0);
}

#[tokio::test]
async fn upsert_trash_restore_and_purge() {
    let fx = fixture().await;
    let created = fx.hook(Hook::on(&fx.deals, "record_created")).await;
    let updated = fx.hook(Hook::on(&fx.deals, "record_updated")).await;
    let deleted = fx.hook(Hook::on(&fx.deals, "record_deleted")).await;
    let ids = fx
        .create(json!([{"fields": {"Name": "a", "Amount": 1}}]))
        .await;
    let r = fx
        .app
        .call(
            "PUT",
            &fx.records(),
            Signing::With(&fx.p),
            Body::Json(json!({"merge_on": ["Name"], "records": [
                {"fields": {"Name": "a", "Amount": 2}},
                {"fields": {"Name": "b", "Amount": 3}}
            ]})),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let b = r.body["created_records"][0].as_str().unwrap().to_string();
    let c = fx.deliveries(&created).await;
    assert_eq!(record_ids(&c), sorted(vec![ids[0].clone(), b.clone()]));
    let u = fx.deliveries(&updated).await;
    assert_eq!(record_ids(&u), vec![ids[0].clone()]);
    assert_eq!(
        u[0]["changed_field_ids"],
        json!([fx.f["Name"], fx.f["Amount"]])
    );
    assert_eq!(u[0]["before"]["fields"]["Amount"], 1);
    assert_eq!(u[0]["after"]["fields"]["Amount"], 2);

    // Trash: record.deleted with the last state in `before`.
    fx.trash(std::slice::from_ref(&b)).await;
    let d = fx.deliveries(&deleted).await;
    assert_eq!(d.len(), 1);
    assert_eq!(d[0]["event"], "record.deleted");
    assert_eq!(d[0]["after"], Value::Null);
    assert_eq!(d[0]["before"]["fields"]["Amount"], 3);
    assert_eq!(d[0]["changed_field_ids"], json!([]));
    // Restore: record.created.
    let r = fx.trash_call("restore", json!({"ids": [b]})).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let c = fx.deliveries(&created).await;
    assert_eq!(c.len(), 3);
    assert_eq!(c[2]["event"], "record.created");
    assert_eq!(c[2]["record_id"], b.as_str());
    assert_eq!(c[2]["after"]["fields"]["Name"], "b");
    // Purge fires nothing.
    fx.trash(std::slice::from_ref(&b)).await;
    let before: i64 = fx
        .app
        .pg
        .query_one(
            "SELECT count(*) FROM deliveries WHERE database_id = $1",
            &[&fx.db],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(
        fx.trash_call("purge", json!({"ids": [b]})).await.status,
        200
    );
    fx.trash(&ids).await;
    assert_eq!(
        fx.trash_call("purge", json!({"all": true})).await.status,
        200
    );
    let after: i64 = fx
        .app
        .pg
        .query_one(
            "SELECT count(*) FROM deliveries WHERE database_id = $1",
            &[&fx.db],
        )
        .await
        .unwrap()
        .get(0);
    // Only the second trash's record.deleted.
    assert_eq!(after, before + 1);
}

#[tokio::test]
async fn fifty_records_enqueue_nothing() {
    let fx = fixture().await;
    let hook = fx.hook(Hook::on(&fx.deals, "record_created")).await;
    let updated = fx.hook(Hook::on(&fx.deals, "record_updated")).await;
    let fifty: Vec<Value> = (0..50)
        .map(|i| json!({"fields": {"Name": format!("n{i}")}}))
        .collect();
    let ids = fx.create(json!(fifty)).await;
    assert_eq!(fx.deliveries(&hook).await.len(), 0);
    let patch: Vec<Value> = ids
        .iter()
        .map(|id| json!({"id": id, "fields": {"Amount": 1}}))
        .collect();
    fx.update(json!(patch)).await;
    assert_eq!(fx.deliveries(&updated).await.len(), 0);
    let deleted = fx.hook(Hook::on(&fx.deals, "record_deleted")).await;
    fx.trash(&ids).await;
    assert_eq!(fx.deliveries(&deleted).await.len(), 0);
    let forty_nine: Vec<Value> = (0..49)
        .map(|i| json!({"fields": {"Name": format!("m{i}")}}))
        .collect();
    fx.create(json!(forty_nine)).await;
    assert_eq!(fx.deliveries(&hook).await.len(), 49);
}

#[tokio::test]
async fn a_rolled_back_write_leaves_no_delivery() {
    let fx = fixture().await;
    let hook = fx.hook(Hook::on(&fx.deals, "record_created")).await;
    let updated = fx.hook(Hook::on(&fx.deals, "record_updated")).await;
    // The second record repeats the first's unique Name: the batch fails.
    let r = fx
        .app
        .post(
            &fx.records(),
            &fx.p,
            json!({"records": [{"fields": {"Name": "same"}}, {"fields": {"Name": "same"}}]}),
        )
        .await;
    assert_eq!(r.status, 400, "{:?}", r.body);
    assert_eq!(fx.deliveries(&hook).await.len(), 0);

    // A failure after the deliveries were written (a deferred check that
    // refuses at commit): the deliveries go with the records.
    let qualified = format!("\"{}\".\"{}\"", fx.db, fx.deals);
    let name_col = &fx.f["Name"];
    fx.app
        .pg
        .batch_execute(&format!(
            "CREATE OR REPLACE FUNCTION outbox_test_refuse() RETURNS trigger LANGUAGE plpgsql AS $$
             BEGIN
               IF NEW.\"{name_col}\" = 'boom' THEN RAISE EXCEPTION 'refused at commit'; END IF;
               RETURN NULL;
             END $$;
             CREATE CONSTRAINT TRIGGER refuse_boom AFTER INSERT OR UPDATE ON {qualified}
               DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION outbox_test_refuse();"
        ))
        .await
        .unwrap();
    let r = fx
        .app
        .post(
            &fx.records(),
            &fx.p,
            json!({"records": [{"fields": {"Name": "fine"}}, {"fields": {"Name": "boom"}}]}),
        )
        .await;
    assert!(r.status >= 400, "{:?}", r.body);
    assert_eq!(fx.deliveries(&hook).await.len(), 0);
    let ids = fx.create(json!([{"fields": {"Name": "ok"}}])).await;
    assert_eq!(fx.deliveries(&hook).await.len(), 1);
    let r = fx
        .app
        .patch(
            &fx.records(),
            &fx.p,
            json!({"records": [{"id": ids[0], "fields": {"Name": "boom"}}]}),
        )
        .await;
    assert!(r.status >= 400, "{:?}", r.body);
    assert_eq!(fx.deliveries(&updated).await.len(), 0);
    let live: i64 = fx
        .app
        .pg
        .query_one(&format!("SELECT count(*) FROM {qualified}"), &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(live, 1);
}

#[tokio::test]
async fn webhook_button_press_enqueues_one_delivery() {
    let fx = fixture().await;
    let hook = fx
        .hook(Hook {
            table: None,
            payload_key: "id",
            ..Hook::on(&fx.deals, "record_deleted")
        })
        .await;
    let button = field(
        &fx.app,
        &fx.p,
        &fx.deals,
        json!({"name": "Ship it", "type": "button", "options": {"webhook_id": hook, "label": "Ship"}}),
    )
    .await;
    let ids = fx
        .create(json!([{"fields": {"Name": "a", "Status": "Open"}}]))
        .await;
    let press = format!("{}/{}/press", fx.records(), ids[0]);
    let before = fx
        .app
        .get(&format!("{}/{}", fx.records(), ids[0]), &fx.p)
        .await
        .body["record"]
        .clone();
    let r = fx
        .app
        .post(&press, &fx.p, json!({"field_id": "Ship it"}))
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(
        r.body,
        json!({"action": "webhook", "delivered": true, "webhook_id": hook})
    );
    let d = fx.deliveries(&hook).await;
    assert_eq!(d.len(), 1);
    let d = &d[0];
    assert_eq!(d["event"], "button.pressed");
    assert_eq!(d["trigger"], "button");
    assert_eq!(d["button"], json!({"field_id": button, "label": "Ship"}));
    assert_eq!(d["pressed_by"], fx.p.user_id.as_str());
    assert_ms_timestamp(&d["pressed_at"]);
    assert_eq!(d["before"], Value::Null);
    assert_eq!(d["changed_field_ids"], json!([]));
    assert_eq!(d["after"]["fields"][&fx.f["Status"]], "Open");
    assert_eq!(d["field_names"][&button], "Ship it");
    assert_eq!(d["test"], false);
    // The record is not changed.
    let after = fx
        .app
        .get(&format!("{}/{}", fx.records(), ids[0]), &fx.p)
        .await
        .body["record"]
        .clone();
    assert_eq!(before, after);
    // A viewer may not press.
    let r = fx
        .app
        .post(&press, &viewer(&fx.db), json!({"field_id": button}))
        .await;
    assert_eq!(r.status, 403);
    // A trashed record: 404, nothing enqueued.
    fx.trash(&ids).await;
    let r = fx
        .app
        .post(&press, &fx.p, json!({"field_id": button}))
        .await;
    assert_eq!(r.status, 404, "{:?}", r.body);
    // The webhook gone (its delete bumps the version): 404.
    let ids = fx.create(json!([{"fields": {"Name": "b"}}])).await;
    // Deliveries first, as the node's own delete does (the deliverer may be
    // recording an attempt of this webhook: the other order deadlocks).
    for sql in [
        "DELETE FROM deliveries WHERE webhook_id = $1",
        "DELETE FROM webhooks WHERE id = $1",
    ] {
        fx.app.pg.execute(sql, &[&hook]).await.unwrap();
    }
    fx.bump().await;
    let r = fx
        .app
        .post(
            &format!("{}/{}/press", fx.records(), ids[0]),
            &fx.p,
            json!({"field_id": button}),
        )
        .await;
    assert_eq!(r.status, 404, "{:?}", r.body);
    let left: i64 = fx
        .app
        .pg
        .query_one(
            "SELECT count(*) FROM deliveries WHERE database_id = $1 AND event = 'button.pressed'",
            &[&fx.db],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(left, 0, "deleted with their webhook");
}
