//! Part C "Request headers and signature" and "Delivery semantics", and
//! part B's test, deliveries and replay routes, through the real router and
//! shard nodes, with a receiver in this process. Webhooks are saved through
//! their routes; deliveries are written into the owning shard's outbox with
//! SQL (what a record write enqueues is `webhooks_events`' subject), then
//! sent by that shard's deliverer on the test cluster's short schedule
//! (deploy/test: `WEBHOOK_RETRY_DELAYS=250ms,500ms,1s`, `WEBHOOK_TIMEOUT=3s`).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cluster_protocol::control::Role;
use cluster_protocol::error::forbidden;
use cluster_protocol::ids::{self, Kind};
use e2e_tests::{database_postgres, id, Person};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// One request the receiver got.
#[derive(Debug, Clone)]
struct Hit {
    path: String,
    /// Header names lowercased.
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Hit {
    fn header(&self, name: &str) -> &str {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map_or("", |(_, v)| v.as_str())
    }
}

/// A receiver on 127.0.0.1 recording every request; `/fail/..` answers
/// 500, anything else 200 `ok`.
#[derive(Clone, Default)]
struct Receiver {
    hits: Arc<Mutex<Vec<Hit>>>,
    base: String,
}

impl Receiver {
    async fn start() -> Receiver {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let hits: Arc<Mutex<Vec<Hit>>> = Arc::default();
        let record = hits.clone();
        tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                tokio::spawn(serve(socket, record.clone()));
            }
        });
        Receiver { hits, base }
    }

    fn url(&self, path: &str) -> String {
        format!("{}/{path}", self.base)
    }

    fn on(&self, prefix: &str) -> Vec<Hit> {
        let hits = self.hits.lock().unwrap();
        hits.iter()
            .filter(|h| h.path.starts_with(prefix))
            .cloned()
            .collect()
    }

    /// Waits (60 s bound) until `n` requests reached paths under `prefix`.
    async fn wait_for(&self, prefix: &str, n: usize) -> Vec<Hit> {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let hits = self.on(prefix);
            if hits.len() >= n {
                return hits;
            }
            assert!(
                Instant::now() < deadline,
                "{} of {n} requests to {prefix}",
                hits.len()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// HTTP/1.1, one request after another on a connection.
async fn serve(mut socket: tokio::net::TcpStream, hits: Arc<Mutex<Vec<Hit>>>) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
            match socket.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
            continue;
        };
        let head = String::from_utf8_lossy(&buf[..end]).into_owned();
        let mut lines = head.lines();
        let path = lines
            .next()
            .and_then(|l| l.split(' ').nth(1))
            .unwrap_or("")
            .to_owned();
        let headers: Vec<(String, String)> = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
            .collect();
        let len: usize = headers
            .iter()
            .find(|(n, _)| n == "content-length")
            .and_then(|(_, v)| v.parse().ok())
            .unwrap_or(0);
        while buf.len() < end + 4 + len {
            match socket.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
        let body = buf[end + 4..end + 4 + len].to_vec();
        buf.drain(..end + 4 + len);
        let fail = path.starts_with("/fail/");
        hits.lock().unwrap().push(Hit {
            path,
            headers,
            body,
        });
        let reply: &[u8] = if fail {
            b"HTTP/1.1 500 Internal Server Error\r\ncontent-length: 4\r\n\r\nnope"
        } else {
            b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok"
        };
        if socket.write_all(reply).await.is_err() {
            return;
        }
    }
}

/// Part C's signature over the raw bytes received, computed here.
fn assert_signed(hit: &Hit, secret: &str, delivery_id: &str, attempt: u32) {
    use hmac::{Hmac, Mac};
    assert_eq!(hit.header("content-type"), "application/json");
    assert_eq!(
        hit.header("x-service-delivery"),
        format!("{delivery_id}.{attempt}")
    );
    let ts = hit.header("x-service-timestamp");
    assert!(ts.parse::<i64>().is_ok(), "{ts}");
    let mut mac = Hmac::<sha2::Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(ts.as_bytes());
    mac.update(b".");
    mac.update(&hit.body);
    let want = format!("sha256={}", hex::encode(mac.finalize().into_bytes()));
    assert_eq!(hit.header("x-service-signature"), want);
}

struct Fx {
    owner: Person,
    db: String,
    receiver: Receiver,
    pg: tokio_postgres::Client,
}

/// A saved webhook: id and the secret shown on create.
struct Hook {
    id: String,
    secret: String,
}

impl Fx {
    async fn new() -> Fx {
        let owner = Person::new().await;
        let db = owner.api.new_database("deliveries").await;
        let pg = database_postgres(&db).await;
        Fx {
            owner,
            db,
            receiver: Receiver::start().await,
            pg,
        }
    }

    async fn hook(&self, path: &str) -> Hook {
        let r = self
            .owner
            .api
            .post(
                &format!("/api/databases/{}/webhooks", self.db),
                json!({"url": self.receiver.url(path), "trigger_type": "record_created"}),
            )
            .await;
        let w = &r.expect_ok()["webhook"];
        Hook {
            id: id(w),
            secret: w["secret"].as_str().unwrap().to_owned(),
        }
    }

    /// Writes `n` due deliveries of `hook` into the shard's outbox (after
    /// `attempts` attempts already made) and notifies, as a write does.
    async fn enqueue(&self, hook: &Hook, n: usize, attempts: i32) -> Vec<String> {
        let tag = ids::tag_of(Kind::Database, &self.db).unwrap();
        let mut out = Vec::new();
        for i in 0..n {
            let dlv = ids::new_tagged(Kind::Delivery, tag);
            let body = json!({
                "delivery_id": dlv, "event": "record.created",
                "occurred_at": "2026-11-25T12:00:00.000Z",
                "database": {"id": self.db, "name": "deliveries"},
                "table": {"id": "tbl_AAAAA0000000", "name": "Tasks"},
                "record_id": "rec_AAAAA0000000", "changed_field_ids": [],
                "field_ids": {"Name": "fld_AAAAA0000000"}, "before": null,
                "after": {"fields": {"Name": format!("Crème brûlée #{i}")}}, "test": false
            })
            .to_string();
            self.pg
                .execute(
                    "INSERT INTO deliveries (id, database_id, webhook_id, event, record_id, body,
                                             attempts)
                     VALUES ($1, $2, $3, 'record.created', 'rec_AAAAA0000000', $4, $5)",
                    &[&dlv, &self.db, &hook.id, &body, &attempts],
                )
                .await
                .unwrap();
            out.push(dlv);
        }
        self.pg
            .execute("SELECT pg_notify('webhook_deliveries', '')", &[])
            .await
            .unwrap();
        out
    }

    fn log_path(&self, hook: &Hook) -> String {
        format!("/api/webhooks/{}/deliveries", hook.id)
    }

    /// The log entry of `dlv` once it is no longer pending (60 s bound).
    async fn finished(&self, hook: &Hook, dlv: &str) -> Value {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let r = self.owner.api.get(&self.log_path(hook)).await;
            let entry = r.expect_ok()["deliveries"]
                .as_array()
                .unwrap()
                .iter()
                .find(|d| d["id"] == dlv)
                .cloned()
                .unwrap_or(Value::Null);
            if entry["state"] != "pending" && entry != Value::Null {
                return entry;
            }
            assert!(Instant::now() < deadline, "{dlv} never finished: {entry}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

#[tokio::test]
async fn deliveries_are_signed_logged_and_replayed_through_the_router() {
    let fx = Fx::new().await;
    let hook = fx.hook("ok/signed").await;
    let sent = fx.enqueue(&hook, 1, 0).await;
    let hit = fx.receiver.wait_for("/ok/signed", 1).await.remove(0);
    assert_signed(&hit, &hook.secret, &sent[0], 1);
    let stored: String = fx
        .pg
        .query_one("SELECT body FROM deliveries WHERE id = $1", &[&sent[0]])
        .await
        .unwrap()
        .get(0);
    assert_eq!(hit.body, stored.as_bytes());
    let entry = fx.finished(&hook, &sent[0]).await;
    assert_eq!(entry["state"], "succeeded");
    assert_eq!(entry["status"], 200);
    assert_eq!(entry["response_body"], "ok");
    assert_eq!(entry["attempts"], 1);

    // Replay: the dlv_ id in the path routes by the webhook's tag.
    let viewer = Person::member(&fx.db, Role::Viewer).await;
    let replay = format!("{}/{}/replay", fx.log_path(&hook), sent[0]);
    let msg = viewer
        .api
        .post(&replay, json!({}))
        .await
        .expect_error(403, "forbidden");
    assert_eq!(msg, forbidden::VIEWER);
    let r = fx.owner.api.post(&replay, json!({})).await;
    let copy = id(&r.expect_ok()["delivery"]);
    assert_ne!(copy, sent[0]);
    let hits = fx.receiver.wait_for("/ok/signed", 2).await;
    assert_signed(&hits[1], &hook.secret, &copy, 1);
    assert_eq!(
        String::from_utf8(hits[1].body.clone()).unwrap(),
        stored.replace(&sent[0], &copy)
    );
    assert_eq!(fx.finished(&hook, &copy).await["state"], "succeeded");

    // The log, newest first, is readable by a viewer.
    let log = viewer.api.get(&fx.log_path(&hook)).await;
    let listed: Vec<String> = log.expect_ok()["deliveries"]
        .as_array()
        .unwrap()
        .iter()
        .map(id)
        .collect();
    assert_eq!(listed, vec![copy.clone(), sent[0].clone()]);

    // Another webhook's delivery, or a stranger: 404.
    let other = fx.hook("ok/other").await;
    fx.owner
        .api
        .post(
            &format!("{}/{}/replay", fx.log_path(&other), sent[0]),
            json!({}),
        )
        .await
        .expect_error(404, "not_found");
    let stranger = Person::new().await;
    stranger
        .api
        .get(&fx.log_path(&hook))
        .await
        .expect_error(404, "not_found");
}

#[tokio::test]
async fn a_failing_receiver_gets_every_attempt_then_the_delivery_fails() {
    let fx = Fx::new().await;
    let hook = fx.hook("fail/always").await;
    let sent = fx.enqueue(&hook, 1, 0).await;
    let entry = fx.finished(&hook, &sent[0]).await;
    assert_eq!(entry["state"], "failed");
    assert_eq!(entry["attempts"], 4, "part C: 3 retries, 4 attempts");
    assert_eq!(entry["status"], 500);
    assert_eq!(entry["response_body"], "nope");
    let hits = fx.receiver.on("/fail/always");
    assert_eq!(hits.len(), 4);
    for (i, hit) in hits.iter().enumerate() {
        assert_signed(hit, &hook.secret, &sent[0], i as u32 + 1);
    }
    let w = fx
        .owner
        .api
        .get(&format!("/api/webhooks/{}", hook.id))
        .await;
    assert_eq!(w.expect_ok()["webhook"]["consecutive_failures"], 1);
}

#[tokio::test]
async fn twenty_exhausted_deliveries_pause_the_webhook_until_resume() {
    let fx = Fx::new().await;
    let hook = fx.hook("fail/pause").await;
    // On their last attempt already: each failure exhausts one.
    let last_tries = fx.enqueue(&hook, 20, 3).await;
    for dlv in &last_tries {
        assert_eq!(fx.finished(&hook, dlv).await["state"], "failed");
    }
    let path = format!("/api/webhooks/{}", hook.id);
    let w = fx.owner.api.get(&path).await.expect_ok()["webhook"].clone();
    assert_eq!(w["consecutive_failures"], 20);
    assert!(w["paused_at"].is_string(), "{w}");

    // Paused: a new delivery waits; resume sends it and resets the streak.
    let waiting = fx.enqueue(&hook, 1, 0).await;
    let r = fx
        .owner
        .api
        .patch(
            &path,
            json!({"resume": true, "url": fx.receiver.url("ok/resumed")}),
        )
        .await;
    let w = r.expect_ok()["webhook"].clone();
    assert_eq!(w["paused_at"], Value::Null);
    assert_eq!(w["consecutive_failures"], 0);
    assert_eq!(fx.finished(&hook, &waiting[0]).await["state"], "succeeded");
    assert_eq!(fx.receiver.on("/ok/resumed").len(), 1);
    assert_eq!(fx.receiver.on("/fail/pause").len(), 20);
}

#[tokio::test]
async fn the_test_route_sends_one_signed_sample_through_the_router() {
    let fx = Fx::new().await;
    let hook = fx.hook("ok/test").await;
    let r = fx
        .owner
        .api
        .post(&format!("/api/webhooks/{}/test", hook.id), json!({}))
        .await;
    let reply = r.expect_ok().clone();
    assert_eq!(reply["succeeded"], true);
    assert_eq!(reply["status"], 200);
    assert_eq!(reply["body"], "ok");
    assert_eq!(reply["error"], Value::Null);
    let dlv = reply["delivery_id"].as_str().unwrap();
    let hit = fx.receiver.wait_for("/ok/test", 1).await.remove(0);
    assert_signed(&hit, &hook.secret, dlv, 1);
    let payload: Value = serde_json::from_slice(&hit.body).unwrap();
    assert_eq!(payload["event"], "webhook.test");
    assert_eq!(payload["test"], true);
    assert_eq!(payload["record_id"], Value::Null);
    let log = fx.owner.api.get(&fx.log_path(&hook)).await;
    assert_eq!(log.expect_ok()["deliveries"], json!([]));
    let viewer = Person::member(&fx.db, Role::Viewer).await;
    viewer
        .api
        .post(&format!("/api/webhooks/{}/test", hook.id), json!({}))
        .await
        .expect_error(403, "forbidden");
}

#[tokio::test]
async fn an_address_refused_at_send_time_is_a_failed_delivery_not_an_error() {
    let fx = Fx::new().await;
    let hook = fx.hook("ok/changed-later").await;
    // A URL that passed the save-time check now points at cloud metadata
    // (as a DNS change would); the send-time check refuses it.
    fx.pg
        .execute(
            "UPDATE webhooks SET url = 'http://169.254.169.254/latest/meta-data' WHERE id = $1",
            &[&hook.id],
        )
        .await
        .unwrap();
    let sent = fx.enqueue(&hook, 1, 3).await;
    let entry = fx.finished(&hook, &sent[0]).await;
    assert_eq!(entry["state"], "failed");
    assert_eq!(entry["status"], 0);
    // The client-visible log says it was refused, not what is there.
    let error = entry["error"].as_str().unwrap();
    assert_eq!(error, "refused: not a public address");
    let r = fx
        .owner
        .api
        .post(&format!("/api/webhooks/{}/test", hook.id), json!({}))
        .await;
    let reply = r.expect_ok();
    assert_eq!(reply["succeeded"], false);
    assert_eq!(reply["error"], "refused: not a public address");
}
