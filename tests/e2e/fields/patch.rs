//! PATCH /api/fields/{id}: body rules, type changes with real casts and
//! refusals, dependants blocking conversions, renames rewriting formulas
//! (and the cases where they do not), options replaced wholesale.

use serde_json::json;

use super::{id, Db};

#[tokio::test]
async fn body_rules() {
    let d = Db::new().await;
    let t = d.table("T").await;
    let f = d
        .field(
            &t,
            json!({"name": "N", "type": "number", "options": {"decimals": 2}}),
        )
        .await;
    let fid = id(&f);
    let msg = d
        .patch(&fid, json!({}))
        .await
        .expect_error(400, "bad_request");
    assert!(msg.contains("name") && msg.contains("options"), "{msg}");
    d.patch(&fid, json!({"position": 3}))
        .await
        .expect_error(400, "bad_request");
    d.patch(&fid, json!({"name": 3}))
        .await
        .expect_error(400, "bad_request");
    d.patch(&fid, json!({"type": true}))
        .await
        .expect_error(400, "bad_request");
    d.patch(&fid, json!({"options": "x"}))
        .await
        .expect_error(400, "bad_request");
    for door in ["formula", "lookup", "rollup", "banana"] {
        let msg = d
            .patch(&fid, json!({"type": door}))
            .await
            .expect_error(400, "bad_request");
        assert!(msg.contains("Valid types"), "{msg}");
    }
    d.owner
        .api
        .patch_raw(&format!("/api/fields/{fid}"), "[1]")
        .await
        .expect_error(400, "bad_request");
    // The reply is the stored row without operators; options replace wholesale.
    let r = d
        .patch(&fid, json!({"options": {"separators": true}}))
        .await;
    let field = r.expect_ok()["field"].clone();
    assert_eq!(
        field,
        json!({"id": fid, "name": "N", "type": "number", "options": {"separators": true}, "position": 0})
    );
    let r = d.patch(&fid, json!({"options": null})).await;
    assert_eq!(r.expect_ok()["field"]["options"], json!({}));
    assert_eq!(d.listed(&t, &fid).await["options"], json!({}));
}

#[tokio::test]
async fn type_changes_cast_for_real() {
    let d = Db::new().await;
    let t = d.table("T").await;
    let txt = d
        .field(&t, json!({"name": "Txt", "type": "single_line_text"}))
        .await;
    let num = d.field(&t, json!({"name": "Num", "type": "number"})).await;
    let chk = d
        .field(&t, json!({"name": "Chk", "type": "checkbox"}))
        .await;
    let sel = d.field(&t, json!({"name": "Sel", "type": "single_select", "options": {"choices": [{"name": "a"}]}})).await;
    let multi = d.field(&t, json!({"name": "Multi", "type": "multi_select", "options": {"choices": [{"name": "a"}]}})).await;
    let long = d
        .field(
            &t,
            json!({"name": "Long", "type": "long_text", "options": {"unique": true}}),
        )
        .await;
    let recs = d
        .records(
            &t,
            vec![
                json!({"Txt": " 12 ", "Num": 2.5, "Chk": true, "Sel": "a", "Long": "x"}),
                json!({"Txt": "", "Num": 3}),
                json!({}),
            ],
        )
        .await;
    let r0 = id(&recs[0]);
    // text -> number: a real cast; blank text becomes empty.
    let r = d.patch(&id(&txt), json!({"type": "number"})).await;
    assert_eq!(r.expect_ok()["field"]["type"], "number");
    assert_eq!(
        d.column_type(&t, &id(&txt)).await.as_deref(),
        Some("numeric")
    );
    assert_eq!(d.cell_text(&t, &id(&txt), &r0).await.as_deref(), Some("12"));
    assert_eq!(d.cell_text(&t, &id(&txt), &id(&recs[1])).await, None);
    assert_eq!(d.read(&t, &r0).await["fields"]["Txt"], json!(12));
    // number -> text, checkbox -> long text.
    d.patch(&id(&num), json!({"type": "email"}))
        .await
        .expect_ok();
    assert_eq!(d.column_type(&t, &id(&num)).await.as_deref(), Some("text"));
    assert_eq!(
        d.cell_text(&t, &id(&num), &r0).await.as_deref(),
        Some("2.5")
    );
    d.patch(&id(&chk), json!({"type": "long_text"}))
        .await
        .expect_ok();
    assert_eq!(
        d.cell_text(&t, &id(&chk), &r0).await.as_deref(),
        Some("true")
    );
    // single -> multi keeps the choices and wraps the cell.
    let r = d.patch(&id(&sel), json!({"type": "multi_select"})).await;
    let o = r.expect_ok()["field"]["options"].clone();
    assert_eq!(o["choices"], sel["options"]["choices"]);
    assert_eq!(d.column_type(&t, &id(&sel)).await.as_deref(), Some("ARRAY"));
    assert_eq!(d.read(&t, &r0).await["fields"]["Sel"], json!(["a"]));
    // Free changes within a storage kind or between text and long text:
    // the column is untouched (no cast).
    d.patch(&id(&long), json!({"type": "url"}))
        .await
        .expect_ok();
    assert_eq!(d.column_type(&t, &id(&long)).await.as_deref(), Some("text"));
    assert_eq!(d.listed(&t, &id(&long)).await["options"]["unique"], true);
    // A type change with options re-normalises them (unique still frozen).
    d.patch(
        &id(&txt),
        json!({"type": "currency", "options": {"symbol": "$"}}),
    )
    .await
    .expect_ok();
    assert_eq!(d.listed(&t, &id(&txt)).await["operators"][2], "greater");

    // Refused pairs name both costumes and change nothing.
    let plain = d
        .field(&t, json!({"name": "Plain", "type": "single_line_text"}))
        .await;
    let date = d.field(&t, json!({"name": "Date", "type": "date"})).await;
    let files = d
        .field(&t, json!({"name": "Files", "type": "attachment"}))
        .await;
    for (f, to) in [
        (&multi, "single_select"),
        (&plain, "date"),
        (&plain, "checkbox"),
        (&plain, "single_select"),
        (&plain, "link"),
        (&plain, "attachment"),
        (&plain, "formula_text"),
        (&plain, "lookup_text"),
        (&plain, "rollup_number"),
        (&plain, "button"),
        (&date, "number"),
        (&date, "single_line_text"),
        (&files, "multi_select"),
    ] {
        let msg = d
            .patch(&id(f), json!({"type": to}))
            .await
            .expect_error(400, "bad_request");
        assert!(msg.contains(to), "{to}: {msg}");
    }
    assert_eq!(
        d.column_type(&t, &id(&plain)).await.as_deref(),
        Some("text")
    );

    // A failed cast: 400 without the datastore's text, nothing changed.
    d.records(&t, vec![json!({"Plain": "12abc"})]).await;
    let msg = d
        .patch(&id(&plain), json!({"type": "number", "name": "Renamed"}))
        .await
        .expect_error(400, "bad_request");
    assert!(
        msg.contains("Plain") && !msg.contains("invalid input syntax") && !msg.contains("numeric"),
        "{msg}"
    );
    assert_eq!(
        d.column_type(&t, &id(&plain)).await.as_deref(),
        Some("text")
    );
    assert_eq!(d.listed(&t, &id(&plain)).await["name"], "Plain");
    // A cast that would break the unique index: 400, no datastore text.
    let code = d
        .field(
            &t,
            json!({"name": "Code", "type": "single_line_text", "options": {"unique": true}}),
        )
        .await;
    d.records(&t, vec![json!({"Code": "1"}), json!({"Code": "01"})])
        .await;
    let msg = d
        .patch(&id(&code), json!({"type": "number"}))
        .await
        .expect_error(400, "bad_request");
    assert!(
        msg.contains("Code") && !msg.contains("duplicate key") && !msg.contains("violates"),
        "{msg}"
    );
    assert_eq!(d.column_type(&t, &id(&code)).await.as_deref(), Some("text"));
    assert_eq!(d.indexes_on(&t, &id(&code)).await.len(), 1);
}

#[tokio::test]
async fn dependants_block_conversions_and_are_named() {
    let d = Db::new().await;
    let t = d.table("T").await;
    let qty = d.field(&t, json!({"name": "Qty", "type": "number"})).await;
    let note = d
        .field(&t, json!({"name": "Note", "type": "single_line_text"}))
        .await;
    d.field(
        &t,
        json!({"name": "Double", "type": "formula", "options": {"expression": "{Qty} * 2"}}),
    )
    .await;
    d.field(
        &t,
        json!({"name": "Shout", "type": "formula", "options": {"expression": "UPPER({Note})"}}),
    )
    .await;
    let msg = d
        .patch(&id(&qty), json!({"type": "single_line_text"}))
        .await
        .expect_error(400, "bad_request");
    assert!(msg.contains("'Double'"), "{msg}");
    assert_eq!(
        d.column_type(&t, &id(&qty)).await.as_deref(),
        Some("numeric")
    );
    // A free change under a formula is fine (and the formula keeps working).
    d.patch(&id(&qty), json!({"type": "currency"}))
        .await
        .expect_ok();
    d.patch(&id(&note), json!({"type": "long_text"}))
        .await
        .expect_ok();
    let msg = d
        .patch(&id(&note), json!({"type": "number"}))
        .await
        .expect_error(400, "bad_request");
    assert!(msg.contains("'Shout'"), "{msg}");
    // A lookup on another table surfacing the field blocks a cast too.
    let o = d.table("Other").await;
    let link = d
        .field(
            &o,
            json!({"name": "T", "type": "link", "options": {"target_table_id": t}}),
        )
        .await;
    let price = d
        .field(&t, json!({"name": "Price", "type": "number"}))
        .await;
    let lk = d.field(&o, json!({"type": "rollup", "options": {"link_field_id": id(&link), "aggregation": "sum", "target_field_id": id(&price)}})).await;
    let msg = d
        .patch(&id(&price), json!({"type": "single_line_text"}))
        .await
        .expect_error(400, "bad_request");
    assert!(
        msg.contains(lk["name"].as_str().unwrap()) && msg.contains("Other"),
        "{msg}"
    );
    d.patch(&id(&price), json!({"type": "percent"}))
        .await
        .expect_ok();
    let title = d
        .field(&t, json!({"name": "Title", "type": "single_line_text"}))
        .await;
    d.field(&o, json!({"type": "lookup", "options": {"link_field_id": id(&link), "target_field_id": id(&title)}})).await;
    d.patch(&id(&title), json!({"type": "long_text"}))
        .await
        .expect_ok();
    d.patch(&id(&title), json!({"type": "number"}))
        .await
        .expect_error(400, "bad_request");
}

#[tokio::test]
async fn renames_rewrite_formulas_except_where_part_b_says_not() {
    let d = Db::new().await;
    let t = d.table("T").await;
    let a = d.field(&t, json!({"name": "A", "type": "number"})).await;
    let b = d.field(&t, json!({"name": "B", "type": "number"})).await;
    let f = d
        .field(
            &t,
            json!({"name": "F", "type": "formula", "options": {"expression": "A + {B}"}}),
        )
        .await;
    let g = d
        .field(
            &t,
            json!({"name": "G", "type": "formula", "options": {"expression": "{F} * 2"}}),
        )
        .await;
    assert_eq!(expr(&d, &t, &id(&f)).await, "{A} + {B}");
    d.patch(&id(&a), json!({"name": "Alpha one"}))
        .await
        .expect_ok();
    assert_eq!(expr(&d, &t, &id(&f)).await, "{Alpha one} + {B}");
    // A new name with a brace or outer spaces: not rewritten.
    d.patch(&id(&b), json!({"name": "B{x}"})).await.expect_ok();
    assert_eq!(expr(&d, &t, &id(&f)).await, "{Alpha one} + {B}");
    d.patch(&id(&b), json!({"name": " Beta"})).await.expect_ok();
    assert_eq!(expr(&d, &t, &id(&f)).await, "{Alpha one} + {B}");
    // (F's text names B again once B is called B again.)
    d.patch(&id(&b), json!({"name": "B"})).await.expect_ok();
    // Renaming a formula with options in the same call skips the rewrite;
    // here that would leave G naming a field that no longer exists, so the
    // change is refused naming G and nothing changes.
    let msg = d
        .patch(
            &id(&f),
            json!({"name": "Eff", "options": {"expression": "{Alpha one} + 1"}}),
        )
        .await
        .expect_error(400, "bad_request");
    assert!(msg.contains("'G'"), "{msg}");
    assert_eq!(d.listed(&t, &id(&f)).await["name"], "F");
    // Without options the dependant is rewritten.
    d.patch(&id(&f), json!({"name": "Eff"})).await.expect_ok();
    assert_eq!(expr(&d, &t, &id(&g)).await, "{Eff} * 2");
    // With options and no dependant reading the old name, the rename stands.
    d.patch(
        &id(&g),
        json!({"name": "Gee", "options": {"expression": "{Eff} * 3"}}),
    )
    .await
    .expect_ok();
    d.patch(
        &id(&f),
        json!({"name": "Ef", "options": {"expression": "{Alpha one} + 1"}}),
    )
    .await
    .expect_error(400, "bad_request");
    // The columns keep computing: Gee = (Alpha one + B) * 3.
    let recs = d.records(&t, vec![json!({"Alpha one": 4})]).await;
    assert_eq!(d.cell_text(&t, &id(&g), &id(&recs[0])).await, None);
    let recs = d.records(&t, vec![json!({"Alpha one": 4, "B": 1})]).await;
    assert_eq!(
        d.cell_text(&t, &id(&g), &id(&recs[0])).await.as_deref(),
        Some("15")
    );
}

async fn expr(d: &Db, table: &str, field: &str) -> String {
    d.listed(table, field).await["options"]["expression"]
        .as_str()
        .unwrap()
        .to_owned()
}
