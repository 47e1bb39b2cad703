//! Part B "Webhooks", the configuration routes, through the router: create,
//! list, get, update, delete and regenerate; the secret shown once; roles,
//! keys and routing; every save-time rule; what a change does to the
//! match memory; the cascades of table and field deletes.

use cluster_protocol::control::{Access, DatabaseScope, Role};
use cluster_protocol::error::forbidden;
use e2e_tests::{cluster, database_postgres, id, ids_in, Api, Person};
use serde_json::{json, Value};

mod memory;
mod validation;

/// A receiver address the test cluster's `EGRESS_ALLOW_CIDRS`
/// (127.0.0.0/8, ::1/128) lets a webhook save; nothing is sent to it here.
const LOCAL: &str = "http://127.0.0.1:9/hook";

/// A database with a table of every field family a rule talks about.
struct Fx {
    owner: Person,
    db: String,
    tasks: String,
    other: String,
    /// Field ids by name, on Tasks.
    f: std::collections::HashMap<String, String>,
}

impl Fx {
    async fn new() -> Fx {
        let owner = Person::new().await;
        let api = &owner.api;
        let db = api.new_database("hooks").await;
        let tasks = id(&api.create_table(&db, "Tasks").await);
        let other = id(&api.create_table(&db, "Other").await);
        let code = api
            .create_field(&other, json!({"name": "Code", "type": "single_line_text"}))
            .await;
        let mut f = std::collections::HashMap::new();
        for body in [
            json!({"name": "Title", "type": "single_line_text"}),
            json!({"name": "Count", "type": "number"}),
            json!({"name": "Due", "type": "date"}),
            json!({"name": "Status", "type": "single_select",
                   "options": {"choices": [{"name": "Open"}, {"name": "Done"}]}}),
            json!({"name": "Double", "type": "formula", "options": {"expression": "{Count} * 2"}}),
            json!({"name": "Lines", "type": "link", "options": {"target_table_id": other}}),
            json!({"name": "Ping", "type": "button",
                   "options": {"url_template": "https://example.com/"}}),
        ] {
            let field = api.create_field(&tasks, body).await;
            f.insert(field["name"].as_str().unwrap().to_owned(), id(&field));
        }
        for body in [
            json!({"name": "Codes", "type": "lookup",
                   "options": {"link_field_id": f["Lines"], "target_field_id": id(&code)}}),
            json!({"name": "Line count", "type": "rollup",
                   "options": {"link_field_id": f["Lines"], "aggregation": "count"}}),
        ] {
            let field = api.create_field(&tasks, body).await;
            f.insert(field["name"].as_str().unwrap().to_owned(), id(&field));
        }
        Fx {
            owner,
            db,
            tasks,
            other,
            f,
        }
    }

    fn api(&self) -> &Api {
        &self.owner.api
    }

    fn list(&self) -> String {
        format!("/api/databases/{}/webhooks", self.db)
    }

    /// Creates a webhook from `body` (defaults: LOCAL, record_created).
    async fn hook(&self, body: Value) -> Value {
        let mut b = json!({"url": LOCAL, "trigger_type": "record_created"});
        b.as_object_mut()
            .unwrap()
            .extend(body.as_object().unwrap().clone());
        self.api().post(&self.list(), b).await.expect_ok()["webhook"].clone()
    }
}

fn is_hex_secret(v: &Value) -> bool {
    v.as_str().is_some_and(|s| {
        s.len() == 48
            && s.bytes()
                .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c))
    })
}

fn hidden(mut w: Value) -> Value {
    w["secret"] = json!("");
    w
}

#[tokio::test]
async fn create_list_get_update_delete_and_regenerate() {
    let fx = Fx::new().await;
    let api = fx.api();
    assert_eq!(
        api.get(&fx.list()).await.expect_ok(),
        &json!({"webhooks": []})
    );

    let reply = api
        .post(
            &fx.list(),
            json!({"url": LOCAL, "trigger_type": "record_updated", "name": "Ops",
                   "table_id": fx.tasks, "payload_key": "id",
                   "watched_field_ids": ["Title", fx.f["Count"]],
                   "conditions": {"join": "or", "conditions": [
                       {"field": "Count", "op": "greater", "value": 2},
                       {"field": fx.f["Status"], "op": "is", "value": "Open"}]}}),
        )
        .await;
    let w = reply.expect_ok()["webhook"].clone();
    let wid = id(&w);
    assert!(wid.starts_with("whk_") && wid.len() == 16, "{wid}");
    assert_eq!(
        &wid[4..9],
        &fx.db[3..8],
        "carries the database's routing tag"
    );
    assert!(is_hex_secret(&w["secret"]), "secret shown on create: {w}");
    let keys: Vec<&str> = w.as_object().unwrap().keys().map(String::as_str).collect();
    for key in [
        "id",
        "database_id",
        "table_id",
        "name",
        "url",
        "trigger_type",
        "payload_key",
        "secret",
        "is_active",
        "conditions",
        "watched_field_ids",
        "consecutive_failures",
        "last_status",
        "last_attempt_at",
        "paused_at",
        "created_at",
        "updated_at",
    ] {
        assert!(keys.contains(&key), "{key} missing: {w}");
    }
    assert_eq!(w["database_id"], fx.db.as_str());
    assert_eq!(w["table_id"], fx.tasks.as_str());
    assert_eq!(w["url"], LOCAL);
    assert_eq!(w["payload_key"], "id");
    assert_eq!(w["is_active"], true);
    assert_eq!(
        w["watched_field_ids"],
        json!([fx.f["Title"], fx.f["Count"]])
    );
    assert_eq!(
        w["conditions"],
        json!({"join": "or", "conditions": [
            {"field": fx.f["Count"], "op": "greater", "value": 2},
            {"field": fx.f["Status"], "op": "is", "value": "Open"}]})
    );
    assert_eq!(w["consecutive_failures"], 0);
    assert_eq!(w["last_status"], Value::Null);
    assert_eq!(w["paused_at"], Value::Null);

    // The secret is never shown again, whoever asks.
    let path = format!("/api/webhooks/{wid}");
    assert_eq!(
        api.get(&path).await.expect_ok()["webhook"],
        hidden(w.clone())
    );

    // The list: created_at, then id.
    let second = fx.hook(json!({"name": "Second"})).await;
    let third = fx
        .hook(json!({"name": "Third", "trigger_type": "record_deleted"}))
        .await;
    let listed = api.get(&fx.list()).await;
    assert_eq!(
        ids_in(listed.expect_ok(), "webhooks"),
        [wid.clone(), id(&second), id(&third)]
    );
    for hook in listed.body["webhooks"].as_array().unwrap() {
        assert_eq!(hook["secret"], "");
    }
    assert_eq!(second["table_id"], Value::Null, "database-wide by default");
    assert_eq!(second["payload_key"], "name");

    // PATCH: the reply is the stored webhook, secret blank.
    let r = api
        .patch(
            &path,
            json!({"name": "Renamed", "url": "http://127.0.0.1:9/other",
                   "trigger_type": "record_matches", "conditions": null,
                   "is_active": false, "payload_key": "name"}),
        )
        .await;
    let patched = r.expect_ok()["webhook"].clone();
    assert_eq!(patched["name"], "Renamed");
    assert_eq!(patched["url"], "http://127.0.0.1:9/other");
    assert_eq!(patched["trigger_type"], "record_matches");
    assert_eq!(patched["conditions"], Value::Null);
    assert_eq!(patched["is_active"], false);
    assert_eq!(patched["secret"], "");
    assert_eq!(api.get(&path).await.expect_ok()["webhook"], patched);

    // Regenerate: a new secret, shown once; the old one is gone from the row.
    let r = api.post(&format!("{path}/secret"), json!({})).await;
    let fresh = r.expect_ok()["webhook"]["secret"].clone();
    assert!(is_hex_secret(&fresh) && fresh != w["secret"], "{fresh}");
    let stored: String = database_postgres(&fx.db)
        .await
        .query_one("SELECT secret FROM webhooks WHERE id = $1", &[&wid])
        .await
        .unwrap()
        .get(0);
    assert_eq!(stored, fresh.as_str().unwrap());
    assert_eq!(api.get(&path).await.expect_ok()["webhook"]["secret"], "");

    // Delete.
    let r = api.delete(&path).await;
    assert_eq!(r.expect_ok(), &json!({"id": wid, "deleted": true}));
    for r in [
        api.get(&path).await,
        api.patch(&path, json!({"name": "x"})).await,
        api.delete(&path).await,
        api.post(&format!("{path}/secret"), json!({})).await,
    ] {
        r.expect_error(404, "not_found");
    }
    assert_eq!(
        ids_in(api.get(&fx.list()).await.expect_ok(), "webhooks"),
        [id(&second), id(&third)]
    );
}

#[tokio::test]
async fn roles_keys_and_routing() {
    let fx = Fx::new().await;
    let w = fx.hook(json!({"table_id": fx.tasks})).await;
    let path = format!("/api/webhooks/{}", id(&w));
    let list = fx.list();
    let writes = |api: Api| {
        let (path, list) = (path.clone(), list.clone());
        async move {
            vec![
                api.post(
                    &list,
                    json!({"url": LOCAL, "trigger_type": "record_created"}),
                )
                .await,
                api.patch(&path, json!({"name": "x"})).await,
                api.delete(&path).await,
                api.post(&format!("{path}/secret"), json!({})).await,
            ]
        }
    };

    // Viewers read, secret blank; every change is 403.
    let viewer = Person::member(&fx.db, Role::Viewer).await;
    assert_eq!(
        viewer.api.get(&path).await.expect_ok()["webhook"],
        hidden(w.clone())
    );
    assert_eq!(
        viewer.api.get(&list).await.expect_ok()["webhooks"],
        json!([hidden(w.clone())])
    );
    for r in writes(viewer.api.clone()).await {
        assert_eq!(r.expect_error(403, "forbidden"), forbidden::VIEWER);
    }

    // Support access reads; writes get its own message.
    let support = Person::new().await;
    cluster()
        .control_plane
        .grant_support(&fx.db, &support.user_id)
        .await
        .unwrap();
    assert_eq!(
        support.api.get(&path).await.expect_ok()["webhook"]["secret"],
        ""
    );
    support.api.get(&list).await.expect_ok();
    for r in writes(support.api.clone()).await {
        assert_eq!(
            r.expect_error(403, "forbidden"),
            forbidden::SUPPORT_READ_ONLY
        );
    }

    // A read-only key of the owner reads and may change nothing.
    let (_, read_only) = fx
        .owner
        .another_key(Access::ReadOnly, DatabaseScope::All)
        .await;
    read_only.get(&path).await.expect_ok();
    for r in writes(read_only).await {
        assert_eq!(r.expect_error(403, "forbidden"), forbidden::KEY_READ_ONLY);
    }

    // Non-members and keys narrowed away see 404, as for a missing id.
    let stranger = Person::new().await;
    let elsewhere = fx.owner.api.new_database("elsewhere").await;
    let (_, narrowed) = fx
        .owner
        .another_key(Access::ReadWrite, DatabaseScope::Only(vec![elsewhere]))
        .await;
    for api in [stranger.api.clone(), narrowed.clone()] {
        api.get(&path).await.expect_error(404, "not_found");
        api.get(&list).await.expect_error(404, "not_found");
        for r in writes(api).await {
            r.expect_error(404, "not_found");
        }
    }
    // Ids whose routing tag names no database, and malformed ids: 404.
    for bad in ["whk_zzzzz0000000", "whk_short", "whk_", "db_x"] {
        fx.api()
            .get(&format!("/api/webhooks/{bad}"))
            .await
            .expect_error(404, "not_found");
    }
    // A webhook id of another database the caller owns, under this one's
    // path tag, is not found either.
    let own_other = fx.owner.api.new_database("other").await;
    let foreign = fx
        .api()
        .post(
            &format!("/api/databases/{own_other}/webhooks"),
            json!({"url": LOCAL, "trigger_type": "record_created"}),
        )
        .await;
    let foreign_id = id(&foreign.expect_ok()["webhook"]);
    let spliced = format!("whk_{}{}", &fx.db[3..8], &foreign_id[9..]);
    fx.api()
        .get(&format!("/api/webhooks/{spliced}"))
        .await
        .expect_error(404, "not_found");

    // Editors manage; the owner may too.
    let editor = Person::member(&fx.db, Role::Editor).await;
    let made = editor
        .api
        .post(
            &list,
            json!({"url": LOCAL, "trigger_type": "record_deleted"}),
        )
        .await;
    assert!(is_hex_secret(&made.expect_ok()["webhook"]["secret"]));
    editor
        .api
        .patch(&path, json!({"name": "by editor"}))
        .await
        .expect_ok();
    let r = editor.api.post(&format!("{path}/secret"), json!({})).await;
    assert!(is_hex_secret(&r.expect_ok()["webhook"]["secret"]));
    editor.api.delete(&path).await.expect_ok();
}
