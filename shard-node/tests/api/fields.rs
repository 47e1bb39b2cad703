//! Fields: real columns, options, links, computed fields, type changes,
//! deletes, all against real PostgreSQL (generated SQL executed).

use serde_json::{json, Value};

use crate::helpers::*;

struct Ctx {
    app: TestApp,
    db: String,
    owner: cluster_protocol::principal::Principal,
}

async fn setup() -> Ctx {
    let app = spawn_app().await;
    let (db, owner) = app.owned_database().await;
    Ctx { app, db, owner }
}

impl Ctx {
    async fn table(&self, name: &str) -> String {
        let t = self.app.create_table(&self.db, &self.owner, name).await;
        t["id"].as_str().unwrap().to_owned()
    }
    async fn add(&self, table: &str, body: Value) -> Reply {
        self.app
            .post(&format!("/api/tables/{table}/fields"), &self.owner, body)
            .await
    }
    async fn field(&self, table: &str, body: Value) -> Value {
        let r = self.add(table, body.clone()).await;
        assert_eq!(r.status, 200, "{body}: {:?}", r.body);
        r.body["field"].clone()
    }
    async fn patch(&self, field: &str, body: Value) -> Reply {
        self.app
            .patch(&format!("/api/fields/{field}"), &self.owner, body)
            .await
    }
    async fn delete(&self, field: &str) -> Reply {
        self.app
            .delete(&format!("/api/fields/{field}"), &self.owner)
            .await
    }
    async fn fields(&self, table: &str) -> Vec<Value> {
        let r = self
            .app
            .get(&format!("/api/tables/{table}/fields"), &self.owner)
            .await;
        assert_eq!(r.status, 200, "{:?}", r.body);
        r.body["fields"].as_array().unwrap().clone()
    }
    async fn get_table(&self, table: &str) -> Value {
        let r = self
            .app
            .get(&format!("/api/tables/{table}"), &self.owner)
            .await;
        assert_eq!(r.status, 200, "{:?}", r.body);
        r.body["table"].clone()
    }
    async fn column_type(&self, table: &str, column: &str) -> Option<String> {
        self.app
            .pg
            .query_opt(
                "SELECT data_type::text FROM information_schema.columns
                 WHERE table_schema = $1 AND table_name = $2 AND column_name = $3",
                &[&self.db, &table, &column],
            )
            .await
            .unwrap()
            .map(|r| r.get(0))
    }
    async fn sql(&self, sql: &str) -> Result<u64, tokio_postgres::Error> {
        self.app.pg.execute(sql, &[]).await
    }
    fn qualified(&self, table: &str) -> String {
        format!("\"{}\".\"{table}\"", self.db)
    }
    async fn version(&self) -> i64 {
        self.app
            .pg
            .query_one(
                "SELECT schema_version FROM databases WHERE id = $1",
                &[&self.db],
            )
            .await
            .unwrap()
            .get(0)
    }
}

fn id(v: &Value) -> String {
    v["id"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn every_stored_costume_is_a_real_column() {
    let c = setup().await;
    let t = c.table("Things").await;
    let cases = [
        ("single_line_text", json!({}), Some("text")),
        ("long_text", json!({"rich": true}), Some("text")),
        ("email", json!({}), Some("text")),
        ("phone", json!({}), Some("text")),
        ("url", json!({}), Some("text")),
        ("number", json!({"decimals": 2}), Some("numeric")),
        ("currency", json!({"symbol": "€"}), Some("numeric")),
        ("percent", json!({}), Some("numeric")),
        ("rating", json!({"max": 5}), Some("numeric")),
        (
            "duration",
            json!({"duration_format": "h:mm"}),
            Some("numeric"),
        ),
        ("date", json!({}), Some("date")),
        (
            "date",
            json!({"include_time": true}),
            Some("timestamp with time zone"),
        ),
        ("checkbox", json!({}), Some("boolean")),
        ("member", json!({}), Some("text")),
        ("multi_member", json!({}), Some("ARRAY")),
        ("single_select", json!({"choices": []}), Some("text")),
        ("multi_select", json!({}), Some("ARRAY")),
        ("attachment", json!({}), Some("ARRAY")),
        ("button", json!({"url_template": "https://x.test"}), None),
    ];
    let before = c.version().await;
    for (i, (ty, options, column)) in cases.iter().enumerate() {
        let f = c
            .field(
                &t,
                json!({"name": format!("  F{i} "), "type": ty, "options": options}),
            )
            .await;
        assert_eq!(f["name"], format!("F{i}"), "trimmed");
        assert_eq!(f["type"], *ty);
        assert_eq!(f["position"], i as i64);
        assert!(f["operators"].is_array());
        let fid = id(&f);
        assert!(fid.starts_with(&format!("fld_{}", &c.db[3..8])));
        assert_eq!(
            c.column_type(&t, &fid).await.as_deref(),
            *column,
            "column of {ty}"
        );
    }
    assert_eq!(c.version().await, before + cases.len() as i64);
    let fields = c.fields(&t).await;
    let ops = |i: usize| fields[i]["operators"].clone();
    assert_eq!(
        ops(0),
        json!([
            "is",
            "is_not",
            "contains",
            "not_contains",
            "empty",
            "not_empty"
        ])
    );
    assert_eq!(ops(5)[2], "greater");
    assert_eq!(ops(10)[2], "before");
    assert_eq!(ops(12), json!(["is"]));
    assert_eq!(
        ops(15),
        json!(["is", "is_not", "any_of", "none_of", "empty", "not_empty"])
    );
    assert_eq!(ops(16)[0], "has_any");
    assert_eq!(ops(17), json!(["empty", "not_empty"]));
    assert_eq!(ops(18), json!([]));
    // Real SQL writes into the real columns.
    let (text, num, date, dt, check, multi) = (
        id(&fields[0]),
        id(&fields[5]),
        id(&fields[10]),
        id(&fields[11]),
        id(&fields[12]),
        id(&fields[16]),
    );
    c.sql(&format!(
        "INSERT INTO {} (id, \"{text}\", \"{num}\", \"{date}\", \"{dt}\", \"{check}\", \"{multi}\")
         VALUES ('rec_x', 'hello', 1.5, '2026-01-02', '2026-01-02T03:04:05Z', true, ARRAY['a','b'])",
        c.qualified(&t)
    ))
    .await
    .unwrap();
    // Writable listing leaves out button and attachment.
    let r = c
        .app
        .get(&format!("/api/tables/{t}/fields?writable=true"), &c.owner)
        .await;
    let names: Vec<&str> = r.body["fields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    assert!(!names.contains(&"F17") && !names.contains(&"F18"));
    assert!(names.contains(&"F16"));
}

#[tokio::test]
async fn create_refusals() {
    let c = setup().await;
    let t = c.table("T").await;
    let r = c.add(&t, json!({"name": "x", "type": "nope"})).await;
    assert_eq!(r.status, 400);
    assert!(
        r.error_message().contains("single_line_text"),
        "{}",
        r.error_message()
    );
    assert!(r.error_message().contains("rollup_date"));
    assert!(!r.error_message().contains(" formula,"));
    for body in [
        json!({"type": "number"}),
        json!({"name": "  ", "type": "number"}),
        json!({"name": 5, "type": "number"}),
        json!({"name": "x"}),
        json!({"name": "x", "type": ""}),
        json!({"name": "x", "type": "number", "options": []}),
    ] {
        let r = c.add(&t, body.clone()).await;
        assert_eq!(r.status, 400, "{body}: {:?}", r.body);
    }
    let r = c
        .add(
            &t,
            json!({"name": "x", "type": "number", "options": {"bogus": 1}}),
        )
        .await;
    assert_eq!(r.status, 400);
    assert!(r.error_message().contains("'bogus'"));
    assert!(r.error_message().contains("decimals"));
    c.field(&t, json!({"name": "Name", "type": "single_line_text"}))
        .await;
    let r = c.add(&t, json!({"name": " Name ", "type": "email"})).await;
    assert_eq!(r.status, 409, "{:?}", r.body);
    assert_eq!(r.error_code(), "conflict");
    let r = c
        .app
        .post(
            "/api/tables/tbl_nope00000000/fields",
            &c.owner,
            json!({"name": "a", "type": "number"}),
        )
        .await;
    assert_eq!(r.status, 404);
    let r = c
        .app
        .post(
            &format!("/api/tables/{t}/fields"),
            &viewer(&c.db),
            json!({"name": "a", "type": "number"}),
        )
        .await;
    assert_eq!(r.status, 403);
    // Any member lists fields.
    let r = c
        .app
        .get(&format!("/api/tables/{t}/fields"), &viewer(&c.db))
        .await;
    assert_eq!(r.status, 200);
}

#[tokio::test]
async fn display_field_is_the_first_that_can_name_a_record() {
    let c = setup().await;
    let t = c.table("T").await;
    c.field(&t, json!({"name": "Done", "type": "checkbox"}))
        .await;
    c.field(&t, json!({"name": "Files", "type": "attachment"}))
        .await;
    assert_eq!(c.get_table(&t).await["display_field_id"], Value::Null);
    let n = c
        .field(&t, json!({"name": "Title", "type": "number"}))
        .await;
    c.field(&t, json!({"name": "Other", "type": "single_line_text"}))
        .await;
    let table = c.get_table(&t).await;
    assert_eq!(table["display_field_id"], n["id"]);
    assert_eq!(table["fields"][2]["operators"][2], "greater");
    // Deleting it moves the display field to the next candidate.
    assert_eq!(c.delete(&id(&n)).await.status, 200);
    let table = c.get_table(&t).await;
    assert_eq!(table["display_field_id"], table["fields"][2]["id"]);
}

#[tokio::test]
async fn select_choices() {
    let c = setup().await;
    let t = c.table("T").await;
    let f = c
        .field(
            &t,
            json!({"name": "S", "type": "single_select", "options": {"choices": [
                {"name": " Open ", "color": "red"}, {"id": "keep1234", "name": "Done"}
            ]}}),
        )
        .await;
    let choices = f["options"]["choices"].as_array().unwrap();
    assert_eq!(choices[0]["name"], "Open");
    assert_eq!(choices[0]["color"], "red");
    assert_eq!(choices[0]["id"].as_str().unwrap().len(), 8);
    assert_eq!(choices[1]["id"], "keep1234");
    for bad in [
        json!([{"name": "A"}, {"name": "A "}]),
        json!([{"color": "x"}]),
        json!([{"name": "__service_no_such_choice__"}]),
        json!([{"name": "x".repeat(501)}]),
        json!((0..1001)
            .map(|i| json!({"name": format!("c{i}")}))
            .collect::<Vec<_>>()),
    ] {
        let r = c
            .add(
                &t,
                json!({"name": "Bad", "type": "multi_select", "options": {"choices": bad}}),
            )
            .await;
        assert_eq!(r.status, 400, "{:?}", r.body);
    }
    let fid = id(&f);
    // Without choices: kept. Response has no operators.
    let r = c.patch(&fid, json!({"options": {"color": "x"}})).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(
        r.body["field"]["options"]["choices"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    assert!(r.body["field"].get("operators").is_none());
    // Writable listing has label/value aliases.
    let r = c
        .app
        .get(&format!("/api/tables/{t}/fields?writable=true"), &c.owner)
        .await;
    let ch = &r.body["fields"][0]["options"]["choices"][1];
    assert_eq!(ch["label"], "Done");
    assert_eq!(ch["value"], "keep1234");
    // A removed choice clears the cells that held it.
    c.sql(&format!(
        "INSERT INTO {} (id, \"{fid}\") VALUES ('rec_a', 'keep1234')",
        c.qualified(&t)
    ))
    .await
    .unwrap();
    let r = c
        .patch(&fid, json!({"options": {"choices": [{"name": "Only"}]}}))
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let row = c
        .app
        .pg
        .query_one(&format!("SELECT \"{fid}\" FROM {}", c.qualified(&t)), &[])
        .await
        .unwrap();
    assert_eq!(row.get::<_, Option<String>>(0), None);
    let r = c.patch(&fid, json!({"options": {"choices": []}})).await;
    assert_eq!(r.body["field"]["options"]["choices"], json!([]));
}

#[tokio::test]
async fn unique_builds_a_partial_index_and_is_frozen() {
    let c = setup().await;
    let t = c.table("T").await;
    let f = c
        .field(
            &t,
            json!({"name": "Code", "type": "single_line_text", "options": {"unique": true}}),
        )
        .await;
    let fid = id(&f);
    let q = c.qualified(&t);
    c.sql(&format!(
        "INSERT INTO {q} (id, \"{fid}\") VALUES ('rec_1', 'A')"
    ))
    .await
    .unwrap();
    assert!(c
        .sql(&format!(
            "INSERT INTO {q} (id, \"{fid}\") VALUES ('rec_2', 'A')"
        ))
        .await
        .is_err());
    // A trashed record does not count.
    c.sql(&format!(
        "INSERT INTO {q} (id, \"{fid}\", deleted_at) VALUES ('rec_3', 'A', now())"
    ))
    .await
    .unwrap();
    // Stored and inert on a costume without the index.
    let lt = c
        .field(
            &t,
            json!({"name": "Notes", "type": "long_text", "options": {"unique": true}}),
        )
        .await;
    c.sql(&format!(
        "INSERT INTO {q} (id, \"{}\") VALUES ('rec_4', 'x'), ('rec_5', 'x')",
        id(&lt)
    ))
    .await
    .unwrap();
    let r = c.patch(&fid, json!({"options": {"unique": false}})).await;
    assert_eq!(r.status, 400);
    let r = c.patch(&fid, json!({"options": {}})).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body["field"]["options"]["unique"], true, "kept");
    let d = c
        .field(
            &t,
            json!({"name": "When", "type": "date", "options": {"include_time": true}}),
        )
        .await;
    let r = c
        .patch(&id(&d), json!({"options": {"include_time": false}}))
        .await;
    assert_eq!(r.status, 400);
    assert!(r.error_message().contains("include_time"));
}

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

#[tokio::test]
async fn links_lookups_and_rollups() {
    let c = setup().await;
    let people = c.table("People").await;
    let orders = c.table("Orders").await;
    let pname = c
        .field(&people, json!({"name": "Name", "type": "single_line_text"}))
        .await;
    let amount = c
        .field(&orders, json!({"name": "Amount", "type": "number"}))
        .await;
    let when = c
        .field(&orders, json!({"name": "When", "type": "date"}))
        .await;
    let note = c
        .field(&orders, json!({"name": "Note", "type": "long_text"}))
        .await;
    let link = c
        .field(
            &people,
            json!({"name": "Orders", "type": "link", "options": {"target_table_id": orders}}),
        )
        .await;
    assert_eq!(link["options"]["direction"], "forward");
    assert_eq!(link["options"]["allow_multiple"], true);
    assert_eq!(link["operators"][0], "has_any");
    let mirror_id = link["options"]["pair_field_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let of = c.fields(&orders).await;
    let mirror = of.iter().find(|f| f["id"] == mirror_id.as_str()).unwrap();
    assert_eq!(mirror["name"], "People");
    assert_eq!(mirror["options"]["direction"], "reverse");
    assert_eq!(mirror["options"]["pair_field_id"], link["id"]);
    assert_eq!(mirror["options"]["target_table_id"], people.as_str());
    // The connector is real: a primary key, link rows vanish with records.
    let conn = format!("\"{}\".\"lnk_{}\"", c.db, id(&link));
    c.sql(&format!(
        "INSERT INTO {} (id) VALUES ('rec_p')",
        c.qualified(&people)
    ))
    .await
    .unwrap();
    c.sql(&format!(
        "INSERT INTO {} (id, \"{}\", \"{}\") VALUES ('rec_o1', 5, '2026-01-01'), ('rec_o2', 7, '2026-02-01')",
        c.qualified(&orders),
        id(&amount),
        id(&when)
    ))
    .await
    .unwrap();
    c.sql(&format!(
        "INSERT INTO {conn} (from_id, to_id) VALUES ('rec_p', 'rec_o1'), ('rec_p', 'rec_o2')"
    ))
    .await
    .unwrap();
    assert!(c
        .sql(&format!(
            "INSERT INTO {conn} (from_id, to_id) VALUES ('rec_p', 'rec_o1')"
        ))
        .await
        .is_err());
    // Mirror clashes and self links.
    let r = c
        .add(
            &people,
            json!({"name": "Again", "type": "link", "options": {"target_table_id": orders}}),
        )
        .await;
    assert_eq!(r.status, 409, "mirror 'People' taken: {:?}", r.body);
    let r = c
        .add(
            &people,
            json!({"name": "People", "type": "link", "options": {"target_table_id": people}}),
        )
        .await;
    assert_eq!(r.status, 409, "self link with one name");
    let selfl = c
        .field(&people, json!({"name": "Friends", "type": "link", "options": {"target_table_id": people, "reverse_field_name": "Friend of"}}))
        .await;
    let r = c
        .add(&people, json!({"name": "L", "type": "link", "options": {}}))
        .await;
    assert_eq!(r.status, 400);
    let r = c
        .add(&people, json!({"name": "L", "type": "link", "options": {"target_table_id": "tbl_ZZZZZabcdefg", "reverse_field_name": "x"}}))
        .await;
    assert_eq!(r.status, 400, "another database: {:?}", r.body);
    let other = format!("tbl_{}abcdefg", &c.db[3..8]);
    let r = c
        .add(&people, json!({"name": "L", "type": "link", "options": {"target_table_id": other, "reverse_field_name": "x"}}))
        .await;
    assert_eq!(r.status, 404);
    let r = c
        .add(&people, json!({"name": "L", "type": "link", "options": {"target_table_id": orders, "reverse_field_name": "y",
            "conditions": {"conditions": [{"field": "Nope", "op": "is", "value": 1}]}}}))
        .await;
    assert_eq!(r.status, 400);
    assert!(r.error_message().contains("Nope"));
    let r = c
        .add(&people, json!({"name": "L", "type": "link", "options": {"target_table_id": orders, "reverse_field_name": "y",
            "conditions": {"conditions": [{"field": "Amount", "op": "greater", "value": 1}]},
            "picker_field_ids": [id(&amount)]}}))
        .await;
    assert_eq!(r.status, 400, "the display field is not a picker field");
    assert!(r.error_message().contains("display field"));
    let r = c
        .add(&people, json!({"name": "L", "type": "link", "options": {"target_table_id": orders, "reverse_field_name": "y",
            "conditions": {"conditions": [{"field": "Amount", "op": "greater", "value": 1}]},
            "picker_field_ids": [id(&note), id(&when)]}}))
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let l2 = id(&r.body["field"]);
    // Only conditions and pickers change; locked keys refuse.
    let r = c
        .patch(&l2, json!({"options": {"allow_multiple": false}}))
        .await;
    assert_eq!(r.status, 400);
    assert!(r.error_message().contains("allow_multiple"));
    let r = c
        .patch(
            &l2,
            json!({"options": {"picker_field_ids": [id(&note)], "target_table_id": orders}}),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(
        r.body["field"]["options"]["picker_field_ids"],
        json!([id(&note)])
    );
    assert!(r.body["field"]["options"].get("conditions").is_none());
    let r = c
        .patch(
            &l2,
            json!({"options": {"picker_field_ids": [id(&amount), id(&amount), id(&when)]}}),
        )
        .await;
    assert_eq!(r.status, 400);
    let r = c
        .patch(&id(&link), json!({"options": {"picker_field_ids": [id(&note), id(&when), id(&note), id(&when), id(&note)]}}))
        .await;
    assert_eq!(r.status, 400);

    // Lookups and rollups.
    let lk = c
        .field(&people, json!({"type": "lookup", "options": {"link_field_id": id(&link), "target_field_id": id(&amount)}}))
        .await;
    assert_eq!(lk["name"], "Amount (from Orders)");
    assert_eq!(lk["type"], "lookup_number");
    assert_eq!(lk["options"]["source_presentation"]["type"], "number");
    assert_eq!(lk["operators"][2], "greater");
    let lk2 = c
        .field(&people, json!({"type": "lookup", "options": {"link_field_id": id(&link), "target_field_id": id(&amount)}}))
        .await;
    assert_eq!(lk2["name"], "Amount (from Orders) 2");
    let sum = c
        .field(&people, json!({"type": "rollup", "options": {"link_field_id": id(&link), "target_field_id": id(&amount), "aggregation": "sum"}}))
        .await;
    assert_eq!(sum["name"], "Sum of Amount (from Orders)");
    assert_eq!(sum["type"], "rollup_number");
    let max = c
        .field(&people, json!({"name": "Last", "type": "rollup", "options": {"link_field_id": id(&link), "target_field_id": id(&when), "aggregation": "max"}}))
        .await;
    assert_eq!(max["type"], "rollup_date");
    let count = c
        .field(&people, json!({"type": "rollup", "options": {"link_field_id": id(&link), "target_field_id": id(&amount), "aggregation": "count"}}))
        .await;
    assert_eq!(count["name"], "Count of Orders");
    assert_eq!(count["options"]["target_field_id"], Value::Null);
    let name_lookup = c
        .field(&orders, json!({"type": "lookup", "options": {"link_field_id": mirror_id, "target_field_id": id(&pname)}}))
        .await;
    assert_eq!(name_lookup["type"], "lookup_text");
    for (opts, why) in [
        (json!({"link_field_id": id(&link)}), "no target"),
        (json!({"target_field_id": id(&amount)}), "no link"),
        (
            json!({"link_field_id": id(&pname), "target_field_id": id(&amount)}),
            "not a link",
        ),
        (
            json!({"link_field_id": id(&link), "target_field_id": id(&pname)}),
            "not on target",
        ),
        (
            json!({"link_field_id": id(&link), "target_field_id": id(&amount), "aggregation": "median"}),
            "bad agg",
        ),
        (
            json!({"link_field_id": id(&link), "target_field_id": id(&when), "aggregation": "sum"}),
            "sum of date",
        ),
    ] {
        let ty = if opts.get("aggregation").is_some() {
            "rollup"
        } else {
            "lookup"
        };
        let r = c.add(&people, json!({"type": ty, "options": opts})).await;
        assert_eq!(r.status, 400, "{why}: {:?}", r.body);
    }
    let r = c
        .add(&orders, json!({"type": "lookup", "options": {"link_field_id": mirror_id, "target_field_id": id(&lk)}}))
        .await;
    assert_eq!(r.status, 400, "surfacing a lookup");
    // A conversion a lookup relies on is refused, naming it.
    let r = c
        .patch(&id(&amount), json!({"type": "single_line_text"}))
        .await;
    assert_eq!(r.status, 400);
    assert!(
        r.error_message().contains("Amount (from Orders)"),
        "{}",
        r.error_message()
    );
    // Deleting the link removes mirror, connector, and riding lookups.
    assert_eq!(c.delete(&id(&link)).await.status, 200);
    let names: Vec<String> = c
        .fields(&people)
        .await
        .iter()
        .map(|f| f["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(names, ["Name", "Friends", "Friend of", "L"]);
    assert!(c
        .fields(&orders)
        .await
        .iter()
        .all(|f| f["id"] != mirror_id.as_str()));
    assert!(c
        .fields(&orders)
        .await
        .iter()
        .all(|f| f["id"] != name_lookup["id"]));
    assert!(c.sql(&format!("SELECT 1 FROM {conn}")).await.is_err());
    // Self link: deleting one side deletes both.
    assert_eq!(c.delete(&id(&selfl)).await.status, 200);
    assert_eq!(c.fields(&people).await.len(), 2);
    // Table delete drops the other side's mirror too.
    let r = c
        .app
        .delete(&format!("/api/tables/{orders}"), &c.owner)
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(c.fields(&people).await.len(), 1);
}

#[tokio::test]
async fn buttons() {
    let c = setup().await;
    let t = c.table("T").await;
    let b = c
        .field(&t, json!({"name": "Go", "type": "button", "options": {"label": "x".repeat(45), "url_template": "https://a.test/{id}"}}))
        .await;
    assert_eq!(b["options"]["label"].as_str().unwrap().len(), 40);
    assert_eq!(b["options"]["action"], "link");
    assert_eq!(b["operators"], json!([]));
    assert_eq!(c.get_table(&t).await["display_field_id"], Value::Null);
    for opts in [
        json!({}),
        json!({"url_template": "javascript:alert(1)"}),
        json!({"action": "webhook"}),
        json!({"action": "teleport", "url_template": "https://a"}),
        json!({"url_template": "https://a", "condition": {"x": {"relative": "today", "offset": 400}}}),
    ] {
        let r = c
            .add(&t, json!({"name": "B", "type": "button", "options": opts}))
            .await;
        assert_eq!(r.status, 400, "{:?}", r.body);
    }
    let r = c
        .add(
            &t,
            json!({"name": "B", "type": "button", "options": {"webhook_id": "whk_nope00000000"}}),
        )
        .await;
    assert_eq!(r.status, 404);
    let whk = format!("whk_{}abcdefg", &c.db[3..8]);
    c.app
        .pg
        .execute(
            "INSERT INTO webhooks (id, database_id, table_id) VALUES ($1, $2, $3)",
            &[&whk, &c.db, &t],
        )
        .await
        .unwrap();
    let w = c
        .field(
            &t,
            json!({"name": "Hook", "type": "button", "options": {"webhook_id": whk}}),
        )
        .await;
    assert_eq!(w["options"]["action"], "webhook");
    let r = c
        .patch(
            &id(&w),
            json!({"options": {"label": "New", "url_template": "https://b"}}),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.body["field"]["options"]["action"], "link");
    assert!(r.body["field"]["options"].get("webhook_id").is_none());
    // Deleting a field strips it from webhook watch lists.
    let n = c.field(&t, json!({"name": "N", "type": "number"})).await;
    c.app
        .pg
        .execute(
            "UPDATE webhooks SET watched_field_ids = ARRAY[$1, 'fld_other'] WHERE id = $2",
            &[&id(&n), &whk],
        )
        .await
        .unwrap();
    assert_eq!(c.delete(&id(&n)).await.status, 200);
    let watched: Vec<String> = c
        .app
        .pg
        .query_one(
            "SELECT watched_field_ids FROM webhooks WHERE id = $1",
            &[&whk],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(watched, ["fld_other"]);
    assert_eq!(c.column_type(&t, &id(&n)).await, None);
    assert_eq!(c.delete(&id(&n)).await.status, 404);
}

#[tokio::test]
async fn cap_of_five_hundred_fields() {
    let c = setup().await;
    let a = c.table("A").await;
    let b = c.table("B").await;
    // Seed 499 fields through the API (real columns), then hit the cap.
    for i in 0..499 {
        c.field(&a, json!({"name": format!("f{i}"), "type": "checkbox"}))
            .await;
    }
    // A link would put A at 500 and B at 1: allowed.
    c.field(
        &b,
        json!({"name": "ToA", "type": "link", "options": {"target_table_id": a}}),
    )
    .await;
    let r = c
        .add(&a, json!({"name": "one more", "type": "number"}))
        .await;
    assert_eq!(r.status, 400);
    assert!(r.error_message().contains("500"));
    let r = c
        .add(&b, json!({"name": "L2", "type": "link", "options": {"target_table_id": a, "reverse_field_name": "zz"}}))
        .await;
    assert_eq!(r.status, 400, "cap checked on the target too");
}
