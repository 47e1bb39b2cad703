//! The scale-out commands of the operator CLI (`move`, `moves`,
//! `rebalance`, `shards drain|activate`) through the real binary. No shard
//! instances run here, so no move runs: these pin what needs none (refused
//! input, plans, shard states, output shapes).

use serde_json::Value;

use crate::helpers::*;

/// `n` active databases owned by a fresh user, oldest first.
async fn databases(app: &App, n: usize) -> Vec<String> {
    let owner = app.user().await;
    let mut ids = Vec::new();
    for _ in 0..n {
        let a = app
            .client
            .allocate_database(&owner)
            .await
            .expect("allocate");
        app.client
            .confirm_database(&a.database_id)
            .await
            .expect("confirm");
        ids.push(a.database_id);
    }
    ids
}

async fn json_ok(app: &App, args: &[&str]) -> Value {
    let (ok, out, err) = cli(app, args).await;
    assert!(ok, "{args:?} failed: {err}");
    one_json(&out)
}

/// A refused command: non-zero exit, nothing on stdout, a reason on stderr
/// that contains `reason`.
async fn refused(app: &App, args: &[&str], reason: &str) {
    let (ok, out, err) = cli(app, args).await;
    assert!(!ok, "{args:?} should fail: {out}");
    assert!(out.is_empty(), "{args:?} printed {out}");
    assert!(
        err.contains(reason),
        "{args:?}: stderr {err:?} lacks {reason:?}"
    );
}

async fn shard_states(app: &App) -> Vec<(String, String)> {
    json_ok(app, &["shards", "list", "--json"]).await["shards"]
        .as_array()
        .expect("shards")
        .iter()
        .map(|s| {
            (
                s["name"].as_str().unwrap_or_default().to_string(),
                s["state"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

async fn placements(app: &App) -> Vec<(String, String, i64)> {
    json_ok(app, &["databases", "list", "--json"]).await["databases"]
        .as_array()
        .expect("databases")
        .iter()
        .map(|d| {
            (
                d["id"].as_str().unwrap_or_default().to_string(),
                d["shard"].as_str().unwrap_or_default().to_string(),
                d["epoch"].as_i64().unwrap_or_default(),
            )
        })
        .collect()
}

#[tokio::test]
async fn drain_activate_and_rebalance_plans() {
    if skip() {
        return;
    }
    let app = spawn_app().await;
    app.shard("s1", 100).await;
    let ids = databases(&app, 4).await;
    app.shard("s2", 100).await;

    // Everything is on s1: the plan gives s2 the two newest databases.
    let plan = json_ok(&app, &["rebalance", "--dry-run", "--json"]).await;
    let expected = serde_json::json!({"moves": [
        {"database_id": ids[3], "from": "s1", "to": "s2"},
        {"database_id": ids[2], "from": "s1", "to": "s2"},
    ]});
    assert_eq!(plan, expected);
    let before = placements(&app).await;
    assert!(before
        .iter()
        .all(|(_, shard, epoch)| shard == "s1" && *epoch == 1));
    // The dry run changed nothing: the same plan again.
    assert_eq!(
        json_ok(&app, &["rebalance", "--dry-run", "--json"]).await,
        expected
    );

    // A draining shard gets nothing: no plan while s2 drains.
    let drained = json_ok(&app, &["shards", "drain", "s2", "--json"]).await;
    assert_eq!(drained["name"], "s2");
    assert_eq!(drained["state"], "draining");
    assert_eq!(drained["moves"], serde_json::json!([]));
    assert_eq!(
        json_ok(&app, &["rebalance", "--dry-run", "--json"]).await,
        serde_json::json!({"moves": []})
    );

    // s1 is now the last active shard: draining it is refused, nothing changes.
    refused(
        &app,
        &["shards", "drain", "s1", "--json"],
        "last active shard",
    )
    .await;
    assert_eq!(
        shard_states(&app).await,
        vec![
            ("s1".into(), "active".into()),
            ("s2".into(), "draining".into())
        ]
    );
    refused(&app, &["shards", "drain", "nope"], "Unknown shard nope").await;
    refused(&app, &["shards", "activate", "nope"], "Unknown shard nope").await;
    refused(
        &app,
        &["databases", "list", "--shard", "nope", "--json"],
        "Unknown shard nope",
    )
    .await;

    let active = json_ok(&app, &["shards", "activate", "s2", "--json"]).await;
    assert_eq!(active["name"], "s2");
    assert_eq!(active["state"], "active");
    assert_eq!(
        json_ok(&app, &["rebalance", "--dry-run", "--json"]).await,
        expected
    );

    // The human forms are tables with a header row.
    let (ok, out, _) = cli(&app, &["rebalance", "--dry-run"]).await;
    assert!(ok);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines[0].split_whitespace().collect::<Vec<_>>(),
        ["DATABASE", "FROM", "TO"]
    );
    assert_eq!(lines.len(), 3);
    assert!(lines[1].starts_with(&ids[3]));
    let (ok, out, _) = cli(&app, &["shards", "list"]).await;
    assert!(ok);
    assert!(out.lines().next().unwrap_or_default().starts_with("NAME"));
    assert_eq!(out.lines().count(), 3, "{out}");
    let (ok, out, _) = cli(&app, &["databases", "list", "--shard", "s1"]).await;
    assert!(ok);
    let header: Vec<&str> = out
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(
        header,
        ["ID", "TAG", "OWNER", "SHARD", "STATE", "EPOCH", "POSITION", "CREATED"]
    );
    assert_eq!(out.lines().count(), 5, "{out}");

    assert_eq!(placements(&app).await, before, "nothing moved");
    app.finish().await;
}

#[tokio::test]
async fn refused_moves_change_nothing() {
    if skip() {
        return;
    }
    let app = spawn_app().await;
    app.shard("s1", 100).await;
    let ids = databases(&app, 1).await;
    let db = ids[0].as_str();
    app.shard("s2", 100).await;

    let show = json_ok(&app, &["databases", "show", db, "--json"]).await;
    for key in [
        "id",
        "tag",
        "owner_id",
        "shard",
        "state",
        "epoch",
        "position",
        "created_at",
    ] {
        assert!(
            show.get(key).is_some(),
            "databases show lacks {key}: {show}"
        );
    }
    assert_eq!(show["shard"], "s1");
    refused(
        &app,
        &["databases", "show", "db_000000000000"],
        "Unknown database",
    )
    .await;

    // Refusals the move engine answers (unknown database, unknown shard,
    // same shard, unknown move); before the engine exists its routes only
    // answer 500, so these wait for it.
    if app.client.moves().await.is_ok() {
        refused(
            &app,
            &["move", "db_000000000000", "--to", "s2", "--json"],
            "db_000000000000",
        )
        .await;
        refused(&app, &["move", db, "--to", "nope"], "nope").await;
        refused(&app, &["move", db, "--to", "s1", "--wait"], "answered 4").await;
        refused(&app, &["moves", "show", "mov_000000000000"], "answered 4").await;
        refused(&app, &["moves", "abort", "mov_000000000000"], "answered 4").await;
        assert_eq!(
            json_ok(&app, &["moves", "list", "--json"]).await,
            serde_json::json!({"moves": []})
        );
        let (ok, out, _) = cli(&app, &["moves", "list"]).await;
        assert!(ok && out.trim() == "no moves", "{out}");

        // A recorded move: the database counts at its destination (so the
        // plan is empty) and a second move of it is refused.
        let first = json_ok(&app, &["move", db, "--to", "s2", "--json"]).await;
        assert_eq!(first["database_id"], db);
        assert!(first["id"].as_str().unwrap_or_default().starts_with("mov_"));
        assert_eq!(
            json_ok(&app, &["rebalance", "--dry-run", "--json"]).await,
            serde_json::json!({"moves": []})
        );
        refused(&app, &["move", db, "--to", "s2"], "answered 409").await;
        let listed = json_ok(&app, &["moves", "list", "--json"]).await;
        assert_eq!(listed["moves"].as_array().map(Vec::len), Some(1));
        let id = first["id"].as_str().unwrap_or_default();
        let (_, out, _) = cli(&app, &["moves", "abort", id, "--json"]).await;
        assert_eq!(one_json(&out)["id"], id);
        let after = json_ok(&app, &["databases", "show", db, "--json"]).await;
        assert_eq!(after["shard"], "s1");
        assert_eq!(after["epoch"], 1);
        app.finish().await;
        return;
    } else {
        eprintln!("the move engine is not built in: skipping its refusals");
        refused(&app, &["move", db, "--to", "s2"], "answered 500").await;
    }
    let after = json_ok(&app, &["databases", "show", db, "--json"]).await;
    assert_eq!(after, show, "refused moves changed nothing");
    app.finish().await;
}
