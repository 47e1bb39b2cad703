//! Part B, Webhooks (configuration): create/list/get/update/delete and the
//! secret, on one node with an empty `EGRESS_ALLOW_CIDRS` (so only https to
//! public addresses saves); what each change does to the match memory and
//! `schema_version`; nothing half-saved.

use cluster_protocol::error::forbidden;
use serde_json::{json, Value};

use crate::helpers::*;

const URL: &str = "https://1.1.1.1/hook";

async fn schema_version(app: &TestApp, db: &str) -> i64 {
    app.pg
        .query_one("SELECT schema_version FROM databases WHERE id = $1", &[&db])
        .await
        .unwrap()
        .get(0)
}

/// Pretends the clock recorded a match: one `webhook_matches` row and the
/// flag set.
async fn remember_a_match(app: &TestApp, db: &str, webhook: &str) {
    app.pg
        .execute(
            "INSERT INTO webhook_matches (webhook_id, record_id, database_id)
             VALUES ($1, 'rec_AAAAAAAAAAAA', $2)",
            &[&webhook, &db],
        )
        .await
        .unwrap();
    app.pg
        .execute(
            "UPDATE webhooks SET matches_recorded = true WHERE id = $1",
            &[&webhook],
        )
        .await
        .unwrap();
}

async fn memory(app: &TestApp, webhook: &str) -> (i64, bool) {
    let row = app
        .pg
        .query_one(
            "SELECT (SELECT count(*) FROM webhook_matches WHERE webhook_id = $1),
                    matches_recorded
             FROM webhooks WHERE id = $1",
            &[&webhook],
        )
        .await
        .unwrap();
    (row.get(0), row.get(1))
}

fn is_hex_secret(v: &Value) -> bool {
    v.as_str().is_some_and(|s| {
        s.len() == 48
            && s.bytes()
                .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c))
    })
}

#[tokio::test]
async fn webhook_lifecycle_on_one_node() {
    let app = spawn_app().await;
    let (db, owner) = app.owned_database().await;
    let table = app.create_table(&db, &owner, "Tasks").await;
    let tid = table["id"].as_str().unwrap();
    let r = app
        .post(
            &format!("/api/tables/{tid}/fields"),
            &owner,
            json!({"name": "Title", "type": "single_line_text"}),
        )
        .await;
    let title = r.body["field"]["id"].as_str().unwrap().to_owned();
    let list_path = format!("/api/databases/{db}/webhooks");

    let r = app.get(&list_path, &owner).await;
    assert_eq!((r.status, &r.body), (200, &json!({"webhooks": []})));

    let v0 = schema_version(&app, &db).await;
    let r = app
        .post(
            &list_path,
            &owner,
            json!({"url": URL, "trigger_type": "record_matches", "table_id": tid,
                   "name": "Ops", "conditions": {"conditions": [
                       {"field": "Title", "op": "contains", "value": "x"}]}}),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let w = r.body["webhook"].clone();
    let wid = w["id"].as_str().unwrap().to_owned();
    assert!(wid.starts_with("whk_") && wid.len() == 16, "{wid}");
    assert_eq!(&wid[4..9], &db[3..8], "the database's routing tag");
    assert!(is_hex_secret(&w["secret"]), "{w}");
    assert_eq!(w["database_id"], db.as_str());
    assert_eq!(w["table_id"], tid);
    assert_eq!(w["name"], "Ops");
    assert_eq!(w["url"], URL);
    assert_eq!(w["trigger_type"], "record_matches");
    assert_eq!(w["payload_key"], "name");
    assert_eq!(w["is_active"], true);
    assert_eq!(
        w["conditions"],
        json!({"conditions": [{"field": title, "op": "contains", "value": "x"}]}),
        "stored with the field's id"
    );
    assert_eq!(w["watched_field_ids"], Value::Null);
    assert_eq!(w["consecutive_failures"], 0);
    assert_eq!(w["last_status"], Value::Null);
    assert_eq!(w["last_attempt_at"], Value::Null);
    assert_eq!(w["paused_at"], Value::Null);
    assert_ms_timestamp(&w["created_at"]);
    assert_ms_timestamp(&w["updated_at"]);
    assert!(
        schema_version(&app, &db).await > v0,
        "create bumps schema_version"
    );

    // Every other reply leaves the secret blank, the owner's included.
    let r = app.get(&format!("/api/webhooks/{wid}"), &owner).await;
    assert_eq!(r.status, 200);
    let mut expected = w.clone();
    expected["secret"] = json!("");
    assert_eq!(r.body["webhook"], expected);
    let r = app.get(&list_path, &viewer(&db)).await;
    assert_eq!(r.body["webhooks"], json!([expected]));

    // PATCH: a rename keeps the memory, a condition change clears it.
    remember_a_match(&app, &db, &wid).await;
    let v1 = schema_version(&app, &db).await;
    let r = app
        .patch(
            &format!("/api/webhooks/{wid}"),
            &owner,
            json!({"name": "Renamed"}),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.body["webhook"]["name"], "Renamed");
    assert_eq!(r.body["webhook"]["secret"], "");
    assert_eq!(memory(&app, &wid).await, (1, true));
    assert!(schema_version(&app, &db).await > v1);
    let r = app
        .patch(
            &format!("/api/webhooks/{wid}"),
            &owner,
            json!({"conditions": null}),
        )
        .await;
    assert_eq!(r.body["webhook"]["conditions"], Value::Null);
    assert_eq!(memory(&app, &wid).await, (0, false));

    // A body that changes nothing writes nothing.
    let v2 = schema_version(&app, &db).await;
    let r = app
        .patch(
            &format!("/api/webhooks/{wid}"),
            &owner,
            json!({"name": "Renamed"}),
        )
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(schema_version(&app, &db).await, v2);

    // Nothing half-saved: a bad key beside good ones changes nothing.
    let before = app.get(&format!("/api/webhooks/{wid}"), &owner).await.body;
    for bad in [
        json!({"name": "x", "trigger_type": "nope"}),
        json!({"name": "x", "url": "http://127.0.0.1/"}),
        json!({"name": "x", "watched_field_ids": ["Nope"]}),
    ] {
        let r = app
            .patch(&format!("/api/webhooks/{wid}"), &owner, bad.clone())
            .await;
        assert_eq!(r.status, 400, "{bad}: {:?}", r.body);
    }
    let after = app.get(&format!("/api/webhooks/{wid}"), &owner).await.body;
    assert_eq!(before, after);

    // Regenerate: a new secret, shown once more.
    let r = app
        .post(&format!("/api/webhooks/{wid}/secret"), &owner, json!({}))
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let secret = &r.body["webhook"]["secret"];
    assert!(is_hex_secret(secret) && *secret != w["secret"]);
    let stored: String = app
        .pg
        .query_one("SELECT secret FROM webhooks WHERE id = $1", &[&wid])
        .await
        .unwrap()
        .get(0);
    assert_eq!(stored, secret.as_str().unwrap());

    // Roles: the shard's own refusals.
    let path = format!("/api/webhooks/{wid}");
    for (p, message) in [
        (viewer(&db), forbidden::VIEWER),
        (support(&db), forbidden::SUPPORT_READ_ONLY),
        (read_only(owner.clone()), forbidden::KEY_READ_ONLY),
    ] {
        assert_eq!(app.get(&path, &p).await.status, 200);
        for r in [
            app.patch(&path, &p, json!({"name": "no"})).await,
            app.delete(&path, &p).await,
            app.post(&format!("{path}/secret"), &p, json!({})).await,
            app.post(
                &list_path,
                &p,
                json!({"url": URL, "trigger_type": "record_created"}),
            )
            .await,
        ] {
            assert_eq!((r.status, r.error_message()), (403, message));
        }
    }
    let editor = editor(&db);
    assert_eq!(
        app.patch(&path, &editor, json!({"is_active": false}))
            .await
            .status,
        200
    );

    // Delete, then every route answers 404.
    let v3 = schema_version(&app, &db).await;
    let r = app.delete(&path, &editor).await;
    assert_eq!(
        (r.status, &r.body),
        (200, &json!({"id": wid, "deleted": true}))
    );
    assert!(schema_version(&app, &db).await > v3);
    assert_eq!(app.get(&path, &owner).await.status, 404);
    assert_eq!(
        app.patch(&path, &owner, json!({"name": "x"})).await.status,
        404
    );
    assert_eq!(app.delete(&path, &owner).await.status, 404);
    assert_eq!(
        app.post(&format!("{path}/secret"), &owner, json!({}))
            .await
            .status,
        404
    );
    assert_eq!(
        app.get(&list_path, &owner).await.body,
        json!({"webhooks": []})
    );
}

#[tokio::test]
async fn urls_outside_the_allowed_ranges_are_refused_at_save() {
    let app = spawn_app().await;
    let (db, owner) = app.owned_database().await;
    let path = format!("/api/databases/{db}/webhooks");
    for (url, starts) in [
        ("http://127.0.0.1:9/", "url: refused: not a public address"),
        ("https://10.0.0.1/", "url: refused: not a public address"),
        (
            "https://169.254.169.254/latest",
            "url: refused: not a public address",
        ),
        (
            "https://[::ffff:127.0.0.1]/",
            "url: refused: not a public address",
        ),
        (
            "http://1.1.1.1/",
            "url: refused: plain http may reach only the allowed private ranges",
        ),
        (
            "ftp://1.1.1.1/",
            "url: the URL scheme must be http or https",
        ),
        ("not a url", "url: it is not a URL"),
    ] {
        let r = app
            .post(
                &path,
                &owner,
                json!({"url": url, "trigger_type": "record_created"}),
            )
            .await;
        assert_eq!(r.status, 400, "{url}: {:?}", r.body);
        assert!(
            r.error_message().starts_with(starts),
            "{url}: {}",
            r.error_message()
        );
    }
    let count: i64 = app
        .pg
        .query_one(
            "SELECT count(*) FROM webhooks WHERE database_id = $1",
            &[&db],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(count, 0);
}

/// PostgreSQL prints a `jsonb` number in full (1.7976931348623157e308 is a
/// 309-digit integer): the node parses such numbers back exactly instead of
/// failing to read the webhook (a 500 the API fuzzer found).
#[tokio::test]
async fn conditions_with_the_largest_numbers_read_back_exactly() {
    let app = spawn_app().await;
    let (db, owner) = app.owned_database().await;
    let table = app.create_table(&db, &owner, "Tasks").await;
    let tid = table["id"].as_str().unwrap();
    let points = app.create_field_id(tid, &owner, "Points", "number").await;
    let path = format!("/api/databases/{db}/webhooks");
    let r = app
        .post(
            &path,
            &owner,
            json!({"url": URL, "trigger_type": "record_matches", "table_id": tid,
                   "conditions": {"conditions": [
                       {"field": "Points", "op": "less", "value": f64::MAX}],
                       "unread": [1.22727760496072e186, -f64::MAX]}}),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let r = app.get(&path, &owner).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let conditions = &r.body["webhooks"][0]["conditions"];
    assert_eq!(
        conditions["conditions"][0],
        json!({"field": points, "op": "less", "value": f64::MAX})
    );
    assert_eq!(
        conditions["unread"],
        json!([1.22727760496072e186, -f64::MAX])
    );
}
