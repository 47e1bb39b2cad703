//! Part B "Webhooks", the configuration routes, through the router: create,
//! list, get, update, delete and regenerate; the secret shown once; roles,
//! keys and routing; every save-time rule; what a change does to the
//! match memory; the cascades of table and field deletes.

use cluster_protocol::control::{Access, DatabaseScope, Role};
use cluster_protocol::error::forbidden;
use e2e_tests::{cluster, database_postgres, id, ids_in, Api, Person};
use serde_json::{json, Value};

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

#[tokio::test]
async fn bodies_are_checked_key_by_key() {
    let fx = Fx::new().await;
    let api = fx.api();
    let list = fx.list();
    let bad = |status: u16, raw: &'static str| {
        let list = list.clone();
        async move {
            let r = api.post_raw(&list, raw).await;
            r.expect_error(
                status,
                if status == 400 {
                    "bad_request"
                } else {
                    "not_found"
                },
            )
        }
    };
    assert_eq!(bad(400, "{nope").await, "Request body must be valid JSON.");
    assert_eq!(bad(400, "[1]").await, "Request body must be a JSON object.");
    assert_eq!(bad(400, "").await, "Request body must be valid JSON.");

    let create = |body: Value| {
        let list = list.clone();
        async move { api.post(&list, body).await.expect_error(400, "bad_request") }
    };
    let base = |extra: Value| {
        let mut b = json!({"url": LOCAL, "trigger_type": "record_updated", "table_id": fx.tasks});
        b.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        b
    };
    assert_eq!(
        create(json!({"trigger_type": "record_created"})).await,
        "url is required."
    );
    assert!(create(json!({"url": LOCAL}))
        .await
        .starts_with("trigger_type is required"));
    for (extra, starts) in [
        (json!({"secret": "s"}), "Unknown key 'secret'"),
        (json!({"resume": true}), "Unknown key 'resume'"),
        (json!({"url": 3}), "url must be a string, not a number."),
        (
            json!({"trigger_type": "record_changed"}),
            "Unknown trigger_type 'record_changed'",
        ),
        (
            json!({"trigger_type": ["record_created"]}),
            "trigger_type must be a string",
        ),
        (
            json!({"payload_key": "fields"}),
            "Unknown payload_key 'fields'",
        ),
        (json!({"name": 1}), "name must be a string"),
        (
            json!({"name": "n".repeat(256)}),
            "name may be at most 255 characters",
        ),
        (json!({"table_id": 5}), "table_id must be a string or null"),
        (
            json!({"is_active": "false"}),
            "is_active must be true or false",
        ),
        (
            json!({"conditions": "{}"}),
            "conditions must be a filter object",
        ),
        (
            json!({"watched_field_ids": "Title"}),
            "watched_field_ids must be a list",
        ),
        (
            json!({"watched_field_ids": [1]}),
            "watched_field_ids[0] must be a field id",
        ),
        (
            json!({"url": format!("http://127.0.0.1/{}", "a".repeat(2048))}),
            "url may be at most 2048 characters",
        ),
    ] {
        let m = create(base(extra.clone())).await;
        assert!(m.starts_with(starts), "{extra}: {m}");
    }
    // PATCH: at least one key, the same checks, and resume/is_active types.
    let w = fx.hook(json!({})).await;
    let path = format!("/api/webhooks/{}", id(&w));
    let m = api
        .patch(&path, json!({}))
        .await
        .expect_error(400, "bad_request");
    assert!(m.starts_with("Send at least one of"), "{m}");
    for (body, starts) in [
        (json!({"resume": "yes"}), "resume must be true or false"),
        (json!({"created_at": "x"}), "Unknown key 'created_at'"),
        (
            json!({"trigger_type": null}),
            "trigger_type must be a string, not null.",
        ),
        (json!({"url": null}), "url must be a string, not null."),
    ] {
        let m = api
            .patch(&path, body.clone())
            .await
            .expect_error(400, "bad_request");
        assert!(m.starts_with(starts), "{body}: {m}");
    }
    let m = api
        .patch_raw(&path, "{\"name\": ")
        .await
        .expect_error(400, "bad_request");
    assert_eq!(m, "Request body must be valid JSON.");
    // Nothing was saved by any of it.
    assert_eq!(
        ids_in(api.get(&list).await.expect_ok(), "webhooks"),
        [id(&w)]
    );
    assert_eq!(api.get(&path).await.expect_ok()["webhook"], hidden(w));
}

#[tokio::test]
async fn tables_conditions_and_watches_are_checked_against_the_schema() {
    let fx = Fx::new().await;
    let api = fx.api();
    let create = |extra: Value| {
        let mut b = json!({"url": LOCAL, "trigger_type": "record_updated", "table_id": fx.tasks});
        b.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        let list = fx.list();
        async move { api.post(&list, b).await }
    };
    let refused =
        |extra: Value| async move { create(extra).await.expect_error(400, "bad_request") };

    // table_id: a table of this database, else 404 (whether it names
    // nothing or a table of another database the caller can see).
    let mine_elsewhere = api.new_database("else").await;
    let foreign_table = id(&api.create_table(&mine_elsewhere, "Foreign").await);
    for t in ["tbl_AAAAAAAAAAAA", foreign_table.as_str()] {
        create(json!({ "table_id": t }))
            .await
            .expect_error(404, "not_found");
    }

    // conditions: the record filter compiler, against Tasks.
    let cond = |c: Value| json!({ "conditions": c });
    for (c, starts) in [
        (
            json!({"conditions": [{"field": "Nope", "op": "is", "value": "x"}]}),
            "conditions.conditions[0].field: ",
        ),
        (
            json!({"conditions": [{"field": "Count", "op": "contains", "value": "x"}]}),
            "conditions.conditions[0].op: Operator 'contains' does not apply",
        ),
        (
            json!({"conditions": [{"field": "Count", "op": "is", "value": "2"}]}),
            "conditions.conditions[0].value: ",
        ),
        (
            json!({"conditions": [{"field": "Ping", "op": "is", "value": "x"}]}),
            "conditions.conditions[0].op: ",
        ),
        (json!({"join": "xor"}), "conditions.join: "),
        (
            json!({"conditions": [{"field": "Codes", "op": "contains", "value": "a"}]}),
            "conditions.conditions[0].field: field 'Codes' is a lookup_text; lookup and rollup",
        ),
        (
            json!({"conditions": [{"conditions": [
                {"field": "Line count", "op": "greater", "value": 1}]}]}),
            "conditions.conditions[0].conditions[0].field: field 'Line count' is a rollup_number",
        ),
        (
            json!({"conditions": [{"conditions": [{"conditions": [
                {"field": "Title", "op": "empty"}]}]}]}),
            "conditions.conditions[0].conditions[0]: Filters nest at most 2 levels deep.",
        ),
        (
            json!({"conditions": vec![json!({"field": "Title", "op": "empty"}); 200]}),
            "conditions.conditions[199]: A filter may have at most 200 nodes",
        ),
        (
            json!({"conditions": [{"field": "Due", "op": "before",
                                   "value": {"relative": "yesterday"}}]}),
            "conditions.conditions[0].value",
        ),
    ] {
        let m = refused(cond(c.clone())).await;
        assert!(m.starts_with(starts), "{c}: {m}");
    }
    let ok = create(cond(json!({"conditions": [
        {"field": "Double", "op": "greater", "value": 1},
        {"field": "Due", "op": "on_or_before", "value": {"relative": "today", "offset": 3}},
        {"conditions": vec![json!({"field": "Title", "op": "empty"}); 196]},
    ]})))
    .await;
    ok.expect_ok();
    let m = refused(json!({"table_id": null, "conditions": {"conditions": []}})).await;
    assert!(m.starts_with("conditions need a specific table_id"), "{m}");

    // watched_field_ids: fields of the table a write can touch.
    for (w, starts) in [
        (
            json!(["Nope"]),
            "watched_field_ids[0]: unknown field 'Nope' in table 'Tasks'.",
        ),
        (
            json!(["Title", "Double"]),
            "watched_field_ids[1]: field 'Double' is a formula_number",
        ),
        (
            json!(["Codes"]),
            "watched_field_ids[0]: field 'Codes' is a lookup_text",
        ),
        (
            json!(["Line count"]),
            "watched_field_ids[0]: field 'Line count' is a rollup_number",
        ),
        (
            json!(["Ping"]),
            "watched_field_ids[0]: field 'Ping' is a button",
        ),
    ] {
        let m = refused(json!({ "watched_field_ids": w })).await;
        assert!(m.starts_with(starts), "{m}");
    }
    let m = refused(json!({"table_id": null, "watched_field_ids": ["Title"]})).await;
    assert!(
        m.starts_with("watched_field_ids need a specific table_id"),
        "{m}"
    );
    let w = create(json!({"watched_field_ids": ["Lines", fx.f["Title"], "Title"]})).await;
    assert_eq!(
        w.expect_ok()["webhook"]["watched_field_ids"],
        json!([fx.f["Lines"], fx.f["Title"]])
    );
    for empty in [json!([]), Value::Null] {
        let w = create(json!({"table_id": null, "watched_field_ids": empty.clone()})).await;
        assert_eq!(w.expect_ok()["webhook"]["watched_field_ids"], empty);
    }

    // An update is checked the same way, against what it would leave.
    let hook = create(cond(
        json!({"conditions": [{"field": "Title", "op": "empty"}]}),
    ))
    .await
    .expect_ok()["webhook"]
        .clone();
    let path = format!("/api/webhooks/{}", id(&hook));
    let m = api
        .patch(&path, json!({"table_id": fx.other}))
        .await
        .expect_error(400, "bad_request");
    assert!(m.starts_with("conditions.conditions[0].field: "), "{m}");
    let m = api
        .patch(&path, json!({"table_id": null}))
        .await
        .expect_error(400, "bad_request");
    assert!(m.starts_with("conditions need a specific table_id"), "{m}");
    api.patch(&path, json!({"table_id": "tbl_AAAAAAAAAAAA"}))
        .await
        .expect_error(404, "not_found");
    let moved = api
        .patch(
            &path,
            json!({"table_id": fx.other, "conditions": {"conditions": [
                {"field": "Code", "op": "is", "value": "A-1"}]}}),
        )
        .await;
    assert_eq!(moved.expect_ok()["webhook"]["table_id"], fx.other.as_str());
    assert_eq!(api.get(&path).await.expect_ok()["webhook"]["secret"], "");
}

#[tokio::test]
async fn urls_are_checked_at_save() {
    let fx = Fx::new().await;
    let api = fx.api();
    // The test cluster allows the loopback ranges (the dev-cluster default).
    for url in [
        "http://127.0.0.1:9/",
        "http://[::1]:9/x",
        "http://localhost:9/y",
    ] {
        let w = fx.hook(json!({ "url": url })).await;
        assert!(w["url"].as_str().unwrap().starts_with("http://"), "{w}");
    }
    for (url, starts) in [
        ("http://10.0.0.1/", "url: 10.0.0.1 is a private address"),
        ("https://10.0.0.1/", "url: 10.0.0.1 is a private address"),
        (
            "http://169.254.169.254/latest/meta-data",
            "url: 169.254.169.254 is a link-local",
        ),
        (
            "https://[::ffff:a9fe:a9fe]/",
            "url: ::ffff:169.254.169.254 is a link-local",
        ),
        (
            "http://100.64.0.1/",
            "url: 100.64.0.1 is a shared (CGNAT) address",
        ),
        (
            "ftp://127.0.0.1/",
            "url: the URL scheme must be http or https",
        ),
        ("127.0.0.1:9", "url: "),
        ("http://", "url: it is not a URL"),
    ] {
        let r = api
            .post(
                &fx.list(),
                json!({"url": url, "trigger_type": "record_created"}),
            )
            .await;
        let m = r.expect_error(400, "bad_request");
        assert!(m.starts_with(starts), "{url}: {m}");
    }
    let w = fx.hook(json!({})).await;
    let path = format!("/api/webhooks/{}", id(&w));
    let m = api
        .patch(&path, json!({"url": "http://192.168.1.1/"}))
        .await
        .expect_error(400, "bad_request");
    assert!(
        m.starts_with("url: 192.168.1.1 is a private address"),
        "{m}"
    );
    assert_eq!(api.get(&path).await.expect_ok()["webhook"]["url"], LOCAL);
}

#[tokio::test]
async fn a_database_has_at_most_100_webhooks() {
    let owner = Person::new().await;
    let db = owner.api.new_database("cap").await;
    let list = format!("/api/databases/{db}/webhooks");
    for _ in 0..100 {
        owner
            .api
            .post(
                &list,
                json!({"url": LOCAL, "trigger_type": "record_created"}),
            )
            .await
            .expect_ok();
    }
    let m = owner
        .api
        .post(
            &list,
            json!({"url": LOCAL, "trigger_type": "record_created"}),
        )
        .await
        .expect_error(400, "bad_request");
    assert!(m.contains("at most 100 webhooks"), "{m}");
    let listed = owner.api.get(&list).await;
    assert_eq!(
        listed.expect_ok()["webhooks"].as_array().unwrap().len(),
        100
    );
}

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
