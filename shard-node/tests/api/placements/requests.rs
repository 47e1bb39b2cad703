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

/// The record writes of `HeldWrite` (create, update, upsert) by `p`, with
/// bodies the owner could send.
async fn record_writes(app: &TestApp, f: &Fixture, p: &Principal) -> Vec<(&'static str, Reply)> {
    let records = format!("/api/tables/{}/records", f.table);
    vec![
        (
            "create record",
            app.post(
                &records,
                p,
                json!({"records": [{"fields": {"Who": "Bob"}}]}),
            )
            .await,
        ),
        (
            "update record",
            app.patch(
                &records,
                p,
                json!({"records": [{"id": f.record, "fields": {"Who": "Eve"}}]}),
            )
            .await,
        ),
        (
            "upsert records",
            app.call(
                "PUT",
                &records,
                Signing::With(p),
                Body::Json(json!({"merge_on": ["Who"], "records": [{"fields": {"Who": "Zed"}}]})),
            )
            .await,
        ),
    ]
}

fn assert_misplaced(replies: &[(&'static str, Reply)], case: &str) {
    for (what, r) in replies {
        assert_eq!(r.status, 421, "{case}, {what}: {:?}", r.body);
        assert_eq!(r.error_code(), "not_found", "{case}, {what}");
        assert_eq!(
            r.error_message(),
            shard_node::error::MISPLACED_MESSAGE,
            "{case}, {what}"
        );
    }
}

fn assert_refused(replies: &[(&'static str, Reply)], message: &str, case: &str) {
    for (what, r) in replies {
        assert_eq!(
            (r.status, r.error_message()),
            (403, message),
            "{case}, {what}: {:?}",
            r.body
        );
    }
}

/// A refused record write (`HeldWrite`) by a caller whose role or key
/// refuses it answers the held check first: 421 while the database is not
/// held here (no placement row, fenced, routed at another epoch), 403 with
/// its refusal once it is; and writes nothing either way.
async fn refused_writes_are_misplaced_before_forbidden(
    app: &TestApp,
    f: &Fixture,
    p: &Principal,
    message: &str,
) {
    let before = names(app, f).await;
    assert_eq!(before, ["Ann"]);

    set_placement(app, &f.db, None).await;
    assert_misplaced(&record_writes(app, f, p).await, "no placement row");
    restore_placement(app, &f.db).await;
    assert_eq!(names(app, f).await, before, "no placement row");

    set_placement(app, &f.db, Some("fenced")).await;
    assert_misplaced(&record_writes(app, f, p).await, "fenced");
    set_placement(app, &f.db, Some("owned")).await;
    assert_eq!(names(app, f).await, before, "fenced");

    let elsewhere = at_epoch(p, Some(2));
    assert_misplaced(&record_writes(app, f, &elsewhere).await, "other epoch");
    assert_eq!(names(app, f).await, before, "other epoch");

    assert_refused(&record_writes(app, f, p).await, message, "held");
    assert_eq!(names(app, f).await, before, "held");

    // The owner's same writes go through: the bodies were not the refusal.
    for (what, r) in record_writes(app, f, &f.owner).await {
        assert_eq!(r.status, 200, "owner, {what}: {:?}", r.body);
    }
    let mut after = names(app, f).await;
    after.sort();
    assert_eq!(after, ["Bob", "Eve", "Zed"]);
}

#[tokio::test]
async fn a_viewer_s_record_write_is_421_before_403() {
    let app = spawn_app().await;
    let f = fixture(&app).await;
    let p = viewer(&f.db);
    refused_writes_are_misplaced_before_forbidden(
        &app,
        &f,
        &p,
        cluster_protocol::error::forbidden::VIEWER,
    )
    .await;
}

#[tokio::test]
async fn a_read_only_key_s_record_write_is_421_before_403() {
    let app = spawn_app().await;
    let f = fixture(&app).await;
    let p = read_only(editor(&f.db));
    refused_writes_are_misplaced_before_forbidden(
        &app,
        &f,
        &p,
        cluster_protocol::error::forbidden::KEY_READ_ONLY,
    )
    .await;
}

#[tokio::test]
async fn a_support_grant_s_record_write_is_421_before_403() {
    let app = spawn_app().await;
    let f = fixture(&app).await;
    let p = support(&f.db);
    refused_writes_are_misplaced_before_forbidden(
        &app,
        &f,
        &p,
        cluster_protocol::error::forbidden::SUPPORT_READ_ONLY,
    )
    .await;
}
