//! Comments on records and share links of views through the real router
//! (README "Comments", "Share links"): routing by the `cmt_`/`shl_` tags
//! and by the tag inside a share token, roles as the router resolves them,
//! and the keyless share read behind the per-address shield.

use cluster_protocol::control::{Access, DatabaseScope, Role};
use e2e_tests::{id, Api, Person};
use serde_json::{json, Value};

/// A database with a Tasks table (Title, Points, Secret) and three tasks.
struct Fx {
    owner: Person,
    db: String,
    table: String,
    f: std::collections::HashMap<&'static str, String>,
    recs: Vec<String>,
}

async fn fixture() -> Fx {
    let owner = Person::new().await;
    let api = &owner.api;
    let db = api.new_database("social").await;
    let table = id(&api.create_table(&db, "Tasks").await);
    let mut f = std::collections::HashMap::new();
    for (name, ty) in [
        ("Title", "single_line_text"),
        ("Points", "number"),
        ("Secret", "single_line_text"),
    ] {
        let field = api
            .create_field(&table, json!({"name": name, "type": ty}))
            .await;
        f.insert(name, id(&field));
    }
    let records: Vec<Value> = [("a", 1), ("b", 5), ("c", 3)]
        .iter()
        .map(|(t, p)| json!({"fields": {"Title": t, "Points": p, "Secret": format!("hush-{t}")}}))
        .collect();
    let r = api
        .post(
            &format!("/api/tables/{table}/records"),
            json!({ "records": records }),
        )
        .await;
    let recs = e2e_tests::ids_in(r.expect_ok(), "records");
    Fx {
        owner,
        db,
        table,
        f,
        recs,
    }
}

fn titles(reply: &Value) -> Vec<String> {
    reply["records"]
        .as_array()
        .expect("records")
        .iter()
        .map(|r| {
            r["fields"]["Title"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect()
}

#[tokio::test]
async fn comments_through_the_router() {
    let fx = fixture().await;
    let path = format!("/api/tables/{}/records/{}/comments", fx.table, fx.recs[0]);

    let viewer = Person::member(&fx.db, Role::Viewer).await;
    let c = viewer
        .api
        .post(&path, json!({"text": "A viewer may comment"}))
        .await
        .expect_ok()["comment"]
        .clone();
    let cid = id(&c);
    assert!(cid.starts_with(&format!("cmt_{}", &fx.db[3..8])), "{cid}");
    assert_eq!(c["author_id"], viewer.user_id.as_str());
    assert_eq!(c["author"]["id"], viewer.user_id.as_str());

    // A read-only key of the owner reads but does not write.
    let (_, read_only) = fx
        .owner
        .another_key(Access::ReadOnly, DatabaseScope::All)
        .await;
    let listed = read_only.get(&path).await;
    assert_eq!(listed.expect_ok()["comments"][0]["id"], cid.as_str());
    let m = read_only
        .post(&path, json!({"text": "x"}))
        .await
        .expect_error(403, "forbidden");
    assert_eq!(m, "This API key is read-only.");

    // Only the author edits; an owner may delete.
    let at = format!("/api/comments/{cid}");
    let m = fx
        .owner
        .api
        .patch(&at, json!({"text": "owner edit"}))
        .await
        .expect_error(403, "forbidden");
    assert_eq!(m, "Only the author can edit a comment.");
    let edited = viewer
        .api
        .patch(&at, json!({"text": "fixed"}))
        .await
        .expect_ok()["comment"]
        .clone();
    assert_eq!(edited["edited"], true);
    let editor = Person::member(&fx.db, Role::Editor).await;
    let m = editor.api.delete(&at).await.expect_error(403, "forbidden");
    assert_eq!(m, "Only the author or an owner can delete a comment.");

    // A stranger is 404 at the router, like any id of another account.
    let stranger = Person::new().await;
    stranger.api.get(&path).await.expect_error(404, "not_found");
    stranger
        .api
        .delete(&at)
        .await
        .expect_error(404, "not_found");

    let gone = fx.owner.api.delete(&at).await;
    assert_eq!(gone.expect_ok(), &json!({"id": cid, "deleted": true}));
    fx.owner
        .api
        .delete(&at)
        .await
        .expect_error(404, "not_found");
    // A malformed comment id never reaches a shard.
    fx.owner
        .api
        .delete("/api/comments/cmt_short")
        .await
        .expect_error(404, "not_found");
}

#[tokio::test]
async fn a_share_link_reads_the_view_without_a_key() {
    let fx = fixture().await;
    let api = &fx.owner.api;
    let config = json!({
        "filters": {"conditions": [{"fieldId": fx.f["Points"], "op": "greater", "value": 1}]},
        "sorts": [{"fieldId": fx.f["Points"], "dir": "desc"}],
        "field_order": [fx.f["Points"], fx.f["Title"]],
        "hidden_fields": [fx.f["Secret"]],
    });
    let view = id(&api
        .post(
            &format!("/api/tables/{}/views", fx.table),
            json!({"name": "Public", "config": config}),
        )
        .await
        .expect_ok()["view"]);
    let shares = format!("/api/views/{view}/shares");
    let viewer = Person::member(&fx.db, Role::Viewer).await;
    viewer
        .api
        .post(&shares, json!({}))
        .await
        .expect_error(403, "forbidden");
    let share = api.post(&shares, json!({})).await.expect_ok()["share"].clone();
    let token = share["token"].as_str().expect("a token").to_string();
    assert!(token.starts_with(&format!("shr{}", &fx.db[3..8])));
    assert!(share["url"]
        .as_str()
        .unwrap()
        .ends_with(&format!("/api/share/{token}/records")));
    let listed = api.get(&shares).await.expect_ok()["shares"].clone();
    assert_eq!(listed[0]["id"], share["id"]);
    assert!(listed[0].get("token").is_none());

    // No key at all.
    let anon = Api::anonymous();
    let read = format!("/api/share/{token}/records");
    let r = anon.get(&read).await;
    let body = r.expect_ok();
    assert_eq!(titles(body), ["b", "c"]);
    assert!(!body.to_string().contains("hush"));
    assert_eq!(body["field_ids"].as_object().unwrap().len(), 2);
    assert!(r.header("x-ratelimit-limit").is_none());
    let page = anon.get(&format!("{read}?page_size=1")).await;
    let b = page.expect_ok()["bookmark"].as_str().unwrap().to_string();
    let next = anon.get(&format!("{read}?page_size=1&bookmark={b}")).await;
    assert_eq!(titles(next.expect_ok()), ["c"]);
    anon.get(&format!("{read}?fields=Secret"))
        .await
        .expect_error(400, "bad_request");
    // A caller's key is neither needed nor forwarded: a stranger's key
    // reads the same, and grants nothing more.
    let stranger = Person::new().await;
    assert_eq!(
        titles(stranger.api.get(&read).await.expect_ok()),
        ["b", "c"]
    );

    // Wrong, malformed and unknown-tag tokens are 404; so is any other method.
    let wrong = format!("/api/share/shr{}{}/records", &fx.db[3..8], "x".repeat(24));
    anon.get(&wrong).await.expect_error(404, "not_found");
    anon.get("/api/share/short/records")
        .await
        .expect_error(404, "not_found");
    anon.get(&format!("/api/share/shr{}/records", "Z".repeat(29)))
        .await
        .expect_error(404, "not_found");

    // Revoked: 404 on the very next read.
    api.delete(&format!("/api/shares/{}", id(&share)))
        .await
        .expect_ok();
    anon.get(&read).await.expect_error(404, "not_found");
}

#[tokio::test]
async fn share_reads_count_against_the_anonymous_address_shield() {
    let anon = Api::anonymous();
    // A well-formed token whose tag matches no database: charged, then 404.
    let path = format!("/api/share/shr{}/records", "0".repeat(29));
    for _ in 0..60 {
        anon.get(&path).await.expect_error(404, "not_found");
    }
    let over = anon.get(&path).await;
    over.expect_error(429, "rate_limited");
    assert!(over.header("retry-after").is_some());
}

#[tokio::test]
async fn comments_and_share_links_move_with_their_database() {
    let fx = fixture().await;
    let api = &fx.owner.api;
    let path = format!("/api/tables/{}/records/{}/comments", fx.table, fx.recs[1]);
    let c = api
        .post(&path, json!({"text": "before the move"}))
        .await
        .expect_ok()["comment"]
        .clone();
    let view = id(&api
        .post(
            &format!("/api/tables/{}/views", fx.table),
            json!({"name": "All", "config": {"hidden_fields": [fx.f["Secret"]]}}),
        )
        .await
        .expect_ok()["view"]);
    let share = api
        .post(&format!("/api/views/{view}/shares"), json!({}))
        .await
        .expect_ok()["share"]
        .clone();
    let read = format!("/api/share/{}/records", share["token"].as_str().unwrap());
    let anon = Api::anonymous();
    let before = anon.get(&read).await.expect_ok().clone();

    let from = e2e_tests::moves::database(&fx.db).await.shard;
    let to = crate::moves_keep::other_shard(&from).await;
    let m = e2e_tests::moves::move_done(&fx.db, &to).await;

    let listed = api.get(&path).await.expect_ok()["comments"].clone();
    assert_eq!(listed, json!([c]));
    assert_eq!(anon.get(&read).await.expect_ok(), &before);
    // Writes land on the new shard: an edit, a new comment, a revoke.
    api.patch(
        &format!("/api/comments/{}", id(&c)),
        json!({"text": "after"}),
    )
    .await
    .expect_ok();
    api.post(&path, json!({"text": "second"})).await.expect_ok();
    api.delete(&format!("/api/shares/{}", id(&share)))
        .await
        .expect_ok();
    anon.get(&read).await.expect_error(404, "not_found");
    e2e_tests::moves::assert_nothing_left(&m).await;
}
