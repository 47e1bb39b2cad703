//! The restore drill (issue 30, "Backups that have been restored";
//! docs/durability.md, "Backups"): a database is written through the
//! router, its shard backed up (`deploy/dev-cluster backup`), written
//! again up to a moment T and changed after T (records, a field, a deleted
//! table, a new user). `deploy/dev-cluster scratch-restore` brings the
//! shard instance and the catalog instance back as of T into scratch
//! instances, which must hold exactly what the live instances held at T:
//! the tenant schema's tables, columns and every row, the shard's catalog
//! rows of the database, and the users created before T but not the one
//! created after.

use std::collections::BTreeMap;
use std::process::Output;
use std::time::Duration;

use e2e_tests::cluster_ops::repo_root;
use e2e_tests::leftovers::shard_admin;
use e2e_tests::moves::env_file;
use e2e_tests::placements::database;
use e2e_tests::{id, ids_in, postgres_connect, Person};
use serde_json::{json, Value};

/// `deploy/dev-cluster ARGS` on the test cluster; its output, whatever
/// its exit status.
async fn dev_cluster(args: &[&str]) -> Output {
    let env = env_file();
    let out = tokio::process::Command::new(format!("{}/deploy/dev-cluster", repo_root()))
        .args(args)
        .env("DEV_CLUSTER_DIR", &env["DEV_CLUSTER_DIR"])
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output();
    let limit = Duration::from_secs(600);
    tokio::time::timeout(limit, out)
        .await
        .unwrap_or_else(|_| panic!("deploy/dev-cluster {args:?} still running after {limit:?}"))
        .expect("run deploy/dev-cluster")
}

/// [`dev_cluster`] that must succeed; returns its stdout.
async fn dev_cluster_ok(args: &[&str]) -> String {
    let out = dev_cluster(args).await;
    assert!(
        out.status.success(),
        "deploy/dev-cluster {args:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8 output")
}

/// A scratch instance as of `at`: its DSN, the one line on stdout.
async fn scratch_restore(instance: &str, at: &str, name: &str) -> String {
    let stdout = dev_cluster_ok(&["scratch-restore", instance, at, name]).await;
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 1, "one line on stdout, the DSN: {stdout:?}");
    let dsn = lines[0].to_owned();
    assert!(
        dsn.starts_with("postgres://postgres@127.0.0.1:") && dsn.ends_with("/cluster"),
        "a DSN of the scratch instance: {dsn}"
    );
    dsn
}

/// Everything in one tenant schema: per table, its columns (name and
/// type, in order) and its rows (as JSON, by id).
type SchemaDump = BTreeMap<String, (Vec<(String, String)>, Vec<Value>)>;

async fn dump_schema(pg: &impl tokio_postgres::GenericClient, schema: &str) -> SchemaDump {
    let tables = pg
        .query(
            "SELECT c.relname::text, format('%I.%I', n.nspname, c.relname)
               FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
              WHERE n.nspname = $1 AND c.relkind IN ('r', 'p') ORDER BY 1",
            &[&schema],
        )
        .await
        .expect("list the tenant tables");
    let mut out = SchemaDump::new();
    for t in tables {
        let (name, qualified): (String, String) = (t.get(0), t.get(1));
        let columns = pg
            .query(
                "SELECT column_name::text, data_type::text FROM information_schema.columns
                  WHERE table_schema = $1 AND table_name = $2 ORDER BY ordinal_position",
                &[&schema, &name],
            )
            .await
            .expect("list the columns")
            .iter()
            .map(|r| (r.get(0), r.get(1)))
            .collect();
        // `qualified` was quoted by the server (format %I), from a name
        // read from pg_class.
        let rows = pg
            .query(
                &format!("SELECT to_jsonb(t) FROM {qualified} t ORDER BY to_jsonb(t)->>'id'"),
                &[],
            )
            .await
            .expect("read the rows")
            .iter()
            .map(|r| r.get(0))
            .collect();
        out.insert(name, (columns, rows));
    }
    out
}

/// The ids in a dumped table's rows.
fn row_ids(dump: &SchemaDump, table: &str) -> Vec<String> {
    let (_, rows) = dump
        .get(table)
        .unwrap_or_else(|| panic!("table {table} in {:?}", dump.keys()));
    let mut ids: Vec<String> = rows
        .iter()
        .map(|r| r["id"].as_str().expect("an id column").to_owned())
        .collect();
    ids.sort();
    ids
}

fn has_column(dump: &SchemaDump, table: &str, column: &str) -> bool {
    dump.get(table)
        .is_some_and(|(cols, _)| cols.iter().any(|(c, _)| c == column))
}

/// The ids of the shard catalog's tables of `database`.
async fn catalog_tables(pg: &tokio_postgres::Client, database: &str) -> Vec<String> {
    pg.query(
        "SELECT id FROM tables WHERE database_id = $1 ORDER BY id",
        &[&database],
    )
    .await
    .expect("read the shard catalog")
    .iter()
    .map(|r| r.get(0))
    .collect()
}

async fn user_exists(pg: &tokio_postgres::Client, user_id: &str) -> bool {
    pg.query_opt("SELECT 1 FROM users WHERE id = $1", &[&user_id])
        .await
        .expect("read the users")
        .is_some()
}

async fn add_records(owner: &Person, table: &str, rows: Vec<Value>) -> Vec<String> {
    let made = owner
        .api
        .post(
            &format!("/api/tables/{table}/records"),
            json!({ "records": rows }),
        )
        .await;
    ids_in(made.expect_ok(), "records")
}

fn named(names: &[&str]) -> Vec<Value> {
    names
        .iter()
        .map(|n| json!({"fields": {"Name": n}}))
        .collect()
}

/// A scratch instance is dropped (twice: the second drop is a no-op) and
/// its directory is gone.
async fn drop_scratch(name: &str) {
    dev_cluster_ok(&["scratch-drop", name]).await;
    dev_cluster_ok(&["scratch-drop", name]).await;
    let dir = format!("{}/scratch/{name}", env_file()["DEV_CLUSTER_DIR"]);
    assert!(
        !std::path::Path::new(&dir).exists(),
        "{dir} is removed by scratch-drop"
    );
}

#[tokio::test]
async fn restore_drill_brings_a_shard_and_the_catalog_back_as_of_a_moment() {
    let owner = Person::new().await;
    let api = &owner.api;
    let db = api.new_database("drill").await;
    let shard = database(&db).await.shard;
    let items = id(&api.create_table(&db, "Items").await);
    let name = id(&api
        .create_field(&items, json!({"name": "Name", "type": "single_line_text"}))
        .await);
    let doomed = id(&api.create_table(&db, "Doomed").await);
    api.create_field(&doomed, json!({"name": "Name", "type": "single_line_text"}))
        .await;
    let mut before_t = add_records(&owner, &items, named(&["a", "b", "c", "d", "e"])).await;
    add_records(&owner, &doomed, named(&["x", "y", "z"])).await;

    dev_cluster_ok(&["backup", &shard]).await;
    // scratch-restore counts a backup from one second after its end
    // (pgBackRest records whole seconds): T comes later than that.
    tokio::time::sleep(Duration::from_millis(1100)).await;

    // After the backup, before T: records, a new field, a changed record.
    let note = id(&api
        .create_field(&items, json!({"name": "Note", "type": "single_line_text"}))
        .await);
    before_t.extend(
        add_records(
            &owner,
            &items,
            vec![
                json!({"fields": {"Name": "f", "Note": "after the backup"}}),
                json!({"fields": {"Name": "g", "Note": "before T"}}),
            ],
        )
        .await,
    );
    let changed_before_t = before_t[0].clone();
    let changed_after_t = before_t[1].clone();
    api.patch(
        &format!("/api/tables/{items}/records"),
        json!({"records": [{"id": changed_before_t, "fields": {"Name": "a, changed before T"}}]}),
    )
    .await
    .expect_ok();
    let user_before = Person::new().await;

    // T, by the shard primary's clock, and what the shard held then: one
    // repeatable-read snapshot (nothing else writes this tenant schema).
    let live = shard_admin(&shard).await;
    let (t, at_t, tables_at_t) = {
        let mut live = live;
        let tx = live
            .build_transaction()
            .isolation_level(tokio_postgres::IsolationLevel::RepeatableRead)
            .start()
            .await
            .expect("begin");
        let t: String = tx
            .query_one(
                "SELECT to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')",
                &[],
            )
            .await
            .expect("now()")
            .get(0);
        let dump = dump_schema(&tx, &db).await;
        let tables: Vec<String> = tx
            .query(
                "SELECT id FROM tables WHERE database_id = $1 ORDER BY id",
                &[&db],
            )
            .await
            .expect("read the shard catalog")
            .iter()
            .map(|r| r.get(0))
            .collect();
        tx.commit().await.expect("commit");
        (t, dump, tables)
    };
    before_t.sort();
    assert_eq!(row_ids(&at_t, &items), before_t, "the records before T");
    assert!(has_column(&at_t, &items, &note) && at_t.contains_key(&doomed));

    // After T: more records, another field, a changed record, a deleted
    // table, a new user.
    let after_t = add_records(&owner, &items, named(&["h", "i"])).await;
    let extra = id(&api
        .create_field(&items, json!({"name": "Extra", "type": "number"}))
        .await);
    api.patch(
        &format!("/api/tables/{items}/records"),
        json!({"records": [{"id": changed_after_t, "fields": {"Name": "changed after T"}}]}),
    )
    .await
    .expect_ok();
    api.delete(&format!("/api/tables/{doomed}"))
        .await
        .expect_ok();
    let user_after = Person::new().await;

    // The shard as of T.
    let scratch = format!("drill-{shard}");
    let dsn = scratch_restore(&shard, &t, &scratch).await;
    eprintln!("chaos: {shard} restored as of {t} at {dsn}");
    let restored = postgres_connect(&dsn).await;
    let got = dump_schema(&restored, &db).await;
    assert_eq!(
        got.keys().collect::<Vec<_>>(),
        at_t.keys().collect::<Vec<_>>(),
        "the tables at T (the one deleted after T included)"
    );
    for (table, (columns, rows)) in &at_t {
        let (got_columns, got_rows) = &got[table];
        assert_eq!(got_columns, columns, "the columns of {table} at T");
        assert_eq!(got_rows, rows, "every row of {table} at T");
    }
    assert_eq!(row_ids(&got, &items), before_t);
    assert!(after_t.iter().all(|r| !row_ids(&got, &items).contains(r)));
    assert!(has_column(&got, &items, &note), "the field made before T");
    assert!(!has_column(&got, &items, &extra), "no field made after T");
    let name_of = |id: &str| {
        got[&items]
            .1
            .iter()
            .find(|r| r["id"] == id)
            .map(|r| r[&name].clone())
    };
    assert_eq!(
        name_of(&changed_before_t),
        Some(json!("a, changed before T"))
    );
    assert_eq!(
        name_of(&changed_after_t),
        Some(json!("b")),
        "as it was at T"
    );
    assert_eq!(catalog_tables(&restored, &db).await, tables_at_t);
    drop(restored);
    drop_scratch(&scratch).await;

    // The catalog as of T.
    let scratch = "drill-control";
    let dsn = scratch_restore("control", &t, scratch).await;
    let restored = postgres_connect(&dsn).await;
    assert!(user_exists(&restored, &owner.user_id).await);
    assert!(
        user_exists(&restored, &user_before.user_id).await,
        "a user made before T"
    );
    assert!(
        !user_exists(&restored, &user_after.user_id).await,
        "no user made after T"
    );
    drop(restored);
    drop_scratch(scratch).await;
}

/// scratch-restore refuses (exit status 2) a moment no backup covers, says
/// why on stderr, prints nothing on stdout and leaves no scratch instance.
#[tokio::test]
async fn scratch_restore_refuses_what_no_backup_covers() {
    let cases = [
        ("2000-01-01T00:00:00Z", "before the first backup"),
        ("2999-01-01T00:00:00Z", "in the future"),
        ("2026-02-30T00:00:00Z", "bad timestamp"),
        ("yesterday", "bad timestamp"),
    ];
    for (at, reason) in cases {
        let name = "refused";
        let out = dev_cluster(&["scratch-restore", "shard-1", at, name]).await;
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            out.status.code(),
            Some(2),
            "scratch-restore at {at} is refused (status 2)"
        );
        assert!(stderr.contains(reason), "{at}: says {reason:?}: {stderr}");
        assert!(out.stdout.is_empty(), "{at}: nothing on stdout");
        let dir = format!("{}/scratch/{name}", env_file()["DEV_CLUSTER_DIR"]);
        assert!(
            !std::path::Path::new(&dir).exists(),
            "{at}: {dir} is not left"
        );
    }
    let out = dev_cluster(&["scratch-restore", "shard-9", "2026-01-01T00:00:00Z", "x"]).await;
    assert_eq!(out.status.code(), Some(2), "an unknown instance is refused");
}
