//! A table loaded through the API has planner statistics right after the
//! load (issue 18): the shard node analyzes a table once enough rows were
//! written since its last analysis, instead of leaving its first minute to
//! autovacuum, during which PostgreSQL plans it as if it could be any size.

use e2e_tests::{database_postgres, Person};
use serde_json::{json, Value};

const BATCHES: usize = 100;
const PER_BATCH: usize = 100;

/// One record of the five-field load, varied by `n`.
fn record(n: usize) -> Value {
    let status = ["todo", "doing", "done", "blocked"][n % 4];
    json!({"fields": {
        "Name": format!("Record {n}"),
        "Amount": (n * 7919) % 100_000,
        "Status": status,
        "Due": format!("2026-{:02}-{:02}", 1 + n % 12, 1 + n % 28),
        "Notes": format!("note {n} about the quarterly figures of team {}", n % 17),
    }})
}

#[tokio::test]
async fn a_table_loaded_with_ten_thousand_records_has_statistics_right_after() {
    let person = Person::new().await;
    let db = person.api.new_database("stats").await;
    let table = person.api.create_table(&db, "Load").await;
    let tid = table["id"].as_str().unwrap().to_owned();
    for body in [
        json!({"name": "Name", "type": "single_line_text"}),
        json!({"name": "Amount", "type": "number"}),
        json!({"name": "Status", "type": "single_select", "options": {"choices": [
            {"name": "todo"}, {"name": "doing"}, {"name": "done"}, {"name": "blocked"}]}}),
        json!({"name": "Due", "type": "date"}),
        json!({"name": "Notes", "type": "long_text"}),
    ] {
        person.api.create_field(&tid, body).await;
    }
    let amount = person.api.get(&format!("/api/tables/{tid}")).await;
    let amount = amount.expect_ok()["table"]["fields"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == "Amount")
        .map(|f| f["id"].as_str().unwrap().to_owned())
        .unwrap();

    let pg = database_postgres(&db).await;
    let analyzed = async || -> (bool, f32, i64) {
        let row = pg
            .query_one(
                "SELECT s.last_analyze IS NOT NULL, c.reltuples,
                        (SELECT count(*) FROM pg_stats p
                          WHERE p.schemaname = $1 AND p.tablename = $2 AND p.attname = $3)
                   FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid
                  WHERE s.schemaname = $1 AND s.relname = $2",
                &[&db, &tid, &amount],
            )
            .await
            .unwrap();
        (row.get(0), row.get(1), row.get(2))
    };
    assert_eq!(
        analyzed().await,
        (false, -1.0, 0),
        "a new table has never been analyzed"
    );

    for b in 0..BATCHES {
        let records: Vec<Value> = (0..PER_BATCH).map(|i| record(b * PER_BATCH + i)).collect();
        let r = person
            .api
            .post(
                &format!("/api/tables/{tid}/records"),
                json!({ "records": records }),
            )
            .await;
        r.expect_ok();
    }

    // The node's ANALYZE runs in the background after the write that made
    // the statistics stale; wait for it (a manual ANALYZE, so
    // `last_analyze`: autovacuum would set `last_autoanalyze` instead).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let (manual, rows, amount_stats) = loop {
        let seen = analyzed().await;
        if (seen.0 && seen.1 >= 8_000.0) || std::time::Instant::now() > deadline {
            break seen;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    assert!(manual, "the node analyzed the table");
    assert!(
        rows >= 8_000.0,
        "the statistics know the table's size: {rows} of 10000 rows"
    );
    assert_eq!(amount_stats, 1, "column statistics of Amount are there");
}
