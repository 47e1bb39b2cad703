//! Save-time checks through the router: bodies key by key, the table,
//! conditions and watched fields against the schema, URLs against the
//! egress guard, the per-database ceiling.

use e2e_tests::{id, ids_in, Person};
use serde_json::{json, Value};

use super::{hidden, Fx, LOCAL};
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
        ("http://10.0.0.1/", "url: refused: not a public address"),
        ("https://10.0.0.1/", "url: refused: not a public address"),
        (
            "http://169.254.169.254/latest/meta-data",
            "url: refused: not a public address",
        ),
        (
            "https://[::ffff:a9fe:a9fe]/",
            "url: refused: not a public address",
        ),
        ("http://100.64.0.1/", "url: refused: not a public address"),
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
    assert!(m.starts_with("url: refused: not a public address"), "{m}");
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
