//! `records::kept_plans` on a real table: a filtered page sorted by a
//! field keeps one plan until a view's sort index begins with that field,
//! and the page answers the same either way.

use cluster_protocol::principal::Principal;
use serde_json::{json, Value};
use shard_node::records::kept_plans::{may_keep_plan, IndexLeads};

use crate::helpers::*;

/// The names of a filtered page sorted by -Amount (Amount > 2).
async fn filtered_names(app: &TestApp, table: &str, owner: &Principal) -> Vec<Value> {
    let filter = "%7B%22conditions%22%3A%5B%7B%22field%22%3A%22Amount%22%2C%22op%22%3A%22greater%22%2C%22value%22%3A2%7D%5D%7D";
    let r = app
        .get(
            &format!("/api/tables/{table}/records?filter={filter}&sort=-Amount"),
            owner,
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    r.body["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|rec| rec["fields"]["Name"].clone())
        .collect()
}

#[tokio::test]
async fn a_page_keeps_its_plan_until_an_index_gives_its_order() {
    let app = spawn_app().await;
    let (db, owner) = app.owned_database().await;
    let table = app.create_table_id(&db, &owner, "T").await;
    let mut ids = std::collections::HashMap::new();
    for (name, ty) in [("Name", "single_line_text"), ("Amount", "number")] {
        ids.insert(name, app.create_field_id(&table, &owner, name, ty).await);
    }
    let records: Vec<Value> = [("a", 1.5), ("b", 7.0), ("c", 3.25), ("d", 2.0), ("e", 12.0)]
        .iter()
        .map(|(n, a)| json!({"fields": {"Name": n, "Amount": a}}))
        .collect();
    let r = app
        .post(
            &format!("/api/tables/{table}/records"),
            &owner,
            json!({"records": records}),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let expected = vec![json!("e"), json!("b"), json!("c")];

    let qualified = shard_node::tenant_schema::table(&db, &table).unwrap();
    let client = app.db.client_for(&db).await.unwrap();
    let amount = format!(
        "\"r\".\"{}\"",
        shard_node::tenant_schema::column(&ids["Amount"])
            .unwrap()
            .trim_matches('"')
    );
    let leads = IndexLeads::default()
        .of(&*client, &qualified)
        .await
        .unwrap();
    assert!(
        may_keep_plan(Some(&amount), &leads),
        "no index begins with Amount: {leads:?}"
    );
    assert!(!may_keep_plan(None, &leads), "the id order has its index");
    // Twice: the second call runs the prepared statement.
    assert_eq!(filtered_names(&app, &table, &owner).await, expected);
    assert_eq!(filtered_names(&app, &table, &owner).await, expected);

    let v = app
        .post(
            &format!("/api/tables/{table}/views"),
            &owner,
            json!({"name": "By amount", "config": {"sorts": [{"fieldId": ids["Amount"], "dir": "desc"}]}}),
        )
        .await;
    assert_eq!(v.status, 200, "{:?}", v.body);
    let leads = IndexLeads::default()
        .of(&*client, &qualified)
        .await
        .unwrap();
    assert!(
        !may_keep_plan(Some(&amount), &leads),
        "the view's sort index begins with Amount: {leads:?}"
    );
    assert_eq!(filtered_names(&app, &table, &owner).await, expected);
}
