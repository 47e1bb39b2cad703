//! Formula fields: generated columns, select names, type changes.

use serde_json::json;

use super::{id, setup};

#[tokio::test]
async fn formulas_are_generated_columns() {
    let c = setup().await;
    let t = c.table("Orders").await;
    let price = c
        .field(&t, json!({"name": "Price", "type": "number"}))
        .await;
    let qty = c.field(&t, json!({"name": "Qty", "type": "number"})).await;
    let total = c
        .field(&t, json!({"name": "Total", "type": "formula", "options": {"expression": "price * { Qty }"}}))
        .await;
    assert_eq!(total["type"], "formula_number");
    assert_eq!(total["options"]["expression"], "{Price} * {Qty}");
    assert_eq!(
        total["options"]["referenced_field_ids"],
        json!([id(&price), id(&qty)])
    );
    assert_eq!(total["operators"][2], "greater");
    let label = c
        .field(
            &t,
            json!({"name": "Label", "type": "formula", "options": {"expression": "IF({Total} > 10, \"big\", \"small\")"}}),
        )
        .await;
    assert_eq!(label["type"], "formula_text");
    let q = c.qualified(&t);
    c.sql(&format!(
        "INSERT INTO {q} (id, \"{}\", \"{}\") VALUES ('rec_1', 3, 4), ('rec_2', 1, 2)",
        id(&price),
        id(&qty)
    ))
    .await
    .unwrap();
    let rows = c
        .app
        .pg
        .query(
            &format!(
                "SELECT \"{}\"::text, \"{}\" FROM {q} ORDER BY id",
                id(&total),
                id(&label)
            ),
            &[],
        )
        .await
        .unwrap();
    assert_eq!(rows[0].get::<_, String>(0), "12");
    assert_eq!(rows[0].get::<_, String>(1), "big");
    assert_eq!(rows[1].get::<_, String>(1), "small");
    // Compile errors say where and what.
    let r = c
        .add(
            &t,
            json!({"name": "Bad", "type": "formula", "options": {"expression": "1 +"}}),
        )
        .await;
    assert_eq!(r.status, 400);
    assert!(
        r.error_message().contains("character 4"),
        "{}",
        r.error_message()
    );
    let r = c
        .add(
            &t,
            json!({"name": "Bad", "type": "formula", "options": {"expression": "{Nope}"}}),
        )
        .await;
    assert!(r.error_message().contains("Unknown field 'Nope'"));
    let r = c
        .add(&t, json!({"name": "Bad", "type": "formula", "options": {}}))
        .await;
    assert_eq!(r.status, 400);
    // display_as.
    let r = c
        .add(&t, json!({"name": "Money", "type": "formula", "options": {"expression": "{Price}", "display_as": "currency"}}))
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let r = c
        .add(&t, json!({"name": "Bad", "type": "formula", "options": {"expression": "{Price}", "display_as": "single_select"}}))
        .await;
    assert_eq!(r.status, 400);
    assert!(r.error_message().contains("single_select"));
    // Renaming a referenced field rewrites the expression.
    let r = c.patch(&id(&price), json!({"name": "Unit price"})).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let fields = c.fields(&t).await;
    assert_eq!(fields[2]["options"]["expression"], "{Unit price} * {Qty}");
    // ... except with a brace in the new name.
    c.patch(&id(&qty), json!({"name": "Q{1}"})).await;
    let fields = c.fields(&t).await;
    assert_eq!(fields[2]["options"]["expression"], "{Unit price} * {Qty}");
    c.patch(&id(&qty), json!({"name": "Qty"})).await;
    // Deleting a referenced field is refused, naming the formula.
    let r = c.delete(&id(&price)).await;
    assert_eq!(r.status, 400);
    assert!(
        r.error_message().contains("'Total'"),
        "{}",
        r.error_message()
    );
    // Editing Total to text recompiles it and the formula inlining it.
    let r = c
        .patch(
            &id(&total),
            json!({"options": {"expression": "{Unit price} & \"!\""}}),
        )
        .await;
    assert_eq!(r.status, 400, "Label compares Total > 10: {:?}", r.body);
    assert!(
        r.error_message().contains("'Label'"),
        "{}",
        r.error_message()
    );
    let r = c
        .patch(
            &id(&total),
            json!({"options": {"expression": "{Unit price} + 1"}}),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert!(r.body["field"].get("operators").is_none());
    let v: String = c
        .app
        .pg
        .query_one(
            &format!("SELECT \"{}\" FROM {q} WHERE id = 'rec_1'", id(&label)),
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(v, "small", "4 is not > 10 after the rebuild");
    let r = c
        .patch(&id(&total), json!({"options": {"display_as": "currency"}}))
        .await;
    assert_eq!(r.status, 400, "expression required");
    // A type change the formula relies on is refused.
    let r = c
        .patch(&id(&price), json!({"type": "single_line_text"}))
        .await;
    assert_eq!(r.status, 400);
    assert!(
        r.error_message().contains("'Total'"),
        "{}",
        r.error_message()
    );
    // Formula type changes are refused.
    let r = c.patch(&id(&total), json!({"type": "number"})).await;
    assert_eq!(r.status, 400);
}

#[tokio::test]
async fn select_formula_reads_choice_names_and_follows_renames() {
    let c = setup().await;
    let t = c.table("T").await;
    let s = c
        .field(&t, json!({"name": "Status", "type": "single_select", "options": {"choices": [{"id": "aaaaaaaa", "name": "Open"}]}}))
        .await;
    let f = c
        .field(&t, json!({"name": "Shout", "type": "formula", "options": {"expression": "UPPER({Status})"}}))
        .await;
    let q = c.qualified(&t);
    c.sql(&format!(
        "INSERT INTO {q} (id, \"{}\") VALUES ('rec_1', 'aaaaaaaa')",
        id(&s)
    ))
    .await
    .unwrap();
    let sql = format!("SELECT \"{}\" FROM {q}", id(&f));
    let v: Option<String> = c.app.pg.query_one(&sql, &[]).await.unwrap().get(0);
    assert_eq!(v.as_deref(), Some("OPEN"));
    let r = c
        .patch(
            &id(&s),
            json!({"options": {"choices": [{"id": "aaaaaaaa", "name": "Closed"}]}}),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let v: Option<String> = c.app.pg.query_one(&sql, &[]).await.unwrap().get(0);
    assert_eq!(v.as_deref(), Some("CLOSED"));
}

#[tokio::test]
async fn type_changes_cast_for_real() {
    let c = setup().await;
    let t = c.table("T").await;
    let a = c
        .field(&t, json!({"name": "A", "type": "single_line_text"}))
        .await;
    let q = c.qualified(&t);
    c.sql(&format!(
        "INSERT INTO {q} (id, \"{}\") VALUES ('rec_1', ' 12.5 '), ('rec_2', ''), ('rec_3', NULL)",
        id(&a)
    ))
    .await
    .unwrap();
    let r = c.patch(&id(&a), json!({"type": "email"})).await;
    assert_eq!(r.status, 200);
    let r = c
        .patch(
            &id(&a),
            json!({"type": "currency", "options": {"symbol": "$"}}),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.body["field"]["type"], "currency");
    assert_eq!(c.column_type(&t, &id(&a)).await.as_deref(), Some("numeric"));
    let r = c.patch(&id(&a), json!({"type": "long_text"})).await;
    assert_eq!(r.status, 200);
    let v: Option<String> = c
        .app
        .pg
        .query_one(
            &format!("SELECT \"{}\" FROM {q} WHERE id = 'rec_1'", id(&a)),
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(v.as_deref(), Some("12.5"));
    // A failed cast is reported without the datastore's words.
    c.sql(&format!(
        "UPDATE {q} SET \"{}\" = 'abc' WHERE id = 'rec_2'",
        id(&a)
    ))
    .await
    .unwrap();
    let r = c.patch(&id(&a), json!({"type": "number"})).await;
    assert_eq!(r.status, 400);
    assert!(
        !r.error_message().contains("numeric"),
        "{}",
        r.error_message()
    );
    assert!(r.error_message().contains("'A'"));
    assert_eq!(
        c.column_type(&t, &id(&a)).await.as_deref(),
        Some("text"),
        "rolled back"
    );
    // Select to multi; the reverse is refused.
    let s = c
        .field(&t, json!({"name": "S", "type": "single_select", "options": {"choices": [{"id": "cccccccc", "name": "c"}]}}))
        .await;
    c.sql(&format!(
        "UPDATE {q} SET \"{}\" = 'cccccccc' WHERE id = 'rec_1'",
        id(&s)
    ))
    .await
    .unwrap();
    let r = c.patch(&id(&s), json!({"type": "multi_select"})).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.body["field"]["options"]["choices"][0]["id"], "cccccccc");
    let v: Vec<String> = c
        .app
        .pg
        .query_one(
            &format!("SELECT \"{}\" FROM {q} WHERE id = 'rec_1'", id(&s)),
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(v, ["cccccccc"]);
    let r = c.patch(&id(&s), json!({"type": "single_select"})).await;
    assert_eq!(r.status, 400);
    let chk = c.field(&t, json!({"name": "C", "type": "checkbox"})).await;
    assert_eq!(
        c.patch(&id(&chk), json!({"type": "single_line_text"}))
            .await
            .status,
        200
    );
    for (ty, bad) in [
        ("formula", "door"),
        ("link", "into link"),
        ("date", "cross"),
    ] {
        let r = c.patch(&id(&a), json!({"type": ty})).await;
        assert_eq!(r.status, 400, "{bad}");
    }
    // PATCH shape rules.
    assert_eq!(c.patch(&id(&a), json!({})).await.status, 400);
    assert_eq!(c.patch(&id(&a), json!({"name": 3})).await.status, 400);
    assert_eq!(
        c.patch("fld_nope00000000", json!({"name": "x"}))
            .await
            .status,
        404
    );
    let r = c.patch(&id(&a), json!({"name": ""})).await;
    assert_eq!(r.status, 200, "empty name allowed on rename");
    let r = c.patch(&id(&a), json!({"name": " S"})).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body["field"]["name"], " S", "not trimmed");
    let r = c.patch(&id(&a), json!({"name": "S"})).await;
    assert_eq!(r.status, 409);
    let r = c.patch(&id(&a), json!({"options": {"zzz": 1}})).await;
    assert_eq!(r.status, 400);
    assert!(r.error_message().contains("'zzz'"));
}
