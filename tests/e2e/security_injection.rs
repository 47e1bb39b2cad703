//! Issue 13, section 1: values of lookup and rollup `conditions` reach
//! PostgreSQL as bound parameters, never as SQL text. The payload of the
//! issue (a value holding `$1::` next to one holding SQL) is accepted and
//! its values round-trip as data on every read path: list pages (one and
//! two statements), get-one, a write's reply, the trash, and a filter on
//! the conditioned lookup. A second pair of values is chosen so that, were
//! the first value spliced into the second as SQL, the cells would show a
//! different record (`x(A)::y`) instead of the right one (`x$1::y`).

use serde_json::{json, Value};

use crate::fields::{id, Db};

/// The two values (first one is SQL if it is ever spliced in).
const SLEEP: &str = " || (SELECT chr(120) FROM pg_sleep(3)) || ";
const DOLLAR: &str = "x$1::y";
/// Splicing `CHR` into `DOLLAR` at `$1::` gives the SQL `'x(' || chr(65) ||
/// ')::y'`, which is the text `x(A)::y`.
const CHR: &str = " || chr(65) || ";
const SPLICED: &str = "x(A)::y";

fn is(field: &str, value: &str) -> Value {
    json!({"field": field, "op": "is", "value": value})
}

/// The cells of a record as the reply carries them (by name).
fn cell<'a>(rec: &'a Value, name: &str) -> &'a Value {
    &rec["fields"][name]
}

#[tokio::test]
async fn lookup_condition_values_are_data_not_sql() {
    let d = Db::new().await;
    let items = d.table("Items").await;
    let code = d
        .field(&items, json!({"name": "Code", "type": "single_line_text"}))
        .await;
    let orders = d.table("Orders").await;
    d.field(
        &orders,
        json!({"name": "Title", "type": "single_line_text"}),
    )
    .await;
    let link = d
        .field(
            &orders,
            json!({"name": "Lines", "type": "link", "options": {"target_table_id": items}}),
        )
        .await;
    let lookup = |name: &str, conditions: Value| {
        json!({"name": name, "type": "lookup", "options": {
            "link_field_id": id(&link), "target_field_id": id(&code), "conditions": conditions}})
    };

    // The exact payload of the issue (both conditions, joined by `and`):
    // accepted, and it admits no record (no Code equals both values).
    let exact = d
        .create(
            &orders,
            lookup(
                "Exact",
                json!({"conditions": [is("Code", SLEEP), is("Code", DOLLAR)]}),
            ),
        )
        .await;
    let exact = exact.expect_ok()["field"].clone();
    assert_eq!(
        exact["options"]["conditions"]["conditions"][1]["value"],
        DOLLAR
    );
    // The same values joined by `or`: each admits the record holding it.
    d.field(
        &orders,
        lookup(
            "Either",
            json!({"join": "or", "conditions": [is("Code", SLEEP), is("Code", DOLLAR)]}),
        ),
    )
    .await;
    d.field(
        &orders,
        lookup(
            "Spliced",
            json!({"join": "or", "conditions": [is("Code", CHR), is("Code", DOLLAR)]}),
        ),
    )
    .await;
    d.field(
        &orders,
        json!({"name": "Count", "type": "rollup", "options": {
            "link_field_id": id(&link), "aggregation": "count",
            "conditions": {"join": "or", "conditions": [is("Code", CHR), is("Code", DOLLAR)]}}}),
    )
    .await;

    let codes = [DOLLAR, SLEEP, CHR, SPLICED, "x", "other"];
    let made = d
        .records(&items, codes.iter().map(|c| json!({ "Code": c })).collect())
        .await;
    let lines: Vec<String> = made.iter().map(id).collect();
    // The write's reply carries every field, conditioned lookups too.
    let created = d
        .records(&orders, vec![json!({"Title": "o", "Lines": lines.clone()})])
        .await;
    let order = id(&created[0]);

    let check = |rec: &Value, path: &str| {
        assert_eq!(cell(rec, "Exact"), &json!([]), "{path}: {rec}");
        assert_eq!(
            cell(rec, "Either"),
            &json!([DOLLAR, SLEEP]),
            "{path}: the values are data, in link order: {rec}"
        );
        assert_eq!(
            cell(rec, "Spliced"),
            &json!([DOLLAR, CHR]),
            "{path}: never the spliced {SPLICED:?}: {rec}"
        );
        assert_eq!(cell(rec, "Count"), &json!(2), "{path}: {rec}");
    };
    check(&created[0], "create reply");
    check(&d.read(&orders, &order).await, "get");

    let api = &d.owner.api;
    let records = format!("/api/tables/{orders}/records");
    // A list page in one statement (no filter values) ...
    let page = api.get(&records).await;
    check(&page.expect_ok()["records"][0], "list");
    // ... and in two (a filter with values), filtering on the lookups.
    for (field, value, hits) in [
        ("Either", DOLLAR, 1),
        ("Either", SLEEP, 1),
        ("Spliced", SPLICED, 0),
        ("Spliced", DOLLAR, 1),
        ("Exact", DOLLAR, 0),
    ] {
        let body = json!({"filter": {"conditions": [is(field, value)]}});
        let r = api.post(&format!("{records}/list"), body).await;
        let listed = r.expect_ok()["records"].as_array().unwrap().clone();
        assert_eq!(listed.len(), hits, "filter {field} is {value:?}");
        if let Some(rec) = listed.first() {
            check(rec, "filtered list");
        }
    }
    // The trash reads the same cells.
    api.delete_with(&records, json!({ "records": [order] }))
        .await
        .expect_ok();
    let trash = api.get(&format!("/api/tables/{orders}/trash")).await;
    check(&trash.expect_ok()["records"][0], "trash");
}

/// NUL cannot be stored in PostgreSQL text: a value holding one is refused
/// with a 400 naming where it is (or, for an id or a view reference, is
/// simply not found), never sent to PostgreSQL (a 500).
#[tokio::test]
async fn nul_in_values_is_refused_not_a_500() {
    let d = Db::new().await;
    let items = d.table("Items").await;
    let code = d
        .field(&items, json!({"name": "Code", "type": "single_line_text"}))
        .await;
    let link = d
        .field(
            &items,
            json!({"name": "Parent", "type": "link", "options": {"target_table_id": items}}),
        )
        .await;
    let made = d.records(&items, vec![json!({"Code": "a"})]).await;
    let rec = id(&made[0]);
    let api = &d.owner.api;
    let records = format!("/api/tables/{items}/records");
    let nul = "a\u{0}b";

    // A lookup's conditions.
    let r = d
        .create(
            &items,
            json!({"name": "L", "type": "lookup", "options": {
                "link_field_id": id(&link), "target_field_id": id(&code),
                "conditions": {"conditions": [is("Code", nul)]}}}),
        )
        .await;
    let msg = r.expect_error(400, "bad_request");
    assert!(msg.contains("NUL"), "{msg}");
    // A filter value, in the body and in the query string.
    let body = json!({"filter": {"conditions": [is("Code", nul)]}});
    let msg = api
        .post(&format!("{records}/list"), body)
        .await
        .expect_error(400, "bad_request");
    assert!(msg.contains("NUL"), "{msg}");
    let q = "filter=%7B%22conditions%22%3A%5B%7B%22field%22%3A%22Code%22%2C%22op%22%3A%22is%22%2C%22value%22%3A%22a%5Cu0000b%22%7D%5D%7D";
    api.get(&format!("{records}?{q}"))
        .await
        .expect_error(400, "bad_request");
    // The search term.
    let msg = api
        .get(&format!("{records}?search=a%00b"))
        .await
        .expect_error(400, "bad_request");
    assert!(msg.contains("search"), "{msg}");
    // A cell.
    let body = json!({"records": [{"fields": {"Code": nul}}]});
    let msg = api
        .post(&records, body)
        .await
        .expect_error(400, "bad_request");
    assert!(msg.contains("Code"), "{msg}");
    // A view reference: a query parameter holding NUL is refused by name.
    let msg = api
        .get(&format!("{records}?view=viw_%00"))
        .await
        .expect_error(400, "bad_request");
    assert!(msg.contains("view"), "{msg}");
    // A record id in the path: not found.
    api.get(&format!("{records}/rec_%00"))
        .await
        .expect_error(404, "not_found");
    // Nothing was written.
    let listed = api.get(&records).await;
    assert_eq!(listed.expect_ok()["records"].as_array().unwrap().len(), 1);
    assert_eq!(d.read(&items, &rec).await["fields"]["Code"], "a");
}
