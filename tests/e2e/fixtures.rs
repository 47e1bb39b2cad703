//! The records fixture the records, trash and views suites share: one
//! person's database with People and Tasks tables, every kind of Tasks
//! field, and five tasks (see [`fixture`]).

use std::collections::HashMap;

use e2e_tests::{id, ids_in, Person};
use serde_json::{json, Value};

/// Record ids of a list or write reply, in order.
pub fn rec_ids(reply: &Value) -> Vec<String> {
    ids_in(reply, "records")
}

/// The record with id `rec` in a list or write reply.
pub fn record_in<'a>(reply: &'a Value, rec: &str) -> &'a Value {
    reply["records"]
        .as_array()
        .expect("records")
        .iter()
        .find(|x| id(x) == rec)
        .unwrap_or_else(|| panic!("{rec} in the reply"))
}

/// A database with two tables: People (Name, Age) and Tasks with text,
/// number, date, select, checkbox, long text, link, lookup, formula,
/// button and a unique text field; five tasks.
pub struct Fx {
    pub person: Person,
    pub db: String,
    pub people: String,
    pub tasks: String,
    /// field name -> id on Tasks
    pub f: HashMap<&'static str, String>,
    pub ann: String,
    pub bob: String,
    /// r[0..5] as described in `fixture`.
    pub r: Vec<String>,
}

impl Fx {
    pub fn records(&self) -> String {
        format!("/api/tables/{}/records", self.tasks)
    }
    /// GET the task list with a query string; asserts 200.
    pub async fn list(&self, query: &str) -> Value {
        self.person
            .api
            .get(&format!("{}?{query}", self.records()))
            .await
            .expect_ok()
            .clone()
    }
    /// Indexes into `r` of the records a filter returns (sorted).
    pub async fn matching(&self, filter: Value) -> Vec<usize> {
        let q = urlencode(&filter.to_string());
        let reply = self.list(&format!("filter={q}")).await;
        let mut out: Vec<usize> = rec_ids(&reply)
            .iter()
            .map(|i| {
                self.r
                    .iter()
                    .position(|x| x == i)
                    .expect("a fixture record")
            })
            .collect();
        out.sort();
        out
    }
}

pub fn urlencode(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

pub async fn fixture() -> Fx {
    let person = Person::new().await;
    let api = &person.api;
    let db = api.new_database("rec").await;
    let people = id(&api.create_table(&db, "People").await);
    let p_name = id(&api
        .create_field(&people, json!({"name": "Name", "type": "single_line_text"}))
        .await);
    api.create_field(&people, json!({"name": "Age", "type": "number"}))
        .await;
    let tasks = id(&api.create_table(&db, "Tasks").await);
    let mut f: HashMap<&'static str, String> = HashMap::new();
    for (name, body) in [
        ("Title", json!({"type": "single_line_text"})),
        ("Points", json!({"type": "number"})),
        ("Due", json!({"type": "date"})),
        (
            "Status",
            json!({"type": "single_select", "options": {"choices": [{"name": "To do"}, {"name": "Doing"}, {"name": "Done"}]}}),
        ),
        ("Done", json!({"type": "checkbox"})),
        ("Note", json!({"type": "long_text"})),
        (
            "Owner",
            json!({"type": "link", "options": {"target_table_id": people}}),
        ),
        (
            "Code",
            json!({"type": "single_line_text", "options": {"unique": true}}),
        ),
    ] {
        let mut body = body;
        body["name"] = json!(name);
        f.insert(name, id(&api.create_field(&tasks, body).await));
    }
    // Derived fields, once the link exists.
    for (name, body) in [
        (
            "Owner Name",
            json!({"type": "lookup", "options": {"link_field_id": f["Owner"], "target_field_id": p_name}}),
        ),
        (
            "Double",
            json!({"type": "formula", "options": {"expression": "{Points} * 2"}}),
        ),
        (
            "Go",
            json!({"type": "button", "options": {"url_template": "https://example.test/t?title={Title}&p={Points}&s={Status}&o={Owner}&x={Nope}"}}),
        ),
    ] {
        let mut body = body;
        body["name"] = json!(name);
        let field = api.create_field(&tasks, body).await;
        if name == "Owner Name" {
            assert_eq!(field["type"], "lookup_text");
        }
        f.insert(name, id(&field));
    }

    let made = api
        .post(
            &format!("/api/tables/{people}/records"),
            json!({"records": [{"fields": {"Name": "Ann", "Age": 30}}, {"fields": {"Name": "Bob", "Age": 40}}]}),
        )
        .await;
    let folks = rec_ids(made.expect_ok());
    let (ann, bob) = (folks[0].clone(), folks[1].clone());
    let made = api
        .post(
            &format!("/api/tables/{tasks}/records"),
            json!({"records": [
                {"fields": {"Title": "Write spec", "Points": 5, "Due": "2026-01-10", "Status": "Doing", "Done": true, "Note": "50% done", "Owner": [ann], "Code": "A1"}},
                {"fields": {"Title": "Review", "Points": 3, "Due": "2026-02-01", "Status": "To do", "Note": "500 lines", "Owner": [{"id": bob}], "Code": "B2"}},
                {"fields": {"Title": "Ship", "Points": null, "Done": false}},
                {"fields": {"Title": "", "Points": 8, "Due": "2026-03-15", "Status": "Done", "Owner": [ann, bob]}},
                {"fields": {"Title": "Plan_b", "Points": 1, "Due": "2025-12-31", "Status": "To do", "Note": "a_b"}},
            ]}),
        )
        .await;
    let r = rec_ids(made.expect_ok());
    assert_eq!(r.len(), 5);
    Fx {
        person,
        db,
        people,
        tasks,
        f,
        ann,
        bob,
        r,
    }
}
