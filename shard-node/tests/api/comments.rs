//! Comments on records (README "Comments"): roles, the text rules and its
//! limit, keyset pages, the edited flag, the author and owner rules, ids of
//! other tables and databases, purge taking a record's comments with it,
//! and `comments.csv` in the export.

use cluster_protocol::error::forbidden;
use cluster_protocol::principal::Principal;
use serde_json::{json, Value};

use crate::export::{csv_rows, export};
use crate::helpers::*;

/// A table with `n` records; returns the table id and the record ids.
async fn table_with_records(
    app: &TestApp,
    db: &str,
    p: &Principal,
    n: usize,
) -> (String, Vec<String>) {
    let tid = app.create_table_id(db, p, "Tasks").await;
    let records: Vec<Value> = (0..n).map(|_| json!({"fields": {}})).collect();
    let r = app
        .post(
            &format!("/api/tables/{tid}/records"),
            p,
            json!({ "records": records }),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let ids = r.body["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_string())
        .collect();
    (tid, ids)
}

fn path(tid: &str, rid: &str) -> String {
    format!("/api/tables/{tid}/records/{rid}/comments")
}

async fn comment(app: &TestApp, tid: &str, rid: &str, p: &Principal, text: &str) -> Value {
    let r = app.post(&path(tid, rid), p, json!({ "text": text })).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    r.body["comment"].clone()
}

#[tokio::test]
async fn any_member_comments_but_read_only_keys_and_support_do_not() {
    let app = spawn_app().await;
    let (db, owner) = app.owned_database().await;
    let (tid, recs) = table_with_records(&app, &db, &owner, 1).await;
    let rid = &recs[0];

    let viewer = viewer(&db);
    let c = comment(&app, &tid, rid, &viewer, "  Looks wrong?  ").await;
    assert!(c["id"]
        .as_str()
        .unwrap()
        .starts_with(&format!("cmt_{}", &db[3..8])));
    assert_eq!(c["table_id"], tid.as_str());
    assert_eq!(c["record_id"], rid.as_str());
    assert_eq!(c["author_id"], viewer.user_id.as_str());
    assert_eq!(c["author"], json!({ "id": viewer.user_id }));
    assert_eq!(c["text"], "  Looks wrong?  ", "stored as sent");
    assert_eq!(c["edited"], false);
    assert_ms_timestamp(&c["created_at"]);
    assert_eq!(c["created_at"], c["updated_at"]);

    let r = app
        .post(
            &path(&tid, rid),
            &read_only(owner.clone()),
            json!({"text": "x"}),
        )
        .await;
    assert_eq!(
        (r.status, r.error_message()),
        (403, forbidden::KEY_READ_ONLY)
    );
    let r = app
        .post(&path(&tid, rid), &support(&db), json!({"text": "x"}))
        .await;
    assert_eq!(
        (r.status, r.error_message()),
        (403, forbidden::SUPPORT_READ_ONLY)
    );
    // Support and read-only keys still read.
    let r = app.get(&path(&tid, rid), &support(&db)).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.body["comments"].as_array().unwrap().len(), 1);
    assert!(r.body.get("bookmark").is_none());

    // A stranger (no role) sees nothing.
    let stranger = Principal {
        role: None,
        ..viewer.clone()
    };
    assert_eq!(app.get(&path(&tid, rid), &stranger).await.status, 404);
}

#[tokio::test]
async fn text_rules_and_the_limit() {
    let app = spawn_app().await;
    let (db, owner) = app.owned_database().await;
    let (tid, recs) = table_with_records(&app, &db, &owner, 1).await;
    let p = path(&tid, &recs[0]);
    for body in [
        json!({}),
        json!({"text": null}),
        json!({"text": 5}),
        json!({"text": "   "}),
        json!({"text": ["a"]}),
    ] {
        let r = app.post(&p, &owner, body.clone()).await;
        assert_eq!((r.status, r.error_code()), (400, "bad_request"), "{body}");
    }
    let r = app
        .post(&p, &owner, json!({"text": "a".repeat(10_001)}))
        .await;
    assert_eq!(r.status, 400);
    assert!(r.error_message().contains("10000"), "{}", r.error_message());
    comment(&app, &tid, &recs[0], &owner, &"é".repeat(10_000)).await;
    let r = app
        .call("POST", &p, Signing::With(&owner), Body::Raw("[1]"))
        .await;
    assert_eq!(r.status, 400);
}

#[tokio::test]
async fn trashed_missing_and_foreign_records_are_404() {
    let app = spawn_app().await;
    let (db, owner) = app.owned_database().await;
    let (tid, recs) = table_with_records(&app, &db, &owner, 2).await;
    let (other_tid, other_recs) = table_with_records(&app, &db, &owner, 1).await;
    let r = app
        .call(
            "DELETE",
            &format!("/api/tables/{tid}/records"),
            Signing::With(&owner),
            Body::Json(json!({"records": [recs[1]]})),
        )
        .await;
    assert_eq!(r.status, 200);
    let missing = format!("rec_{}zzzzzzz", &db[3..8]);
    for (t, rid) in [
        (&tid, &recs[1]),
        (&tid, &missing),
        (&tid, &other_recs[0]),
        (&other_tid, &recs[0]),
    ] {
        let r = app.post(&path(t, rid), &owner, json!({"text": "x"})).await;
        assert_eq!(r.status, 404, "{t} {rid}");
        assert_eq!(app.get(&path(t, rid), &owner).await.status, 404);
    }
    // A table of another database, named under this database's principal.
    let (db2, owner2) = app.owned_database().await;
    let (tid2, recs2) = table_with_records(&app, &db2, &owner2, 1).await;
    let c = comment(&app, &tid2, &recs2[0], &owner2, "theirs").await;
    let r = app
        .post(&path(&tid2, &recs2[0]), &owner, json!({"text": "x"}))
        .await;
    assert_eq!(r.status, 404);
    let id = c["id"].as_str().unwrap();
    let r = app
        .patch(&format!("/api/comments/{id}"), &owner, json!({"text": "x"}))
        .await;
    assert_eq!(r.status, 404);
    assert_eq!(
        app.delete(&format!("/api/comments/{id}"), &owner)
            .await
            .status,
        404
    );
}

#[tokio::test]
async fn pages_oldest_first_with_bookmarks() {
    let app = spawn_app().await;
    let (db, owner) = app.owned_database().await;
    let (tid, recs) = table_with_records(&app, &db, &owner, 2).await;
    let mut made = Vec::new();
    for i in 0..5 {
        let c = comment(&app, &tid, &recs[0], &owner, &format!("c{i}")).await;
        made.push(c["id"].as_str().unwrap().to_string());
    }
    comment(&app, &tid, &recs[1], &owner, "elsewhere").await;
    let base = path(&tid, &recs[0]);
    let mut seen = Vec::new();
    let mut url = format!("{base}?page_size=2");
    loop {
        let r = app.get(&url, &owner).await;
        assert_eq!(r.status, 200, "{:?}", r.body);
        for c in r.body["comments"].as_array().unwrap() {
            seen.push(c["id"].as_str().unwrap().to_string());
        }
        match r.body.get("bookmark") {
            Some(b) => {
                assert_eq!(r.body["comments"].as_array().unwrap().len(), 2);
                url = format!("{base}?page_size=2&bookmark={}", b.as_str().unwrap());
            }
            None => break,
        }
    }
    assert_eq!(seen, made);
    // Exactly a page: no bookmark.
    let r = app.get(&format!("{base}?page_size=5"), &owner).await;
    assert!(r.body.get("bookmark").is_none());
    let r = app.get(&base, &owner).await;
    assert_eq!(
        r.body["comments"].as_array().unwrap().len(),
        5,
        "default 50"
    );

    for bad in ["0", "101", "x", "1.5", ""] {
        let r = app.get(&format!("{base}?page_size={bad}"), &owner).await;
        assert_eq!(r.status, 400, "page_size={bad}");
    }
    let r = app.get(&format!("{base}?bookmark=nonsense"), &owner).await;
    assert_eq!(r.status, 400);
    // A bookmark of another record's comments is refused.
    let first = app.get(&format!("{base}?page_size=1"), &owner).await;
    let b = first.body["bookmark"].as_str().unwrap();
    let r = app
        .get(&format!("{}?bookmark={b}", path(&tid, &recs[1])), &owner)
        .await;
    assert_eq!(r.status, 400);
}

#[tokio::test]
async fn only_the_author_edits_and_author_or_owner_deletes() {
    let app = spawn_app().await;
    let (db, owner) = app.owned_database().await;
    let (tid, recs) = table_with_records(&app, &db, &owner, 1).await;
    let editor = editor(&db);
    let other_editor = self::editor(&db);
    let c = comment(&app, &tid, &recs[0], &editor, "first").await;
    let id = c["id"].as_str().unwrap();
    let at = format!("/api/comments/{id}");

    for p in [&owner, &other_editor] {
        let r = app.patch(&at, p, json!({"text": "hijack"})).await;
        assert_eq!(
            (r.status, r.error_message()),
            (403, "Only the author can edit a comment.")
        );
    }
    let r = app.patch(&at, &editor, json!({"text": " "})).await;
    assert_eq!(r.status, 400);
    let r = app.patch(&at, &editor, json!({"text": "second"})).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let edited = &r.body["comment"];
    assert_eq!(edited["text"], "second");
    assert_eq!(edited["edited"], true);
    assert_eq!(edited["created_at"], c["created_at"]);
    assert!(edited["updated_at"].as_str() > c["updated_at"].as_str());
    let listed = app.get(&path(&tid, &recs[0]), &owner).await;
    assert_eq!(listed.body["comments"][0], *edited);

    let r = app.delete(&at, &other_editor).await;
    assert_eq!(
        (r.status, r.error_message()),
        (403, "Only the author or an owner can delete a comment.")
    );
    let r = app.delete(&at, &read_only(editor.clone())).await;
    assert_eq!(
        (r.status, r.error_message()),
        (403, forbidden::KEY_READ_ONLY)
    );
    let r = app.delete(&at, &editor).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body, json!({"id": id, "deleted": true}));
    assert_eq!(app.delete(&at, &editor).await.status, 404);

    // An owner deletes anyone's comment; a viewer deletes its own.
    let viewer = viewer(&db);
    let c = comment(&app, &tid, &recs[0], &viewer, "mine").await;
    let at = format!("/api/comments/{}", c["id"].as_str().unwrap());
    assert_eq!(
        app.patch(&at, &viewer, json!({"text": "m"})).await.status,
        200
    );
    assert_eq!(app.delete(&at, &viewer).await.status, 200);
    let c = comment(&app, &tid, &recs[0], &editor, "theirs").await;
    let at = format!("/api/comments/{}", c["id"].as_str().unwrap());
    assert_eq!(app.delete(&at, &owner).await.status, 200);
}

#[tokio::test]
async fn purge_takes_the_records_comments_and_table_delete_cascades() {
    let app = spawn_app().await;
    let (db, owner) = app.owned_database().await;
    let (tid, recs) = table_with_records(&app, &db, &owner, 3).await;
    for r in &recs {
        comment(&app, &tid, r, &owner, "note").await;
    }
    let count = |rid: String| {
        let pg = &app.pg;
        async move {
            pg.query_one(
                "SELECT count(*) FROM comments WHERE record_id = $1",
                &[&rid],
            )
            .await
            .unwrap()
            .get::<_, i64>(0)
        }
    };
    let r = app
        .call(
            "DELETE",
            &format!("/api/tables/{tid}/records"),
            Signing::With(&owner),
            Body::Json(json!({"records": [recs[0], recs[1]]})),
        )
        .await;
    assert_eq!(r.status, 200);
    // Trashing keeps them; purging by id removes them.
    assert_eq!(count(recs[0].clone()).await, 1);
    let r = app
        .post(
            &format!("/api/tables/{tid}/trash/purge"),
            &owner,
            json!({"ids": [recs[0]]}),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(count(recs[0].clone()).await, 0);
    assert_eq!(count(recs[1].clone()).await, 1);
    let r = app
        .post(
            &format!("/api/tables/{tid}/trash/purge"),
            &owner,
            json!({"all": true}),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(count(recs[1].clone()).await, 0);
    assert_eq!(count(recs[2].clone()).await, 1);

    // The retention purger.
    let (tid2, recs2) = table_with_records(&app, &db, &owner, 1).await;
    comment(&app, &tid2, &recs2[0], &owner, "old").await;
    let r = app
        .call(
            "DELETE",
            &format!("/api/tables/{tid2}/records"),
            Signing::With(&owner),
            Body::Json(json!({"records": [recs2[0]]})),
        )
        .await;
    assert_eq!(r.status, 200);
    shard_node::trash::purger::purge_expired(&app.db, std::time::Duration::ZERO)
        .await
        .unwrap();
    assert_eq!(count(recs2[0].clone()).await, 0);

    // Deleting the table takes the rest.
    let r = app.delete(&format!("/api/tables/{tid}"), &owner).await;
    assert_eq!(r.status, 200);
    assert_eq!(count(recs[2].clone()).await, 0);
}

#[tokio::test]
async fn export_writes_comments_for_editors_only() {
    let app = spawn_app().await;
    let (db, owner) = app.owned_database().await;
    let (tid, recs) = table_with_records(&app, &db, &owner, 1).await;
    let a = comment(&app, &tid, &recs[0], &owner, "=SUM(1)").await;
    let b = comment(&app, &tid, &recs[0], &owner, "plain, with comma").await;
    let r = app
        .patch(
            &format!("/api/comments/{}", b["id"].as_str().unwrap()),
            &owner,
            json!({"text": "plain, edited"}),
        )
        .await;
    assert_eq!(r.status, 200);
    let (entries, _) = export(&app, &db, &owner).await;
    let rows = csv_rows(&entries["comments.csv"].bytes);
    assert_eq!(
        rows[0],
        [
            "id",
            "table",
            "record_id",
            "author",
            "author_id",
            "created_at",
            "edited",
            "body"
        ]
    );
    assert_eq!(rows.len(), 3);
    assert_eq!(rows[1][0], a["id"].as_str().unwrap());
    assert_eq!(rows[1][1], "Tasks");
    assert_eq!(rows[1][2], recs[0]);
    assert_eq!(rows[1][3], owner.user_id);
    assert_eq!(rows[1][4], owner.user_id);
    assert_eq!(rows[1][5], a["created_at"].as_str().unwrap());
    assert_eq!(rows[1][6], "false");
    assert_eq!(rows[1][7], "'=SUM(1)", "formula guard");
    assert_eq!(rows[2][6], "true");
    assert_eq!(rows[2][7], "plain, edited");
    let readme = String::from_utf8(entries["README.txt"].bytes.clone()).unwrap();
    assert!(!readme.contains("do not exist"), "{readme}");

    let (entries, _) = export(&app, &db, &viewer(&db)).await;
    assert!(!entries.contains_key("comments.csv"));
}
