//! Part B, Trash, through the real router: delete moves to the trash,
//! listing newest first with `deleted_at`, restore, purge (by id and all),
//! and the roles: viewers list only, editors act only on their own records.

use std::collections::HashSet;

use cluster_protocol::control::Role;
use e2e_tests::{id, Person};
use serde_json::{json, Value};

use crate::fixtures::{fixture, rec_ids, urlencode};

#[tokio::test]
async fn trash_restore_purge() {
    let fx = fixture().await;
    let api = &fx.person.api;
    let records = fx.records();
    let trash = format!("/api/tables/{}/trash", fx.tasks);
    // DELETE by body and by query; duplicates taken once.
    let r = api
        .delete_with(&records, json!({"records": [fx.r[0], fx.r[0]]}))
        .await;
    assert_eq!(
        r.expect_ok(),
        &json!({"records": [{"id": fx.r[0], "deleted": true}]})
    );
    let r = api
        .delete(&format!("{records}?records={},{}", fx.r[1], fx.r[2]))
        .await;
    assert_eq!(rec_ids(r.expect_ok()).len(), 2);
    // Already trashed: 400; unknown: 404; nothing trashed by the failed batch.
    api.delete_with(&records, json!({"records": [fx.r[3], fx.r[0]]}))
        .await
        .expect_error(400, "bad_request");
    api.delete_with(&records, json!({"records": [fx.r[3], "rec_000000000000"]}))
        .await
        .expect_error(404, "not_found");
    assert_eq!(rec_ids(&fx.list("").await).len(), 2);
    api.get(&format!("{records}/{}", fx.r[0]))
        .await
        .expect_error(404, "not_found");
    // A trashed record leaves link cells and lookups.
    let r3 = api.get(&format!("{records}/{}", fx.r[3])).await.expect_ok()["record"].clone();
    assert_eq!(r3["fields"]["Owner Name"], json!(["Ann", "Bob"]));

    // Listing: newest first, deleted_at, keyed by name, no companion map; paging.
    let page = api
        .get(&format!("{trash}?page_size=2"))
        .await
        .expect_ok()
        .clone();
    let first = page["records"].as_array().unwrap().clone();
    assert_eq!(first.len(), 2);
    assert!(first[0]["deleted_at"].is_string());
    assert!(first[0]["deleted_at"].as_str() >= first[1]["deleted_at"].as_str());
    assert!(page.get("field_ids").is_none());
    let b = urlencode(page["bookmark"].as_str().unwrap());
    let rest = api
        .get(&format!("{trash}?page_size=2&bookmark={b}"))
        .await
        .expect_ok()
        .clone();
    let mut all: Vec<String> = first.iter().map(id).collect();
    all.extend(rec_ids(&rest));
    assert!(rest.get("bookmark").is_none());
    assert_eq!(all.iter().collect::<HashSet<_>>().len(), 3);
    assert_eq!(rec_ids(&rest), vec![fx.r[0].clone()], "oldest last");
    api.get(&format!("{trash}?page_size=0"))
        .await
        .expect_error(400, "bad_request");
    api.get(&format!("{trash}?bookmark=nope"))
        .await
        .expect_error(400, "bad_request");

    // Restore: back with every cell; 400 when an id is not in the trash.
    api.post(
        &format!("{trash}/restore"),
        json!({"ids": [fx.r[0], fx.r[3]]}),
    )
    .await
    .expect_error(400, "bad_request");
    let r = api
        .post(&format!("{trash}/restore"), json!({"ids": [fx.r[0]]}))
        .await;
    let back = r.expect_ok();
    assert_eq!(back["records"][0]["fields"]["Title"], "Write spec");
    assert_eq!(back["records"][0]["fields"]["Owner Name"], json!(["Ann"]));
    assert_eq!(rec_ids(&fx.list("").await).len(), 3);
    // Restoring into a unique clash is a 400 naming the field.
    api.post(&records, json!({"records": [{"fields": {"Code": "B2"}}]}))
        .await
        .expect_ok();
    let msg = api
        .post(&format!("{trash}/restore"), json!({"ids": [fx.r[1]]}))
        .await
        .expect_error(400, "bad_request");
    assert!(msg.contains("'Code'"), "{msg}");
    // Purge by id (only trashed records), then purge all.
    api.post(&format!("{trash}/purge"), json!({"ids": [fx.r[3]]}))
        .await
        .expect_error(400, "bad_request");
    let r = api
        .post(&format!("{trash}/purge"), json!({"ids": [fx.r[1]]}))
        .await;
    assert_eq!(
        r.expect_ok(),
        &json!({"records": [{"id": fx.r[1], "deleted": true}]})
    );
    let r = api
        .post(&format!("{trash}/purge"), json!({"all": true}))
        .await;
    assert_eq!(r.expect_ok(), &json!({"deleted": 1}));
    assert_eq!(api.get(&trash).await.expect_ok()["records"], json!([]));
    let many: Vec<Value> = (0..101).map(|i| json!(format!("rec_{i:012}"))).collect();
    api.post(&format!("{trash}/restore"), json!({"ids": many}))
        .await
        .expect_error(400, "bad_request");
}

#[tokio::test]
async fn trash_roles() {
    let fx = fixture().await;
    let records = fx.records();
    let trash = format!("/api/tables/{}/trash", fx.tasks);
    let editor = Person::member(&fx.db, Role::Editor).await;
    let viewer = Person::member(&fx.db, Role::Viewer).await;

    // An editor may not trash the owner's records (403, nothing deleted) ...
    let r = editor
        .api
        .delete_with(&records, json!({"records": [fx.r[0]]}))
        .await;
    r.expect_error(403, "forbidden");
    assert_eq!(rec_ids(&fx.list("").await).len(), 5);
    // ... but may trash, restore and purge its own.
    let mine = rec_ids(
        editor
            .api
            .post(
                &records,
                json!({"records": [{"fields": {"Title": "e1"}}, {"fields": {"Title": "e2"}}]}),
            )
            .await
            .expect_ok(),
    );
    editor
        .api
        .delete_with(&records, json!({"records": mine}))
        .await
        .expect_ok();
    editor
        .api
        .post(&format!("{trash}/restore"), json!({"ids": [mine[0]]}))
        .await
        .expect_ok();
    // The owner trashes one of the owner's; the editor can neither restore nor purge it.
    fx.person
        .api
        .delete_with(&records, json!({"records": [fx.r[0]]}))
        .await
        .expect_ok();
    editor
        .api
        .post(&format!("{trash}/restore"), json!({"ids": [fx.r[0]]}))
        .await
        .expect_error(403, "forbidden");
    editor
        .api
        .post(
            &format!("{trash}/purge"),
            json!({"ids": [fx.r[0], mine[1]]}),
        )
        .await
        .expect_error(403, "forbidden");
    // purge all by an editor removes only the editor's own trashed records.
    let r = editor
        .api
        .post(&format!("{trash}/purge"), json!({"all": true}))
        .await;
    assert_eq!(r.expect_ok(), &json!({"deleted": 1}));
    assert_eq!(
        rec_ids(fx.person.api.get(&trash).await.expect_ok()),
        vec![fx.r[0].clone()]
    );
    // Viewers: list yes, everything else 403.
    assert_eq!(rec_ids(viewer.api.get(&trash).await.expect_ok()).len(), 1);
    viewer
        .api
        .post(&format!("{trash}/restore"), json!({"ids": [fx.r[0]]}))
        .await
        .expect_error(403, "forbidden");
    viewer
        .api
        .post(&format!("{trash}/purge"), json!({"all": true}))
        .await
        .expect_error(403, "forbidden");
    viewer
        .api
        .delete_with(&records, json!({"records": [fx.r[1]]}))
        .await
        .expect_error(403, "forbidden");
    // The owner acts on anyone's records.
    fx.person
        .api
        .post(&format!("{trash}/restore"), json!({"ids": [fx.r[0]]}))
        .await
        .expect_ok();
    fx.person
        .api
        .delete_with(&records, json!({"records": [mine[0]]}))
        .await
        .expect_ok();
    fx.person
        .api
        .post(&format!("{trash}/purge"), json!({"all": true}))
        .await
        .expect_ok();
}
