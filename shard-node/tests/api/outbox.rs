//! Part C, Events: every record write leaves its deliveries in the outbox
//! (`deliveries`) in its own transaction: kinds, payload keying, watched
//! fields, conditions, `record_matches` memory, the 50-record rule,
//! rollbacks, purge, webhook buttons and the match clock. Webhooks are
//! inserted with SQL (as their routes would save them, bumping the schema
//! version); what is checked is the rows the node writes.

use std::collections::HashMap;
use std::time::Duration;

use cluster_protocol::principal::Principal;
use serde_json::{json, Value};
use shard_node::config::WebhookSettings;

use crate::helpers::*;

/// A database with a table `Deals` (Name, Status, Amount, Due, Owner ->
/// People) and a table `People` (Who).
struct Fx {
    app: TestApp,
    db: String,
    p: Principal,
    deals: String,
    people: String,
    /// Field name -> id on Deals.
    f: HashMap<String, String>,
    /// Records of People.
    ann: String,
}

async fn field(app: &TestApp, p: &Principal, tid: &str, body: Value) -> String {
    let r = app
        .post(&format!("/api/tables/{tid}/fields"), p, body.clone())
        .await;
    assert_eq!(r.status, 200, "{body} -> {:?}", r.body);
    r.body["field"]["id"].as_str().unwrap().to_string()
}

async fn fixture_on(app: TestApp) -> Fx {
    let (db, p) = app.owned_database().await;
    let deals = app.create_table_id(&db, &p, "Deals").await;
    let people = app.create_table_id(&db, &p, "People").await;
    field(
        &app,
        &p,
        &people,
        json!({"name": "Who", "type": "single_line_text"}),
    )
    .await;
    let mut f = HashMap::new();
    for body in [
        json!({"name": "Name", "type": "single_line_text", "options": {"unique": true}}),
        json!({"name": "Status", "type": "single_select", "options": {"choices": [{"name": "Open"}, {"name": "Won"}]}}),
        json!({"name": "Amount", "type": "number"}),
        json!({"name": "Due", "type": "date"}),
        json!({"name": "Owner", "type": "link", "options": {"target_table_id": people}}),
    ] {
        let name = body["name"].as_str().unwrap().to_string();
        f.insert(name, field(&app, &p, &deals, body).await);
    }
    let r = app
        .post(
            &format!("/api/tables/{people}/records"),
            &p,
            json!({"records": [{"fields": {"Who": "Ann"}}]}),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let ann = r.body["records"][0]["id"].as_str().unwrap().to_string();
    Fx {
        app,
        db,
        p,
        deals,
        people,
        f,
        ann,
    }
}

async fn fixture() -> Fx {
    fixture_on(spawn_app().await).await
}

/// A webhook as its routes would save it.
#[derive(Clone)]
struct Hook {
    table: Option<String>,
    trigger: &'static str,
    payload_key: &'static str,
    conditions: Option<Value>,
    watched: Option<Vec<String>>,
    active: bool,
    paused: bool,
    recorded: bool,
}

impl Hook {
    fn on(table: &str, trigger: &'static str) -> Hook {
        Hook {
            table: Some(table.to_owned()),
            trigger,
            payload_key: "name",
            conditions: None,
            watched: None,
            active: true,
            paused: false,
            recorded: true,
        }
    }
}

impl Fx {
    fn records(&self) -> String {
        format!("/api/tables/{}/records", self.deals)
    }

    async fn hook(&self, h: Hook) -> String {
        let id = format!("whk_{}{}", &self.db[3..8], &user_id()[4..11]);
        self.app
            .pg
            .execute(
                "INSERT INTO webhooks (id, database_id, table_id, name, url, trigger_type,
                     payload_key, is_active, paused_at, conditions, watched_field_ids,
                     matches_recorded, secret)
                 VALUES ($1, $2, $3, 'test', 'http://127.0.0.1:9/hook', $4, $5, $6,
                     CASE WHEN $7 THEN now() END, $8, $9, $10, repeat('ab', 24))",
                &[
                    &id,
                    &self.db,
                    &h.table,
                    &h.trigger,
                    &h.payload_key,
                    &h.active,
                    &h.paused,
                    &h.conditions,
                    &h.watched,
                    &h.recorded,
                ],
            )
            .await
            .unwrap();
        self.bump().await;
        id
    }

    async fn bump(&self) {
        self.app
            .pg
            .execute(
                "UPDATE databases SET schema_version = schema_version + 1 WHERE id = $1",
                &[&self.db],
            )
            .await
            .unwrap();
    }

    /// The webhook's delivery bodies (parsed), oldest first, then by
    /// record id; each checked against its row's columns.
    async fn deliveries(&self, webhook: &str) -> Vec<Value> {
        let rows = self
            .app
            .pg
            .query(
                "SELECT id, event, record_id, body, database_id FROM deliveries
                 WHERE webhook_id = $1 ORDER BY created_at, record_id, id",
                &[&webhook],
            )
            .await
            .unwrap();
        rows.iter()
            .map(|r| {
                let body: Value = serde_json::from_str(r.get::<_, &str>(3)).unwrap();
                assert_eq!(body["delivery_id"], r.get::<_, &str>(0));
                assert_eq!(body["event"], r.get::<_, &str>(1));
                assert_eq!(body["record_id"].as_str(), r.get::<_, Option<&str>>(2));
                assert_eq!(r.get::<_, &str>(4), self.db);
                body
            })
            .collect()
    }

    async fn create(&self, records: Value) -> Vec<String> {
        let r = self
            .app
            .post(&self.records(), &self.p, json!({ "records": records }))
            .await;
        assert_eq!(r.status, 200, "{:?}", r.body);
        ids_of(&r.body)
    }

    async fn update(&self, records: Value) {
        let r = self
            .app
            .patch(&self.records(), &self.p, json!({ "records": records }))
            .await;
        assert_eq!(r.status, 200, "{:?}", r.body);
    }

    async fn trash(&self, ids: &[String]) {
        let r = self
            .app
            .call(
                "DELETE",
                &self.records(),
                Signing::With(&self.p),
                Body::Json(json!({ "records": ids })),
            )
            .await;
        assert_eq!(r.status, 200, "{:?}", r.body);
    }

    async fn trash_call(&self, what: &str, body: Value) -> Reply {
        self.app
            .post(
                &format!("/api/tables/{}/trash/{what}", self.deals),
                &self.p,
                body,
            )
            .await
    }

    async fn memory(&self, webhook: &str) -> Vec<String> {
        self.app
            .pg
            .query(
                "SELECT record_id FROM webhook_matches WHERE webhook_id = $1 ORDER BY record_id",
                &[&webhook],
            )
            .await
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect()
    }
}

fn ids_of(body: &Value) -> Vec<String> {
    body["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_string())
        .collect()
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

fn record_ids(deliveries: &[Value]) -> Vec<String> {
    sorted(
        deliveries
            .iter()
            .map(|d| d["record_id"].as_str().unwrap().to_string())
            .collect(),
    )
}

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
    let failed = shard_node::records::events::guarded(
        &tx,
        tx.query_typed("SELECT 1 / (x - 1) FROM t_guard", &[]),
    )
    .await
    .unwrap();
    assert!(failed.is_none());
    let ok =
        shard_node::records::events::guarded(&tx, tx.query_typed("SELECT x FROM t_guard", &[]))
            .await
            .unwrap()
            .unwrap();
    assert_eq!(ok.len(), 1);
    tx.batch_execute("INSERT INTO t_guard VALUES (2)")
        .await
        .unwrap();
    tx.commit().await.unwrap();
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

    // Before the first clock pass, only creation fires; the memory still
    // follows every write.
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
    assert_eq!(
        record_ids(&fx.deliveries(&fresh).await),
        vec![more[0].clone()]
    );
    assert_eq!(
        fx.memory(&fresh).await,
        sorted(vec![more[0].clone(), more[1].clone()])
    );
    // 50 records: the memory follows, nothing fires.
    let fifty: Vec<Value> = (0..50)
        .map(|i| json!({"fields": {"Name": format!("n{i}"), "Status": "Open"}}))
        .collect();
    fx.create(json!(fifty)).await;
    // (`hook` took c's creation and d's entry: 6 in all.)
    assert_eq!(fx.deliveries(&hook).await.len(), 6);
    assert_eq!(fx.memory(&hook).await.len(), 3 + 50);
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
    fx.app
        .pg
        .execute("DELETE FROM webhooks WHERE id = $1", &[&hook])
        .await
        .unwrap();
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

/// A node whose match clock ticks every 200 ms.
/// A node on a PostgreSQL database of its own: no other test's node passes
/// (or is passed by) its webhooks.
async fn private_app() -> TestApp {
    let (url, _) = private_database().await;
    spawn_app_on(url).await
}

async fn fast_clock_app() -> TestApp {
    let (url, _) = private_database().await;
    spawn_app_webhooks(
        url,
        WebhookSettings {
            match_clock_interval: Duration::from_millis(200),
            ..WebhookSettings::default()
        },
    )
    .await
}

/// Polls `check` every 100 ms for up to 30 s.
async fn eventually<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    for _ in 0..300 {
        if check().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("timed out waiting for {what}");
}

#[tokio::test]
async fn the_match_clock_records_silently_then_fires_on_time() {
    let fx = fixture_on(fast_clock_app().await).await;
    let at = field(
        &fx.app,
        &fx.p,
        &fx.deals,
        json!({"name": "At", "type": "date", "options": {"include_time": true}}),
    )
    .await;
    // Matches while `At` is in the past.
    let past =
        json!({"conditions": [{"field": "At", "op": "before", "value": {"relative": "now"}}]});
    // A record already matching before the webhook exists.
    let old = fx
        .create(json!([{"fields": {"Name": "old", "At": "2020-01-01T00:00:00Z"}}]))
        .await;
    let hook = fx
        .hook(Hook {
            conditions: Some(past),
            recorded: false,
            payload_key: "id",
            ..Hook::on(&fx.deals, "record_matches")
        })
        .await;
    // First pass: records what matches, delivers nothing.
    eventually("the first pass", || async {
        fx.app
            .pg
            .query_one(
                "SELECT matches_recorded FROM webhooks WHERE id = $1",
                &[&hook],
            )
            .await
            .unwrap()
            .get::<_, bool>(0)
    })
    .await;
    assert_eq!(fx.memory(&hook).await, old);
    assert_eq!(fx.deliveries(&hook).await.len(), 0);
    // A record that will match in a moment: created not matching.
    let soon = (chrono::Utc::now() + chrono::Duration::seconds(2))
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    let new = fx
        .create(json!([{"fields": {"Name": "new", "At": soon}}]))
        .await;
    assert_eq!(fx.deliveries(&hook).await.len(), 0);
    eventually("the clock-driven delivery", || async {
        !fx.deliveries(&hook).await.is_empty()
    })
    .await;
    let d = fx.deliveries(&hook).await;
    assert_eq!(d.len(), 1);
    assert_eq!(d[0]["event"], "record.matches");
    assert_eq!(d[0]["record_id"], new[0].as_str());
    // Clock-driven: name-keyed with field_ids whatever payload_key says,
    // no changed fields, no before.
    assert_eq!(d[0]["field_ids"]["At"], at.as_str());
    assert!(d[0].get("field_names").is_none());
    assert_eq!(d[0]["after"]["fields"]["Name"], "new");
    assert_eq!(d[0]["changed_field_ids"], json!([]));
    assert_eq!(d[0]["before"], Value::Null);
    assert_eq!(
        fx.memory(&hook).await,
        sorted(vec![old[0].clone(), new[0].clone()])
    );
    // More passes: it keeps matching, nothing fires again. A record that
    // stops matching (moved to the future) leaves the memory.
    let later = (chrono::Utc::now() + chrono::Duration::days(1))
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    fx.update(json!([{"id": old[0], "fields": {"At": later}}]))
        .await;
    assert_eq!(fx.memory(&hook).await, vec![new[0].clone()]);
    tokio::time::sleep(Duration::from_millis(1000)).await;
    assert_eq!(fx.deliveries(&hook).await.len(), 1);
}

#[tokio::test]
async fn today_resolves_in_the_database_timezone() {
    let fx = fixture_on(fast_clock_app().await).await;
    // A zone whose date differs from UTC's right now.
    let now = chrono::Utc::now();
    let (zone, offset) = if now.format("%H").to_string().parse::<u32>().unwrap() >= 12 {
        ("Pacific/Kiritimati", 14) // UTC+14, no DST: already tomorrow
    } else {
        ("Etc/GMT+12", -12) // UTC-12: still yesterday
    };
    let tz = chrono::FixedOffset::east_opt(offset * 3600).unwrap();
    let their_today = now.with_timezone(&tz).date_naive().to_string();
    assert_ne!(their_today, now.date_naive().to_string());
    let ids = fx
        .create(json!([{"fields": {"Name": "x", "Due": their_today}}]))
        .await;
    let hook = fx
        .hook(Hook {
            conditions: Some(
                json!({"conditions": [{"field": "Due", "op": "is", "value": {"relative": "today"}}]}),
            ),
            ..Hook::on(&fx.deals, "record_matches")
        })
        .await;
    // In UTC the record is not due today: passes go by, nothing fires.
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(fx.deliveries(&hook).await.len(), 0);
    // The database moves to the zone where it is: the next pass fires.
    fx.app
        .pg
        .execute(
            "UPDATE databases SET timezone = $2, schema_version = schema_version + 1 WHERE id = $1",
            &[&fx.db, &zone],
        )
        .await
        .unwrap();
    eventually("the clock-driven delivery", || async {
        !fx.deliveries(&hook).await.is_empty()
    })
    .await;
    let d = fx.deliveries(&hook).await;
    assert_eq!(record_ids(&d), ids);
}
