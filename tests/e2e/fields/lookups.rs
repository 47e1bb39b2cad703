//! Lookups and rollups: link_field_id and target_field_id validation,
//! aggregation fit, costume inference, derived names de-duplicated,
//! source_presentation, count storing a null target, values read back.

use serde_json::{json, Value};

use super::{id, Db};

struct Fixture {
    d: Db,
    orders: String,
    items: String,
    link: Value,
    name: Value,
    price: Value,
    when: Value,
    paid: Value,
    kind: Value,
    notes: Value,
}

async fn fixture() -> Fixture {
    let d = Db::new().await;
    let items = d.table("Items").await;
    let name = d
        .field(&items, json!({"name": "Name", "type": "single_line_text"}))
        .await;
    let price = d
        .field(
            &items,
            json!({"name": "Price", "type": "currency", "options": {"symbol": "$"}}),
        )
        .await;
    let when = d
        .field(&items, json!({"name": "When", "type": "date"}))
        .await;
    let paid = d
        .field(&items, json!({"name": "Paid", "type": "checkbox"}))
        .await;
    let kind = d.field(&items, json!({"name": "Kind", "type": "multi_select", "options": {"choices": [{"name": "k"}]}})).await;
    let notes = d
        .field(&items, json!({"name": "Notes", "type": "long_text"}))
        .await;
    let orders = d.table("Orders").await;
    let link = d
        .field(
            &orders,
            json!({"name": "Lines", "type": "link", "options": {"target_table_id": items}}),
        )
        .await;
    Fixture {
        d,
        orders,
        items,
        link,
        name,
        price,
        when,
        paid,
        kind,
        notes,
    }
}

impl Fixture {
    /// Creates one item per cells object and an order linking them all
    /// (in order); returns the order as read back.
    async fn order_of(&self, items: Vec<Value>) -> Value {
        let items = self.d.records(&self.items, items).await;
        let lines: Vec<String> = items.iter().map(id).collect();
        let order = self
            .d
            .records(&self.orders, vec![json!({ "Lines": lines })])
            .await;
        self.d.read(&self.orders, &id(&order[0])).await
    }
}

#[tokio::test]
async fn lookups_infer_their_costume_and_name() {
    let f = fixture().await;
    let d = &f.d;
    let lk = |target: &Value| json!({"type": "lookup", "options": {"link_field_id": id(&f.link), "target_field_id": id(target)}});
    let by_name = d.field(&f.orders, lk(&f.name)).await;
    assert_eq!(by_name["type"], "lookup_text");
    assert_eq!(by_name["name"], "Name (from Lines)");
    assert_eq!(
        by_name["options"],
        json!({"link_field_id": id(&f.link), "target_field_id": id(&f.name),
               "source_presentation": {"type": "single_line_text", "options": {}}}),
        "source_presentation written by the server"
    );
    // De-duplicated, never refused, when the name is derived.
    let again = d.field(&f.orders, lk(&f.name)).await;
    assert_eq!(again["name"], "Name (from Lines) 2");
    let price = d.field(&f.orders, lk(&f.price)).await;
    assert_eq!(price["type"], "lookup_number");
    assert_eq!(
        price["options"]["source_presentation"],
        json!({"type": "currency", "options": {"symbol": "$"}})
    );
    assert_eq!(d.field(&f.orders, lk(&f.when)).await["type"], "lookup_date");
    assert_eq!(
        d.field(&f.orders, lk(&f.paid)).await["type"],
        "lookup_checkbox"
    );
    let kind = d.field(&f.orders, lk(&f.kind)).await;
    assert_eq!(
        (kind["type"].as_str(), kind["operators"].clone()),
        (Some("lookup_text"), json!([]))
    );
    assert_eq!(
        d.field(&f.orders, lk(&f.notes)).await["type"],
        "lookup_text"
    );
    // A name sent is used (trimmed) and must be free.
    let named = d
        .field(&f.orders, json!({"name": " Item name ", "type": "lookup", "options": {"link_field_id": id(&f.link), "target_field_id": id(&f.name)}}))
        .await;
    assert_eq!(named["name"], "Item name");
    d.create(&f.orders, json!({"name": "Item name", "type": "lookup", "options": {"link_field_id": id(&f.link), "target_field_id": id(&f.name)}}))
        .await
        .expect_error(409, "conflict");
    // A concrete lookup type on create is the door (inferred).
    let c = d
        .field(&f.orders, json!({"name": "C", "type": "lookup_checkbox", "options": {"link_field_id": id(&f.link), "target_field_id": id(&f.name)}}))
        .await;
    assert_eq!(c["type"], "lookup_text");
    // None has a column; none can be the display field.
    assert_eq!(d.column_type(&f.orders, &id(&by_name)).await, None);
    assert_eq!(
        d.get_table(&f.orders).await["display_field_id"],
        Value::Null
    );

    // Values through the records path: a list per linked record.
    let read = f
        .order_of(vec![
            json!({"Name": "bolt", "Price": 2}),
            json!({"Name": "nut", "Price": 3.5}),
        ])
        .await;
    assert_eq!(read["fields"]["Name (from Lines)"], json!(["bolt", "nut"]));
    assert_eq!(read["fields"]["Price (from Lines)"], json!([2, 3.5]));
    let _ = f.items;
}

#[tokio::test]
async fn rollups_check_the_aggregation_and_count_stores_no_target() {
    let f = fixture().await;
    let d = &f.d;
    let ru = |agg: &str, target: Option<&Value>| {
        let mut o = json!({"link_field_id": id(&f.link), "aggregation": agg, "decimals": 1});
        if let Some(t) = target {
            o["target_field_id"] = json!(id(t));
        }
        d.create(&f.orders, json!({"type": "rollup", "options": o}))
    };
    let sum = ru("sum", Some(&f.price)).await.expect_ok()["field"].clone();
    assert_eq!(
        (sum["type"].as_str(), sum["name"].as_str()),
        (Some("rollup_number"), Some("Sum of Price (from Lines)"))
    );
    assert_eq!(sum["options"]["decimals"], 1);
    assert_eq!(sum["options"]["source_presentation"]["type"], "currency");
    let avg = ru("avg", Some(&f.price)).await.expect_ok()["field"].clone();
    assert_eq!(avg["name"], "Average of Price (from Lines)");
    let max_date = ru("max", Some(&f.when)).await.expect_ok()["field"].clone();
    assert_eq!(
        (max_date["type"].as_str(), max_date["name"].as_str()),
        (Some("rollup_date"), Some("Max of When (from Lines)"))
    );
    assert_eq!(max_date["operators"][1], "is_not");
    assert_eq!(
        ru("min", Some(&f.price)).await.expect_ok()["field"]["type"],
        "rollup_number"
    );
    // count reads no target: one sent is stored as null.
    let count = ru("count", Some(&f.name)).await.expect_ok()["field"].clone();
    assert_eq!(
        (count["type"].as_str(), count["name"].as_str()),
        (Some("rollup_number"), Some("Count of Lines"))
    );
    assert_eq!(count["options"]["target_field_id"], Value::Null);
    assert_eq!(
        ru("count", None).await.expect_ok()["field"]["name"],
        "Count of Lines 2"
    );
    // Aggregations that do not fit.
    for (agg, target, needle) in [
        ("sum", &f.name, "number field"),
        ("avg", &f.when, "number field"),
        ("min", &f.name, "number or date"),
        ("max", &f.paid, "number or date"),
    ] {
        let msg = ru(agg, Some(target)).await.expect_error(400, "bad_request");
        assert!(msg.contains(needle), "{agg}: {msg}");
    }
    let msg = ru("median", Some(&f.price))
        .await
        .expect_error(400, "bad_request");
    assert!(msg.contains("sum, count, min, max, avg"), "{msg}");
    d.create(&f.orders, json!({"type": "rollup", "options": {"link_field_id": id(&f.link), "target_field_id": id(&f.price)}}))
        .await
        .expect_error(400, "bad_request");

    // A formula of the linked table can be surfaced and rolled up.
    let due = d
        .field(&f.items, json!({"name": "Due", "type": "formula", "options": {"expression": "DATEADD({When}, 7, 'days')"}}))
        .await;
    let latest = ru("max", Some(&due)).await.expect_ok()["field"].clone();
    assert_eq!(latest["type"], "rollup_date");
    let total = d
        .field(
            &f.items,
            json!({"name": "Total", "type": "formula", "options": {"expression": "{Price} * 2"}}),
        )
        .await;
    let lk = d
        .field(&f.orders, json!({"type": "lookup", "options": {"link_field_id": id(&f.link), "target_field_id": id(&total)}}))
        .await;
    assert_eq!(lk["type"], "lookup_number");
    // Values: sum, count, max date.
    let read = f
        .order_of(vec![
            json!({"Price": 2, "When": "2024-01-02"}),
            json!({"Price": 3.5, "When": "2024-03-04"}),
        ])
        .await;
    assert_eq!(read["fields"]["Sum of Price (from Lines)"], json!(5.5));
    assert_eq!(read["fields"]["Count of Lines"], json!(2));
    assert_eq!(
        read["fields"]["Max of When (from Lines)"],
        json!("2024-03-04")
    );
}

#[tokio::test]
async fn lookup_and_rollup_references_are_validated() {
    let f = fixture().await;
    let d = &f.d;
    let other = d.table("Other").await;
    let local = d
        .field(&f.orders, json!({"name": "Local", "type": "number"}))
        .await;
    let other_link = d.field(&other, json!({"name": "Items", "type": "link", "options": {"target_table_id": f.items, "reverse_field_name": "O"}})).await;
    let mirror = f.link["options"]["pair_field_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let lookup = d
        .field(&f.orders, json!({"type": "lookup", "options": {"link_field_id": id(&f.link), "target_field_id": id(&f.name)}}))
        .await;
    let rollup = d
        .field(&f.orders, json!({"type": "rollup", "options": {"link_field_id": id(&f.link), "aggregation": "count"}}))
        .await;
    // A lookup on Items surfacing a lookup/rollup of Orders through the mirror: refused.
    for t in [&lookup, &rollup] {
        let msg = d
            .create(&f.items, json!({"type": "lookup", "options": {"link_field_id": mirror, "target_field_id": id(t)}}))
            .await
            .expect_error(400, "bad_request");
        assert!(msg.contains("lookup or rollup"), "{msg}");
        d.create(&f.items, json!({"type": "rollup", "options": {"link_field_id": mirror, "aggregation": "sum", "target_field_id": id(t)}}))
            .await
            .expect_error(400, "bad_request");
    }
    let bad = |options: Value| d.create(&f.orders, json!({"type": "lookup", "options": options}));
    for (options, needle) in [
        (json!({"target_field_id": id(&f.name)}), "link_field_id"),
        (json!({"link_field_id": id(&f.link)}), "target_field_id"),
        (
            json!({"link_field_id": id(&local), "target_field_id": id(&f.name)}),
            "not a link field",
        ),
        (
            json!({"link_field_id": id(&other_link), "target_field_id": id(&f.name)}),
            "not a link field",
        ),
        (
            json!({"link_field_id": id(&f.link), "target_field_id": id(&local)}),
            "not a field of the linked table",
        ),
        (
            json!({"link_field_id": id(&f.link), "target_field_id": id(&f.name),
                "conditions": {"conditions": [{"field": "Local", "op": "is", "value": 1}]}}),
            "conditions",
        ),
    ] {
        let msg = bad(options).await.expect_error(400, "bad_request");
        assert!(msg.contains(needle), "{needle}: {msg}");
    }
    // An unknown key on create is refused like everywhere else.
    let msg =
        bad(json!({"link_field_id": id(&f.link), "target_field_id": id(&f.name), "stray": 1}))
            .await
            .expect_error(400, "bad_request");
    assert!(msg.contains("'stray'"), "{msg}");
    // Conditions over the linked table are kept.
    let c = d
        .field(&f.orders, json!({"name": "Cheap", "type": "lookup", "options": {"link_field_id": id(&f.link), "target_field_id": id(&f.name),
            "conditions": {"conditions": [{"field": "Price", "op": "less", "value": 3}]}}}))
        .await;
    assert_eq!(
        c["options"]["conditions"]["conditions"][0]["field"],
        "Price"
    );
    // Update: a complete configuration is required and re-inferred.
    let r = d
        .patch(
            &id(&lookup),
            json!({"options": {"link_field_id": id(&f.link)}}),
        )
        .await;
    r.expect_error(400, "bad_request");
    let r = d
        .patch(
            &id(&lookup),
            json!({"options": {"link_field_id": id(&f.link), "target_field_id": id(&f.price), "stray": 1}}),
        )
        .await;
    let updated = r.expect_ok()["field"].clone();
    assert_eq!(updated["type"], "lookup_number");
    assert!(updated.get("operators").is_none());
    assert_eq!(
        updated["options"]["source_presentation"]["type"],
        "currency"
    );
    // The doors and type changes are refused on update.
    d.patch(&id(&lookup), json!({"type": "lookup"}))
        .await
        .expect_error(400, "bad_request");
    d.patch(&id(&rollup), json!({"type": "number"}))
        .await
        .expect_error(400, "bad_request");
}

/// ARCHITECTURE decisions: a link cell and a lookup cell list the linked
/// records in link order, on a listed page as on a single read. The links
/// are written in descending id order, so neither id order nor the order
/// the records were created in can pass for link order.
#[tokio::test]
async fn listed_link_and_lookup_cells_keep_link_order() {
    let f = fixture().await;
    let d = &f.d;
    let lookup = d.field(&f.orders, json!({"type": "lookup", "options": {"link_field_id": id(&f.link), "target_field_id": id(&f.name)}})).await;
    let items = d
        .records(
            &f.items,
            ["a", "b", "c", "d"]
                .iter()
                .map(|n| json!({ "Name": n }))
                .collect(),
        )
        .await;
    let mut linked: Vec<(String, String)> = items
        .iter()
        .map(|r| (id(r), r["fields"]["Name"].as_str().unwrap().to_owned()))
        .collect();
    linked.sort();
    linked.reverse();
    let ids: Vec<&str> = linked.iter().map(|(i, _)| i.as_str()).collect();
    let names: Vec<&str> = linked.iter().map(|(_, n)| n.as_str()).collect();
    let order = d.records(&f.orders, vec![json!({ "Lines": ids })]).await;

    let page = d
        .owner
        .api
        .get(&format!("/api/tables/{}/records", f.orders))
        .await;
    let listed = page.expect_ok()["records"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == order[0]["id"])
        .expect("the order is listed")
        .clone();
    let read = d.read(&f.orders, &id(&order[0])).await;
    for record in [&listed, &read] {
        let cell: Vec<&str> = record["fields"]["Lines"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l["id"].as_str().unwrap())
            .collect();
        assert_eq!(cell, ids, "link cell in link order");
        assert_eq!(
            record["fields"][lookup["name"].as_str().unwrap()],
            json!(names),
            "lookup in link order"
        );
    }
}
