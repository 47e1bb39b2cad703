//! The two tenants of the cross-tenant test: what each one owns
//! (`populate`) and everything A can read of its own (`snapshot`).

use std::collections::BTreeMap;

use e2e_tests::{database_postgres, id, unique, Api};
use serde_json::{json, Value};

use crate::fixtures::rec_ids;

/// Makes a tenant's schema and data in `db`; every name and text value
/// carries `marker`. Returns the ids by placeholder name (`db`, `t`, `f.Name`, ...).
pub async fn populate(api: &Api, db: &str, marker: &str) -> BTreeMap<String, String> {
    let mut ids = BTreeMap::new();
    let tag = db[3..8].to_string();
    let t = id(&api.create_table(db, &format!("Main {marker}")).await);
    let t2 = id(&api.create_table(db, &format!("Other {marker}")).await);
    let label = id(&api
        .create_field(&t2, json!({"name": "Label", "type": "single_line_text"}))
        .await);
    // The row a button needs, as records.rs makes it; switched off, so the
    // tenant's own writes enqueue nothing and the deliverer never touches
    // it (a button press still would: the snapshot counts deliveries).
    let hook = format!("whk_{tag}{}", &unique("h")[2..9]);
    database_postgres(db)
        .await
        .execute(
            "INSERT INTO webhooks (id, database_id, table_id, name, is_active)
             VALUES ($1, $2, $3, $4, false)",
            &[&hook, &db, &t, &format!("{marker} hook")],
        )
        .await
        .unwrap();
    let specs: [(&str, Value); 11] = [
        ("Name", json!({"type": "single_line_text"})),
        ("Count", json!({"type": "number"})),
        (
            "Stage",
            json!({"type": "single_select", "options": {"choices": [{"name": format!("{marker} stage")}]}}),
        ),
        ("Due", json!({"type": "date"})),
        ("Done", json!({"type": "checkbox"})),
        (
            "Code",
            json!({"type": "single_line_text", "options": {"unique": true}}),
        ),
        (
            "Link",
            json!({"type": "link", "options": {"target_table_id": t2, "reverse_field_name": "Mains"}}),
        ),
        (
            "Look",
            json!({"type": "lookup", "options": {"link_field_id": "", "target_field_id": label}}),
        ),
        (
            "Calc",
            json!({"type": "formula", "options": {"expression": "{Count} * 2"}}),
        ),
        (
            "Go",
            json!({"type": "button", "options": {"url_template": "https://example.test/{Name}"}}),
        ),
        (
            "Ping",
            json!({"type": "button", "options": {"webhook_id": hook}}),
        ),
    ];
    for (name, mut body) in specs {
        body["name"] = json!(name);
        if name == "Look" {
            body["options"]["link_field_id"] = json!(ids["f.Link"]);
        }
        let made = api.create_field(&t, body).await;
        if name == "Stage" {
            ids.insert("choice".into(), id(&made["options"]["choices"][0]));
        }
        if name == "Link" {
            let pair = made["options"]["pair_field_id"].as_str().unwrap();
            ids.insert("f.Mains".into(), pair.to_string());
        }
        ids.insert(format!("f.{name}"), id(&made));
    }
    let r2 = rec_ids(
        api.post(
            &format!("/api/tables/{t2}/records"),
            json!({"records": [{"fields": {"Label": format!("{marker} label")}}]}),
        )
        .await
        .expect_ok(),
    )[0]
    .clone();
    let code = format!("{marker}-c1");
    let made = api
        .post(
            &format!("/api/tables/{t}/records"),
            json!({"records": [
                {"fields": {"Name": format!("{marker} one"), "Count": 1, "Stage": format!("{marker} stage"),
                            "Due": "2026-01-02", "Done": true, "Code": code, "Link": [r2]}},
                {"fields": {"Name": format!("{marker} two"), "Count": 2, "Code": format!("{marker}-c2")}},
                {"fields": {"Name": format!("{marker} gone"), "Count": 3}},
            ]}),
        )
        .await;
    let r = rec_ids(made.expect_ok());
    api.delete_with(
        &format!("/api/tables/{t}/records"),
        json!({"records": [r[2]]}),
    )
    .await
    .expect_ok();
    let v = api
        .post(
            &format!("/api/tables/{t}/views"),
            json!({"name": format!("{marker} view"), "config": {
                "filters": {"conditions": [{"fieldId": ids["f.Name"], "op": "contains", "value": marker}]},
                "sorts": [{"fieldId": ids["f.Count"], "dir": "desc"}]}}),
        )
        .await;
    ids.insert("f.Label".into(), label);
    ids.insert("v".into(), id(&v.expect_ok()["view"]));
    ids.insert("t.body".into(), t[9..].to_string());
    ids.insert("r.body".into(), r[0][9..].to_string());
    for (k, v) in [
        ("db", db.to_string()),
        ("tag", tag),
        ("t", t),
        ("t2", t2),
        ("hook", hook),
        ("r", r[0].clone()),
        ("rt", r[2].clone()),
        ("r2", r2),
        ("code", code),
        ("marker", marker.to_string()),
    ] {
        ids.insert(k.into(), v);
    }
    ids
}

/// Everything A can read of its database, plus its webhook rows.
pub async fn snapshot(api: &Api, a: &BTreeMap<String, String>) -> Value {
    let get = |path: String| async move { api.get(&path).await.expect_ok().clone() };
    let db = &a["db"];
    let listed: Vec<Value> = get("/api/databases".into()).await["databases"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["id"] == json!(db))
        .cloned()
        .collect();
    let mut per_table = Vec::new();
    for t in [&a["t"], &a["t2"]] {
        per_table.push(json!({
            "table": get(format!("/api/tables/{t}")).await,
            "views": get(format!("/api/tables/{t}/views")).await,
            "records": get(format!("/api/tables/{t}/records?page_size=1000&cell_format=ids")).await,
            "trash": get(format!("/api/tables/{t}/trash?page_size=1000")).await,
        }));
    }
    let pg = database_postgres(db).await;
    let deliveries: i64 = pg
        .query_one(
            "SELECT count(*) FROM deliveries WHERE database_id = $1",
            &[db],
        )
        .await
        .unwrap()
        .get(0);
    let hooks: Vec<String> = pg
        .query(
            "SELECT to_jsonb(w)::text FROM webhooks w WHERE database_id = $1 ORDER BY id",
            &[db],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    json!({
        "database": listed,
        "tables": get(format!("/api/databases/{db}/tables")).await,
        "per_table": per_table,
        "record": get(format!("/api/tables/{}/records/{}", a["t"], a["r"])).await,
        "webhooks": hooks,
        "deliveries": deliveries,
    })
}
