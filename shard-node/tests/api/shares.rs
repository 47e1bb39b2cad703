//! Share links of views (README "Share links"): the editor's routes, the
//! token's shape and storage, and the anonymous read: the view's filter,
//! sort and visible fields only, `page_size`/`bookmark` only, 404 for a
//! wrong, revoked or foreign token and once the view or table is gone, and
//! the share principal refused everywhere else.

use cluster_protocol::error::forbidden;
use cluster_protocol::principal::Principal;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::helpers::*;

struct Fixture {
    db: String,
    owner: Principal,
    table: String,
    view: String,
    /// Field ids by name: Title, Points, Secret.
    f: std::collections::HashMap<String, String>,
    /// Record ids by title.
    r: std::collections::HashMap<String, String>,
}

async fn fixture(app: &TestApp) -> Fixture {
    let (db, owner) = app.owned_database().await;
    let table = app.create_table_id(&db, &owner, "Tasks").await;
    let mut f = std::collections::HashMap::new();
    for (name, ty) in [
        ("Title", "single_line_text"),
        ("Points", "number"),
        ("Secret", "single_line_text"),
    ] {
        let r = app
            .post(
                &format!("/api/tables/{table}/fields"),
                &owner,
                json!({"name": name, "type": ty}),
            )
            .await;
        assert_eq!(r.status, 200, "{:?}", r.body);
        f.insert(
            name.to_string(),
            r.body["field"]["id"].as_str().unwrap().to_string(),
        );
    }
    // A visible formula reading the hidden Secret: left out of the share.
    let r = app
        .post(
            &format!("/api/tables/{table}/fields"),
            &owner,
            json!({"name": "Echo", "type": "formula", "options": {"expression": "{Secret}"}}),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    f.insert(
        "Echo".to_string(),
        r.body["field"]["id"].as_str().unwrap().to_string(),
    );
    let rows = [("a", 1), ("b", 5), ("c", 3), ("d", 9), ("e", 0)];
    let records: Vec<Value> = rows
        .iter()
        .map(|(t, p)| json!({"fields": {"Title": t, "Points": p, "Secret": format!("hush-{t}")}}))
        .collect();
    let resp = app
        .post(
            &format!("/api/tables/{table}/records"),
            &owner,
            json!({"records": records}),
        )
        .await;
    assert_eq!(resp.status, 200, "{:?}", resp.body);
    let r = resp.body["records"]
        .as_array()
        .unwrap()
        .iter()
        .zip(rows)
        .map(|(rec, (t, _))| (t.to_string(), rec["id"].as_str().unwrap().to_string()))
        .collect();
    let config = json!({
        "filters": {"join": "and", "conditions": [{"fieldId": f["Points"], "op": "greater", "value": 1}]},
        "sorts": [{"fieldId": f["Secret"], "dir": "desc"}],
        "field_order": [f["Points"], f["Title"]],
        "hidden_fields": [f["Secret"]],
    });
    let v = app
        .post(
            &format!("/api/tables/{table}/views"),
            &owner,
            json!({"name": "Public", "config": config}),
        )
        .await;
    assert_eq!(v.status, 200, "{:?}", v.body);
    let view = v.body["view"]["id"].as_str().unwrap().to_string();
    Fixture {
        db,
        owner,
        table,
        view,
        f,
        r,
    }
}

async fn share(app: &TestApp, fx: &Fixture, p: &Principal) -> Value {
    let r = app
        .post(&format!("/api/views/{}/shares", fx.view), p, json!({}))
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    r.body["share"].clone()
}

fn read_path(token: &str, query: &str) -> String {
    format!("/api/share/{token}/records{query}")
}

fn anon(db: &str) -> Principal {
    Principal::share_read(db, Some(1))
}

fn titles(reply: &Value) -> Vec<String> {
    reply["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["fields"]["Title"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn editors_create_list_and_revoke_links_with_hashed_tokens() {
    let app = spawn_app().await;
    let fx = fixture(&app).await;
    let s = share(&app, &fx, &editor(&fx.db)).await;
    let id = s["id"].as_str().unwrap();
    assert!(id.starts_with(&format!("shl_{}", &fx.db[3..8])), "{id}");
    assert_eq!(s["view_id"], fx.view.as_str());
    assert_eq!(s["table_id"], fx.table.as_str());
    assert_ms_timestamp(&s["created_at"]);
    let token = s["token"].as_str().unwrap();
    assert_eq!(token.len(), 32);
    assert!(token.starts_with(&format!("shr{}", &fx.db[3..8])));
    assert!(token.bytes().all(|b| b.is_ascii_alphanumeric()));
    assert_eq!(
        s["url"],
        format!("http://127.0.0.1:8080/api/share/{token}/records")
    );

    // Stored as its SHA-256 only.
    let row = app
        .pg
        .query_one("SELECT token_sha256 FROM share_links WHERE id = $1", &[&id])
        .await
        .unwrap();
    let stored: String = row.get(0);
    assert_eq!(stored, hex::encode(Sha256::digest(token.as_bytes())));
    let leaked = app
        .pg
        .query_one(
            "SELECT count(*) FROM share_links WHERE row_to_json(share_links)::text LIKE '%' || $1 || '%'",
            &[&token],
        )
        .await
        .unwrap();
    assert_eq!(leaked.get::<_, i64>(0), 0);

    let list = app
        .get(&format!("/api/views/{}/shares", fx.view), &fx.owner)
        .await;
    assert_eq!(list.status, 200);
    let shares = list.body["shares"].as_array().unwrap();
    assert_eq!(shares.len(), 1);
    assert!(shares[0].get("token").is_none());
    assert!(shares[0].get("url").is_none());
    assert_eq!(shares[0]["id"], id);

    // Viewers, read-only keys and support are refused; an unknown view is 404.
    let v = viewer(&fx.db);
    let r = app
        .post(&format!("/api/views/{}/shares", fx.view), &v, json!({}))
        .await;
    assert_eq!((r.status, r.error_message()), (403, forbidden::VIEWER));
    let r = app.get(&format!("/api/views/{}/shares", fx.view), &v).await;
    assert_eq!(r.status, 403);
    let r = app
        .post(
            &format!("/api/views/{}/shares", fx.view),
            &read_only(fx.owner.clone()),
            json!({}),
        )
        .await;
    assert_eq!(
        (r.status, r.error_message()),
        (403, forbidden::KEY_READ_ONLY)
    );
    let r = app
        .delete(&format!("/api/shares/{id}"), &support(&fx.db))
        .await;
    assert_eq!(
        (r.status, r.error_message()),
        (403, forbidden::SUPPORT_READ_ONLY)
    );
    let missing = format!("viw_{}zzzzzzz", &fx.db[3..8]);
    let r = app
        .post(
            &format!("/api/views/{missing}/shares"),
            &fx.owner,
            json!({}),
        )
        .await;
    assert_eq!(r.status, 404);

    // Revoke: gone from the list and from the read at once.
    assert_eq!(
        app.get(&read_path(token, ""), &anon(&fx.db)).await.status,
        200
    );
    let r = app
        .delete(&format!("/api/shares/{id}"), &editor(&fx.db))
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body, json!({"id": id, "deleted": true}));
    assert_eq!(
        app.get(&read_path(token, ""), &anon(&fx.db)).await.status,
        404
    );
    assert_eq!(
        app.delete(&format!("/api/shares/{id}"), &fx.owner)
            .await
            .status,
        404
    );
    let list = app
        .get(&format!("/api/views/{}/shares", fx.view), &fx.owner)
        .await;
    assert_eq!(list.body["shares"], json!([]));
}

#[tokio::test]
async fn the_read_shows_the_view_and_nothing_more() {
    let app = spawn_app().await;
    let fx = fixture(&app).await;
    let token = share(&app, &fx, &fx.owner).await["token"]
        .as_str()
        .unwrap()
        .to_string();
    let p = anon(&fx.db);
    let r = app.get(&read_path(&token, ""), &p).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    // Points > 1, sorted by the hidden Secret descending.
    assert_eq!(titles(&r.body), ["d", "c", "b"]);
    let visible: Vec<&String> = vec![&fx.f["Points"], &fx.f["Title"]];
    let map = r.body["field_ids"].as_object().unwrap();
    assert_eq!(map.len(), 2);
    for (name, id) in map {
        assert!(
            visible.contains(&&id.as_str().unwrap().to_string()),
            "{name}"
        );
    }
    for rec in r.body["records"].as_array().unwrap() {
        let cells = rec["fields"].as_object().unwrap();
        assert!(
            cells.keys().all(|k| k == "Title" || k == "Points"),
            "{cells:?}"
        );
    }
    let text = r.body.to_string();
    assert!(!text.contains("hush"), "{text}");
    assert!(!text.contains("Secret"), "{text}");
    assert!(!text.contains(&fx.f["Secret"]), "{text}");
    assert!(
        !text.contains("Echo"),
        "a formula of a hidden field: {text}"
    );
    // The keyed listing of the same view does show the formula (the view
    // itself does not hide it): only the share withholds it.
    let keyed = app
        .get(
            &format!("/api/tables/{}/records?view={}", fx.table, fx.view),
            &fx.owner,
        )
        .await;
    assert!(keyed.body.to_string().contains("Echo"));
    assert!(r.body.get("bookmark").is_none());

    // Pages.
    let first = app.get(&read_path(&token, "?page_size=2"), &p).await;
    assert_eq!(titles(&first.body), ["d", "c"]);
    let b = first.body["bookmark"].as_str().unwrap();
    // The view sorts by the hidden Secret: the bookmark must not show it.
    let opened =
        base64::Engine::decode(&base64::engine::general_purpose::URL_SAFE_NO_PAD, b).unwrap();
    assert!(!String::from_utf8_lossy(&opened).contains("hush"));
    // A records-list bookmark of the same view is not a share bookmark.
    let keyed = app
        .get(
            &format!(
                "/api/tables/{}/records?view={}&page_size=2",
                fx.table, fx.view
            ),
            &fx.owner,
        )
        .await;
    let plain = keyed.body["bookmark"].as_str().unwrap();
    let plain_bytes =
        base64::Engine::decode(&base64::engine::general_purpose::URL_SAFE_NO_PAD, plain).unwrap();
    assert!(
        String::from_utf8_lossy(&plain_bytes).contains("hush"),
        "the unsealed form shows it"
    );
    let r = app
        .get(
            &read_path(&token, &format!("?page_size=2&bookmark={plain}")),
            &p,
        )
        .await;
    assert_eq!(r.status, 400);
    let next = app
        .get(
            &read_path(&token, &format!("?page_size=2&bookmark={b}")),
            &p,
        )
        .await;
    assert_eq!(next.status, 200, "{:?}", next.body);
    assert_eq!(titles(&next.body), ["b"]);
    assert!(next.body.get("bookmark").is_none());
    for bad in ["?page_size=0", "?page_size=1001", "?bookmark=junk"] {
        assert_eq!(
            app.get(&read_path(&token, bad), &p).await.status,
            400,
            "{bad}"
        );
    }

    // Nothing widens it.
    for q in [
        format!("?fields={}", fx.f["Secret"]),
        "?filter=%7B%7D".to_string(),
        "?search=hush".to_string(),
        "?sort=Title".to_string(),
        "?view=Public".to_string(),
        "?key_by=id".to_string(),
        "?cell_format=ids".to_string(),
    ] {
        let r = app.get(&read_path(&token, &q), &p).await;
        assert_eq!((r.status, r.error_code()), (400, "bad_request"), "{q}");
    }
    let _ = &fx.r;
}

#[tokio::test]
async fn wrong_foreign_and_orphaned_tokens_are_404() {
    let app = spawn_app().await;
    let fx = fixture(&app).await;
    let s = share(&app, &fx, &fx.owner).await;
    let token = s["token"].as_str().unwrap().to_string();
    let p = anon(&fx.db);

    // A token of the right shape that was never issued; one character off.
    let guessed = format!("shr{}{}", &fx.db[3..8], "A".repeat(24));
    let mut off = token.clone();
    let last = if off.ends_with('a') { "b" } else { "a" };
    off.replace_range(31.., last);
    for t in [
        guessed.as_str(),
        off.as_str(),
        "nonsense",
        &token.to_uppercase(),
    ] {
        let r = app.get(&read_path(t, ""), &p).await;
        assert_eq!((r.status, r.error_code()), (404, "not_found"), "{t}");
    }
    // Another database's token, presented under this database (its tag
    // routed elsewhere): not found here.
    let other = fixture(&app).await;
    let theirs = share(&app, &other, &other.owner).await["token"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(app.get(&read_path(&theirs, ""), &p).await.status, 404);
    assert_eq!(
        app.get(&read_path(&theirs, ""), &anon(&other.db))
            .await
            .status,
        200
    );

    // The view deleted (another view keeps the table's last one), then
    // the table.
    let keep = app
        .post(
            &format!("/api/tables/{}/views", fx.table),
            &fx.owner,
            json!({"name": "Keep"}),
        )
        .await;
    assert_eq!(keep.status, 200);
    assert_eq!(app.get(&read_path(&token, ""), &p).await.status, 200);
    let r = app
        .delete(&format!("/api/views/{}", fx.view), &fx.owner)
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(app.get(&read_path(&token, ""), &p).await.status, 404);

    let token2 = share(&app, &other, &other.owner).await["token"]
        .as_str()
        .unwrap()
        .to_string();
    let r = app
        .delete(&format!("/api/tables/{}", other.table), &other.owner)
        .await;
    assert_eq!(r.status, 200);
    let gone = app.get(&read_path(&token2, ""), &anon(&other.db)).await;
    assert_eq!(gone.status, 404);
    let rows = app
        .pg
        .query_one(
            "SELECT count(*) FROM share_links WHERE database_id = $1",
            &[&other.db],
        )
        .await
        .unwrap();
    assert_eq!(rows.get::<_, i64>(0), 0, "cascaded with the table");
}

#[tokio::test]
async fn a_share_principal_reaches_nothing_else_and_a_key_not_the_share_route() {
    let app = spawn_app().await;
    let fx = fixture(&app).await;
    let token = share(&app, &fx, &fx.owner).await["token"]
        .as_str()
        .unwrap()
        .to_string();
    let p = anon(&fx.db);
    let rec = &fx.r["a"];
    for (method, path) in [
        ("GET", format!("/api/tables/{}/records", fx.table)),
        ("GET", format!("/api/tables/{}/records/{rec}", fx.table)),
        ("GET", format!("/api/tables/{}", fx.table)),
        ("GET", format!("/api/databases/{}/tables", fx.db)),
        ("GET", format!("/api/tables/{}/views", fx.table)),
        ("GET", format!("/api/views/{}/shares", fx.view)),
        ("POST", format!("/api/views/{}/shares", fx.view)),
        (
            "GET",
            format!("/api/tables/{}/records/{rec}/comments", fx.table),
        ),
        ("GET", format!("/api/databases/{}/export", fx.db)),
        ("POST", format!("/api/databases/{}/import", fx.db)),
        ("POST", "/internal/databases/lookup".to_string()),
        ("POST", "/api/databases".to_string()),
    ] {
        let r = app
            .call(
                method,
                &path,
                Signing::With(&p),
                Body::Json(json!({"database_ids": [fx.db]})),
            )
            .await;
        assert_eq!(r.status, 404, "{method} {path}: {:?}", r.body);
    }
    // A keyed principal on the share route is not a share read.
    let r = app.get(&read_path(&token, ""), &fx.owner).await;
    assert_eq!(r.status, 404);
    // Unsigned: 401 like every other route.
    let r = app
        .call("GET", &read_path(&token, ""), Signing::Unsigned, Body::None)
        .await;
    assert_eq!(r.status, 401);
    // A share principal whose database is not held here: 421 (misplaced).
    let r = app
        .get(
            &read_path(&token, ""),
            &Principal::share_read(&fx.db, Some(7)),
        )
        .await;
    assert_eq!(r.status, 421);
}
