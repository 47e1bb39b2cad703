//! Part B, Records: write shapes per costume, reads with filter, sort,
//! fields, bookmark paging, views, PATCH rules, if_updated_at, links with
//! lookups and rollups.

use cluster_protocol::principal::Principal;
use serde_json::{json, Value};

use crate::helpers::*;

async fn field(app: &TestApp, p: &Principal, tid: &str, body: Value) -> Value {
    let r = app
        .post(&format!("/api/tables/{tid}/fields"), p, body.clone())
        .await;
    assert_eq!(r.status, 200, "{body} -> {:?}", r.body);
    r.body["field"].clone()
}

#[tokio::test]
async fn write_and_read_every_shape() {
    let app = spawn_app().await;
    let (db, p) = app.owned_database().await;
    let tid = app.create_table_id(&db, &p, "Tasks").await;
    let other = app.create_table_id(&db, &p, "People").await;
    field(
        &app,
        &p,
        &other,
        json!({"name": "Who", "type": "single_line_text"}),
    )
    .await;
    field(&app, &p, &other, json!({"name": "Age", "type": "number"})).await;
    field(
        &app,
        &p,
        &tid,
        json!({"name": "Name", "type": "single_line_text"}),
    )
    .await;
    field(&app, &p, &tid, json!({"name": "Score", "type": "number"})).await;
    field(
        &app,
        &p,
        &tid,
        json!({"name": "Stars", "type": "rating", "options": {"max": 5}}),
    )
    .await;
    field(&app, &p, &tid, json!({"name": "Took", "type": "duration"})).await;
    field(&app, &p, &tid, json!({"name": "Due", "type": "date"})).await;
    field(
        &app,
        &p,
        &tid,
        json!({"name": "At", "type": "date", "options": {"include_time": true}}),
    )
    .await;
    field(&app, &p, &tid, json!({"name": "Done", "type": "checkbox"})).await;
    let sel = field(&app, &p, &tid, json!({"name": "Stage", "type": "single_select", "options": {"choices": [{"name": "New"}, {"name": "Old"}]}})).await;
    let link = field(
        &app,
        &p,
        &tid,
        json!({"name": "Owner", "type": "link", "options": {"target_table_id": other}}),
    )
    .await;
    let who = {
        let r = app.post(&format!("/api/tables/{other}/records"), &p, json!({"records": [{"fields": {"Who": "Ann", "Age": 30}}, {"fields": {"Who": "Bob", "Age": 40}}]})).await;
        assert_eq!(r.status, 200, "{:?}", r.body);
        r.body["records"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["id"].as_str().unwrap().to_string())
            .collect::<Vec<_>>()
    };
    field(&app, &p, &tid, json!({"name": "Ages", "type": "lookup", "options": {"link_field_id": link["id"], "target_field_id": app.get(&format!("/api/tables/{other}/fields"), &p).await.body["fields"].as_array().unwrap().iter().find(|f| f["name"] == "Age").unwrap()["id"]}})).await;
    field(&app, &p, &tid, json!({"name": "Links", "type": "rollup", "options": {"link_field_id": link["id"], "aggregation": "count"}})).await;

    let r = app.post(&format!("/api/tables/{tid}/records"), &p, json!({"records": [
        {"fields": {"Name": "a", "Score": 1.5, "Stars": 7.6, "Took": "1:30", "Due": "2024-02-29", "At": "2024-03-01T10:15:00Z", "Done": true, "Stage": "New", "Owner": [who[0], {"id": who[1]}]}},
        {"fields": {"Name": "b", "Score": 3, "Stars": 2.4, "Took": 90, "Stage": sel["options"]["choices"][1]["id"]}},
        {"fields": {"Name": "c", "Stars": 0}}
    ]})).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let a = &r.body["records"][0]["fields"];
    assert_eq!(a["Stars"], json!(5), "clamped");
    assert_eq!(a["Took"], json!(5400));
    assert_eq!(a["Due"], "2024-02-29");
    assert_eq!(a["At"], "2024-03-01T10:15:00.000Z");
    assert_eq!(a["Done"], true);
    assert_eq!(a["Stage"], "New");
    assert_eq!(
        a["Owner"],
        json!([{"id": who[0], "display": "Ann"}, {"id": who[1], "display": "Bob"}])
    );
    assert_eq!(a["Ages"], json!([30, 40]));
    assert_eq!(a["Links"], json!(2));
    assert_eq!(r.body["records"][1]["fields"]["Stars"], json!(2));
    assert_eq!(r.body["records"][1]["fields"]["Stage"], "Old");
    assert_eq!(r.body["records"][2]["fields"]["Stars"], Value::Null);
    assert_eq!(r.body["field_ids"].as_object().unwrap().len(), 11);

    for bad in [
        json!({"Due": "2023-02-29"}),
        json!({"Took": -1}),
        json!({"Stage": "Nope"}),
        json!({"Ages": [1]}),
        json!({"Nope": 1}),
        json!({"Score": "5"}),
        json!({"Name": "x", "fld_nonexistent1": 1}),
    ] {
        let r = app
            .post(
                &format!("/api/tables/{tid}/records"),
                &p,
                json!({"records": [{"fields": {"Name": "ok"}}, {"fields": bad.clone()}]}),
            )
            .await;
        assert_eq!(r.status, 400, "{bad} -> {:?}", r.body);
    }

    // Reading: filter, sort, fields, key_by, paging.
    let r = app.post(&format!("/api/tables/{tid}/records/list"), &p, json!({"filter": {"conditions": [{"field": "Score", "op": "greater", "value": 1}]}, "sort": "-Score", "fields": "Name", "key_by": "id"})).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.body["records"].as_array().unwrap().len(), 2);
    assert_eq!(r.body["field_names"].as_object().unwrap().len(), 1);
    let r = app
        .get(
            &format!("/api/tables/{tid}/records?page_size=2&sort=Name"),
            &p,
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let b = r.body["bookmark"].as_str().unwrap().to_string();
    let r2 = app
        .get(
            &format!("/api/tables/{tid}/records?page_size=2&sort=Name&bookmark={b}"),
            &p,
        )
        .await;
    assert_eq!(r2.body["records"].as_array().unwrap().len(), 1);
    assert!(r2.body.get("bookmark").is_none());
    assert_eq!(r2.body["records"][0]["fields"]["Name"], "c");
    let r = app
        .get(&format!("/api/tables/{tid}/records?search=B"), &p)
        .await;
    assert_eq!(r.body["records"].as_array().unwrap().len(), 1);
    for bad in [
        "page_size=0",
        "cell_format=x",
        "key_by=x",
        "flat=2",
        "filter=%7Bx",
        "sort=Owner",
        "bookmark=!!",
    ] {
        let r = app
            .get(&format!("/api/tables/{tid}/records?{bad}"), &p)
            .await;
        assert_eq!(r.status, 400, "{bad}");
    }

    // PATCH and if_updated_at.
    let rec = r2.body["records"][0].clone();
    let rid = rec["id"].as_str().unwrap();
    let r = app.patch(&format!("/api/tables/{tid}/records"), &p, json!({"records": [{"id": rid, "fields": {"Score": 9}, "if_updated_at": rec["updated_at"]}]})).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.body["records"][0]["fields"]["Name"], "c");
    let r = app.patch(&format!("/api/tables/{tid}/records"), &p, json!({"records": [{"id": rid, "fields": {"Score": 10}, "if_updated_at": rec["updated_at"]}]})).await;
    assert_eq!(r.status, 409, "{:?}", r.body);
    assert_eq!(r.body["error"]["records"][0]["fields"]["Score"], json!(9));
    let r = app
        .patch(
            &format!("/api/tables/{tid}/records"),
            &p,
            json!({"records": [{"id": rid}, {"id": rid}]}),
        )
        .await;
    assert_eq!(r.status, 400);
    let r = app
        .patch(
            &format!("/api/tables/{tid}/records"),
            &p,
            json!({"records": [{"id": "rec_AAAAAAAAAAAA"}]}),
        )
        .await;
    assert_eq!(r.status, 404);
    let r = app
        .get(&format!("/api/tables/{tid}/records/{rid}"), &p)
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.body["record"]["fields"]["Score"], json!(9));
}

/// The text of the statement waiting for a lock on `relation`, polled for
/// up to 10 s until it contains `marker`; the last text seen otherwise.
/// (An activity's text is copied a moment before its wait is read, so the
/// text of the waiter's previous statement may show once.) `pg` may be in
/// a transaction: the activity snapshot is cleared before each look.
async fn statement_waiting_on(
    pg: &tokio_postgres::Client,
    relation: &str,
    marker: &str,
) -> Option<String> {
    let sql = format!(
        "SELECT a.query FROM pg_locks l JOIN pg_stat_activity a USING (pid) \
         WHERE l.relation = '{}'::regclass AND NOT l.granted",
        relation.replace('\'', "''")
    );
    let mut seen = None;
    for _ in 0..400 {
        pg.batch_execute("SELECT pg_stat_clear_snapshot()")
            .await
            .unwrap();
        if let Some(r) = pg.query(&sql, &[]).await.unwrap().first() {
            let query: String = r.get(0);
            let found = query.contains(marker);
            seen = Some(query);
            if found {
                break;
            }
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    seen
}

/// A filtered page is read in two statements (`PageQuery::read_in_two`);
/// when a row of the page changes between them, the page is read again in
/// one statement, whole and current. The cells statement is held on a lock
/// of the link's connector table (the first statement does not read it)
/// while the test updates a row of the page and commits.
#[tokio::test]
async fn a_row_changed_between_the_two_statements_of_a_filtered_page_is_read_again() {
    let app = spawn_app().await;
    let (db, p) = app.owned_database().await;
    let tid = app.create_table_id(&db, &p, "Tasks").await;
    let people = app.create_table_id(&db, &p, "People").await;
    field(
        &app,
        &p,
        &people,
        json!({"name": "Who", "type": "single_line_text"}),
    )
    .await;
    let name = field(
        &app,
        &p,
        &tid,
        json!({"name": "Name", "type": "single_line_text"}),
    )
    .await;
    let owner = field(
        &app,
        &p,
        &tid,
        json!({"name": "Owner", "type": "link", "options": {"target_table_id": people}}),
    )
    .await;
    let r = app
        .post(
            &format!("/api/tables/{people}/records"),
            &p,
            json!({"records": [{"fields": {"Who": "Ann"}}]}),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let ann = r.body["records"][0]["id"].as_str().unwrap().to_owned();
    let r = app
        .post(
            &format!("/api/tables/{tid}/records"),
            &p,
            json!({"records": [
                {"fields": {"Name": "keep 1", "Owner": [ann]}},
                {"fields": {"Name": "keep 2", "Owner": [ann]}},
                {"fields": {"Name": "keep 3", "Owner": [ann]}},
                {"fields": {"Name": "other", "Owner": [ann]}}]}),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let changed = r.body["records"][1]["id"].as_str().unwrap().to_owned();

    let table = shard_node::tenant_schema::table(&db, &tid).unwrap();
    let column = shard_node::tenant_schema::column(name["id"].as_str().unwrap()).unwrap();
    let connector =
        shard_node::tenant_schema::connector(&db, owner["id"].as_str().unwrap()).unwrap();
    let list = format!("/api/tables/{tid}/records/list");
    let filter =
        json!({"filter": {"conditions": [{"field": "Name", "op": "contains", "value": "keep"}]}});
    app.pg
        .batch_execute(&format!(
            "BEGIN; LOCK TABLE {connector} IN ACCESS EXCLUSIVE MODE"
        ))
        .await
        .unwrap();
    let writer = async {
        // Once the page's cells statement (the one reading by `unnest` of
        // the first one's rows) waits for the lock, change a row the first
        // statement read and let the page go on.
        let waiting = statement_waiting_on(&app.pg, &connector, "unnest(").await;
        app.pg
            .execute(
                &format!(
                    "UPDATE {table} SET {column} = 'keep 2, changed', updated_at = now() \
                     WHERE id = $1"
                ),
                &[&changed],
            )
            .await
            .unwrap();
        app.pg.batch_execute("COMMIT").await.unwrap();
        waiting
    };
    let (waiting, page) = tokio::join!(writer, app.post(&list, &p, filter.clone()));
    let waiting = waiting.expect("the page never waited for the connector's lock");
    assert!(
        waiting.contains("unnest("),
        "the statement that waited is not the cells statement: {waiting}"
    );
    assert_eq!(page.status, 200, "{:?}", page.body);
    let names: Vec<&str> = page.body["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["fields"]["Name"].as_str().unwrap())
        .collect();
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(sorted, ["keep 1", "keep 2, changed", "keep 3"], "{names:?}");
    for r in page.body["records"].as_array().unwrap() {
        assert_eq!(r["fields"]["Owner"][0]["id"], ann, "{r}");
    }

    // The same page again, nothing changing: the same three records.
    let again = app.post(&list, &p, filter).await;
    assert_eq!(again.status, 200, "{:?}", again.body);
    assert_eq!(again.body["records"], page.body["records"]);
}

/// A page read in two statements finds its rows again by row version
/// (`page_sql::page_cells_sql`): in the order given, and without a row that
/// changed after the first statement read it, so the caller can tell and
/// read the page in one statement instead.
#[tokio::test]
async fn page_cells_statement_finds_only_the_row_versions_it_was_given() {
    let app = spawn_app().await;
    let (db, p) = app.owned_database().await;
    let tid = app.create_table_id(&db, &p, "Tasks").await;
    field(&app, &p, &tid, json!({"name": "Score", "type": "number"})).await;
    let r = app
        .post(
            &format!("/api/tables/{tid}/records"),
            &p,
            json!({"records": [{"fields": {"Score": 1}}, {"fields": {"Score": 2}}, {"fields": {"Score": 3}}]}),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let table = shard_node::tenant_schema::table(&db, &tid).unwrap();
    let read = format!("SELECT id, ctid::text, xmin::text FROM {table} ORDER BY id DESC");
    let versions = |rows: Vec<tokio_postgres::Row>| -> [Vec<String>; 3] {
        [0, 1, 2].map(|i| rows.iter().map(|r| r.get::<_, String>(i)).collect())
    };
    let [ids, tids, xmins] = versions(app.pg.query(&read, &[]).await.unwrap());
    assert_eq!(ids.len(), 3);
    let cells = shard_node::records::page_sql::page_cells_sql(&table, &[], &[]);
    let same = shard_node::records::page_sql::same_versions;
    // The ids of the rows found as the version given, in reply order.
    let found = |rows: &[tokio_postgres::Row]| -> Vec<String> {
        rows.iter()
            .filter(|r| r.get::<_, bool>(r.len() - 1))
            .map(|r| r.get::<_, String>(0))
            .collect()
    };

    // Every row, in the order of the arrays (here: ids descending).
    let rows = app.pg.query(&cells, &[&ids, &tids, &xmins]).await.unwrap();
    assert!(same(&rows, 3).unwrap());
    assert_eq!(found(&rows), ids);

    // The middle record changes: its old version is not found any more
    // (missing, or at its old place as another version).
    app.pg
        .execute(
            &format!("UPDATE {table} SET updated_at = now() WHERE id = $1"),
            &[&ids[1]],
        )
        .await
        .unwrap();
    let rows = app.pg.query(&cells, &[&ids, &tids, &xmins]).await.unwrap();
    assert!(!same(&rows, 3).unwrap());
    assert_eq!(found(&rows), vec![ids[0].clone(), ids[2].clone()]);

    // The versions read after the change are found again.
    let [ids2, tids2, xmins2] = versions(app.pg.query(&read, &[]).await.unwrap());
    let rows = app
        .pg
        .query(&cells, &[&ids2, &tids2, &xmins2])
        .await
        .unwrap();
    assert!(same(&rows, 3).unwrap());
    assert_eq!(found(&rows), ids2);
}
