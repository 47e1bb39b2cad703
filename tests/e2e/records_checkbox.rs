//! Checkbox cells. Part A: unset cells read null; part B: `is false`
//! matches never-set cells, and ascending puts empty last (descending
//! first). A checkbox never written reads null until a value is written
//! (writing `false` reads `false`, writing null clears it again), on every
//! read path (one record, a list page, a write's reply, lookups of it);
//! filters, sort and paging, upsert matching, formulas and the cast to
//! text agree with that.

use e2e_tests::{id, Person};
use serde_json::{json, Value};

use crate::fixtures::{rec_ids, urlencode};

struct Items {
    person: Person,
    table: String,
    /// Name -> record id.
    recs: Vec<(&'static str, String)>,
}

impl Items {
    fn path(&self) -> String {
        format!("/api/tables/{}/records", self.table)
    }
    fn rec(&self, name: &str) -> &str {
        &self.recs.iter().find(|(n, _)| *n == name).expect(name).1
    }
    /// Names of the records a list query returns, in order.
    async fn names(&self, query: &str) -> Vec<String> {
        let reply = self
            .person
            .api
            .get(&format!("{}?{query}", self.path()))
            .await;
        reply.expect_ok()["records"]
            .as_array()
            .expect("records")
            .iter()
            .map(|r| r["fields"]["Name"].as_str().unwrap_or("").to_owned())
            .collect()
    }
    /// `field` of every record of a list page, by record name.
    async fn listed(&self, field: &str) -> Vec<(String, Value)> {
        let reply = self.person.api.get(&self.path()).await;
        let mut out: Vec<(String, Value)> = reply.expect_ok()["records"]
            .as_array()
            .expect("records")
            .iter()
            .map(|r| {
                (
                    r["fields"]["Name"].as_str().unwrap_or("").to_owned(),
                    r["fields"][field].clone(),
                )
            })
            .collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }
    async fn one(&self, name: &str) -> Value {
        let reply = self
            .person
            .api
            .get(&format!("{}/{}", self.path(), self.rec(name)))
            .await;
        reply.expect_ok()["record"]["fields"].clone()
    }
}

/// Items (Name, Done, Seen checkboxes, a formula over Done) with four
/// records: `unset` (Done never written), `checked` (true), `cleared`
/// (false), `nulled` (null written).
async fn items() -> Items {
    let person = Person::new().await;
    let api = &person.api;
    let db = api.new_database("chk").await;
    let table = id(&api.create_table(&db, "Items").await);
    for body in [
        json!({"name": "Name", "type": "single_line_text"}),
        json!({"name": "Done", "type": "checkbox"}),
        json!({"name": "Seen", "type": "checkbox"}),
        json!({"name": "Score", "type": "formula", "options": {"expression": "IF({Done}, 1, 0)"}}),
    ] {
        api.create_field(&table, body).await;
    }
    let made = api
        .post(
            &format!("/api/tables/{table}/records"),
            json!({"records": [
                {"fields": {"Name": "unset"}},
                {"fields": {"Name": "checked", "Done": true, "Seen": true}},
                {"fields": {"Name": "cleared", "Done": false, "Seen": false}},
                {"fields": {"Name": "nulled", "Done": null}},
            ]}),
        )
        .await;
    let made = made.expect_ok();
    // The write's own reply already reads null for the never-written cells.
    let done: Vec<Value> = made["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["fields"]["Done"].clone())
        .collect();
    assert_eq!(
        done,
        vec![Value::Null, json!(true), json!(false), Value::Null]
    );
    let ids = rec_ids(made);
    let recs = ["unset", "checked", "cleared", "nulled"]
        .into_iter()
        .zip(ids)
        .collect();
    Items {
        person,
        table,
        recs,
    }
}

fn n(names: &[&str]) -> Vec<String> {
    names.iter().map(|s| s.to_string()).collect()
}

#[tokio::test]
async fn a_checkbox_never_written_reads_null_until_written() {
    let it = items().await;
    // One record, and a list page (read by another path).
    assert_eq!(it.one("unset").await["Done"], Value::Null);
    assert_eq!(it.one("checked").await["Done"], json!(true));
    assert_eq!(it.one("cleared").await["Done"], json!(false));
    assert_eq!(it.one("nulled").await["Done"], Value::Null);
    assert_eq!(
        it.listed("Done").await,
        vec![
            ("checked".into(), json!(true)),
            ("cleared".into(), json!(false)),
            ("nulled".into(), Value::Null),
            ("unset".into(), Value::Null),
        ]
    );
    // A formula reads a never-written box as unchecked.
    assert_eq!(
        it.listed("Score").await,
        vec![
            ("checked".into(), json!(1)),
            ("cleared".into(), json!(0)),
            ("nulled".into(), json!(0)),
            ("unset".into(), json!(0)),
        ]
    );
    // Written false reads false; written null reads null again.
    let api = &it.person.api;
    let r = api
        .patch(
            &it.path(),
            json!({"records": [{"id": it.rec("unset"), "fields": {"Done": false}}, {"id": it.rec("checked"), "fields": {"Done": null}}]}),
        )
        .await;
    let body = r.expect_ok();
    assert_eq!(body["records"][0]["fields"]["Done"], json!(false));
    assert_eq!(body["records"][1]["fields"]["Done"], Value::Null);
    assert_eq!(it.one("unset").await["Done"], json!(false));
    assert_eq!(it.one("checked").await["Done"], Value::Null);
}

#[tokio::test]
async fn lookups_of_a_checkbox_list_null_for_never_written_cells() {
    let it = items().await;
    let api = &it.person.api;
    let db_of = api.get(&format!("/api/tables/{}", it.table)).await;
    let db = db_of.expect_ok()["table"]["database_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let orders = id(&api.create_table(&db, "Orders").await);
    let link = id(&api
        .create_field(
            &orders,
            json!({"name": "Lines", "type": "link", "options": {"target_table_id": it.table}}),
        )
        .await);
    let done_id = {
        let fields = api.get(&format!("/api/tables/{}/fields", it.table)).await;
        let fields = fields.expect_ok()["fields"].as_array().unwrap().clone();
        id(fields.iter().find(|f| f["name"] == "Done").unwrap())
    };
    let lookup = api
        .create_field(
            &orders,
            json!({"name": "Dones", "type": "lookup", "options": {"link_field_id": link, "target_field_id": done_id}}),
        )
        .await;
    assert_eq!(lookup["type"], "lookup_checkbox");
    let lines = json!([it.rec("unset"), it.rec("checked"), it.rec("cleared")]);
    let made = api
        .post(
            &format!("/api/tables/{orders}/records"),
            json!({"records": [{"fields": {"Lines": lines}}]}),
        )
        .await;
    let order = rec_ids(made.expect_ok()).remove(0);
    let want = json!([null, true, false]);
    let one = api
        .get(&format!("/api/tables/{orders}/records/{order}"))
        .await;
    assert_eq!(one.expect_ok()["record"]["fields"]["Dones"], want);
    let page = api.get(&format!("/api/tables/{orders}/records")).await;
    assert_eq!(page.expect_ok()["records"][0]["fields"]["Dones"], want);
    // A lookup's positive operator: some linked record satisfies it.
    let filter = |v: bool| {
        urlencode(&json!({"conditions": [{"field": "Dones", "op": "is", "value": v}]}).to_string())
    };
    for v in [true, false] {
        let r = api
            .get(&format!(
                "/api/tables/{orders}/records?filter={}",
                filter(v)
            ))
            .await;
        assert_eq!(rec_ids(r.expect_ok()), vec![order.clone()], "is {v}");
    }
}

#[tokio::test]
async fn filters_sort_and_paging_treat_never_written_as_empty() {
    let it = items().await;
    let f = |v: bool| {
        let filter = json!({"conditions": [{"field": "Done", "op": "is", "value": v}]});
        format!("filter={}&sort=Name", urlencode(&filter.to_string()))
    };
    // `is false` matches never-set cells (part B); `is true` only a checked box.
    assert_eq!(
        it.names(&f(false)).await,
        n(&["cleared", "nulled", "unset"])
    );
    assert_eq!(it.names(&f(true)).await, n(&["checked"]));
    // Checkbox takes `is` only.
    let empty = urlencode(r#"{"conditions":[{"field":"Done","op":"empty"}]}"#);
    it.person
        .api
        .get(&format!("{}?filter={empty}", it.path()))
        .await
        .expect_error(400, "bad_request");

    // Ascending: false, true, then the never-written (empty) last; descending
    // the reverse, empty first. Ties break by record id.
    let by_id = |names: &[&str]| {
        let mut v: Vec<(&str, &str)> = names.iter().map(|x| (it.rec(x), *x)).collect();
        v.sort();
        v.into_iter()
            .map(|(_, x)| x.to_string())
            .collect::<Vec<_>>()
    };
    let mut asc = n(&["cleared", "checked"]);
    asc.extend(by_id(&["unset", "nulled"]));
    assert_eq!(it.names("sort=Done").await, asc);
    let mut desc = by_id(&["unset", "nulled"]);
    desc.extend(n(&["checked", "cleared"]));
    assert_eq!(it.names("sort=-Done").await, desc);

    // Paging one record at a time crosses from values to empties and back.
    for (sort, whole) in [("Done", &asc), ("-Done", &desc)] {
        let api = &it.person.api;
        let mut seen = Vec::new();
        let mut bookmark: Option<String> = None;
        loop {
            let mut q = format!("{}?page_size=1&sort={sort}", it.path());
            if let Some(b) = &bookmark {
                q.push_str(&format!("&bookmark={}", urlencode(b)));
            }
            let page = api.get(&q).await;
            let page = page.expect_ok();
            seen.push(
                page["records"][0]["fields"]["Name"]
                    .as_str()
                    .unwrap()
                    .to_owned(),
            );
            match page.get("bookmark").and_then(Value::as_str) {
                Some(b) => bookmark = Some(b.to_owned()),
                None => break,
            }
            assert!(seen.len() <= 4, "paging does not end");
        }
        assert_eq!(&seen, whole, "paged sort {sort}");
    }
}

#[tokio::test]
async fn upsert_matches_a_checkbox_as_checked_or_not() {
    let it = items().await;
    let api = &it.person.api;
    // `false` matches a never-written cell, as `is false` does, and writes it.
    let r = api
        .put(
            &it.path(),
            json!({"merge_on": ["Name", "Done"], "records": [{"fields": {"Name": "unset", "Done": false}}]}),
        )
        .await;
    let body = r.expect_ok();
    assert_eq!(body["records"][0]["created"], false);
    assert_eq!(id(&body["records"][0]), it.rec("unset"));
    assert_eq!(body["records"][0]["fields"]["Done"], json!(false));
    // `true` matches only a checked box: a never-written one is another key.
    let r = api
        .put(
            &it.path(),
            json!({"merge_on": ["Name", "Done"], "records": [{"fields": {"Name": "nulled", "Done": true}}]}),
        )
        .await;
    assert_eq!(r.expect_ok()["records"][0]["created"], true);
    assert_eq!(it.one("nulled").await["Done"], Value::Null);
    let r = api
        .put(
            &it.path(),
            json!({"merge_on": ["Name", "Done"], "records": [{"fields": {"Name": "checked", "Done": true}}]}),
        )
        .await;
    assert_eq!(id(&r.expect_ok()["records"][0]), it.rec("checked"));
}

#[tokio::test]
async fn a_checkbox_cast_to_text_keeps_never_written_cells_empty() {
    let it = items().await;
    let api = &it.person.api;
    let fields = api.get(&format!("/api/tables/{}/fields", it.table)).await;
    let seen = fields.expect_ok()["fields"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == "Seen")
        .map(id)
        .unwrap();
    api.patch(
        &format!("/api/fields/{seen}"),
        json!({"type": "single_line_text"}),
    )
    .await
    .expect_ok();
    assert_eq!(
        it.listed("Seen").await,
        vec![
            ("checked".into(), json!("true")),
            ("cleared".into(), json!("false")),
            ("nulled".into(), Value::Null),
            ("unset".into(), Value::Null),
        ]
    );
}
