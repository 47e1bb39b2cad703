//! Part B, Trash (and the DELETE records route): soft delete, newest-first
//! listing with bookmarks, restore, purge, the editor-own-records rule and
//! the background purger.

use cluster_protocol::error::forbidden;
use serde_json::{json, Value};

use crate::helpers::*;

async fn make(
    app: &TestApp,
    tid: &str,
    p: &cluster_protocol::principal::Principal,
    n: usize,
) -> Vec<String> {
    let records: Vec<Value> = (0..n).map(|_| json!({"fields": {}})).collect();
    let r = app
        .post(
            &format!("/api/tables/{tid}/records"),
            p,
            json!({"records": records}),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    r.body["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_string())
        .collect()
}

async fn delete(
    app: &TestApp,
    tid: &str,
    p: &cluster_protocol::principal::Principal,
    ids: &[String],
) -> Reply {
    app.call(
        "DELETE",
        &format!("/api/tables/{tid}/records"),
        Signing::With(p),
        Body::Json(json!({"records": ids})),
    )
    .await
}

#[tokio::test]
async fn create_delete_restore_purge() {
    let app = spawn_app().await;
    let (db, owner) = app.owned_database().await;
    let table = app.create_table(&db, &owner, "T").await;
    let tid = table["id"].as_str().unwrap();
    let ids = make(&app, tid, &owner, 5).await;
    assert!(ids
        .iter()
        .all(|i| i.starts_with(&format!("rec_{}", &db[3..8]))));

    // Duplicate ids are taken once.
    let r = delete(
        &app,
        tid,
        &owner,
        &[ids[0].clone(), ids[0].clone(), ids[1].clone()],
    )
    .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(
        r.body,
        json!({"records": [{"id": ids[0], "deleted": true}, {"id": ids[1], "deleted": true}]})
    );
    // Query form.
    let r = app
        .call(
            "DELETE",
            &format!("/api/tables/{tid}/records?records={}", ids[2]),
            Signing::With(&owner),
            Body::None,
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    // Unknown id: 404 and nothing trashed.
    let r = delete(
        &app,
        tid,
        &owner,
        &[ids[3].clone(), "rec_nothere12345".into()],
    )
    .await;
    assert_eq!(r.status, 404);
    let r = delete(&app, tid, &owner, &[ids[0].clone()]).await;
    assert_eq!(r.status, 400, "already trashed");

    let r = app
        .get(&format!("/api/tables/{tid}/trash"), &viewer(&db))
        .await;
    assert_eq!(r.status, 200);
    let listed: Vec<&str> = r.body["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    assert_eq!(listed[0], ids[2], "newest first");
    assert_eq!(listed.len(), 3);
    assert!(r.body.get("bookmark").is_none());
    assert!(r.body.get("field_ids").is_none());
    assert_ms_timestamp(&r.body["records"][0]["deleted_at"]);

    // Paging by one.
    let mut seen = vec![];
    let mut bookmark: Option<String> = None;
    loop {
        let q = match &bookmark {
            Some(b) => format!("?page_size=1&bookmark={b}"),
            None => "?page_size=1".into(),
        };
        let r = app
            .get(&format!("/api/tables/{tid}/trash{q}"), &owner)
            .await;
        assert_eq!(r.status, 200, "{:?}", r.body);
        seen.push(r.body["records"][0]["id"].as_str().unwrap().to_string());
        match r.body.get("bookmark") {
            Some(b) => bookmark = Some(b.as_str().unwrap().into()),
            None => break,
        }
    }
    assert_eq!(seen, listed);
    for bad in [
        "?page_size=0",
        "?page_size=1001",
        "?page_size=x",
        "?bookmark=zzz",
    ] {
        let r = app
            .get(&format!("/api/tables/{tid}/trash{bad}"), &owner)
            .await;
        assert_eq!(r.status, 400, "{bad}");
    }

    let v = viewer(&db);
    let r = app
        .post(
            &format!("/api/tables/{tid}/trash/restore"),
            &v,
            json!({"ids": [ids[0]]}),
        )
        .await;
    assert_eq!((r.status, r.error_message()), (403, forbidden::VIEWER));
    let r = app
        .post(
            &format!("/api/tables/{tid}/trash/restore"),
            &owner,
            json!({"ids": [ids[0], ids[4]]}),
        )
        .await;
    assert_eq!(r.status, 400, "live record is not in the trash");
    let r = app
        .post(
            &format!("/api/tables/{tid}/trash/restore"),
            &owner,
            json!({"ids": [ids[0]]}),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.body["records"][0]["id"], ids[0].as_str());

    let r = app
        .post(
            &format!("/api/tables/{tid}/trash/purge"),
            &owner,
            json!({"ids": [ids[1]]}),
        )
        .await;
    assert_eq!(
        r.body,
        json!({"records": [{"id": ids[1], "deleted": true}]})
    );
    let r = app
        .post(
            &format!("/api/tables/{tid}/trash/purge"),
            &owner,
            json!({"all": true}),
        )
        .await;
    assert_eq!(r.body, json!({"deleted": 1}));
    let r = app.get(&format!("/api/tables/{tid}/trash"), &owner).await;
    assert_eq!(r.body["records"], json!([]));
}

#[tokio::test]
async fn editors_act_only_on_their_own_records() {
    let app = spawn_app().await;
    let (db, owner) = app.owned_database().await;
    let tid = app.create_table_id(&db, &owner, "T").await;
    let ed = editor(&db);
    let other = editor(&db);
    let mine = make(&app, &tid, &ed, 2).await;
    let theirs = make(&app, &tid, &other, 1).await;
    let r = delete(&app, &tid, &ed, &[mine[0].clone(), theirs[0].clone()]).await;
    assert_eq!(r.status, 403, "{:?}", r.body);
    // Nothing trashed.
    let r = app.get(&format!("/api/tables/{tid}/trash"), &ed).await;
    assert_eq!(r.body["records"], json!([]));
    assert_eq!(delete(&app, &tid, &ed, &mine).await.status, 200);
    assert_eq!(
        delete(&app, &tid, &owner, &theirs).await.status,
        200,
        "owner deletes anyone's"
    );
    let r = app
        .post(
            &format!("/api/tables/{tid}/trash/restore"),
            &ed,
            json!({"ids": [theirs[0]]}),
        )
        .await;
    assert_eq!(r.status, 403);
    let r = app
        .post(
            &format!("/api/tables/{tid}/trash/purge"),
            &ed,
            json!({"ids": [mine[0], theirs[0]]}),
        )
        .await;
    assert_eq!(r.status, 403);
    // An editor's all purges only its own.
    let r = app
        .post(
            &format!("/api/tables/{tid}/trash/purge"),
            &ed,
            json!({"all": true}),
        )
        .await;
    assert_eq!(r.body, json!({"deleted": 2}));
    let r = app.get(&format!("/api/tables/{tid}/trash"), &owner).await;
    assert_eq!(r.body["records"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn batches_hold_at_most_100() {
    let app = spawn_app().await;
    let (db, owner) = app.owned_database().await;
    let tid = app.create_table_id(&db, &owner, "T").await;
    let many: Vec<Value> = (0..101).map(|_| json!({"fields": {}})).collect();
    let r = app
        .post(
            &format!("/api/tables/{tid}/records"),
            &owner,
            json!({"records": many}),
        )
        .await;
    assert_eq!(r.status, 400);
    let r = app
        .post(
            &format!("/api/tables/{tid}/records"),
            &viewer(&db),
            json!({"records": [{}]}),
        )
        .await;
    assert_eq!((r.status, r.error_message()), (403, forbidden::VIEWER));
    let ids = make(&app, &tid, &owner, 100).await;
    assert_eq!(ids.len(), 100);
    let r = app
        .post(
            &format!("/api/tables/{tid}/trash/restore"),
            &owner,
            json!({"ids": (0..101).map(|i| format!("rec_{i}")).collect::<Vec<_>>()}),
        )
        .await;
    assert_eq!(r.status, 400);
}

#[tokio::test]
async fn the_purger_removes_records_trashed_over_the_retention() {
    let app = spawn_app().await;
    let (db, owner) = app.owned_database().await;
    let tid = app.create_table_id(&db, &owner, "T").await;
    let ids = make(&app, &tid, &owner, 3).await;
    assert_eq!(delete(&app, &tid, &owner, &ids[..2]).await.status, 200);
    app.pg
        .execute(&format!("UPDATE \"{db}\".\"{tid}\" SET deleted_at = now() - interval '8 days' WHERE id = $1"), &[&ids[0]])
        .await
        .unwrap();
    // Another test's node, sharing this PostgreSQL database, runs a purger
    // pass when it starts and may remove the record first: what is checked
    // is what is left.
    shard_node::trash::purger::purge_expired(&app.db, shard_node::config::TRASH_RETENTION)
        .await
        .unwrap();
    let left: Vec<String> = app
        .pg
        .query(
            &format!("SELECT id FROM \"{db}\".\"{tid}\" ORDER BY id"),
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    let mut expected = vec![ids[1].clone(), ids[2].clone()];
    expected.sort();
    assert_eq!(left, expected);
}
