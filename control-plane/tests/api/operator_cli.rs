//! Issue 29's operator CLI through the real binary against a control plane
//! with a real catalog (no shard instances, so no move gets anywhere): the
//! new lists with their filters and pages, `shards list`'s counts, sizes
//! and redacted DSNs, `--dry-run` of `move` and `shards drain`, stopping a
//! rebalance, the JSON result of every changing command, and errors as one
//! JSON object on stderr with their exit codes.

use serde_json::{json, Value};

use crate::helpers::*;

/// Exit code, stdout, stderr of `control-plane ARGS` with the app's URL
/// and token, plus `env`.
async fn run(app: &App, args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_control-plane"))
        .args(args)
        .env("CONTROL_PLANE_URL", &app.base)
        .env("CONTROL_PLANE_TOKEN", TOKEN)
        .envs(env.iter().copied())
        .output()
        .await
        .expect("run control-plane");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

async fn json_ok(app: &App, args: &[&str]) -> Value {
    let (code, out, err) = run(app, args, &[]).await;
    assert_eq!(code, 0, "{args:?}: {err}");
    one_json(&out)
}

/// Asserts `args` (with `--json`) fails with `exit`, nothing on stdout,
/// and exactly one JSON error object with `code` on stderr; returns it.
async fn json_error(
    app: &App,
    args: &[&str],
    env: &[(&str, &str)],
    exit: i32,
    code: &str,
) -> Value {
    let (got, out, err) = run(app, args, env).await;
    assert_eq!(got, exit, "{args:?}: {err}");
    assert!(out.is_empty(), "{args:?} printed {out}");
    let e = one_json(&err);
    assert_eq!(e["error"]["code"], code, "{err}");
    assert_eq!(e["error"]["exit"], exit, "{err}");
    assert!(
        !e["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .is_empty(),
        "{err}"
    );
    e
}

fn ids(list: &Value, key: &str) -> Vec<String> {
    list[key]
        .as_array()
        .unwrap_or_else(|| panic!("{key} in {list}"))
        .iter()
        .map(|v| v["id"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// Follows `next_cursor` through pages of `limit`; every id once, in order.
async fn all_pages(app: &App, args: &[&str], key: &str, limit: &str) -> Vec<String> {
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut page_args: Vec<&str> = args.to_vec();
        page_args.extend(["--limit", limit, "--json"]);
        if let Some(c) = &cursor {
            page_args.extend(["--cursor", c.as_str()]);
        }
        let page = json_ok(app, &page_args).await;
        let got = ids(&page, key);
        assert!(got.len() <= limit.parse::<usize>().unwrap_or(0), "{page}");
        seen.extend(got);
        match page["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => return seen,
        }
    }
}

/// `n` active databases of a fresh user on the app's shards.
async fn databases(app: &App, owner: &str, n: usize) -> Vec<String> {
    let mut out = Vec::new();
    for _ in 0..n {
        let a = app.client.allocate_database(owner).await.expect("allocate");
        app.client
            .confirm_database(&a.database_id)
            .await
            .expect("confirm");
        out.push(a.database_id);
    }
    out
}

#[tokio::test]
async fn lists_page_and_filter() {
    if skip() {
        return;
    }
    let app = spawn_app().await;
    app.shard("s1", 100).await;
    let mut users = Vec::new();
    for _ in 0..5 {
        users.push(app.user().await);
    }

    // users list: oldest first, every user once across pages of 2.
    let all = json_ok(&app, &["users", "list", "--json"]).await;
    assert_eq!(ids(&all, "users"), users);
    assert!(all.get("next_cursor").is_none(), "{all}");
    let first = &all["users"][0];
    for key in ["id", "email", "name", "suspended"] {
        assert!(first.get(key).is_some(), "users list lacks {key}: {first}");
    }
    assert_eq!(
        all_pages(&app, &["users", "list"], "users", "2").await,
        users
    );
    let (code, out, _) = run(&app, &["users", "list", "--limit", "2"], &[]).await;
    assert_eq!(code, 0);
    assert!(out.starts_with("ID"), "{out}");
    assert!(
        out.contains("--cursor"),
        "a cut page names its cursor: {out}"
    );
    json_error(
        &app,
        &["users", "list", "--cursor", "usr_000000000000", "--json"],
        &[],
        3,
        "bad_request",
    )
    .await;

    // keys list: the user's keys, no token or hash.
    let owner = users[0].clone();
    let key = json_ok(
        &app,
        &["keys", "create", "--user", &owner, "--name", "ci", "--json"],
    )
    .await;
    let keys = json_ok(&app, &["keys", "list", "--user", &owner, "--json"]).await;
    assert_eq!(
        ids(&keys, "keys"),
        vec![key["id"].as_str().unwrap_or_default()]
    );
    let text = keys.to_string();
    assert!(
        !text.contains("token") && !text.contains("secret"),
        "{text}"
    );
    assert_eq!(keys["keys"][0]["access"], "read_write");
    assert_eq!(
        json_ok(&app, &["keys", "list", "--user", &users[1], "--json"]).await,
        json!({"keys": []})
    );
    json_error(
        &app,
        &["keys", "list", "--user", "usr_000000000000", "--json"],
        &[],
        3,
        "not_found",
    )
    .await;

    // members list: the owner of a new database.
    let dbs = databases(&app, &owner, 3).await;
    let members = json_ok(&app, &["members", "list", "--database", &dbs[0], "--json"]).await;
    assert_eq!(members["members"][0]["user"]["id"], owner.as_str());
    assert_eq!(members["members"][0]["role"], "owner");
    let (code, out, _) = run(&app, &["members", "list", "--database", &dbs[0]], &[]).await;
    assert_eq!(code, 0);
    assert!(out.starts_with("USER") && out.contains(&owner), "{out}");

    // databases list: filters and pages by position.
    app.shard("s2", 100).await;
    let more = databases(&app, &users[1], 2).await;
    let everything: Vec<String> = dbs.iter().chain(&more).cloned().collect();
    assert_eq!(
        all_pages(&app, &["databases", "list"], "databases", "2").await,
        everything
    );
    let on_s1 = json_ok(&app, &["databases", "list", "--shard", "s1", "--json"]).await;
    assert_eq!(
        ids(&on_s1, "databases")[..3],
        dbs[..],
        "the first three are on s1"
    );
    let on_s2 = json_ok(&app, &["databases", "list", "--shard", "s2", "--json"]).await;
    assert!(on_s2["databases"]
        .as_array()
        .expect("list")
        .iter()
        .all(|d| d["shard"] == "s2"));
    let creating = json_ok(
        &app,
        &["databases", "list", "--state", "creating", "--json"],
    )
    .await;
    assert_eq!(creating, json!({"databases": []}));
    let active = json_ok(
        &app,
        &[
            "databases",
            "list",
            "--state",
            "active",
            "--shard",
            "s1",
            "--limit",
            "1",
            "--json",
        ],
    )
    .await;
    assert_eq!(ids(&active, "databases"), vec![dbs[0].clone()]);
    assert_eq!(active["next_cursor"], dbs[0].as_str());

    // moves list: by shard, state, database, batch, in pages, newest first.
    let m1 = json_ok(&app, &["move", &dbs[0], "--to", "s2", "--json"]).await;
    let m2 = json_ok(&app, &["move", &dbs[1], "--to", "s2", "--json"]).await;
    let newest_first = vec![
        m2["id"].as_str().unwrap_or_default().to_string(),
        m1["id"].as_str().unwrap_or_default().to_string(),
    ];
    assert_eq!(
        all_pages(&app, &["moves", "list", "--shard", "s2"], "moves", "1").await,
        newest_first
    );
    let of_db = json_ok(&app, &["moves", "list", "--database", &dbs[0], "--json"]).await;
    assert_eq!(ids(&of_db, "moves"), newest_first[1..].to_vec());
    let unfinished = json_ok(&app, &["moves", "list", "--state", "unfinished", "--json"]).await;
    assert_eq!(ids(&unfinished, "moves").len(), 2, "{unfinished}");
    assert_eq!(
        json_ok(&app, &["moves", "list", "--state", "done", "--json"]).await,
        json!({"moves": []})
    );
    assert_eq!(
        json_ok(&app, &["moves", "list", "--batch", "reb_none", "--json"]).await,
        json!({"moves": []})
    );
    json_ok(&app, &["moves", "abort", "--all", "--json"]).await;
    app.finish().await;
}

#[tokio::test]
async fn shards_list_counts_sizes_and_hides_passwords() {
    if skip() {
        return;
    }
    let app = spawn_app().await;
    let admin_url = std::env::var("TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into());
    // A shard whose PostgreSQL is the test instance (so its size is
    // readable) and one with a password in its DSN that answers nowhere.
    let (code, out, err) = run(
        &app,
        &[
            "shards",
            "add",
            "--name",
            "real",
            "--url",
            "http://real",
            "--json",
        ],
        &[("SHARD_DSN", admin_url.as_str())],
    )
    .await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(one_json(&out)["name"], "real");
    let secret_dsn = "postgres://shard:hunter2-secret@127.0.0.1:1/cluster";
    let (code, out, err) = run(
        &app,
        &[
            "shards",
            "add",
            "--name",
            "secret",
            "--url",
            "http://secret",
            "--json",
        ],
        &[("SHARD_DSN", secret_dsn)],
    )
    .await;
    assert_eq!(code, 0, "{err}");
    assert!(
        !out.contains("hunter2"),
        "shards add prints no password: {out}"
    );
    assert_eq!(
        one_json(&out)["postgres"],
        "postgres://shard:***@127.0.0.1:1/cluster"
    );
    let owner = app.user().await;
    databases(&app, &owner, 3).await;

    let list = json_ok(&app, &["shards", "list", "--json"]).await;
    assert!(!list.to_string().contains("hunter2"), "{list}");
    let shards = list["shards"].as_array().expect("shards");
    let by_name = |n: &str| {
        shards
            .iter()
            .find(|s| s["name"] == n)
            .unwrap_or_else(|| panic!("{n} in {list}"))
            .clone()
    };
    let (real, secret) = (by_name("real"), by_name("secret"));
    assert_eq!(
        real["databases"].as_i64().unwrap_or(-1) + secret["databases"].as_i64().unwrap_or(-1),
        3,
        "{list}"
    );
    assert!(real["bytes"].as_i64().unwrap_or(0) > 0, "{real}");
    assert!(
        secret.get("bytes").is_none(),
        "unreachable: no size: {secret}"
    );
    assert_eq!(
        secret["postgres"],
        "postgres://shard:***@127.0.0.1:1/cluster"
    );
    let (code, out, _) = run(&app, &["shards", "list"], &[]).await;
    assert_eq!(code, 0);
    let header: Vec<&str> = out
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(
        header,
        ["NAME", "STATE", "WEIGHT", "DATABASES", "SIZE", "URL"]
    );
    assert!(!out.contains("hunter2"));
    // The control plane itself still holds the real DSN.
    let held = app.client.shards().await.expect("shards");
    assert!(held.shards.iter().any(|s| s.postgres == secret_dsn));
    app.finish().await;
}

#[tokio::test]
async fn dry_runs_change_nothing_and_a_rebalance_can_be_stopped() {
    if skip() {
        return;
    }
    let app = spawn_app().await;
    app.shard("s1", 100).await;
    let owner = app.user().await;
    let dbs = databases(&app, &owner, 4).await;
    app.shard("s2", 100).await;

    // move --dry-run: the plan, no move recorded; refused like a move.
    let plan = json_ok(
        &app,
        &["move", &dbs[0], "--to", "s2", "--dry-run", "--json"],
    )
    .await;
    assert_eq!(
        plan,
        json!({"moves": [{"database_id": dbs[0], "from": "s1", "to": "s2"}]})
    );
    assert_eq!(
        json_ok(&app, &["moves", "list", "--json"]).await,
        json!({"moves": []})
    );
    json_error(
        &app,
        &["move", &dbs[0], "--to", "s1", "--dry-run", "--json"],
        &[],
        3,
        "bad_request",
    )
    .await;

    // shards drain --dry-run: the plan, the shard still active.
    let drain = json_ok(&app, &["shards", "drain", "s1", "--dry-run", "--json"]).await;
    assert_eq!(drain["shard"], "s1");
    let planned = drain["moves"].as_array().expect("moves");
    assert_eq!(planned.len(), 4, "{drain}");
    assert!(planned.iter().all(|m| m["from"] == "s1" && m["to"] == "s2"));
    let shards = json_ok(&app, &["shards", "list", "--json"]).await;
    assert!(shards["shards"]
        .as_array()
        .expect("shards")
        .iter()
        .all(|s| s["state"] == "active"));
    assert_eq!(
        json_ok(&app, &["moves", "list", "--json"]).await,
        json!({"moves": []})
    );
    json_error(
        &app,
        &["shards", "drain", "nope", "--dry-run", "--json"],
        &[],
        3,
        "not_found",
    )
    .await;

    // A rebalance records its batch on its moves; --abort stops them all,
    // and a manual move is left alone.
    let manual = json_ok(&app, &["move", &dbs[0], "--to", "s2", "--json"]).await;
    let started = json_ok(&app, &["rebalance", "--json"]).await;
    let batch = started["batch"].as_str().expect("a batch id").to_string();
    assert!(batch.starts_with("reb_"), "{batch}");
    let of_batch = started["started"].as_array().expect("started").clone();
    assert!(!of_batch.is_empty(), "{started}");
    assert!(of_batch.iter().all(|m| m["batch"] == batch.as_str()));
    let listed = json_ok(&app, &["moves", "list", "--batch", &batch, "--json"]).await;
    assert_eq!(
        listed["moves"].as_array().map(Vec::len),
        Some(of_batch.len())
    );

    let stopped = json_ok(&app, &["rebalance", "--abort", "--json"]).await;
    let aborted = stopped["aborted"].as_array().expect("aborted");
    assert_eq!(aborted.len(), of_batch.len(), "{stopped}");
    assert_eq!(stopped["refused"], json!([]));
    assert!(aborted.iter().all(|m| m["batch"] == batch.as_str()));
    let manual_now = json_ok(
        &app,
        &[
            "moves",
            "show",
            manual["id"].as_str().unwrap_or_default(),
            "--json",
        ],
    )
    .await;
    assert!(manual_now["batch"].is_null(), "{manual_now}");
    assert_ne!(
        manual_now["state"], "aborted",
        "rebalance --abort leaves a manual move alone"
    );
    // What is still unfinished of the batch is aborting already: asking again is no refusal.
    let again = json_ok(&app, &["moves", "abort", "--batch", &batch, "--json"]).await;
    assert_eq!(again["refused"], json!([]), "{again}");
    json_ok(&app, &["moves", "abort", "--all", "--json"]).await;
    app.finish().await;
}

#[tokio::test]
async fn every_changing_command_prints_its_object_and_errors_are_json() {
    if skip() {
        return;
    }
    let app = spawn_app().await;
    app.shard("s1", 100).await;
    let email = format!("{}@example.com", cluster_protocol::ids::random_token(8));
    let user = json_ok(&app, &["users", "create", "--email", &email, "--json"]).await;
    let user_id = user["id"].as_str().unwrap_or_default().to_string();
    let suspended = json_ok(&app, &["users", "suspend", &user_id, "--json"]).await;
    assert_eq!(suspended["id"], user_id.as_str());
    assert_eq!(suspended["suspended"], true);
    let back = json_ok(&app, &["users", "unsuspend", &user_id, "--json"]).await;
    assert_eq!(back["suspended"], false);

    let other = app.user().await;
    let db = databases(&app, &user_id, 1).await.remove(0);
    let added = json_ok(
        &app,
        &[
            "members",
            "add",
            "--database",
            &db,
            "--user",
            &other,
            "--role",
            "editor",
            "--json",
        ],
    )
    .await;
    assert_eq!(
        added,
        json!({"database_id": db, "user_id": other, "role": "editor"})
    );
    let removed = json_ok(
        &app,
        &[
            "members",
            "remove",
            "--database",
            &db,
            "--user",
            &other,
            "--json",
        ],
    )
    .await;
    assert_eq!(
        removed,
        json!({"database_id": db, "user_id": other, "removed": true})
    );
    let granted = json_ok(
        &app,
        &[
            "support",
            "grant",
            "--database",
            &db,
            "--user",
            &other,
            "--json",
        ],
    )
    .await;
    assert_eq!(
        granted,
        json!({"database_id": db, "user_id": other, "support": true})
    );
    let revoked = json_ok(
        &app,
        &[
            "support",
            "revoke",
            "--database",
            &db,
            "--user",
            &other,
            "--json",
        ],
    )
    .await;
    assert_eq!(revoked["support"], false);

    // Exit codes and the JSON error object.
    json_error(
        &app,
        &["keys", "revoke", "key_000000000000", "--json"],
        &[],
        3,
        "not_found",
    )
    .await;
    json_error(
        &app,
        &["users", "suspend", &user_id, "--json"],
        &[("CONTROL_PLANE_TOKEN", "wrong")],
        3,
        "unauthorized",
    )
    .await;
    json_error(
        &app,
        &["users", "list", "--json"],
        &[("CONTROL_PLANE_URL", "http://127.0.0.1:9")],
        4,
        "unreachable",
    )
    .await;
    json_error(
        &app,
        &["users", "list", "--json"],
        &[("CONTROL_PLANE_TOKEN", "")],
        2,
        "usage",
    )
    .await;
    json_error(
        &app,
        &["keys", "update", "key_000000000000", "--json"],
        &[],
        2,
        "usage",
    )
    .await;
    let e = json_error(
        &app,
        &["moves", "list", "--limit", "0", "--json"],
        &[],
        2,
        "usage",
    )
    .await;
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("limit"),
        "{e}"
    );
    // Without --json: clap's usage text, exit 2; a refusal is "error: ...", exit 3.
    let (code, out, err) = run(&app, &["moves", "list", "--limit", "0"], &[]).await;
    assert_eq!((code, out.as_str()), (2, ""));
    assert!(err.contains("--limit"), "{err}");
    let (code, _, err) = run(&app, &["keys", "revoke", "key_000000000000"], &[]).await;
    assert_eq!(code, 3);
    assert!(err.starts_with("error: "), "{err}");
    // --help names the connection settings and exit codes; --version works anywhere.
    let (code, out, _) = run(&app, &["--help"], &[]).await;
    assert_eq!(code, 0);
    assert!(
        out.contains("CONTROL_PLANE_URL") && out.contains("Exit codes"),
        "{out}"
    );
    assert!(!out.contains(TOKEN), "the token's value is never shown");
    let (code, out, _) = run(&app, &["moves", "--version"], &[]).await;
    assert_eq!(code, 0);
    assert!(
        out.starts_with("control-plane") && out.contains(env!("CARGO_PKG_VERSION")),
        "{out}"
    );
    app.finish().await;
}
