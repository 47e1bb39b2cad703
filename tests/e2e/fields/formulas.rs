//! Formulas: generated stored columns PostgreSQL computes, result types and
//! costumes, inlining of referenced formulas, no error at write time,
//! display_as, referenced_field_ids, compile errors, recompilation.

use serde_json::{json, Value};

use super::{id, Db};

#[tokio::test]
async fn formulas_are_generated_columns_of_their_result_type() {
    let d = Db::new().await;
    let t = d.table("T").await;
    let a = d.field(&t, json!({"name": "A", "type": "number"})).await;
    let b = d.field(&t, json!({"name": "B", "type": "number"})).await;
    let s = d
        .field(&t, json!({"name": "Label", "type": "single_line_text"}))
        .await;
    let day = d.field(&t, json!({"name": "Day", "type": "date"})).await;
    let at = d
        .field(
            &t,
            json!({"name": "At", "type": "date", "options": {"include_time": true}}),
        )
        .await;
    let st = d.field(&t, json!({"name": "St", "type": "single_select", "options": {"choices": [{"name": "Open"}, {"name": "Done"}]}})).await;
    let form = |name: &str, e: &str| {
        d.field(
            &t,
            json!({"name": name, "type": "formula", "options": {"expression": e}}),
        )
    };
    let ratio = form("Ratio", "{A} / {B}").await;
    let twice = form("Twice", "{Ratio} * 2").await;
    let text = form("Text", "UPPER({Label}) & '-' & {St}").await;
    let parsed = form("Parsed", "VALUE({Label})").await;
    let next = form("Next", "DATEADD({Day}, 1, 'months')").await;
    let later = form("Later", "DATEADD({At}, 90, 'minutes')").await;
    let big = form("Big", "POWER({A}, {B})").await;
    let cmp = form("Cmp", "{A} > {B}").await;
    for (f, costume, column) in [
        (&ratio, "formula_number", "numeric"),
        (&twice, "formula_number", "numeric"),
        (&text, "formula_text", "text"),
        (&parsed, "formula_number", "numeric"),
        (&next, "formula_date", "date"),
        (&later, "formula_date", "timestamp with time zone"),
        (&big, "formula_number", "numeric"),
        (&cmp, "formula_number", "numeric"),
    ] {
        assert_eq!(f["type"], costume, "{}", f["name"]);
        assert_eq!(
            d.column_type(&t, &id(f)).await.as_deref(),
            Some(column),
            "{}",
            f["name"]
        );
        assert!(
            d.generated(&t, &id(f)).await.is_some(),
            "{} is GENERATED ALWAYS ... STORED",
            f["name"]
        );
    }
    // A formula reading a formula inlines it: its column reads A and B, not Ratio's column.
    let g = d.generated(&t, &id(&twice)).await.unwrap();
    assert!(g.contains(&id(&a)) && !g.contains(&id(&ratio)), "{g}");
    assert_eq!(
        twice["options"]["referenced_field_ids"],
        json!([id(&ratio)])
    );
    assert_eq!(
        text["options"]["referenced_field_ids"],
        json!([id(&s), id(&st)])
    );

    // Adversarial rows written straight into the table never raise.
    let (open, _) = (st["options"]["choices"][0]["id"].as_str().unwrap(), ());
    let ins =
        format!(
        "INSERT INTO {{t}} (id, \"{a}\", \"{b}\", \"{s}\", \"{day}\", \"{at}\", \"{st}\") VALUES
         ('rec_ok', 3, 2, 'x', '2024-01-31', '2024-01-01T23:00:00Z', '{open}'),
         ('rec_zero', 1, 0, '12abc', '9999-12-31', '9999-12-31T23:59:00Z', 'gone'),
         ('rec_huge', 1e200, 1e10, NULL, NULL, NULL, NULL),
         ('rec_nulls', NULL, NULL, NULL, NULL, NULL, NULL)",
        a = id(&a), b = id(&b), s = id(&s), day = id(&day), at = id(&at), st = id(&st)
    );
    d.sql(&t, &ins)
        .await
        .expect("no formula raises at write time");
    let cell = |f: &Value, r: &'static str| {
        let fid = id(f);
        let t = t.clone();
        let d = &d;
        async move { d.cell_text(&t, &fid, r).await }
    };
    assert_eq!(cell(&ratio, "rec_ok").await.as_deref(), Some("1.5"));
    assert_eq!(cell(&twice, "rec_ok").await.as_deref(), Some("3"));
    assert_eq!(cell(&text, "rec_ok").await.as_deref(), Some("X-Open"));
    assert_eq!(cell(&next, "rec_ok").await.as_deref(), Some("2024-02-29"));
    assert_eq!(
        cell(&later, "rec_ok").await.as_deref(),
        Some("2024-01-02 00:30:00+00")
    );
    assert_eq!(cell(&cmp, "rec_ok").await.as_deref(), Some("1"));
    assert_eq!(cell(&ratio, "rec_zero").await, None, "x / 0 is blank");
    assert_eq!(
        cell(&parsed, "rec_zero").await,
        None,
        "junk text is no number"
    );
    assert_eq!(
        cell(&next, "rec_zero").await,
        None,
        "past year 9999 is blank"
    );
    assert_eq!(cell(&big, "rec_huge").await, None, "overflow is blank");
    assert_eq!(cell(&text, "rec_nulls").await.as_deref(), Some("-"));

    // Through the records path: computed values read back, writes refused.
    let recs = d
        .records(
            &t,
            vec![json!({"A": 10, "B": 4, "Label": "hi", "St": "Done"})],
        )
        .await;
    let r = &recs[0]["fields"];
    assert_eq!(r["Ratio"], json!(2.5));
    assert_eq!(r["Twice"], json!(5));
    assert_eq!(r["Text"], "HI-Done");
    let res = d
        .owner
        .api
        .post(
            &format!("/api/tables/{t}/records"),
            json!({"records": [{"fields": {"Ratio": 1}}]}),
        )
        .await;
    res.expect_error(400, "bad_request");
    // Renaming a select choice rebuilds the formulas that read its name.
    let done = st["options"]["choices"][1]["id"].clone();
    d.patch(&id(&st), json!({"options": {"choices": [{"id": open, "name": "Open"}, {"id": done, "name": "Closed"}]}}))
        .await
        .expect_ok();
    assert_eq!(
        d.cell_text(&t, &id(&text), &id(&recs[0])).await.as_deref(),
        Some("HI-Closed")
    );
}

#[tokio::test]
async fn compile_errors_say_where_and_what() {
    let d = Db::new().await;
    let t = d.table("T").await;
    d.field(&t, json!({"name": "Label", "type": "single_line_text"}))
        .await;
    let other = d.table("O").await;
    let link = d
        .field(
            &t,
            json!({"name": "O", "type": "link", "options": {"target_table_id": other}}),
        )
        .await;
    d.field(&t, json!({"name": "Cnt", "type": "rollup", "options": {"link_field_id": id(&link), "aggregation": "count"}})).await;
    for (e, needle) in [
        ("1 +", "character 4"),
        ("1 + {Label}", "'+' expects numbers"),
        ("{Nope}", "Unknown field 'Nope'"),
        ("NOW()", "NOW is not available"),
        ("TODAY()", ""),
        ("{O}", "cannot be used in a formula"),
        ("{Cnt} + 1", "cannot be used in a formula"),
        ("\"abc", "Unterminated"),
    ] {
        let r = d
            .create(
                &t,
                json!({"name": "F", "type": "formula", "options": {"expression": e}}),
            )
            .await;
        let msg = r.expect_error(400, "bad_request");
        assert!(
            msg.contains("character") && msg.contains(needle),
            "{e}: {msg}"
        );
    }
    for options in [
        json!({}),
        json!({"expression": "  "}),
        json!({"expression": 3}),
    ] {
        d.create(
            &t,
            json!({"name": "F", "type": "formula", "options": options}),
        )
        .await
        .expect_error(400, "bad_request");
    }
    assert_eq!(d.fields(&t).await.len(), 3, "nothing created");
    assert_eq!(d.column_type(&t, "F").await, None);
}

#[tokio::test]
async fn display_as_and_server_written_keys() {
    let d = Db::new().await;
    let t = d.table("T").await;
    d.field(&t, json!({"name": "N", "type": "number"})).await;
    let f = d
        .field(
            &t,
            json!({"name": "Money", "type": "formula", "options": {
            "expression": "{N} * 2", "display_as": "currency", "symbol": "£", "decimals": 2,
            "referenced_field_ids": ["fld_forged"]}}),
        )
        .await;
    assert_eq!(f["options"]["display_as"], "currency");
    assert_eq!(f["options"]["symbol"], "£");
    assert_ne!(
        f["options"]["referenced_field_ids"],
        json!(["fld_forged"]),
        "written by the server"
    );
    for ok in ["percent", "duration", "number"] {
        d.field(&t, json!({"name": format!("as {ok}"), "type": "formula", "options": {"expression": "{N}", "display_as": ok}})).await;
    }
    for (e, wear) in [
        ("{N}", "single_select"),
        ("{N}", "checkbox"),
        ("'x'", "currency"),
        ("'x'", "date"),
    ] {
        let msg = d
            .create(&t, json!({"name": "X", "type": "formula", "options": {"expression": e, "display_as": wear}}))
            .await
            .expect_error(400, "bad_request");
        assert!(msg.contains(wear), "{msg}");
    }
    // A text result may wear a select, its choices matched by name.
    let sel = d
        .field(
            &t,
            json!({"name": "Size", "type": "formula", "options": {
            "expression": "IF({N} > 10, 'big', 'small')", "display_as": "single_select",
            "choices": [{"name": " small "}, {"name": "big"}]}}),
        )
        .await;
    let choices = sel["options"]["choices"].as_array().unwrap();
    assert_eq!(
        (
            choices[0]["name"].as_str(),
            choices[0]["id"].as_str().map(str::len)
        ),
        (Some("small"), Some(8))
    );
    d.create(&t, json!({"name": "Y", "type": "formula", "options": {
        "expression": "'x'", "display_as": "single_select", "choices": [{"name": "a"}, {"name": "a"}]}}))
        .await
        .expect_error(400, "bad_request");
    // An edit that changes the result type clears the old formatting; one
    // that keeps it keeps the presentation and any unknown key.
    let r = d
        .patch(
            &id(&f),
            json!({"options": {"expression": "{N} + 1", "legacy_key": true}}),
        )
        .await;
    let o = r.expect_ok()["field"]["options"].clone();
    assert_eq!(
        (
            o["display_as"].as_str(),
            o["symbol"].as_str(),
            o["legacy_key"].as_bool()
        ),
        (Some("currency"), Some("£"), Some(true))
    );
    let r = d
        .patch(&id(&f), json!({"options": {"expression": "'n=' & {N}"}}))
        .await;
    let field = r.expect_ok()["field"].clone();
    assert_eq!(field["type"], "formula_text");
    assert!(
        field["options"].get("display_as").is_none() && field["options"].get("symbol").is_none(),
        "{field}"
    );
    assert_eq!(d.column_type(&t, &id(&f)).await.as_deref(), Some("text"));
    // A formula update must carry an expression.
    d.patch(
        &id(&f),
        json!({"options": {"display_as": "single_line_text"}}),
    )
    .await
    .expect_error(400, "bad_request");
    // A formula cannot reach itself.
    let msg = d
        .patch(&id(&f), json!({"options": {"expression": "{Money} & 'x'"}}))
        .await
        .expect_error(400, "bad_request");
    assert!(msg.contains("itself"), "{msg}");
}

#[tokio::test]
async fn recompiling_a_formula_rebuilds_its_column_and_its_dependants() {
    let d = Db::new().await;
    let t = d.table("T").await;
    let n = d.field(&t, json!({"name": "N", "type": "number"})).await;
    let base = d
        .field(
            &t,
            json!({"name": "Base", "type": "formula", "options": {"expression": "{N} + 1"}}),
        )
        .await;
    let top = d
        .field(
            &t,
            json!({"name": "Top", "type": "formula", "options": {"expression": "{Base} * 10"}}),
        )
        .await;
    let recs = d.records(&t, vec![json!({"N": 1})]).await;
    let rid = id(&recs[0]);
    assert_eq!(
        d.cell_text(&t, &id(&top), &rid).await.as_deref(),
        Some("20")
    );
    d.patch(&id(&base), json!({"options": {"expression": "{N} + 2"}}))
        .await
        .expect_ok();
    assert_eq!(
        d.cell_text(&t, &id(&base), &rid).await.as_deref(),
        Some("3")
    );
    assert_eq!(
        d.cell_text(&t, &id(&top), &rid).await.as_deref(),
        Some("30"),
        "the dependant was rebuilt"
    );
    // A change that would break a dependant is refused, naming it.
    let msg = d
        .patch(&id(&base), json!({"options": {"expression": "'t'"}}))
        .await
        .expect_error(400, "bad_request");
    assert!(msg.contains("'Top'"), "{msg}");
    assert_eq!(
        d.column_type(&t, &id(&base)).await.as_deref(),
        Some("numeric"),
        "nothing changed"
    );
    // A formula whose result type a lookup relies on cannot change type.
    let o = d.table("O").await;
    let link = d
        .field(
            &o,
            json!({"name": "T", "type": "link", "options": {"target_table_id": t}}),
        )
        .await;
    let lk = d.field(&o, json!({"type": "lookup", "options": {"link_field_id": id(&link), "target_field_id": id(&top)}})).await;
    assert_eq!(lk["type"], "lookup_number");
    let msg = d
        .patch(&id(&top), json!({"options": {"expression": "'x'"}}))
        .await
        .expect_error(400, "bad_request");
    assert!(msg.contains(lk["name"].as_str().unwrap()), "{msg}");
    d.patch(
        &id(&top),
        json!({"options": {"expression": "{Base} * 100"}}),
    )
    .await
    .expect_ok();
    assert_eq!(
        d.cell_text(&t, &id(&top), &rid).await.as_deref(),
        Some("300")
    );
    let _ = n;
}
