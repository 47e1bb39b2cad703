//! DELETE /api/fields/{id}: the column or connector and mirror go, lookups
//! and rollups riding a deleted link (or surfacing a deleted field) go,
//! webhook watch lists and picker lists lose the id, the display field
//! moves on. A field a formula reads is refused (README: decided).

use serde_json::{json, Value};

use super::{id, Db};

#[tokio::test]
async fn deleting_a_field_drops_its_column_and_tidies_references() {
    let d = Db::new().await;
    let t = d.table("T").await;
    let title = d
        .field(
            &t,
            json!({"name": "Title", "type": "single_line_text", "options": {"unique": true}}),
        )
        .await;
    let n = d.field(&t, json!({"name": "N", "type": "number"})).await;
    let watched = vec![id(&title), id(&n)];
    let hook = d.webhook(&t, "watch01", Some(&watched)).await;
    assert_eq!(d.get_table(&t).await["display_field_id"], title["id"]);
    assert_eq!(d.indexes_on(&t, &id(&title)).await.len(), 1);
    let r = d.delete(&id(&title)).await;
    assert_eq!(r.expect_ok(), &json!({"deleted": true}));
    assert_eq!(d.column_type(&t, &id(&title)).await, None);
    assert!(d.indexes_on(&t, &id(&title)).await.is_empty());
    assert_eq!(
        d.get_table(&t).await["display_field_id"],
        n["id"],
        "the display field moves on"
    );
    let left = d.watched_field_ids(&hook).await;
    assert_eq!(left, vec![id(&n)]);
    d.delete(&id(&title)).await.expect_error(404, "not_found");
    d.delete(&id(&n)).await.expect_ok();
    assert_eq!(d.get_table(&t).await["display_field_id"], Value::Null);
    assert!(d.fields(&t).await.is_empty());
    // The name is free again.
    d.field(&t, json!({"name": "Title", "type": "number"}))
        .await;
}

#[tokio::test]
async fn deleting_a_link_takes_its_mirror_connector_and_riders() {
    let d = Db::new().await;
    let a = d.table("A").await;
    let b = d.table("B").await;
    let b_name = d
        .field(&b, json!({"name": "Name", "type": "single_line_text"}))
        .await;
    let b_num = d.field(&b, json!({"name": "Num", "type": "number"})).await;
    let a_text = d
        .field(&a, json!({"name": "Text", "type": "single_line_text"}))
        .await;
    let link = d
        .field(
            &a,
            json!({"name": "Bs", "type": "link", "options": {"target_table_id": b}}),
        )
        .await;
    let mirror = link["options"]["pair_field_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let other_link = d.field(&a, json!({"name": "Bs2", "type": "link", "options": {"target_table_id": b, "reverse_field_name": "A2",
        "picker_field_ids": [id(&b_num)]}})).await;
    // Riders on both sides, and one on another link that must survive.
    let l1 = d.field(&a, json!({"type": "lookup", "options": {"link_field_id": id(&link), "target_field_id": id(&b_name)}})).await;
    let r1 = d.field(&a, json!({"type": "rollup", "options": {"link_field_id": id(&link), "aggregation": "count"}})).await;
    let l2 = d.field(&b, json!({"type": "lookup", "options": {"link_field_id": mirror, "target_field_id": id(&a_text)}})).await;
    let keep = d.field(&a, json!({"type": "lookup", "options": {"link_field_id": id(&other_link), "target_field_id": id(&b_name)}})).await;
    let watched = vec![id(&link), mirror.clone(), id(&l1), id(&b_num)];
    let hook = d.webhook(&a, "watch02", Some(&watched)).await;
    let connector = format!("lnk_{}", id(&link));
    assert!(d.relation_exists(&connector).await);
    d.delete(&id(&link)).await.expect_ok();
    assert!(!d.relation_exists(&connector).await);
    let a_ids: Vec<Value> = d.fields(&a).await.iter().map(|f| f["id"].clone()).collect();
    assert_eq!(
        a_ids,
        vec![
            a_text["id"].clone(),
            other_link["id"].clone(),
            keep["id"].clone()
        ]
    );
    let b_ids: Vec<Value> = d.fields(&b).await.iter().map(|f| f["id"].clone()).collect();
    assert_eq!(b_ids.len(), 3, "mirror and its rider gone: {b_ids:?}");
    for gone in [&mirror, &id(&l1), &id(&r1), &id(&l2)] {
        assert!(
            !b_ids.contains(&json!(gone)) && !a_ids.contains(&json!(gone)),
            "{gone}"
        );
    }
    let left = d.watched_field_ids(&hook).await;
    assert_eq!(left, vec![id(&b_num)]);
    // Deleting the mirror side deletes the forward field too.
    let m2 = other_link["options"]["pair_field_id"]
        .as_str()
        .unwrap()
        .to_owned();
    d.delete(&m2).await.expect_ok();
    assert!(!d.relation_exists(&format!("lnk_{}", id(&other_link))).await);
    assert_eq!(d.fields(&a).await.len(), 1, "forward and its lookup gone");
    // A field a lookup surfaces: the lookup goes with it; picker lists lose
    // it (A's display field, Text, cannot be a picker field: use Extra).
    let extra = d
        .field(&a, json!({"name": "Extra", "type": "number"}))
        .await;
    let l3 = d
        .field(&b, json!({"name": "As", "type": "link", "options": {"target_table_id": a, "reverse_field_name": "Bees",
            "picker_field_ids": [id(&extra)]}}))
        .await;
    let lk = d
        .field(&b, json!({"type": "lookup", "options": {"link_field_id": id(&l3), "target_field_id": id(&extra)}}))
        .await;
    d.delete(&id(&extra)).await.expect_ok();
    let b_fields = d.fields(&b).await;
    assert!(b_fields.iter().all(|f| f["id"] != lk["id"]));
    let l3_now = b_fields.iter().find(|f| f["id"] == l3["id"]).unwrap();
    assert_eq!(l3_now["options"]["picker_field_ids"], json!([]));
}

#[tokio::test]
async fn a_field_a_formula_reads_cannot_be_deleted() {
    let d = Db::new().await;
    let t = d.table("T").await;
    let n = d.field(&t, json!({"name": "N", "type": "number"})).await;
    let f1 = d
        .field(
            &t,
            json!({"name": "F1", "type": "formula", "options": {"expression": "{N} + 1"}}),
        )
        .await;
    let f2 = d
        .field(
            &t,
            json!({"name": "F2", "type": "formula", "options": {"expression": "{F1} + 1"}}),
        )
        .await;
    let msg = d.delete(&id(&n)).await.expect_error(400, "bad_request");
    assert!(msg.contains("'F1'"), "{msg}");
    let msg = d.delete(&id(&f1)).await.expect_error(400, "bad_request");
    assert!(msg.contains("'F2'"), "{msg}");
    assert_eq!(d.column_type(&t, &id(&n)).await.as_deref(), Some("numeric"));
    d.delete(&id(&f2)).await.expect_ok();
    assert_eq!(d.column_type(&t, &id(&f2)).await, None);
    d.delete(&id(&f1)).await.expect_ok();
    d.delete(&id(&n)).await.expect_ok();
    assert!(d.fields(&t).await.is_empty());
}
