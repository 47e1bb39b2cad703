//! Background workers touch only the databases served here: a database
//! without a placement row (a move's target before the flip, its source
//! after) is skipped by the trash purger and the webhook deliverer.

use cluster_protocol::ids::{self, Kind};
use serde_json::json;

use super::*;
use crate::deliveries::{harness, settings};

#[tokio::test]
async fn the_purger_skips_a_database_not_served_here() {
    let app = spawn_app().await;
    let f = fixture(&app).await;
    let table = shard_node::tenant_schema::table(&f.db, &f.table).unwrap();
    let trashed = app
        .pg
        .execute(
            &format!("UPDATE {table} SET deleted_at = now() - interval '8 days' WHERE id = $1"),
            &[&f.record],
        )
        .await
        .unwrap();
    assert_eq!(trashed, 1);
    let count = async || -> i64 {
        app.pg
            .query_one(&format!("SELECT count(*) FROM {table}"), &[])
            .await
            .unwrap()
            .get(0)
    };
    set_placement(&app, &f.db, None).await;
    shard_node::trash::purger::purge_expired(&app.db, shard_node::config::TRASH_RETENTION)
        .await
        .unwrap();
    assert_eq!(count().await, 1, "purged while not served here");

    restore_placement(&app, &f.db).await;
    shard_node::trash::purger::purge_expired(&app.db, shard_node::config::TRASH_RETENTION)
        .await
        .unwrap();
    assert_eq!(count().await, 0);
}

#[tokio::test]
async fn the_deliverer_skips_a_database_not_served_here() {
    let h = harness(settings(&[100], 5_000)).await;
    let unplaced = h.webhook("ok/unplaced").await;
    set_placement(&h.app, &h.database_id, None).await;
    let waiting = h.enqueue(&unplaced, 1).await;

    // A database served here, its delivery enqueued after the other: once
    // it is delivered, the deliverer has claimed past the unplaced one.
    let (other, _) = h.app.owned_database().await;
    let tag = ids::tag_of(Kind::Database, &other).unwrap().to_owned();
    let hook = ids::new_tagged(Kind::Webhook, &tag);
    let url = h.receiver.url("ok/placed");
    h.app
        .pg
        .execute(
            "INSERT INTO webhooks (id, database_id, name, url, secret)
             VALUES ($1, $2, 'hook', $3, 'secret')",
            &[&hook, &other, &url],
        )
        .await
        .unwrap();
    let delivery = ids::new_tagged(Kind::Delivery, &tag);
    let body = json!({"delivery_id": delivery}).to_string();
    h.app
        .pg
        .execute(
            "INSERT INTO deliveries (id, database_id, webhook_id, event, body)
             VALUES ($1, $2, $3, 'record.created', $4)",
            &[&delivery, &other, &hook, &body],
        )
        .await
        .unwrap();
    h.app
        .pg
        .execute("SELECT pg_notify('webhook_deliveries', '')", &[])
        .await
        .unwrap();
    assert_eq!(h.finished(&delivery).await.state, "succeeded");

    let row = h.row(&waiting[0]).await;
    assert_eq!((row.state.as_str(), row.attempts), ("pending", 0));
    assert!(h.receiver.hits_on("/ok/unplaced").is_empty());

    // Served here again, it goes out.
    restore_placement(&h.app, &h.database_id).await;
    h.app
        .pg
        .execute("SELECT pg_notify('webhook_deliveries', '')", &[])
        .await
        .unwrap();
    assert_eq!(h.finished(&waiting[0]).await.state, "succeeded");
}
