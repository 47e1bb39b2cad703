//! Issue 29's operator CLI against the test cluster, through the real
//! `control-plane` binary: the new lists (`users`, `keys`, `members`,
//! `shards` with counts and sizes, paged and filtered `databases` and
//! `moves`), `--dry-run` of `move` and `shards drain`, `--wait --timeout`,
//! and each exit code with its JSON error on stderr (usage, refused,
//! unreachable, aborted, timed out).

use std::time::Duration;

use cluster_protocol::control::MoveState;
use e2e_tests::moves::{
    cli, cli_command, cli_within, database, get_move, wait_finished, wait_state,
};
use e2e_tests::{cluster, Person};
use serde_json::{json, Value};

use crate::moves_keep::other_shard;

/// Exit code, stdout and stderr of the CLI run with the cluster's URL and
/// token overridden by `env`.
async fn run_with(args: &[&str], env: &[(&str, &str)]) -> (Option<i32>, String, String) {
    let out = cli_command(args).envs(env.iter().copied()).output();
    let out = tokio::time::timeout(Duration::from_secs(60), out)
        .await
        .expect("the CLI answers within a minute")
        .expect("run the CLI");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The one JSON error object on stderr, checked against `code` and `exit`.
#[track_caller]
fn json_error(stderr: &str, code: &str, exit: i32) -> Value {
    let lines: Vec<&str> = stderr.trim().lines().collect();
    assert_eq!(lines.len(), 1, "one line on stderr: {stderr}");
    let e: Value = serde_json::from_str(lines[0]).expect("stderr is one JSON object");
    assert_eq!(e["error"]["code"], code, "{e}");
    assert_eq!(e["error"]["exit"], exit, "{e}");
    assert!(
        e["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty()),
        "{e}"
    );
    e
}

async fn new_database(owner: &Person) -> String {
    owner.api.new_database("cli").await
}

#[tokio::test]
async fn lists_show_what_an_operator_needs() {
    let owner = Person::new().await;
    let db = new_database(&owner).await;
    let placed = database(&db).await;

    // shards list: every shard with its database count and size, no password.
    let listed = cli(&["shards", "list", "--json"]).await.json();
    let shards = listed["shards"].as_array().expect("shards");
    assert!(shards.len() >= 2, "{listed}");
    for s in shards {
        assert!(s["databases"].as_i64().is_some(), "{s}");
        assert!(
            s["bytes"].as_i64().is_some_and(|b| b > 0),
            "a live shard has a size: {s}"
        );
    }
    let ours = shards
        .iter()
        .find(|s| s["name"] == placed.shard.as_str())
        .expect("our shard");
    assert!(ours["databases"].as_i64().unwrap_or(0) >= 1, "{ours}");
    let held = cluster().control_plane.shards().await.expect("shards");
    let text = listed.to_string();
    for s in &held.shards {
        let dsn: tokio_postgres::Config = s.postgres.parse().expect("a DSN");
        if let Some(pw) = dsn.get_password().filter(|p| !p.is_empty()) {
            assert!(
                !text.contains(&*String::from_utf8_lossy(pw)),
                "a password in {text}"
            );
        }
    }

    // users list pages; keys list and members list show the new user's.
    let page = cli(&["users", "list", "--limit", "1", "--json"])
        .await
        .json();
    assert_eq!(page["users"].as_array().map(Vec::len), Some(1), "{page}");
    let cursor = page["next_cursor"]
        .as_str()
        .expect("more than one user: a cursor");
    let next = cli(&[
        "users", "list", "--limit", "1", "--cursor", cursor, "--json",
    ])
    .await
    .json();
    assert_ne!(next["users"][0]["id"], page["users"][0]["id"]);
    let keys = cli(&["keys", "list", "--user", &owner.user_id, "--json"])
        .await
        .json();
    assert_eq!(keys["keys"][0]["id"], owner.key_id.as_str(), "{keys}");
    assert_eq!(keys["keys"][0]["user_id"], owner.user_id.as_str());
    let members = cli(&["members", "list", "--database", &db, "--json"])
        .await
        .json();
    assert_eq!(members["members"][0]["user"]["id"], owner.user_id.as_str());
    assert_eq!(members["members"][0]["role"], "owner");

    // databases list by shard and state, one page.
    let on_shard = cli(&[
        "databases",
        "list",
        "--shard",
        &placed.shard,
        "--state",
        "active",
        "--limit",
        "1",
        "--json",
    ])
    .await
    .json();
    let page = on_shard["databases"].as_array().expect("databases");
    assert_eq!(page.len(), 1, "{on_shard}");
    assert_eq!(page[0]["shard"], placed.shard.as_str());
    assert_eq!(page[0]["state"], "active");

    // moves list of one database: none yet, then its move, by shard and state.
    let none = cli(&["moves", "list", "--database", &db, "--json"])
        .await
        .json();
    assert_eq!(none, json!({"moves": []}));
    let to = other_shard(&placed.shard).await;
    let m = cli(&[
        "move",
        &db,
        "--to",
        &to,
        "--json",
        "--step-delay-ms",
        "1000",
        // The delay also follows the fence: a budget that fits it.
        "--pause-budget-ms",
        "30000",
    ])
    .await
    .move_object();
    let of_db = cli(&[
        "moves",
        "list",
        "--database",
        &db,
        "--shard",
        &to,
        "--state",
        "unfinished",
        "--json",
    ])
    .await
    .json();
    assert_eq!(of_db["moves"][0]["id"], m.id.as_str(), "{of_db}");
    let done = wait_finished(&m.id).await;
    assert_eq!(done.state, MoveState::Done, "{done:?}");
    let finished = cli(&[
        "moves",
        "list",
        "--database",
        &db,
        "--state",
        "done",
        "--json",
    ])
    .await
    .json();
    assert_eq!(finished["moves"][0]["id"], m.id.as_str());
}

#[tokio::test]
async fn dry_runs_plan_and_change_nothing() {
    let owner = Person::new().await;
    let db = new_database(&owner).await;
    let before = database(&db).await;
    let to = other_shard(&before.shard).await;

    let plan = cli(&["move", &db, "--to", &to, "--dry-run", "--json"])
        .await
        .json();
    assert_eq!(
        plan,
        json!({"moves": [{"database_id": db, "from": before.shard, "to": to}]})
    );
    let moves = cli(&["moves", "list", "--database", &db, "--json"])
        .await
        .json();
    assert_eq!(moves, json!({"moves": []}), "the dry run recorded nothing");

    let drain = cli(&["shards", "drain", &before.shard, "--dry-run", "--json"])
        .await
        .json();
    assert_eq!(drain["shard"], before.shard.as_str());
    let planned = drain["moves"].as_array().expect("planned moves");
    assert!(planned
        .iter()
        .all(|m| m["from"] == before.shard.as_str() && m["to"] != before.shard.as_str()));
    assert!(
        planned.iter().any(|m| m["database_id"] == db.as_str()),
        "{drain}"
    );
    let shards = cli(&["shards", "list", "--json"]).await.json();
    assert!(
        shards["shards"]
            .as_array()
            .expect("shards")
            .iter()
            .all(|s| s["state"] == "active"),
        "the dry run drained nothing: {shards}"
    );
    let after = database(&db).await;
    assert_eq!((after.shard, after.epoch), (before.shard, before.epoch));
}

#[tokio::test]
async fn exit_codes_and_json_errors() {
    // usage (2): clap's, and ours.
    let (code, out, err) = run_with(&["moves", "list", "--state", "running", "--json"], &[]).await;
    assert_eq!((code, out.as_str()), (Some(2), ""));
    json_error(&err, "usage", 2);
    let (code, _, err) = run_with(&["users", "list"], &[("CONTROL_PLANE_TOKEN", "")]).await;
    assert_eq!(code, Some(2));
    assert!(err.contains("CONTROL_PLANE_TOKEN"), "{err}");

    // refused (3).
    let (code, out, err) = run_with(&["moves", "show", "mov_000000000000", "--json"], &[]).await;
    assert_eq!((code, out.as_str()), (Some(3), ""));
    json_error(&err, "not_found", 3);
    let (code, _, err) = run_with(
        &["shards", "list", "--json"],
        &[("CONTROL_PLANE_TOKEN", "nope")],
    )
    .await;
    assert_eq!(code, Some(3));
    json_error(&err, "unauthorized", 3);

    // unreachable (4): a closed port.
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr").port()
    };
    let url = format!("http://127.0.0.1:{closed}");
    let (code, out, err) =
        run_with(&["users", "list", "--json"], &[("CONTROL_PLANE_URL", &url)]).await;
    assert_eq!((code, out.as_str()), (Some(4), ""));
    json_error(&err, "unreachable", 4);
    let (code, _, err) = run_with(&["users", "list"], &[("CONTROL_PLANE_URL", &url)]).await;
    assert_eq!(code, Some(4));
    assert!(err.starts_with("error: "), "{err}");
}

#[tokio::test]
async fn waiting_times_out_leaving_the_move_running() {
    let owner = Person::new().await;
    let db = new_database(&owner).await;
    let to = other_shard(&database(&db).await.shard).await;
    let run = cli_within(
        &[
            "move",
            &db,
            "--to",
            &to,
            "--wait",
            "--timeout",
            "1s",
            "--step-delay-ms",
            "3000",
            "--pause-budget-ms",
            "30000",
            "--json",
        ],
        Duration::from_secs(60),
    )
    .await;
    assert_eq!(run.code, Some(6), "{}", run.stderr);
    let m: cluster_protocol::control::Move =
        serde_json::from_str(run.stdout.trim()).expect("the move as it stood on stdout");
    assert!(!m.state.is_finished(), "{m:?}");
    let e = json_error(&run.stderr, "timed_out", 6);
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains(&m.id),
        "{e}"
    );
    // Left running: it finishes on its own.
    assert_eq!(wait_finished(&m.id).await.state, MoveState::Done);
}

#[tokio::test]
async fn a_waited_move_that_is_aborted_exits_aborted() {
    let owner = Person::new().await;
    let db = new_database(&owner).await;
    let to = other_shard(&database(&db).await.shard).await;
    let child = cli_command(&[
        "move",
        &db,
        "--to",
        &to,
        "--wait",
        "--step-delay-ms",
        "2000",
        "--json",
    ])
    .spawn()
    .expect("run the CLI");
    // Find the move the waiting CLI started, and abort it while it copies.
    let id = loop {
        let listed = cli(&["moves", "list", "--database", &db, "--json"])
            .await
            .json();
        if let Some(id) = listed["moves"][0]["id"].as_str() {
            break id.to_string();
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    wait_state(&id, MoveState::Copying).await;
    let aborted = cli(&["moves", "abort", &id, "--json"]).await.move_object();
    assert_eq!(aborted.id, id);
    let out = tokio::time::timeout(Duration::from_secs(180), child.wait_with_output())
        .await
        .expect("the waiting CLI returns")
        .expect("its output");
    assert_eq!(
        out.status.code(),
        Some(5),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let m: cluster_protocol::control::Move =
        serde_json::from_slice(&out.stdout).expect("the aborted move on stdout");
    assert_eq!(m.state, MoveState::Aborted);
    json_error(&String::from_utf8_lossy(&out.stderr), "aborted", 5);
    assert_eq!(get_move(&id).await.state, MoveState::Aborted);
}
