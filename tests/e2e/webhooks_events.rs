//! Part C, Events, through the real router: webhooks saved with their
//! routes, record writes of every kind, and the outbox rows the owning
//! shard writes in the same transaction (read from that shard's
//! PostgreSQL: what is checked here is what gets enqueued, byte for byte;
//! sending is the deliverer's part). Webhook URLs point at a small receiver
//! in this process that answers 204 to anything.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use e2e_tests::{database_postgres, id, Person};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Request bodies a receiver got, in arrival order.
type Received = Arc<Mutex<Vec<String>>>;

/// A receiver on 127.0.0.1 that answers every request 204 and keeps its
/// body; its URL.
async fn receiver() -> (String, Received) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let received = Received::default();
    let kept = received.clone();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let kept = kept.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                loop {
                    // One request: headers, then Content-Length bytes.
                    let Some(end) = find(&buf, b"\r\n\r\n") else {
                        match socket.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                        continue;
                    };
                    let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
                    let len: usize = head
                        .lines()
                        .find_map(|l| l.strip_prefix("content-length:"))
                        .and_then(|v| v.trim().parse().ok())
                        .unwrap_or(0);
                    while buf.len() < end + 4 + len {
                        match socket.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    }
                    let body = String::from_utf8_lossy(&buf[end + 4..end + 4 + len]).into_owned();
                    kept.lock().unwrap().push(body);
                    buf.drain(..end + 4 + len);
                    let reply = b"HTTP/1.1 204 No Content\r\ncontent-length: 0\r\n\r\n";
                    if socket.write_all(reply).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    (format!("http://{addr}/hook"), received)
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

struct Fx {
    person: Person,
    db: String,
    deals: String,
    people: String,
    url: String,
    received: Received,
    pg: tokio_postgres::Client,
}

impl Fx {
    async fn new() -> Fx {
        let person = Person::new().await;
        let api = &person.api;
        let db = api.new_database("events").await;
        let deals = id(&api.create_table(&db, "Deals").await);
        let people = id(&api.create_table(&db, "People").await);
        api.create_field(&people, json!({"name": "Who", "type": "single_line_text"}))
            .await;
        for body in [
            json!({"name": "Name", "type": "single_line_text", "options": {"unique": true}}),
            json!({"name": "Status", "type": "single_select", "options": {"choices": [{"name": "Open"}, {"name": "Won"}]}}),
            json!({"name": "Amount", "type": "number"}),
            json!({"name": "At", "type": "date", "options": {"include_time": true}}),
            json!({"name": "Owner", "type": "link", "options": {"target_table_id": people}}),
        ] {
            api.create_field(&deals, body).await;
        }
        let pg = database_postgres(&db).await;
        let (url, received) = receiver().await;
        Fx {
            person,
            db,
            deals,
            people,
            url,
            received,
            pg,
        }
    }

    fn records(&self) -> String {
        format!("/api/tables/{}/records", self.deals)
    }

    async fn field_id(&self, name: &str) -> String {
        let r = self
            .person
            .api
            .get(&format!("/api/tables/{}/fields", self.deals))
            .await;
        r.expect_ok()["fields"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["name"] == name)
            .map(id)
            .unwrap()
    }

    /// Saves a webhook through its route; returns its id.
    async fn webhook(&self, mut body: Value) -> String {
        body["url"] = json!(self.url);
        let r = self
            .person
            .api
            .post(&format!("/api/databases/{}/webhooks", self.db), body)
            .await;
        id(&r.expect_ok()["webhook"])
    }

    async fn set_amount(&self, record: &str, amount: i64) {
        let body = json!({"records": [{"id": record, "fields": {"Amount": amount}}]});
        self.person
            .api
            .patch(&self.records(), body)
            .await
            .expect_ok();
    }

    async fn create(&self, records: Value) -> Vec<String> {
        let r = self
            .person
            .api
            .post(&self.records(), json!({ "records": records }))
            .await;
        e2e_tests::ids_in(r.expect_ok(), "records")
    }

    /// How many deliveries the database has enqueued.
    async fn enqueued(&self) -> i64 {
        self.pg
            .query_one(
                "SELECT count(*) FROM deliveries WHERE database_id = $1",
                &[&self.db],
            )
            .await
            .unwrap()
            .get(0)
    }

    /// The webhook's enqueued bodies, oldest first, then by record id.
    async fn deliveries(&self, webhook: &str) -> Vec<Value> {
        self.pg
            .query(
                "SELECT body FROM deliveries WHERE webhook_id = $1
                 ORDER BY created_at, record_id, id",
                &[&webhook],
            )
            .await
            .unwrap()
            .iter()
            .map(|r| serde_json::from_str(r.get::<_, &str>(0)).unwrap())
            .collect()
    }
}

#[tokio::test]
async fn every_write_path_enqueues_its_events() {
    let fx = Fx::new().await;
    let api = &fx.person.api;
    let status = fx.field_id("Status").await;
    let amount = fx.field_id("Amount").await;
    let created = fx
        .webhook(json!({"name": "new", "trigger_type": "record_created", "table_id": fx.deals}))
        .await;
    let won = fx
        .webhook(json!({
            "trigger_type": "record_updated", "table_id": fx.deals, "payload_key": "id",
            "watched_field_ids": [status],
            "conditions": {"conditions": [{"field": "Status", "op": "is", "value": "Won"}]}
        }))
        .await;
    let deleted = fx
        .webhook(json!({"trigger_type": "record_deleted", "table_id": fx.deals}))
        .await;
    let anywhere = fx.webhook(json!({"trigger_type": "record_created"})).await;

    let ann = fx
        .person
        .api
        .post(
            &format!("/api/tables/{}/records", fx.people),
            json!({"records": [{"fields": {"Who": "Ann"}}]}),
        )
        .await
        .expect_ok()["records"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let ids = fx
        .create(json!([{"fields": {"Name": "a", "Status": "Open", "Amount": 1, "Owner": [ann]}}]))
        .await;
    let d = fx.deliveries(&created).await;
    assert_eq!(d.len(), 1);
    assert_eq!(d[0]["event"], "record.created");
    assert_eq!(d[0]["record_id"], ids[0].as_str());
    assert_eq!(d[0]["table"], json!({"id": fx.deals, "name": "Deals"}));
    assert_eq!(d[0]["database"]["id"], fx.db.as_str());
    assert!(d[0]["delivery_id"]
        .as_str()
        .unwrap()
        .starts_with(&format!("dlv_{}", &fx.db[3..8])));
    assert_eq!(
        d[0]["after"]["fields"]["Owner"],
        json!([{"id": ann, "display": "Ann"}])
    );
    assert_eq!(d[0]["after"]["fields"]["Status"], "Open");
    assert_eq!(d[0]["field_ids"]["Amount"], amount.as_str());
    assert_eq!(d[0]["test"], false);
    // Whole-database: both tables' creations.
    assert_eq!(fx.deliveries(&anywhere).await.len(), 2);

    // Not watched, or not matching: nothing. Watched and matching: one,
    // keyed by id, with before, after and the supplied fields.
    api.patch(
        &fx.records(),
        json!({"records": [{"id": ids[0], "fields": {"Amount": 2}}]}),
    )
    .await
    .expect_ok();
    api.patch(
        &fx.records(),
        json!({"records": [{"id": ids[0], "fields": {"Status": "Open"}}]}),
    )
    .await
    .expect_ok();
    assert_eq!(fx.deliveries(&won).await.len(), 0);
    api.patch(
        &fx.records(),
        json!({"records": [{"id": ids[0], "fields": {"Status": "Won", "Amount": 3}}]}),
    )
    .await
    .expect_ok();
    let d = fx.deliveries(&won).await;
    assert_eq!(d.len(), 1);
    assert_eq!(d[0]["event"], "record.updated");
    assert_eq!(d[0]["changed_field_ids"], json!([status, amount]));
    assert_eq!(d[0]["before"]["fields"][&status], "Open");
    assert_eq!(d[0]["after"]["fields"][&status], "Won");
    assert_eq!(d[0]["after"]["fields"][&amount], 3);
    assert_eq!(d[0]["field_names"][&status], "Status");

    // Upsert: one created, one updated.
    let r = api
        .put(
            &fx.records(),
            json!({"merge_on": ["Name"], "records": [
                {"fields": {"Name": "a", "Status": "Won"}},
                {"fields": {"Name": "b"}}
            ]}),
        )
        .await;
    let b = r.expect_ok()["created_records"][0]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(fx.deliveries(&created).await.len(), 2);
    assert_eq!(fx.deliveries(&won).await.len(), 2);

    // Trash, restore, purge.
    api.delete_with(&fx.records(), json!({"records": [b]}))
        .await
        .expect_ok();
    let d = fx.deliveries(&deleted).await;
    assert_eq!(d.len(), 1);
    assert_eq!(d[0]["after"], Value::Null);
    assert_eq!(d[0]["before"]["fields"]["Name"], "b");
    let trash = format!("/api/tables/{}/trash", fx.deals);
    api.post(&format!("{trash}/restore"), json!({"ids": [b]}))
        .await
        .expect_ok();
    let d = fx.deliveries(&created).await;
    assert_eq!(d.len(), 3);
    assert_eq!(d[2]["record_id"], b.as_str());
    api.delete_with(&fx.records(), json!({"records": [b]}))
        .await
        .expect_ok();
    let before = fx.enqueued().await;
    api.post(&format!("{trash}/purge"), json!({"all": true}))
        .await
        .expect_ok();
    assert_eq!(fx.enqueued().await, before, "purge fires nothing");

    // The deliverer sends each enqueued body as written, byte for byte.
    let bodies: Vec<String> = fx
        .pg
        .query(
            "SELECT body FROM deliveries WHERE webhook_id = $1",
            &[&created],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    let until = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let got = fx.received.lock().unwrap().clone();
        if bodies.iter().all(|b| got.contains(b)) {
            break;
        }
        assert!(
            tokio::time::Instant::now() < until,
            "not every delivery arrived: {} enqueued, {} received",
            bodies.len(),
            got.len()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn big_and_failed_writes_enqueue_nothing() {
    let fx = Fx::new().await;
    let hook = fx
        .webhook(json!({"trigger_type": "record_created", "table_id": fx.deals}))
        .await;
    let fifty: Vec<Value> = (0..50)
        .map(|i| json!({"fields": {"Name": format!("n{i}")}}))
        .collect();
    fx.create(json!(fifty)).await;
    assert_eq!(fx.deliveries(&hook).await.len(), 0);
    // The second record repeats the first's unique name: nothing written.
    fx.person
        .api
        .post(
            &fx.records(),
            json!({"records": [{"fields": {"Name": "x"}}, {"fields": {"Name": "x"}}]}),
        )
        .await
        .expect_error(400, "bad_request");
    assert_eq!(fx.deliveries(&hook).await.len(), 0);
    let nine: Vec<Value> = (0..49)
        .map(|i| json!({"fields": {"Name": format!("m{i}")}}))
        .collect();
    fx.create(json!(nine)).await;
    assert_eq!(fx.deliveries(&hook).await.len(), 49);
}

#[tokio::test]
async fn a_webhook_button_enqueues_button_pressed() {
    let fx = Fx::new().await;
    let api = &fx.person.api;
    let hook = fx.webhook(json!({"trigger_type": "record_deleted"})).await;
    let button = id(&api
        .create_field(
            &fx.deals,
            json!({"name": "Notify", "type": "button", "options": {"webhook_id": hook, "label": "Tell"}}),
        )
        .await);
    let ids = fx.create(json!([{"fields": {"Name": "a"}}])).await;
    let r = api
        .post(
            &format!("{}/{}/press", fx.records(), ids[0]),
            json!({"field_id": button}),
        )
        .await;
    assert_eq!(
        r.expect_ok(),
        &json!({"action": "webhook", "delivered": true, "webhook_id": hook})
    );
    let d = fx.deliveries(&hook).await;
    assert_eq!(d.len(), 1);
    assert_eq!(d[0]["event"], "button.pressed");
    assert_eq!(d[0]["trigger"], "button");
    assert_eq!(d[0]["button"], json!({"field_id": button, "label": "Tell"}));
    assert_eq!(d[0]["pressed_by"], fx.person.user_id.as_str());
    assert_eq!(d[0]["after"]["fields"]["Name"], "a");
    assert_eq!(d[0]["before"], Value::Null);
    // Gone webhook: 404.
    api.delete(&format!("/api/webhooks/{hook}"))
        .await
        .expect_ok();
    api.post(
        &format!("{}/{}/press", fx.records(), ids[0]),
        json!({"field_id": button}),
    )
    .await
    .expect_error(404, "not_found");
}

/// `MATCH_CLOCK_INTERVAL` as deploy/test passes it to the cluster and to
/// this suite (`2s`, `500ms`); the services' default otherwise.
fn clock_interval() -> Duration {
    let v = std::env::var("MATCH_CLOCK_INTERVAL").unwrap_or_default();
    let v = v.trim();
    if let Some(ms) = v.strip_suffix("ms").and_then(|n| n.parse().ok()) {
        return Duration::from_millis(ms);
    }
    v.trim_end_matches('s')
        .parse()
        .map(Duration::from_secs)
        .unwrap_or(Duration::from_secs(60))
}

#[tokio::test]
async fn record_matches_on_writes_and_on_the_clock() {
    let fx = Fx::new().await;
    let api = &fx.person.api;
    let hook = fx
        .webhook(json!({
            "trigger_type": "record_matches", "table_id": fx.deals, "payload_key": "id",
            "conditions": {"conditions": [{"field": "At", "op": "before", "value": {"relative": "now"}}]}
        }))
        .await;
    let recorded = || async {
        fx.pg
            .query_one(
                "SELECT matches_recorded FROM webhooks WHERE id = $1",
                &[&hook],
            )
            .await
            .unwrap()
            .get::<_, bool>(0)
    };
    let wait = clock_interval() * 3 + Duration::from_secs(30);
    let until = tokio::time::Instant::now() + wait;
    while !recorded().await {
        assert!(
            tokio::time::Instant::now() < until,
            "no first pass within {wait:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Created already matching: fires (creation counts), keyed by id.
    let past = fx
        .create(json!([{"fields": {"Name": "past", "At": "2020-01-01T00:00:00Z"}}]))
        .await;
    let d = fx.deliveries(&hook).await;
    assert_eq!(d.len(), 1);
    assert_eq!(d[0]["event"], "record.matches");
    assert_eq!(d[0]["record_id"], past[0].as_str());
    assert!(d[0].get("field_names").is_some());
    // Continuing to match: nothing more.
    api.patch(
        &fx.records(),
        json!({"records": [{"id": past[0], "fields": {"Name": "still"}}]}),
    )
    .await
    .expect_ok();
    assert_eq!(fx.deliveries(&hook).await.len(), 1);
    // A record that comes to match by time alone: the clock fires, name-keyed.
    let soon = (chrono::Utc::now() + chrono::Duration::seconds(2))
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    let later = fx
        .create(json!([{"fields": {"Name": "soon", "At": soon}}]))
        .await;
    assert_eq!(fx.deliveries(&hook).await.len(), 1);
    let until = tokio::time::Instant::now() + wait;
    while fx.deliveries(&hook).await.len() < 2 {
        assert!(
            tokio::time::Instant::now() < until,
            "no clock-driven delivery within {wait:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let d = fx.deliveries(&hook).await;
    assert_eq!(d.len(), 2);
    assert_eq!(d[1]["record_id"], later[0].as_str());
    assert_eq!(d[1]["after"]["fields"]["Name"], "soon");
    assert!(d[1].get("field_ids").is_some());
    assert_eq!(d[1]["before"], Value::Null);
    assert_eq!(d[1]["changed_field_ids"], json!([]));
}

/// Part C: `record.matches` fires when a record goes from not matching to
/// matching, from the webhook's creation on: the writes right after it
/// (before its first clock pass, which the node runs every
/// `MATCH_CLOCK_INTERVAL`) see their own transitions.
#[tokio::test]
async fn record_matches_fires_on_transitions_right_after_creation() {
    let fx = Fx::new().await;
    // Matching before the webhook exists: an update that keeps it matching
    // is no transition.
    let old = fx
        .create(json!([{"fields": {"Name": "old", "Amount": 50}}]))
        .await;
    let hook = fx
        .webhook(json!({
            "trigger_type": "record_matches", "table_id": fx.deals, "payload_key": "name",
            "conditions": {"conditions": [{"field": "Amount", "op": "greater", "value": 10}]}
        }))
        .await;
    let created = fx
        .create(json!([{"fields": {"Name": "q", "Amount": 5}}]))
        .await;
    let q = created[0].as_str();
    fx.set_amount(q, 15).await;
    fx.set_amount(&old[0], 60).await;
    let d = fx.deliveries(&hook).await;
    assert_eq!(record_ids_of(&d), vec![q], "5 -> 15 fires once: {d:?}");
    assert_eq!(d[0]["event"], "record.matches");
    assert_eq!(d[0]["before"]["fields"]["Amount"], 5);
    assert_eq!(d[0]["after"]["fields"]["Amount"], 15);
    // Continuing to match does not fire again.
    fx.set_amount(q, 20).await;
    assert_eq!(fx.deliveries(&hook).await.len(), 1);
    // Leaving, then entering again, fires again.
    fx.set_amount(q, 5).await;
    assert_eq!(fx.deliveries(&hook).await.len(), 1);
    fx.set_amount(q, 15).await;
    let d = fx.deliveries(&hook).await;
    assert_eq!(record_ids_of(&d), vec![q, q]);
    assert_eq!(d[1]["before"]["fields"]["Amount"], 5);
}

fn record_ids_of(deliveries: &[Value]) -> Vec<&str> {
    deliveries
        .iter()
        .map(|d| d["record_id"].as_str().unwrap_or_default())
        .collect()
}
