//! Issue 13, section 2: a lookup's or rollup's `conditions` may name
//! conditioned lookups of the linked table, which are written out in full
//! at every mention, down to four levels, so a few fields made one read
//! megabytes of SQL. Conditions have a cost (a condition 1, one on a link,
//! lookup or rollup 50, plus the cost of a named lookup's conditions): at
//! most 10,000 per lookup or rollup, 20,000 per table and per request
//! filter. The field change that crosses a cap is refused with a 400
//! naming the field and the cap, reads keep working, and conditions stored
//! over a cap (behind the API's back) read as admitting no linked record.

use serde_json::{json, Value};

use crate::fields::{id, Db};

/// Lookups of `Parent` (a self-link of Items) surfacing `Code`.
struct Fan {
    d: Db,
    items: String,
    link: String,
    code: String,
    child: String,
}

impl Fan {
    async fn new() -> Fan {
        let d = Db::new().await;
        let items = d.table("Items").await;
        let code = d
            .field(&items, json!({"name": "Code", "type": "single_line_text"}))
            .await;
        let link = d
            .field(
                &items,
                json!({"name": "Parent", "type": "link", "options": {
                    "target_table_id": items, "reverse_field_name": "Children"}}),
            )
            .await;
        let parent = d.records(&items, vec![json!({"Code": "a1"})]).await;
        let child = d
            .records(
                &items,
                vec![json!({"Code": "a2", "Parent": [id(&parent[0])]})],
            )
            .await;
        Fan {
            items,
            link: id(&link),
            code: id(&code),
            child: id(&child[0]),
            d,
        }
    }

    /// `{"join": "or", "conditions": [Code contains a, <named> is x (times)]}`.
    fn conditions(named: Option<&str>, times: usize) -> Value {
        let mut c = vec![json!({"field": "Code", "op": "contains", "value": "a"})];
        if let Some(n) = named {
            c.extend((0..times).map(|_| json!({"field": n, "op": "is", "value": "x"})));
        }
        json!({"join": "or", "conditions": c})
    }

    async fn lookup(&self, name: &str, conditions: Value) -> e2e_tests::Reply {
        self.d
            .create(
                &self.items,
                json!({"name": name, "type": "lookup", "options": {
                    "link_field_id": self.link, "target_field_id": self.code,
                    "conditions": conditions}}),
            )
            .await
    }

    /// The child record's cells, as GET one and a list page read them.
    async fn cells(&self) -> Value {
        let one = self.d.read(&self.items, &self.child).await;
        let page = self
            .d
            .owner
            .api
            .get(&format!("/api/tables/{}/records", self.items))
            .await;
        let listed = page.expect_ok()["records"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["id"] == self.child.as_str())
            .cloned()
            .unwrap();
        assert_eq!(listed["fields"], one["fields"], "list and get agree");
        one["fields"].clone()
    }
}

fn names_the_cap(msg: &str, field: &str, cap: &str) {
    assert!(
        msg.contains(&format!("'{field}'")) && msg.contains(cap),
        "the message names the field '{field}' and the cap {cap}: {msg}"
    );
}

/// Costs: L0 (a group and a condition) 2; L1, naming L0 20 times,
/// 2 + 20 * (50 + 2) = 1,042; naming L1 n times, 2 + n * (50 + 1,042).
#[tokio::test]
async fn condition_fan_out_is_refused_at_the_step_that_crosses_the_cap() {
    let f = Fan::new().await;
    let l0 = f.lookup("L0", Fan::conditions(None, 0)).await.expect_ok()["field"].clone();
    f.lookup("L1", Fan::conditions(Some("L0"), 20))
        .await
        .expect_ok();
    // L2 naming L1 ten times: 10,922, over the lookup cap.
    let msg = f
        .lookup("L2", Fan::conditions(Some("L1"), 10))
        .await
        .expect_error(400, "bad_request");
    names_the_cap(&msg, "L2", "10000");
    // Nine times: 9,830, accepted (the table's total is 10,874).
    f.lookup("L2", Fan::conditions(Some("L1"), 9))
        .await
        .expect_ok();
    // Another one: 9,830 more would make 20,704, over the table cap.
    let msg = f
        .lookup("L3", Fan::conditions(Some("L1"), 9))
        .await
        .expect_error(400, "bad_request");
    names_the_cap(&msg, "L3", "20000");
    // Eight times: 8,738 (19,612 together), accepted.
    f.lookup("L3", Fan::conditions(Some("L1"), 8))
        .await
        .expect_ok();

    // Widening L0 (2 -> 3) grows every lookup that reaches it: L1 would
    // cost 1,062 and L2 2 + 9 * 1,112 = 10,010. Refused naming L2, and
    // nothing written.
    let before = f.d.listed(&f.items, &id(&l0)).await;
    let wider = json!({"join": "or", "conditions": [
        {"field": "Code", "op": "contains", "value": "a"},
        {"field": "Code", "op": "contains", "value": "b"}]});
    let msg =
        f.d.patch(
            &id(&l0),
            json!({"options": {
            "link_field_id": f.link, "target_field_id": f.code, "conditions": wider}}),
        )
        .await
        .expect_error(400, "bad_request");
    names_the_cap(&msg, "L2", "10000");
    let after = f.d.listed(&f.items, &id(&l0)).await;
    assert_eq!(after["options"], before["options"], "nothing written");

    // Reads keep working, with the conditions applied.
    let cells = f.cells().await;
    for name in ["L0", "L1", "L2", "L3"] {
        assert_eq!(cells[name], json!(["a1"]), "{name}: {cells}");
    }
    // A filter naming L1 (50 + 1,042 each) 18 times costs 19,657 and
    // works; 19 times, 20,749, is refused naming the cap.
    let list = format!("/api/tables/{}/records/list", f.items);
    let naming = |times: usize| {
        let c: Vec<Value> = (0..times)
            .map(|_| json!({"field": "L1", "op": "is", "value": "a1"}))
            .collect();
        json!({"filter": {"conditions": c}})
    };
    let hits = f.d.owner.api.post(&list, naming(18)).await;
    assert_eq!(hits.expect_ok()["records"].as_array().unwrap().len(), 1);
    let msg =
        f.d.owner
            .api
            .post(&list, naming(19))
            .await
            .expect_error(400, "bad_request");
    assert!(msg.contains("20000"), "{msg}");
}

/// Conditions over the cap in the catalog (written before the cap, or by a
/// path that missed it): the read stays bounded, reading them as admitting
/// no linked record, and every other cell is as before.
#[tokio::test]
async fn conditions_stored_over_the_cap_read_as_admitting_nothing() {
    let f = Fan::new().await;
    f.lookup("L0", Fan::conditions(None, 0)).await.expect_ok();
    f.lookup("L1", Fan::conditions(Some("L0"), 20))
        .await
        .expect_ok();
    let l2 = f.lookup("L2", Fan::conditions(None, 0)).await.expect_ok()["field"].clone();
    assert_eq!(f.cells().await["L2"], json!(["a1"]));

    // Behind the API's back: L2 names L1 ten times (10,922).
    f.d.pg
        .execute(
            "UPDATE fields SET options = jsonb_set(options, '{conditions}', $2) WHERE id = $1",
            &[&id(&l2), &Fan::conditions(Some("L1"), 10)],
        )
        .await
        .unwrap();
    f.d.bump_schema_version().await;

    let cells = f.cells().await;
    assert_eq!(
        cells["L2"],
        json!([]),
        "over the cap: admits nothing: {cells}"
    );
    for name in ["L0", "L1"] {
        assert_eq!(cells[name], json!(["a1"]), "{name}: {cells}");
    }
    // A filter on it sees no linked record; on the others, as before.
    let list = format!("/api/tables/{}/records/list", f.items);
    for (field, hits) in [("L2", 0), ("L1", 1)] {
        let body = json!({"filter": {"conditions": [
            {"field": field, "op": "is", "value": "a1"}]}});
        let r = f.d.owner.api.post(&list, body).await;
        let listed = r.expect_ok()["records"].as_array().unwrap().len();
        assert_eq!(listed, hits, "{field}");
    }
    // Other changes to the database still save (the overrun is not theirs).
    f.lookup("L3", Fan::conditions(Some("L1"), 1))
        .await
        .expect_ok();
}
