//! Fields: real columns, options, links, computed fields, type changes,
//! deletes, all against real PostgreSQL (generated SQL executed).

use serde_json::{json, Value};

use crate::helpers::*;

mod formulas;
mod links;

pub(super) struct Ctx {
    app: TestApp,
    db: String,
    owner: cluster_protocol::principal::Principal,
}

pub(super) async fn setup() -> Ctx {
    let app = spawn_app().await;
    let (db, owner) = app.owned_database().await;
    Ctx { app, db, owner }
}

impl Ctx {
    pub(super) async fn table(&self, name: &str) -> String {
        let t = self.app.create_table(&self.db, &self.owner, name).await;
        t["id"].as_str().unwrap().to_owned()
    }
    pub(super) async fn add(&self, table: &str, body: Value) -> Reply {
        self.app
            .post(&format!("/api/tables/{table}/fields"), &self.owner, body)
            .await
    }
    pub(super) async fn field(&self, table: &str, body: Value) -> Value {
        let r = self.add(table, body.clone()).await;
        assert_eq!(r.status, 200, "{body}: {:?}", r.body);
        r.body["field"].clone()
    }
    pub(super) async fn patch(&self, field: &str, body: Value) -> Reply {
        self.app
            .patch(&format!("/api/fields/{field}"), &self.owner, body)
            .await
    }
    pub(super) async fn delete(&self, field: &str) -> Reply {
        self.app
            .delete(&format!("/api/fields/{field}"), &self.owner)
            .await
    }
    pub(super) async fn fields(&self, table: &str) -> Vec<Value> {
        let r = self
            .app
            .get(&format!("/api/tables/{table}/fields"), &self.owner)
            .await;
        assert_eq!(r.status, 200, "{:?}", r.body);
        r.body["fields"].as_array().unwrap().clone()
    }
    pub(super) async fn get_table(&self, table: &str) -> Value {
        let r = self
            .app
            .get(&format!("/api/tables/{table}"), &self.owner)
            .await;
        assert_eq!(r.status, 200, "{:?}", r.body);
        r.body["table"].clone()
    }
    pub(super) async fn column_type(&self, table: &str, column: &str) -> Option<String> {
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
    pub(super) async fn sql(&self, sql: &str) -> Result<u64, tokio_postgres::Error> {
        self.app.pg.execute(sql, &[]).await
    }
    pub(super) fn qualified(&self, table: &str) -> String {
        format!("\"{}\".\"{table}\"", self.db)
    }
    pub(super) async fn version(&self) -> i64 {
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

pub(super) fn id(v: &Value) -> String {
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
