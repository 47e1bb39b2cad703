//! Links, lookups, rollups, buttons and the 500-field cap.

use serde_json::{json, Value};

use super::{id, setup};

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
    let c_ids = |cols: &[&str]| -> Vec<(String, String)> {
        cols.iter()
            .map(|c| (c.to_string(), "C".to_string()))
            .collect()
    };
    assert_eq!(
        crate::tables::id_collations(&c.app, &c.db, &format!("lnk_{}", id(&link))).await,
        c_ids(&["from_id", "to_id"]),
        "connector ids compare byte by byte"
    );
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
