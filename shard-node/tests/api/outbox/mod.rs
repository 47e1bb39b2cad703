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

mod clock;
mod clock_batches;
mod conditions;
mod matching;
mod writes;

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

/// A node on a PostgreSQL database of its own: no other test's node passes
/// (or is passed by) its webhooks.
async fn private_app() -> TestApp {
    let (url, _) = private_database().await;
    spawn_app_on(url).await
}
