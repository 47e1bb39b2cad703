//! Aborting a move in each state before the flip, and the refused CLI
//! inputs (ARCHITECTURE.md "Operator contract"). A move given the hidden
//! `--step-delay-ms` sits a while in each state, long enough to act there.
//! An aborted move leaves the database on its source, working, with
//! structural changes allowed again, and nothing behind on either shard.

use cluster_protocol::control::MoveState;
use cluster_protocol::ids::{self, Kind};
use e2e_tests::moves::{
    assert_nothing_left, cli, copy_on, database, replication_name, replication_objects, start_move,
    wait_finished, wait_state,
};
use e2e_tests::{id, ids_in, Person};
use serde_json::json;

use crate::moves_keep::other_shard;

/// A small database: one table with a text field and three records.
async fn small_database(owner: &Person) -> (String, String) {
    let api = &owner.api;
    let db = api.new_database("abort").await;
    let table = id(&api.create_table(&db, "Items").await);
    api.create_field(&table, json!({"name": "Name", "type": "single_line_text"}))
        .await;
    api.post(
        &format!("/api/tables/{table}/records"),
        json!({"records": [{"fields": {"Name": "a"}}, {"fields": {"Name": "b"}}, {"fields": {"Name": "c"}}]}),
    )
    .await
    .expect_ok();
    (db, table)
}

/// The moves of `database_id` in `moves list`.
async fn moves_of(database_id: &str) -> Vec<String> {
    let listed = cli(&["moves", "list", "--json"]).await.json();
    listed["moves"]
        .as_array()
        .expect("moves")
        .iter()
        .filter(|m| m["database_id"] == database_id)
        .map(id)
        .collect()
}

#[tokio::test]
async fn a_move_aborted_in_each_state_leaves_the_database_on_its_source() {
    let owner = Person::new().await;
    let api = &owner.api;
    for state in [
        MoveState::Pending,
        MoveState::Copying,
        MoveState::CatchingUp,
        MoveState::Cutover,
    ] {
        let (db, table) = small_database(&owner).await;
        let records = format!("/api/tables/{table}/records");
        let before = database(&db).await;
        let to = other_shard(&before.shard).await;
        // A large pause budget: the delay after the fence must not be
        // what aborts the cutover.
        let m = start_move(
            &db,
            &to,
            &["--step-delay-ms", "4000", "--pause-budget-ms", "30000"],
        )
        .await;
        wait_state(&m.id, state).await;
        if state == MoveState::CatchingUp {
            // Copied, not flipped: structural changes are 409, record writes go on.
            let r = api
                .post(
                    &format!("/api/tables/{table}/fields"),
                    json!({"name": "Refused", "type": "number"}),
                )
                .await;
            r.expect_error(409, "conflict");
            api.post(
                &records,
                json!({"records": [{"fields": {"Name": "during"}}]}),
            )
            .await
            .expect_ok();
        }
        let run = cli(&["moves", "abort", &m.id, "--json"]).await;
        assert_eq!(run.move_object().id, m.id);
        let ended = wait_finished(&m.id).await;
        assert_eq!(
            ended.state,
            MoveState::Aborted,
            "aborted in {state:?}: {ended:?}"
        );
        assert!(ended.error.is_some(), "an aborted move says why: {ended:?}");
        let after = database(&db).await;
        assert_eq!(
            (after.shard.as_str(), after.epoch),
            (before.shard.as_str(), before.epoch),
            "aborted in {state:?}: the database stays where it was"
        );
        // It works on the source: reads, writes and structural changes.
        let listed = api.get(&format!("{records}?page_size=100")).await;
        let want = if state == MoveState::CatchingUp { 4 } else { 3 };
        assert_eq!(ids_in(listed.expect_ok(), "records").len(), want);
        api.post(
            &records,
            json!({"records": [{"fields": {"Name": "after"}}]}),
        )
        .await
        .expect_ok();
        api.create_field(&table, json!({"name": "Allowed", "type": "number"}))
            .await;
        assert_nothing_left(&ended).await;
        // Aborting a finished move is refused and changes nothing.
        cli(&["moves", "abort", &m.id, "--json"])
            .await
            .expect_refused();
        let again = cli(&["moves", "show", &m.id, "--json"]).await.move_object();
        assert_eq!(again.state, MoveState::Aborted);
    }
}

#[tokio::test]
async fn refused_cli_inputs_change_nothing() {
    let owner = Person::new().await;
    let (db, _) = small_database(&owner).await;
    let before = database(&db).await;
    let to = other_shard(&before.shard).await;
    let unknown_db = ids::new_database_id("ZZZZZ");
    let unknown_move = ids::new_untagged(Kind::Move);
    for args in [
        vec!["move", unknown_db.as_str(), "--to", to.as_str(), "--json"],
        vec!["move", "not-a-database", "--to", to.as_str(), "--json"],
        vec!["move", db.as_str(), "--to", "shard-99", "--json"],
        vec!["move", db.as_str(), "--to", before.shard.as_str(), "--json"],
        vec!["moves", "show", unknown_move.as_str(), "--json"],
        vec!["moves", "abort", unknown_move.as_str(), "--json"],
        vec!["shards", "drain", "shard-99", "--json"],
        vec!["shards", "activate", "shard-99", "--json"],
    ] {
        let run = cli(&args).await;
        let why = run.expect_refused();
        assert!(!why.contains("not yet implemented"), "{args:?}: {why}");
    }
    assert!(moves_of(&db).await.is_empty(), "a refusal recorded no move");
    let after = database(&db).await;
    assert_eq!(
        (after.shard, after.epoch),
        (before.shard.clone(), before.epoch)
    );

    // A second move of a database already moving.
    let m = start_move(&db, &to, &["--step-delay-ms", "5000"]).await;
    assert_eq!(m.from, before.shard);
    cli(&["move", &db, "--to", &to, "--json"])
        .await
        .expect_refused();
    assert_eq!(moves_of(&db).await, vec![m.id.clone()]);
    cli(&["moves", "abort", &m.id, "--json"])
        .await
        .move_object();
    let ended = wait_finished(&m.id).await;
    assert_eq!(ended.state, MoveState::Aborted, "{ended:?}");
    assert_nothing_left(&ended).await;
    let after = database(&db).await;
    assert_eq!((after.shard, after.epoch), (before.shard, before.epoch));
}

/// The leftovers check's own ground truth, without a move: a new database
/// is on its shard (schema, catalog row, placement) and nowhere else, and
/// no replication object carries a move's name.
#[tokio::test]
async fn a_new_database_is_held_by_its_shard_only() {
    let owner = Person::new().await;
    let (db, _) = small_database(&owner).await;
    let placed = database(&db).await;
    let held = copy_on(&placed.shard, &db).await;
    assert!(held.schema && held.database_row, "{held:?}");
    assert!(held.catalog_rows.contains(&"tables"), "{held:?}");
    assert_eq!(held.publications, 0);
    let other = other_shard(&placed.shard).await;
    let elsewhere = copy_on(&other, &db).await;
    assert!(elsewhere.is_empty(), "{other} has {elsewhere:?}");
    let name = replication_name(&ids::new_untagged(Kind::Move));
    assert!(name.starts_with("tmv_") && name.len() == 4 + 24, "{name}");
    for shard in [&placed.shard, &other] {
        assert_eq!(replication_objects(shard, &name).await, [0, 0, 0]);
    }
}
