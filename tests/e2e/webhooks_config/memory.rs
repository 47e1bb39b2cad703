//! What configuration changes do to the match memory and
//! `schema_version`, and the cascades of table, field and webhook deletes.

use e2e_tests::{database_postgres, id, ids_in};
use serde_json::{json, Value};

use super::Fx;
/// (rows of `webhook_matches`, `matches_recorded`) of a webhook.
async fn memory(pg: &tokio_postgres::Client, webhook: &str) -> (i64, bool) {
    let row = pg
        .query_one(
            "SELECT (SELECT count(*) FROM webhook_matches WHERE webhook_id = $1),
                    matches_recorded FROM webhooks WHERE id = $1",
            &[&webhook],
        )
        .await
        .unwrap();
    (row.get(0), row.get(1))
}

/// What the time-driven pass leaves behind: two remembered matches.
async fn remember(pg: &tokio_postgres::Client, db: &str, webhook: &str) {
    pg.execute(
        "INSERT INTO webhook_matches (webhook_id, record_id, database_id)
         VALUES ($1, 'rec_AAAAAAAAAAAA', $2), ($1, 'rec_BBBBBBBBBBBB', $2)
         ON CONFLICT DO NOTHING",
        &[&webhook, &db],
    )
    .await
    .unwrap();
    pg.execute(
        "UPDATE webhooks SET matches_recorded = true WHERE id = $1",
        &[&webhook],
    )
    .await
    .unwrap();
}

async fn schema_version(pg: &tokio_postgres::Client, db: &str) -> i64 {
    pg.query_one("SELECT schema_version FROM databases WHERE id = $1", &[&db])
        .await
        .unwrap()
        .get(0)
}

#[tokio::test]
async fn changes_clear_the_match_memory_and_move_the_schema_version() {
    let fx = Fx::new().await;
    let api = fx.api();
    let pg = database_postgres(&fx.db).await;
    let w = fx
        .hook(
            json!({"trigger_type": "record_matches", "table_id": fx.tasks,
                     "conditions": {"conditions": [{"field": "Title", "op": "not_empty"}]}}),
        )
        .await;
    let wid = id(&w);
    let path = format!("/api/webhooks/{wid}");
    let other_conditions = json!({"conditions": [{"field": "Count", "op": "greater", "value": 1}]});

    // (change, clears the memory)
    let steps = [
        (json!({"name": "renamed"}), false),
        (json!({"url": "http://127.0.0.1:9/elsewhere"}), false),
        (json!({"payload_key": "id"}), false),
        (json!({"watched_field_ids": ["Title"]}), false),
        (json!({ "conditions": other_conditions.clone() }), true),
        (json!({ "conditions": other_conditions.clone() }), false),
        (json!({"trigger_type": "record_updated"}), true),
        (
            json!({"trigger_type": "record_matches", "conditions": null}),
            true,
        ),
        (
            json!({"table_id": fx.other, "watched_field_ids": null}),
            true,
        ),
        (json!({"is_active": false}), true),
        (json!({"is_active": false}), false),
        (json!({"is_active": true}), true),
        (json!({"resume": true}), false),
    ];
    for (change, clears) in steps {
        remember(&pg, &fx.db, &wid).await;
        let before = schema_version(&pg, &fx.db).await;
        api.patch(&path, change.clone()).await.expect_ok();
        let after = memory(&pg, &wid).await;
        assert_eq!(
            after,
            if clears { (0, false) } else { (2, true) },
            "{change}"
        );
        assert!(
            !clears || schema_version(&pg, &fx.db).await > before,
            "{change} moves schema_version"
        );
    }

    // Resume: clears an auto-pause, the failure streak and the memory.
    remember(&pg, &fx.db, &wid).await;
    pg.execute(
        "UPDATE webhooks SET paused_at = now(), consecutive_failures = 20 WHERE id = $1",
        &[&wid],
    )
    .await
    .unwrap();
    let paused = api.get(&path).await;
    assert_eq!(paused.expect_ok()["webhook"]["consecutive_failures"], 20);
    assert!(paused.body["webhook"]["paused_at"].is_string());
    let before = schema_version(&pg, &fx.db).await;
    let resumed = api.patch(&path, json!({"resume": true})).await;
    let resumed = &resumed.expect_ok()["webhook"];
    assert_eq!(resumed["paused_at"], Value::Null);
    assert_eq!(resumed["consecutive_failures"], 0);
    assert_eq!(memory(&pg, &wid).await, (0, false));
    assert!(schema_version(&pg, &fx.db).await > before);

    // Create and delete move the version too.
    let before = schema_version(&pg, &fx.db).await;
    let other = fx.hook(json!({})).await;
    let created = schema_version(&pg, &fx.db).await;
    assert!(created > before);
    api.delete(&format!("/api/webhooks/{}", id(&other)))
        .await
        .expect_ok();
    assert!(schema_version(&pg, &fx.db).await > created);
    // A delete takes the memory with it.
    remember(&pg, &fx.db, &wid).await;
    api.delete(&path).await.expect_ok();
    let left: i64 = pg
        .query_one(
            "SELECT count(*) FROM webhook_matches WHERE webhook_id = $1",
            &[&wid],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(left, 0);
}

#[tokio::test]
async fn table_and_field_deletes_keep_their_cascades() {
    let fx = Fx::new().await;
    let api = fx.api();
    let bound = fx.hook(json!({"table_id": fx.other})).await;
    let watching = fx
        .hook(
            json!({"table_id": fx.tasks, "trigger_type": "record_updated",
                     "watched_field_ids": ["Title", "Due", "Status"]}),
        )
        .await;
    let wide = fx.hook(json!({})).await;

    // A field delete strips it from every watch list.
    api.delete(&format!("/api/fields/{}", fx.f["Due"]))
        .await
        .expect_ok();
    let w = api.get(&format!("/api/webhooks/{}", id(&watching))).await;
    assert_eq!(
        w.expect_ok()["webhook"]["watched_field_ids"],
        json!([fx.f["Title"], fx.f["Status"]])
    );

    // A table delete deletes the webhooks bound to it, and only those.
    api.delete(&format!("/api/tables/{}", fx.other))
        .await
        .expect_ok();
    api.get(&format!("/api/webhooks/{}", id(&bound)))
        .await
        .expect_error(404, "not_found");
    assert_eq!(
        ids_in(api.get(&fx.list()).await.expect_ok(), "webhooks"),
        [id(&watching), id(&wide)]
    );
}

#[tokio::test]
async fn a_webhook_a_button_names_can_be_deleted() {
    let fx = Fx::new().await;
    let api = fx.api();
    let w = fx.hook(json!({"table_id": fx.tasks})).await;
    let button = api
        .create_field(
            &fx.tasks,
            json!({"name": "Notify", "type": "button", "options": {"webhook_id": id(&w)}}),
        )
        .await;
    api.delete(&format!("/api/webhooks/{}", id(&w)))
        .await
        .expect_ok();
    // The button stays as configured (pressing it now finds no webhook).
    let fields = api.get(&format!("/api/tables/{}/fields", fx.tasks)).await;
    let kept = fields.expect_ok()["fields"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["id"] == button["id"])
        .cloned()
        .expect("button kept");
    assert_eq!(kept["options"]["webhook_id"], id(&w).as_str());
}
