//! Part B, Upsert: "a record matched but removed during the write gives 409
//! `conflict` with an empty `records` array", made deterministic through the
//! shard's PostgreSQL: the matched row is locked, the upsert is sent and
//! waits on that lock, the row is trashed and the lock released.

use std::time::{Duration, Instant};

use e2e_tests::{database_postgres, id, Person};
use serde_json::json;

use crate::fixtures::rec_ids;

#[tokio::test]
async fn upsert_of_a_record_trashed_during_the_write_is_a_409_with_no_records() {
    let person = Person::new().await;
    let api = person.api.clone();
    let db = api.new_database("upsert-race").await;
    let t = id(&api.create_table(&db, "Contacts").await);
    let email = id(&api
        .create_field(&t, json!({"name": "Email", "type": "email"}))
        .await);
    let name = id(&api
        .create_field(&t, json!({"name": "Name", "type": "single_line_text"}))
        .await);
    let path = format!("/api/tables/{t}/records");
    let made = api
        .post(
            &path,
            json!({"records": [{"fields": {"Email": "a@x.test", "Name": "A"}}]}),
        )
        .await;
    let a = rec_ids(made.expect_ok())[0].clone();
    let table = format!("\"{db}\".\"{t}\"");

    // Hold the matched row's lock in an open transaction.
    let mut holder = database_postgres(&db).await;
    let tx = holder.transaction().await.unwrap();
    let locked = tx
        .query(
            &format!("SELECT id FROM {table} WHERE id = $1 FOR UPDATE"),
            &[&a],
        )
        .await
        .unwrap();
    assert_eq!(locked.len(), 1);
    let holder_pid: i32 = tx
        .query_one("SELECT pg_backend_pid()", &[])
        .await
        .unwrap()
        .get(0);

    // The upsert matches a@x.test (and would create b@x.test), then waits.
    let upsert = tokio::spawn({
        let api = api.clone();
        let path = path.clone();
        async move {
            api.put(
                &path,
                json!({"merge_on": ["Email"], "records": [
                    {"fields": {"Email": "a@x.test", "Name": "A2"}},
                    {"fields": {"Email": "b@x.test", "Name": "B"}}]}),
            )
            .await
        }
    });
    let watcher = database_postgres(&db).await;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let waiting: i64 = watcher
            .query_one(
                "SELECT count(*) FROM pg_stat_activity \
                 WHERE pid <> $1 AND wait_event_type = 'Lock' AND $1 = ANY(pg_blocking_pids(pid)) \
                 AND query LIKE '%FOR UPDATE%' AND query LIKE $2",
                &[&holder_pid, &format!("%{t}%")],
            )
            .await
            .unwrap()
            .get(0);
        if waiting == 1 {
            break;
        }
        assert!(
            !upsert.is_finished(),
            "the upsert finished without waiting on the locked row"
        );
        assert!(
            Instant::now() < deadline,
            "the upsert never waited on the locked row"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // Trash the matched row and release the lock.
    tx.execute(
        &format!("UPDATE {table} SET deleted_at = now() WHERE id = $1"),
        &[&a],
    )
    .await
    .unwrap();
    tx.commit().await.unwrap();

    let r = upsert.await.expect("upsert task");
    let msg = r.expect_error(409, "conflict");
    assert!(msg.contains("removed"), "{msg}");
    assert_eq!(r.body["error"]["records"], json!([]));

    // Nothing from the upsert was written: no new record, the trashed one
    // unchanged (still "A"), no other row at all.
    assert_eq!(
        api.get(&path).await.expect_ok()["records"],
        json!([]),
        "no live record"
    );
    let rows = watcher
        .query(
            &format!(
                "SELECT id, \"{name}\", \"{email}\", deleted_at IS NOT NULL FROM {table} ORDER BY id"
            ),
            &[],
        )
        .await
        .unwrap();
    assert_eq!(rows.len(), 1, "only the original row exists");
    assert_eq!(rows[0].get::<_, String>(0), a);
    assert_eq!(rows[0].get::<_, Option<String>>(1).as_deref(), Some("A"));
    assert_eq!(
        rows[0].get::<_, Option<String>>(2).as_deref(),
        Some("a@x.test")
    );
    assert!(rows[0].get::<_, bool>(3), "trashed by the test");
}
