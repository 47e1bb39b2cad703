//! Rules across costumes: names, the display field, the writable listing,
//! `unique` indexes, the cap of 500 fields, and roles on field routes.

use cluster_protocol::control::Role;
use e2e_tests::Person;
use serde_json::{json, Value};

use super::{id, Db, VIEWER_REFUSAL};

#[tokio::test]
async fn names_are_trimmed_on_create_and_unique_per_table() {
    let d = Db::new().await;
    let tid = d.table("T").await;
    let other = d.table("U").await;
    let a = d
        .field(
            &tid,
            json!({"name": "  Title\t", "type": "single_line_text"}),
        )
        .await;
    assert_eq!(a["name"], "Title");
    assert_eq!(a["position"], 0);
    let msg = d
        .create(&tid, json!({"name": " Title ", "type": "number"}))
        .await
        .expect_error(409, "conflict");
    assert!(msg.contains("Title"), "{msg}");
    // Same name on another table is fine; names are case-sensitive.
    d.field(&other, json!({"name": "Title", "type": "number"}))
        .await;
    let b = d
        .field(&tid, json!({"name": "title", "type": "number"}))
        .await;
    assert_eq!(b["position"], 1);
    // Rename: not trimmed, only uniqueness; empty string allowed.
    let r = d.patch(&id(&b), json!({"name": " Padded "})).await;
    assert_eq!(r.expect_ok()["field"]["name"], " Padded ");
    d.patch(&id(&b), json!({"name": "Title"}))
        .await
        .expect_error(409, "conflict");
    let r = d.patch(&id(&b), json!({"name": ""})).await;
    assert_eq!(r.expect_ok()["field"]["name"], "");
    // Renaming to its own name is not a clash.
    d.patch(&id(&a), json!({"name": "Title"})).await.expect_ok();
    let names: Vec<Value> = d
        .fields(&tid)
        .await
        .iter()
        .map(|f| f["name"].clone())
        .collect();
    assert_eq!(names, vec![json!("Title"), json!("")]);
}

#[tokio::test]
async fn display_field_is_the_first_field_that_can_name_a_record() {
    let d = Db::new().await;
    let other = d.table("Other").await;
    let tid = d.table("T").await;
    assert_eq!(d.get_table(&tid).await["display_field_id"], Value::Null);
    for (name, ty, options) in [
        ("Done", "checkbox", json!({})),
        ("Files", "attachment", json!({})),
        ("Go", "button", json!({"url_template": "https://x.test"})),
        ("Other", "link", json!({"target_table_id": other})),
    ] {
        d.field(&tid, json!({"name": name, "type": ty, "options": options}))
            .await;
        assert_eq!(
            d.get_table(&tid).await["display_field_id"],
            Value::Null,
            "{ty} cannot name a record"
        );
    }
    // The mirror (a link) did not make itself the other table's display field.
    assert_eq!(d.get_table(&other).await["display_field_id"], Value::Null);
    let number = d.field(&tid, json!({"name": "N", "type": "number"})).await;
    assert_eq!(d.get_table(&tid).await["display_field_id"], number["id"]);
    d.field(&tid, json!({"name": "Title", "type": "single_line_text"}))
        .await;
    assert_eq!(
        d.get_table(&tid).await["display_field_id"],
        number["id"],
        "only the first one"
    );
    // A formula can name a record.
    let f = d
        .field(
            &other,
            json!({"name": "F", "type": "formula", "options": {"expression": "'x'"}}),
        )
        .await;
    assert_eq!(d.get_table(&other).await["display_field_id"], f["id"]);
}

#[tokio::test]
async fn writable_listing_omits_computed_fields_and_aliases_choices() {
    let d = Db::new().await;
    let other = d.table("Other").await;
    let tid = d.table("T").await;
    let text = d
        .field(&tid, json!({"name": "Text", "type": "single_line_text"}))
        .await;
    let pick = d
        .field(&tid, json!({"name": "Pick", "type": "single_select", "options": {"choices": [{"name": "A", "color": "rose"}]}}))
        .await;
    let tags = d.field(&tid, json!({"name": "Tags", "type": "multi_select", "options": {"choices": [{"name": "x"}]}})).await;
    let link = d
        .field(
            &tid,
            json!({"name": "Other", "type": "link", "options": {"target_table_id": other}}),
        )
        .await;
    d.field(&tid, json!({"name": "Files", "type": "attachment"}))
        .await;
    d.field(
        &tid,
        json!({"name": "Go", "type": "button", "options": {"url_template": "https://x.test"}}),
    )
    .await;
    d.field(
        &tid,
        json!({"name": "F", "type": "formula", "options": {"expression": "{Text}"}}),
    )
    .await;
    d.field(&tid, json!({"name": "L", "type": "lookup", "options": {"link_field_id": id(&link), "target_field_id": link["options"]["pair_field_id"]}})).await;
    d.field(&tid, json!({"name": "R", "type": "rollup", "options": {"link_field_id": id(&link), "aggregation": "count"}})).await;

    let all = d.fields(&tid).await;
    assert_eq!(all.len(), 9);
    assert!(all[1]["options"]["choices"][0].get("label").is_none());
    for q in ["writable=1", "writable=TRUE", "writable=yes"] {
        let r = d
            .owner
            .api
            .get(&format!("/api/tables/{tid}/fields?{q}"))
            .await;
        assert_eq!(
            r.expect_ok()["fields"].as_array().unwrap().len(),
            9,
            "{q} has no effect"
        );
    }
    let viewer = Person::member(&d.id, Role::Viewer).await;
    let r = viewer
        .api
        .get(&format!("/api/tables/{tid}/fields?writable=true"))
        .await;
    let writable = r.expect_ok()["fields"].as_array().unwrap().clone();
    let ids: Vec<Value> = writable.iter().map(|f| f["id"].clone()).collect();
    assert_eq!(
        ids,
        vec![
            text["id"].clone(),
            pick["id"].clone(),
            tags["id"].clone(),
            link["id"].clone()
        ]
    );
    let choice = &writable[1]["options"]["choices"][0];
    assert_eq!(choice["label"], "A");
    assert_eq!(choice["value"], choice["id"]);
    assert_eq!(choice["color"], "rose");
    assert_eq!(writable[2]["options"]["choices"][0]["label"], "x");
    assert!(writable.iter().all(|f| f["operators"].is_array()));
    // The mirror is listed on the other table, writable too.
    let r = viewer
        .api
        .get(&format!("/api/tables/{other}/fields?writable=true"))
        .await;
    assert_eq!(
        r.expect_ok()["fields"][0]["id"],
        link["options"]["pair_field_id"]
    );
}

#[tokio::test]
async fn unique_builds_a_partial_index_for_exactly_the_listed_costumes() {
    let d = Db::new().await;
    let tid = d.table("T").await;
    let indexed = [
        "single_line_text",
        "email",
        "phone",
        "url",
        "number",
        "currency",
        "percent",
        "date",
        "single_select",
    ];
    let inert = [
        "long_text",
        "rating",
        "duration",
        "checkbox",
        "member",
        "multi_member",
        "multi_select",
        "attachment",
    ];
    let mut made = Vec::new();
    for costume in indexed.iter().chain(inert.iter()) {
        let f = d
            .field(
                &tid,
                json!({"name": costume, "type": costume, "options": {"unique": true}}),
            )
            .await;
        assert_eq!(f["options"]["unique"], true, "stored on {costume}");
        let idx = d.indexes_on(&tid, &id(&f)).await;
        if indexed.contains(costume) {
            assert_eq!(idx.len(), 1, "{costume}: {idx:?}");
            assert!(idx[0].starts_with("CREATE UNIQUE INDEX"), "{idx:?}");
            assert!(
                idx[0].contains("WHERE (deleted_at IS NULL)"),
                "partial over live records: {idx:?}"
            );
        } else {
            assert!(idx.is_empty(), "{costume} is inert: {idx:?}");
        }
        made.push((costume.to_string(), id(&f)));
    }
    let date_time = d.field(&tid, json!({"name": "dt", "type": "date", "options": {"unique": true, "include_time": true}})).await;
    assert_eq!(d.indexes_on(&tid, &id(&date_time)).await.len(), 1);
    let plain = d
        .field(&tid, json!({"name": "plain", "type": "single_line_text"}))
        .await;
    assert!(d.indexes_on(&tid, &id(&plain)).await.is_empty());

    // The index holds through the records path: a live duplicate is refused,
    // a trashed one does not count.
    let first = d
        .records(
            &tid,
            vec![json!({"single_line_text": "same", "long_text": "dup"})],
        )
        .await;
    let r = d
        .owner
        .api
        .post(
            &format!("/api/tables/{tid}/records"),
            json!({"records": [{"fields": {"single_line_text": "same"}}]}),
        )
        .await;
    assert_eq!(r.status, 400, "{}", r.body);
    d.records(&tid, vec![json!({"long_text": "dup"})]).await; // inert unique
    let rid = id(&first[0]);
    let r = d
        .owner
        .api
        .delete(&format!("/api/tables/{tid}/records?records={rid}"))
        .await;
    r.expect_ok();
    d.records(&tid, vec![json!({"single_line_text": "same"})])
        .await;

    // Frozen: cannot be added or removed; omitting it keeps it (and the index).
    let (_, text_id) = &made[0];
    let msg = d
        .patch(text_id, json!({"options": {"unique": false}}))
        .await
        .expect_error(400, "bad_request");
    assert!(msg.contains("unique"), "{msg}");
    d.patch(&id(&plain), json!({"options": {"unique": true}}))
        .await
        .expect_error(400, "bad_request");
    let r = d.patch(text_id, json!({"options": {}})).await;
    assert_eq!(r.expect_ok()["field"]["options"]["unique"], true);
    assert_eq!(d.indexes_on(&tid, text_id).await.len(), 1);
    d.patch(text_id, json!({"options": {"unique": true}}))
        .await
        .expect_ok();
    // include_time is frozen the same way.
    let msg = d
        .patch(&id(&date_time), json!({"options": {"include_time": false}}))
        .await
        .expect_error(400, "bad_request");
    assert!(msg.contains("include_time"), "{msg}");
    let (_, date_id) = made.iter().find(|(c, _)| c == "date").unwrap();
    d.patch(date_id, json!({"options": {"include_time": true}}))
        .await
        .expect_error(400, "bad_request");
    assert_eq!(d.column_type(&tid, date_id).await.as_deref(), Some("date"));
}

#[tokio::test]
async fn cap_of_500_fields_counts_a_link_on_both_tables() {
    let d = Db::new().await;
    let full = d.table("Full").await;
    let roomy = d.table("Roomy").await;
    // 499 fields through the API would spend most of a key's minute; the
    // catalog rows are added directly (buttons: no column), then the edge
    // is crossed through the API.
    let tag = &d.id[3..8];
    d.pg.execute(
        "INSERT INTO fields (id, table_id, database_id, name, type, options, position)
         SELECT 'fld_' || $3 || lpad(g::text, 7, '0'), $1, $2, 'B' || g, 'button',
                '{\"label\": \"B\", \"action\": \"link\", \"url_template\": \"https://x.test\"}', g
         FROM generate_series(1, 499) g",
        &[&full, &d.id, &tag],
    )
    .await
    .unwrap();
    d.bump_schema_version().await;
    assert_eq!(d.fields(&full).await.len(), 499);
    // A link from the roomy table into the table with 499 fields needs two
    // slots... no: one on each table. It fits once.
    let l = d
        .field(
            &roomy,
            json!({"name": "Full", "type": "link", "options": {"target_table_id": full}}),
        )
        .await;
    assert_eq!(d.fields(&full).await.len(), 500);
    // 501st: 400 naming the number, on either table and through a link.
    let msg = d
        .create(&full, json!({"name": "N", "type": "number"}))
        .await
        .expect_error(400, "bad_request");
    assert!(msg.contains("500"), "{msg}");
    let msg = d
        .create(&roomy, json!({"name": "Again", "type": "link", "options": {"target_table_id": full, "reverse_field_name": "R2"}}))
        .await
        .expect_error(400, "bad_request");
    assert!(msg.contains("500"), "{msg}");
    d.create(&full, json!({"name": "Out", "type": "link", "options": {"target_table_id": roomy, "reverse_field_name": "Out"}}))
        .await
        .expect_error(400, "bad_request");
    assert_eq!(d.fields(&roomy).await.len(), 1, "nothing half-made");
    // Deleting one frees a slot.
    d.delete(&id(&l)).await.expect_ok();
    // A self-link needs two slots on the same table: 499 + 2 is too many.
    let msg = d
        .create(&full, json!({"name": "Me", "type": "link", "options": {"target_table_id": full, "reverse_field_name": "Also me"}}))
        .await
        .expect_error(400, "bad_request");
    assert!(msg.contains("500"), "{msg}");
    d.field(&full, json!({"name": "N", "type": "number"})).await;
}

#[tokio::test]
async fn roles_on_field_routes() {
    let d = Db::new().await;
    let tid = d.table("T").await;
    let f = d.field(&tid, json!({"name": "N", "type": "number"})).await;
    let viewer = Person::member(&d.id, Role::Viewer).await;
    let editor = Person::member(&d.id, Role::Editor).await;
    let stranger = Person::new().await;
    let path = format!("/api/tables/{tid}/fields");
    let fid = id(&f);
    let msg = viewer
        .api
        .post(&path, json!({"name": "X", "type": "number"}))
        .await
        .expect_error(403, "forbidden");
    assert_eq!(msg, VIEWER_REFUSAL);
    let msg = viewer
        .api
        .patch(&format!("/api/fields/{fid}"), json!({"name": "Y"}))
        .await
        .expect_error(403, "forbidden");
    assert_eq!(msg, VIEWER_REFUSAL);
    let msg = viewer
        .api
        .delete(&format!("/api/fields/{fid}"))
        .await
        .expect_error(403, "forbidden");
    assert_eq!(msg, VIEWER_REFUSAL);
    assert_eq!(
        viewer.api.get(&path).await.expect_ok()["fields"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    for r in [
        stranger.api.get(&path).await,
        stranger
            .api
            .post(&path, json!({"name": "X", "type": "number"}))
            .await,
        stranger
            .api
            .patch(&format!("/api/fields/{fid}"), json!({"name": "Y"}))
            .await,
        stranger.api.delete(&format!("/api/fields/{fid}")).await,
    ] {
        r.expect_error(404, "not_found");
    }
    let read_only = d
        .owner
        .another_key(
            cluster_protocol::control::Access::ReadOnly,
            cluster_protocol::control::DatabaseScope::All,
        )
        .await
        .1;
    let msg = read_only
        .post(&path, json!({"name": "X", "type": "number"}))
        .await
        .expect_error(403, "forbidden");
    assert_eq!(msg, "This API key is read-only.");
    // An editor may create, update and delete fields.
    let e = editor
        .api
        .post(&path, json!({"name": "E", "type": "number"}))
        .await;
    let eid = id(&e.expect_ok()["field"]);
    editor
        .api
        .patch(&format!("/api/fields/{eid}"), json!({"name": "E2"}))
        .await
        .expect_ok();
    editor
        .api
        .delete(&format!("/api/fields/{eid}"))
        .await
        .expect_ok();
    // Missing ids: 404.
    d.patch("fld_nosuchfield", json!({"name": "x"}))
        .await
        .expect_error(404, "not_found");
    d.delete(&format!("fld_{}0000000", &d.id[3..8]))
        .await
        .expect_error(404, "not_found");
}
