//! Issue 13, section 4: requests that answered 500 (or a refusal outside
//! the envelope) answer the envelope with a 4xx naming what is wrong, and
//! write nothing: NUL characters in names, text and addresses, dates out
//! of range, text longer than a btree entry in a sorted or unique field,
//! and the framework's own refusals.

use e2e_tests::{database_postgres, id, Api};
use rand::Rng;
use serde_json::json;

use crate::fixtures::{fixture, rec_ids, urlencode};

const NUL: &str = "a\u{0}b";

/// Asserts a 400 envelope whose message names `what` and the NUL rule.
#[track_caller]
fn refused_for_nul(r: &e2e_tests::Reply, what: &str) {
    let msg = r.expect_error(400, "bad_request");
    assert!(
        msg.contains(what) && msg.contains("NUL"),
        "message should name {what} and the NUL rule: {msg}"
    );
}

/// Text no compression shrinks: `n` random printable characters.
fn incompressible(n: usize) -> String {
    let mut r = rand::thread_rng();
    (0..n)
        .map(|_| char::from(b'!' + r.gen_range(0..94u8)))
        .collect()
}

#[tokio::test]
async fn a_nul_in_a_name_is_refused_on_every_route_and_nothing_is_written() {
    let fx = fixture().await;
    let api = &fx.person.api;

    // Databases: create and rename.
    let before = api.get("/api/databases").await.expect_ok()["databases"]
        .as_array()
        .unwrap()
        .len();
    refused_for_nul(
        &api.post("/api/databases", json!({"name": NUL})).await,
        "name",
    );
    let after = api.get("/api/databases").await.expect_ok()["databases"]
        .as_array()
        .unwrap()
        .len();
    assert_eq!(before, after, "no database was created");
    let db_path = format!("/api/databases/{}", fx.db);
    refused_for_nul(&api.patch(&db_path, json!({"name": NUL})).await, "name");

    // Tables: create and rename.
    let tables_path = format!("/api/databases/{}/tables", fx.db);
    let tables = api.get(&tables_path).await.expect_ok().clone();
    refused_for_nul(&api.post(&tables_path, json!({"name": NUL})).await, "name");
    let table_path = format!("/api/tables/{}", fx.tasks);
    refused_for_nul(&api.patch(&table_path, json!({"name": NUL})).await, "name");
    assert_eq!(api.get(&tables_path).await.expect_ok(), &tables);

    // Fields: create, rename, options (choice names).
    let fields_path = format!("/api/tables/{}/fields", fx.tasks);
    let fields = api.get(&fields_path).await.expect_ok().clone();
    refused_for_nul(
        &api.post(&fields_path, json!({"name": NUL, "type": "number"}))
            .await,
        "name",
    );
    refused_for_nul(
        &api.post(
            &fields_path,
            json!({"name": "Mood", "type": "single_select", "options": {"choices": [{"name": NUL}]}}),
        )
        .await,
        "options.choices[0].name",
    );
    let title = format!("/api/fields/{}", fx.f["Title"]);
    refused_for_nul(&api.patch(&title, json!({"name": NUL})).await, "name");
    let status = format!("/api/fields/{}", fx.f["Status"]);
    refused_for_nul(
        &api.patch(
            &status,
            json!({"options": {"choices": [{"name": "To do"}, {"name": NUL}]}}),
        )
        .await,
        "options.choices[1].name",
    );
    assert_eq!(api.get(&fields_path).await.expect_ok(), &fields);

    // Views: create and rename, and a NUL inside a view's config.
    let views_path = format!("/api/tables/{}/views", fx.tasks);
    refused_for_nul(&api.post(&views_path, json!({"name": NUL})).await, "name");
    refused_for_nul(
        &api.post(&views_path, json!({"name": "V", "config": {"note": NUL}}))
            .await,
        "config.note",
    );
    let v = api.post(&views_path, json!({"name": "Grid"})).await;
    let view_path = format!("/api/views/{}", id(&v.expect_ok()["view"]));
    refused_for_nul(&api.patch(&view_path, json!({"name": NUL})).await, "name");
    let views = api.get(&views_path).await.expect_ok()["views"].clone();
    assert_eq!(views.as_array().unwrap().len(), 1);
    assert_eq!(views[0]["name"], "Grid");
}

#[tokio::test]
async fn a_nul_in_cell_text_filters_and_addresses_is_refused() {
    let fx = fixture().await;
    let api = &fx.person.api;
    let path = fx.records();
    let before = rec_ids(&fx.list("").await);
    refused_for_nul(
        &api.post(
            &path,
            json!({"records": [{"fields": {"Note": "ok"}}, {"fields": {"Note": NUL}}]}),
        )
        .await,
        "records[1].fields.Note",
    );
    refused_for_nul(
        &api.patch(
            &path,
            json!({"records": [{"id": fx.r[0], "fields": {"Title": NUL}}]}),
        )
        .await,
        "Title",
    );
    assert_eq!(rec_ids(&fx.list("").await), before, "nothing written");
    let r0 = fx.person.api.get(&format!("{path}/{}", fx.r[0])).await;
    assert_eq!(r0.expect_ok()["record"]["fields"]["Title"], "Write spec");

    // The query string: named by its parameter; a path segment: not found.
    refused_for_nul(&api.get(&format!("{path}?search=x%00y")).await, "search");
    refused_for_nul(
        &api.post(&format!("{path}/list"), json!({"search": NUL}))
            .await,
        "search",
    );
    api.get(&format!("{path}/rec_%00"))
        .await
        .expect_error(404, "not_found");
}

#[tokio::test]
async fn dates_outside_years_1_to_9999_are_refused_naming_the_field() {
    let fx = fixture().await;
    let api = &fx.person.api;
    let at = id(&api
        .create_field(
            &fx.tasks,
            json!({"name": "At", "type": "date", "options": {"include_time": true}}),
        )
        .await);
    let path = fx.records();
    let before = rec_ids(&fx.list("").await);
    for (cells, field) in [
        (json!({"Due": "0000-01-01"}), "Due"),
        (json!({"Due": "0000-12-31"}), "Due"),
        (json!({"At": "0000-06-01T10:00:00Z"}), "At"),
        // Year 1 at +14:00 is still year 0 in UTC.
        (json!({"At": "0001-01-01T00:00+14:00"}), "At"),
        (json!({"At": "9999-12-31T23:59-14:00"}), "At"),
    ] {
        let r = api
            .post(&path, json!({"records": [{"fields": cells}]}))
            .await;
        let msg = r.expect_error(400, "bad_request");
        assert!(msg.contains(field) && msg.contains("0001-01-01"), "{msg}");
    }
    assert_eq!(rec_ids(&fx.list("").await), before, "nothing written");
    // The edges themselves are dates.
    let r = api
        .post(
            &path,
            json!({"records": [{"fields": {"Due": "0001-01-01", "At": "9999-12-31T23:59:59Z"}}, {"fields": {"Due": "9999-12-31"}}]}),
        )
        .await;
    let made = r.expect_ok()["records"].clone();
    assert_eq!(made[0]["fields"]["Due"], "0001-01-01");
    assert_eq!(made[1]["fields"]["Due"], "9999-12-31");
    let _ = at;
}

#[tokio::test]
async fn long_text_in_a_view_sorted_field_is_stored_and_the_sort_uses_the_index() {
    let fx = fixture().await;
    let api = &fx.person.api;
    let views = format!("/api/tables/{}/views", fx.tasks);
    let v = api
        .post(
            &views,
            json!({"name": "By note", "config": {"sorts": [{"fieldId": fx.f["Note"], "dir": "asc"}]}}),
        )
        .await;
    let vid = id(&v.expect_ok()["view"]);
    // 4,000 incompressible characters: more than a btree entry holds.
    let long = incompressible(4000);
    let r = api
        .post(
            &fx.records(),
            json!({"records": [{"fields": {"Title": "long", "Note": long}}]}),
        )
        .await;
    let rid = rec_ids(r.expect_ok())[0].clone();
    let page = fx.list(&format!("view={vid}&page_size=100")).await;
    assert!(rec_ids(&page).contains(&rid));
    // The view's index is on the prefix, and a sorted read uses it.
    let pg = database_postgres(&fx.db).await;
    let index = format!("{}_sort_prefix", fx.f["Note"]);
    let def: String = pg
        .query_one(
            "SELECT indexdef FROM pg_indexes WHERE schemaname = $1 AND indexname = $2",
            &[&fx.db, &index],
        )
        .await
        .expect("the view's sort index exists")
        .get(0);
    assert!(def.contains("left\"("), "{def}");
    let col = format!("\"{}\"", fx.f["Note"]);
    pg.batch_execute("SET enable_seqscan = off").await.unwrap();
    let plan: Vec<String> = pg
        .query(
            &format!(
                "EXPLAIN SELECT r.id FROM \"{}\".\"{}\" AS r WHERE r.deleted_at IS NULL \
                 ORDER BY left(r.{col}, 500) ASC NULLS LAST, r.{col} ASC NULLS LAST, r.id ASC LIMIT 10",
                fx.db, fx.tasks
            ),
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert!(
        plan.iter().any(|l| l.contains(&index)),
        "the sorted read walks {index}: {plan:#?}"
    );
}

#[tokio::test]
async fn long_text_in_a_unique_field_is_unique_by_value() {
    let fx = fixture().await;
    let api = &fx.person.api;
    let path = fx.records();
    let long = incompressible(4000);
    let r = api
        .post(&path, json!({"records": [{"fields": {"Code": long}}]}))
        .await;
    r.expect_ok();
    // The same long value again is the unique 400, not a 500.
    let r = api
        .post(&path, json!({"records": [{"fields": {"Code": long}}]}))
        .await;
    let msg = r.expect_error(400, "bad_request");
    assert!(msg.contains("Code") && msg.contains("unique"), "{msg}");
    // Another long value with the same first 3,999 characters is distinct.
    let mut other = long.clone();
    other.pop();
    other.push('~');
    if other == long {
        other.push('~');
    }
    api.post(&path, json!({"records": [{"fields": {"Code": other}}]}))
        .await
        .expect_ok();
    // Upsert matches on the long value.
    let r = api
        .put(
            &path,
            json!({"merge_on": ["Code"], "records": [{"fields": {"Code": long, "Title": "matched"}}]}),
        )
        .await;
    let body = r.expect_ok();
    assert_eq!(body["records"].as_array().unwrap().len(), 1);
    let page = fx
        .list(&format!(
            "filter={}",
            urlencode(
                &json!({"conditions": [{"field": "Title", "op": "is", "value": "matched"}]})
                    .to_string()
            )
        ))
        .await;
    assert_eq!(
        rec_ids(&page).len(),
        1,
        "the upsert updated the stored record"
    );
}

#[tokio::test]
async fn turning_unique_on_over_long_text_works_and_duplicates_are_named() {
    let fx = fixture().await;
    let api = &fx.person.api;
    let path = fx.records();
    // A long text field keeps `unique` without an index; changing it to
    // single line text builds the index over what it holds.
    let field =
        |name: &str| json!({"name": name, "type": "long_text", "options": {"unique": true}});
    let memo = id(&api.create_field(&fx.tasks, field("Memo")).await);
    let dup = id(&api.create_field(&fx.tasks, field("Dup")).await);
    let long = incompressible(4000);
    api.patch(
        &path,
        json!({"records": [
            {"id": fx.r[0], "fields": {"Memo": long, "Dup": "same"}},
            {"id": fx.r[1], "fields": {"Dup": "same"}}
        ]}),
    )
    .await
    .expect_ok();
    let r = api
        .patch(
            &format!("/api/fields/{memo}"),
            json!({"type": "single_line_text"}),
        )
        .await;
    assert_eq!(r.expect_ok()["field"]["options"]["unique"], true);
    let r = api
        .patch(
            &path,
            json!({"records": [{"id": fx.r[1], "fields": {"Memo": long}}]}),
        )
        .await;
    let msg = r.expect_error(400, "bad_request");
    assert!(msg.contains("Memo") && msg.contains("unique"), "{msg}");
    // Real duplicates still say so, and the type stays.
    let r = api
        .patch(
            &format!("/api/fields/{dup}"),
            json!({"type": "single_line_text"}),
        )
        .await;
    let msg = r.expect_error(400, "bad_request");
    assert!(msg.contains("Dup") && msg.contains("duplicate"), "{msg}");
    let fields = api
        .get(&format!("/api/tables/{}/fields", fx.tasks))
        .await
        .expect_ok()["fields"]
        .clone();
    let dup_now = fields
        .as_array()
        .unwrap()
        .iter()
        .find(|f| id(f) == dup)
        .unwrap();
    assert_eq!(dup_now["type"], "long_text");
}

#[tokio::test]
async fn framework_refusals_answer_the_envelope() {
    let fx = fixture().await;
    let api = &fx.person.api;
    let path = fx.records();
    // A DELETE body over 2 MB (axum's default) but under the node's limit
    // is read like any other body.
    let big = json!({"records": [fx.r[4]], "pad": "x".repeat(3 * 1024 * 1024)});
    let r = api.delete_with(&path, big).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    // Over the node's limit: the 400 naming it, as for every other body.
    let r = api
        .delete_with(
            &path,
            json!({"records": [fx.r[3]], "pad": "x".repeat(11 * 1024 * 1024)}),
        )
        .await;
    let msg = r.expect_error(400, "bad_request");
    assert!(msg.contains("10 MiB"), "{msg}");
    assert_eq!(
        rec_ids(&fx.list("").await).len(),
        4,
        "only r[4] was trashed"
    );
    // A query string that does not decode as UTF-8.
    let r = api.get(&format!("{path}?sort=%FF")).await;
    let msg = r.expect_error(400, "bad_request");
    assert!(!msg.is_empty());
    // An unknown route and an unknown method under a real table.
    api.get(&format!("/api/tables/{}/nope", fx.tasks))
        .await
        .expect_error(404, "not_found");
    let r = Api::send(
        api,
        reqwest::Method::PUT,
        &format!("/api/tables/{}", fx.tasks),
        Some(b"{}".to_vec()),
    )
    .await;
    assert_eq!(r.body["error"]["code"], json!("not_found"), "{:?}", r.body);
}
