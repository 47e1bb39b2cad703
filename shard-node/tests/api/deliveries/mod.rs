//! Webhook deliveries (part C "Request headers and signature", "Delivery
//! semantics"; part B's test, deliveries and replay routes) against a real
//! receiver in the test process.
//!
//! Each test runs its own node on a database of its own: a node's
//! deliverer claims every due delivery of its database, and each test
//! needs its own retry schedule, timeout and egress allow list. Webhooks
//! and deliveries are written with SQL, as the webhook routes and the
//! outbox would.

mod attempts;
mod crash;
mod fairness;
mod isolation;
mod log;
mod pause;
pub mod receiver;

use std::time::{Duration, Instant};

use cluster_protocol::ids::{self, Kind};
use cluster_protocol::principal::Principal;
use serde_json::{json, Value};
use shard_node::config::WebhookSettings;

use crate::helpers::*;
use receiver::{Hit, Receiver};

/// Settings with a short schedule; plain http to 127.0.0.1 allowed.
pub fn settings(retry_ms: &[u64], timeout_ms: u64) -> WebhookSettings {
    WebhookSettings {
        retry_delays: retry_ms
            .iter()
            .map(|ms| Duration::from_millis(*ms))
            .collect(),
        timeout: Duration::from_millis(timeout_ms),
        egress_allow_cidrs: vec!["127.0.0.0/8".into(), "::1/128".into()],
        ..WebhookSettings::default()
    }
}

pub struct Harness {
    pub app: TestApp,
    pub receiver: Receiver,
    pub database_id: String,
    pub owner: Principal,
}

/// A node with `settings` on a fresh database, a database in it, and a
/// receiver.
pub async fn harness(settings: WebhookSettings) -> Harness {
    let (url, _) = private_database().await;
    let app = spawn_app_webhooks(url, settings).await;
    let (database_id, owner) = app.owned_database().await;
    Harness {
        app,
        receiver: Receiver::start().await,
        database_id,
        owner,
    }
}

/// A webhook row as the tests see it.
#[derive(Debug, Clone)]
pub struct Hook {
    pub id: String,
    pub secret: String,
}

/// A delivery row as the tests see it.
#[derive(Debug, Clone)]
pub struct Row {
    pub state: String,
    pub attempts: i32,
    pub last_status: Option<i32>,
    pub last_error: Option<String>,
    pub last_response_body: Option<String>,
    pub body: String,
}

pub fn new_secret() -> String {
    let bytes: [u8; 24] = rand::random();
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl Harness {
    /// A whole-database webhook posting to `url`.
    pub async fn webhook_to(&self, url: &str, table_id: Option<&str>) -> Hook {
        self.webhook_in(&self.database_id, url, table_id).await
    }

    /// A webhook of `database_id` (another database on the same node)
    /// posting to `url`.
    pub async fn webhook_in(&self, database_id: &str, url: &str, table_id: Option<&str>) -> Hook {
        let tag = ids::tag_of(Kind::Database, database_id).unwrap();
        let id = ids::new_tagged(Kind::Webhook, tag);
        let secret = new_secret();
        self.app
            .pg
            .execute(
                "INSERT INTO webhooks (id, database_id, table_id, name, url, secret)
                 VALUES ($1, $2, $3, 'hook', $4, $5)",
                &[&id, &database_id, &table_id, &url, &secret],
            )
            .await
            .unwrap();
        Hook { id, secret }
    }

    /// A webhook posting to the receiver's `path`.
    pub async fn webhook(&self, path: &str) -> Hook {
        self.webhook_to(&self.receiver.url(path), None).await
    }

    /// The payload a record write would enqueue, as serde_json writes it.
    pub fn payload(&self, delivery_id: &str, note: &str) -> String {
        json!({
            "delivery_id": delivery_id,
            "event": "record.created",
            "occurred_at": "2026-03-04T05:06:07.123Z",
            "database": {"id": self.database_id, "name": "Test"},
            "table": {"id": "tbl_AAAAA0000000", "name": "Tasks"},
            "record_id": "rec_AAAAA0000000",
            "changed_field_ids": [],
            "field_ids": {"Name": "fld_AAAAA0000000"},
            "before": null,
            "after": {"fields": {"Name": note}},
            "test": false
        })
        .to_string()
    }

    /// Enqueues `n` deliveries to `hook`, due now, and wakes the deliverer
    /// as a write would; returns their ids in order.
    pub async fn enqueue(&self, hook: &Hook, n: usize) -> Vec<String> {
        self.enqueue_in(&self.database_id, hook, n).await
    }

    /// As [`Harness::enqueue`], for a webhook of `database_id`.
    pub async fn enqueue_in(&self, database_id: &str, hook: &Hook, n: usize) -> Vec<String> {
        let tag = ids::tag_of(Kind::Database, database_id).unwrap();
        let mut out = Vec::new();
        for i in 0..n {
            let id = ids::new_tagged(Kind::Delivery, tag);
            let body = self.payload(&id, &format!("Café ☕ #{i}"));
            self.app
                .pg
                .execute(
                    "INSERT INTO deliveries (id, database_id, webhook_id, event, record_id, body)
                     VALUES ($1, $2, $3, 'record.created', 'rec_AAAAA0000000', $4)",
                    &[&id, &database_id, &hook.id, &body],
                )
                .await
                .unwrap();
            out.push(id);
        }
        self.app
            .pg
            .execute("SELECT pg_notify('webhook_deliveries', '')", &[])
            .await
            .unwrap();
        out
    }

    pub async fn row(&self, id: &str) -> Row {
        let r = self
            .app
            .pg
            .query_one(
                "SELECT state, attempts, last_status, last_error, last_response_body, body
                 FROM deliveries WHERE id = $1",
                &[&id],
            )
            .await
            .unwrap();
        Row {
            state: r.get(0),
            attempts: r.get(1),
            last_status: r.get(2),
            last_error: r.get(3),
            last_response_body: r.get(4),
            body: r.get(5),
        }
    }

    /// Waits until the delivery is finished (60 s bound).
    pub async fn finished(&self, id: &str) -> Row {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let row = self.row(id).await;
            if row.state != "pending" {
                return row;
            }
            assert!(Instant::now() < deadline, "{id} never finished: {row:?}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// `consecutive_failures`, `last_status` and whether paused.
    pub async fn webhook_state(&self, hook: &Hook) -> (i32, Option<i32>, bool) {
        let r = self
            .app
            .pg
            .query_one(
                "SELECT consecutive_failures, last_status, paused_at IS NOT NULL
                 FROM webhooks WHERE id = $1",
                &[&hook.id],
            )
            .await
            .unwrap();
        (r.get(0), r.get(1), r.get(2))
    }
}

/// Part C's signature, computed here from the hit's raw bytes.
pub fn expected_signature(secret: &str, hit: &Hit) -> String {
    use hmac::{Hmac, Mac};
    let mut mac = Hmac::<sha2::Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(hit.header("x-service-timestamp").as_bytes());
    mac.update(b".");
    mac.update(&hit.body);
    format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
}

/// Asserts the four headers and the signature of `hit`.
pub fn assert_signed(hit: &Hit, secret: &str, delivery_id: &str, attempt: i32) {
    assert_eq!(hit.header("content-type"), "application/json");
    assert_eq!(
        hit.header("x-service-delivery"),
        format!("{delivery_id}.{attempt}")
    );
    let ts: i64 = hit.header("x-service-timestamp").parse().unwrap();
    assert!(
        (ts - chrono::Utc::now().timestamp()).abs() < 600,
        "timestamp {ts} is not unix seconds of now"
    );
    assert_eq!(
        hit.header("x-service-signature"),
        expected_signature(secret, hit)
    );
}

pub fn json_of(hit: &Hit) -> Value {
    hit.json()
}
