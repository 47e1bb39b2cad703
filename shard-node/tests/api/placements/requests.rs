//! Requests against a database in each placement state.

use cluster_protocol::principal::Principal;
use serde_json::json;
use shard_node::catalog::placements::MOVING_MESSAGE;

use super::*;

fn at_epoch(p: &Principal, epoch: Option<i64>) -> Principal {
    Principal { epoch, ..p.clone() }
}

#[tokio::test]
async fn the_held_check_wants_the_placement_s_epoch() {
    let app = spawn_app().await;
    let (db, owner) = app.owned_database().await;
    let tables = format!("/api/databases/{db}/tables");
    assert_eq!(app.get(&tables, &owner).await.status, 200, "epoch 1");
    let r = app.get(&tables, &at_epoch(&owner, Some(2))).await;
    assert_eq!(r.status, 421, "{:?}", r.body);
    // A principal naming no epoch is not checked against it.
    assert_eq!(app.get(&tables, &at_epoch(&owner, None)).await.status, 200);

    // After a move back here the placement is at a later epoch: a router
    // still routing by the old one is turned away.
    app.pg
        .execute(
            "UPDATE placements SET epoch = 2 WHERE database_id = $1",
            &[&db],
        )
        .await
        .unwrap();
    assert_eq!(app.get(&tables, &owner).await.status, 421);
    let r = app.post(&tables, &owner, json!({"name": "Nope"})).await;
    assert_eq!(r.status, 421);
    let now = at_epoch(&owner, Some(2));
    assert_eq!(app.get(&tables, &now).await.status, 200);
    let r = app.post(&tables, &now, json!({"name": "Yes"})).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
}

/// Every kind of request the fixture's database answers, reads and writes.
async fn every_request(app: &TestApp, f: &Fixture) -> Vec<(&'static str, u16)> {
    let (db, t, p) = (&f.db, &f.table, &f.owner);
    let records = format!("/api/tables/{t}/records");
    vec![
        (
            "list tables",
            app.get(&format!("/api/databases/{db}/tables"), p)
                .await
                .status,
        ),
        ("list records", app.get(&records, p).await.status),
        (
            "get record",
            app.get(&format!("{records}/{}", f.record), p).await.status,
        ),
        (
            "create record",
            app.post(
                &records,
                p,
                json!({"records": [{"fields": {"Who": "Bob"}}]}),
            )
            .await
            .status,
        ),
        (
            "update record",
            app.patch(
                &records,
                p,
                json!({"records": [{"id": f.record, "fields": {"Who": "Eve"}}]}),
            )
            .await
            .status,
        ),
        (
            "rename database",
            app.patch(&format!("/api/databases/{db}"), p, json!({"name": "Moved"}))
                .await
                .status,
        ),
        (
            "create table",
            app.post(
                &format!("/api/databases/{db}/tables"),
                p,
                json!({"name": "U"}),
            )
            .await
            .status,
        ),
    ]
}

/// What the database holds, to show nothing was written.
async fn contents(app: &TestApp, f: &Fixture) -> (Vec<String>, String, i64) {
    let name: String = app
        .pg
        .query_one("SELECT name FROM databases WHERE id = $1", &[&f.db])
        .await
        .unwrap()
        .get(0);
    let tables: i64 = app
        .pg
        .query_one(
            "SELECT count(*) FROM tables WHERE database_id = $1",
            &[&f.db],
        )
        .await
        .unwrap()
        .get(0);
    (names(app, f).await, name, tables)
}

#[tokio::test]
async fn a_database_without_a_placement_here_is_misplaced_and_untouched() {
    let app = spawn_app().await;
    let f = fixture(&app).await;
    let before = contents(&app, &f).await;
    set_placement(&app, &f.db, None).await;
    for (what, status) in every_request(&app, &f).await {
        assert_eq!(status, 421, "{what}");
    }
    assert_eq!(contents(&app, &f).await, before);
}

#[tokio::test]
async fn a_fenced_database_is_misplaced_and_untouched() {
    let app = spawn_app().await;
    let f = fixture(&app).await;
    let before = contents(&app, &f).await;
    set_placement(&app, &f.db, Some("fenced")).await;
    for (what, status) in every_request(&app, &f).await {
        assert_eq!(status, 421, "{what}");
    }
    assert_eq!(contents(&app, &f).await, before);
    // The lookup the router fans out does not list it either.
    let r = app
        .post(
            "/internal/databases/lookup",
            &bare(f.owner.user_id.as_str()),
            json!({"database_ids": [f.db]}),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.body["databases"], json!([]));
    // Served again (an aborted cutover), it answers as before.
    set_placement(&app, &f.db, Some("owned")).await;
    let r = app
        .get(&format!("/api/tables/{}/records", f.table), &f.owner)
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
}

#[tokio::test]
async fn while_moving_structural_changes_are_409_and_record_writes_go_on() {
    let app = spawn_app().await;
    let f = fixture(&app).await;
    let (db, t, p) = (&f.db, &f.table, &f.owner);
    let r = app
        .post(
            &format!("/api/tables/{t}/views"),
            p,
            json!({"name": "Grid"}),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let view = r.body["view"]["id"].as_str().unwrap().to_owned();
    let field: String = app
        .pg
        .query_one("SELECT id FROM fields WHERE table_id = $1", &[t])
        .await
        .unwrap()
        .get(0);
    set_placement(&app, db, Some("moving")).await;

    let refused = [
        (
            "create table",
            app.post(
                &format!("/api/databases/{db}/tables"),
                p,
                json!({"name": "U"}),
            )
            .await,
        ),
        (
            "rename table",
            app.patch(&format!("/api/tables/{t}"), p, json!({"name": "T2"}))
                .await,
        ),
        (
            "delete table",
            app.delete(&format!("/api/tables/{t}"), p).await,
        ),
        (
            "create field",
            app.post(
                &format!("/api/tables/{t}/fields"),
                p,
                json!({"name": "More", "type": "number"}),
            )
            .await,
        ),
        (
            "update field",
            app.patch(&format!("/api/fields/{field}"), p, json!({"name": "Whom"}))
                .await,
        ),
        (
            "delete field",
            app.delete(&format!("/api/fields/{field}"), p).await,
        ),
        (
            "create view",
            app.post(&format!("/api/tables/{t}/views"), p, json!({"name": "Two"}))
                .await,
        ),
        (
            "update view",
            app.patch(&format!("/api/views/{view}"), p, json!({"name": "Grid 2"}))
                .await,
        ),
        (
            "delete view",
            app.delete(&format!("/api/views/{view}"), p).await,
        ),
    ];
    for (what, r) in &refused {
        assert_eq!(r.status, 409, "{what}: {:?}", r.body);
        assert_eq!(r.error_code(), "conflict", "{what}");
        assert_eq!(r.error_message(), MOVING_MESSAGE, "{what}");
    }
    // Deleting the database (no API key may; the shard's own path).
    let deleted = shard_node::databases::delete::purge(&app.db, db).await;
    match deleted {
        Err(shard_node::error::ApiError::Conflict(m)) => assert_eq!(m, MOVING_MESSAGE),
        other => panic!("database delete while moving: {other:?}"),
    }

    // Record writes and the database's own settings are not structural.
    let records = format!("/api/tables/{t}/records");
    let r = app
        .post(
            &records,
            p,
            json!({"records": [{"fields": {"Who": "Bob"}}]}),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let r = app
        .patch(
            &records,
            p,
            json!({"records": [{"id": f.record, "fields": {"Who": "Eve"}}]}),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let r = app
        .patch(
            &format!("/api/databases/{db}"),
            p,
            json!({"name": "Moving"}),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let mut who = names(&app, &f).await;
    who.sort();
    assert_eq!(who, ["Bob", "Eve"]);
    let (tables, fields, views): (i64, i64, i64) = {
        let r = app
            .pg
            .query_one(
                "SELECT (SELECT count(*) FROM tables WHERE database_id = $1),
                        (SELECT count(*) FROM fields WHERE database_id = $1),
                        (SELECT count(*) FROM views WHERE database_id = $1)",
                &[db],
            )
            .await
            .unwrap();
        (r.get(0), r.get(1), r.get(2))
    };
    assert_eq!((tables, fields, views), (1, 1, 1), "no structure changed");

    // When the move is over (aborted: owned again), they go through.
    set_placement(&app, db, Some("owned")).await;
    let r = app
        .post(
            &format!("/api/databases/{db}/tables"),
            p,
            json!({"name": "U"}),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
}
