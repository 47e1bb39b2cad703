//! Helpers for the database-move tests (`e2e/moves_*.rs` and the
//! `chaos-tests` package): the operator CLI as a script would run it, a
//! move watched until it reaches a state or finishes (bounded: a hung move
//! fails the test with its state and error), superuser SQL on each shard's
//! PostgreSQL instance, and the check that a finished move left nothing
//! behind (docs/moves.md: replication objects named `tmv_...`, the copy of
//! the schema and the catalog rows on the shard that does not hold the
//! database).

use std::collections::HashMap;
use std::process::Stdio;
use std::time::{Duration, Instant};

use cluster_protocol::control::{DatabaseInfo, Move, MoveState};
use serde_json::Value;

use crate::cluster;

/// How long a move may take in the tests before it counts as hung.
pub const MOVE_DEADLINE: Duration = Duration::from_secs(120);

/// The shard-level catalog tables a move replicates, each filtered by
/// `database_id` (docs/moves.md), plus the never-replicated `placements`.
pub const CATALOG_TABLES: [&str; 8] = [
    "tables",
    "fields",
    "views",
    "webhooks",
    "deliveries",
    "webhook_matches",
    "attachments",
    "placements",
];

/// The env file, read again on every call (the chaos tests grow the
/// cluster, and `up` rewrites the file; `cluster()` keeps the first read).
pub fn env_file() -> HashMap<String, String> {
    let path = std::env::var("CLUSTER_ENV_FILE").unwrap_or_else(|_| {
        concat!(env!("CARGO_MANIFEST_DIR"), "/../.dev-cluster-test/env").to_owned()
    });
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("read the cluster env file {path}: {e}"));
    crate::parse_env_file(&text)
}

/// What one CLI run printed.
#[derive(Debug)]
pub struct CliRun {
    pub success: bool,
    pub stdout: String,
    pub stderr: String,
}

impl CliRun {
    /// stdout as the one JSON object `--json` prints.
    #[track_caller]
    pub fn json(&self) -> Value {
        assert!(
            self.success,
            "the CLI failed: {}\n{}",
            self.stderr, self.stdout
        );
        serde_json::from_str(self.stdout.trim())
            .unwrap_or_else(|e| panic!("stdout is one JSON object ({e}): {}", self.stdout))
    }

    /// stdout as a move object.
    #[track_caller]
    pub fn move_object(&self) -> Move {
        serde_json::from_value(self.json()).expect("a move object")
    }

    /// Asserts the run was refused: non-zero exit, a reason on stderr.
    #[track_caller]
    pub fn expect_refused(&self) -> &str {
        assert!(!self.success, "expected a refusal, got: {}", self.stdout);
        assert!(
            !self.stderr.trim().is_empty(),
            "a refusal says why on stderr"
        );
        &self.stderr
    }
}

/// Runs `$BIN_DIR/control-plane ARGS` with the cluster's URL and token;
/// killed (and the test failed) after `limit`.
pub async fn cli_within(args: &[&str], limit: Duration) -> CliRun {
    let env = env_file();
    let var = |k: &str| {
        env.get(k)
            .cloned()
            .unwrap_or_else(|| panic!("the env file lacks {k}"))
    };
    let bin = format!("{}/control-plane", var("BIN_DIR"));
    let child = tokio::process::Command::new(&bin)
        .args(args)
        .env("CONTROL_PLANE_URL", var("CONTROL_PLANE_URL"))
        .env("CONTROL_PLANE_TOKEN", var("CONTROL_PLANE_TOKEN"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|e| panic!("run {bin}: {e}"));
    let out = tokio::time::timeout(limit, child.wait_with_output())
        .await
        .unwrap_or_else(|_| panic!("control-plane {args:?} still running after {limit:?}"))
        .expect("the CLI's output");
    CliRun {
        success: out.status.success(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Runs the CLI with a minute's bound (enough for any command without `--wait`).
pub async fn cli(args: &[&str]) -> CliRun {
    cli_within(args, Duration::from_secs(60)).await
}

/// `move DB --to SHARD --json` plus `extra`: the move as recorded.
pub async fn start_move(database_id: &str, to: &str, extra: &[&str]) -> Move {
    let mut args = vec!["move", database_id, "--to", to, "--json"];
    args.extend_from_slice(extra);
    let m = cli(&args).await.move_object();
    assert_eq!((m.database_id.as_str(), m.to.as_str()), (database_id, to));
    m
}

/// `move DB --to SHARD --wait --json`: the finished move. `--wait` exits
/// non-zero when the move ends aborted, so the caller gets the run.
pub async fn move_and_wait(database_id: &str, to: &str, extra: &[&str]) -> CliRun {
    let mut args = vec!["move", database_id, "--to", to, "--wait", "--json"];
    args.extend_from_slice(extra);
    cli_within(&args, MOVE_DEADLINE + Duration::from_secs(60)).await
}

/// Moves a database and asserts it ends `done` on `to`.
pub async fn move_done(database_id: &str, to: &str) -> Move {
    let run = move_and_wait(database_id, to, &[]).await;
    let m = run.move_object();
    assert_eq!(m.state, MoveState::Done, "move ended {m:?}");
    assert_eq!(database(database_id).await.shard, to);
    m
}

/// `moves show ID --json`, through the control plane's client (no process).
pub async fn get_move(move_id: &str) -> Move {
    cluster()
        .control_plane
        .get_move(move_id)
        .await
        .unwrap_or_else(|e| panic!("moves show {move_id}: {e:?}"))
}

/// The database's placement in the control plane's catalog.
pub async fn database(database_id: &str) -> DatabaseInfo {
    cluster()
        .control_plane
        .database(database_id)
        .await
        .unwrap_or_else(|e| panic!("databases show {database_id}: {e:?}"))
}

/// Polls until the move is `done` or `aborted` (within `limit`; the
/// control plane may be briefly unreachable in the chaos tests).
pub async fn wait_finished_within(move_id: &str, limit: Duration) -> Move {
    let deadline = Instant::now() + limit;
    let mut last: Option<Move> = None;
    loop {
        if let Ok(m) = cluster().control_plane.get_move(move_id).await {
            if m.state.is_finished() {
                return m;
            }
            last = Some(m);
        }
        assert!(
            Instant::now() < deadline,
            "move {move_id} not finished after {limit:?}: {}",
            describe(last.as_ref())
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

pub async fn wait_finished(move_id: &str) -> Move {
    wait_finished_within(move_id, MOVE_DEADLINE).await
}

/// Polls until the move is in `state`; fails if it finishes first or
/// does not get there in time. Tests give the move a `--step-delay-ms`
/// long enough to find it there.
pub async fn wait_state(move_id: &str, state: MoveState) -> Move {
    let deadline = Instant::now() + MOVE_DEADLINE;
    loop {
        let m = get_move(move_id).await;
        if m.state == state {
            return m;
        }
        assert!(
            !m.state.is_finished(),
            "move {move_id} finished before reaching {}: {m:?}",
            state.as_str()
        );
        assert!(
            Instant::now() < deadline,
            "move {move_id} never reached {}: {}",
            state.as_str(),
            describe(Some(&m))
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn describe(m: Option<&Move>) -> String {
    match m {
        Some(m) => format!(
            "state {}, error {:?}, attempts {}, progress {:?}",
            m.state.as_str(),
            m.error,
            m.attempts,
            m.progress
        ),
        None => "the control plane did not answer".to_owned(),
    }
}

/// Publication, slot and subscription name of a move (docs/moves.md,
/// "Names"): `tmv_` and the hex of the id's 12 characters.
pub fn replication_name(move_id: &str) -> String {
    let suffix = move_id.strip_prefix("mov_").unwrap_or(move_id);
    format!("tmv_{}", hex::encode(suffix.as_bytes()).to_lowercase())
}

/// The shard names registered now, in order.
pub async fn shard_names() -> Vec<String> {
    let list = cluster().control_plane.shards().await.expect("shards list");
    let mut names: Vec<String> = list.shards.into_iter().map(|s| s.name).collect();
    names.sort_by_key(|n| shard_number(n));
    names
}

fn shard_number(name: &str) -> u32 {
    name.trim_start_matches("shard-")
        .parse()
        .unwrap_or(u32::MAX)
}

/// A superuser session on a shard's PostgreSQL instance: the host of
/// `TEST_POSTGRES_URL` (deploy/test's `postgres` superuser), the port and
/// database of the shard's registered DSN.
pub async fn shard_admin(shard: &str) -> tokio_postgres::Client {
    let list = cluster().control_plane.shards().await.expect("shards list");
    let dsn = list
        .shards
        .iter()
        .find(|s| s.name == shard)
        .unwrap_or_else(|| panic!("{shard} is registered"))
        .postgres
        .clone();
    let url = reqwest::Url::parse(&dsn).expect("a shard DSN is a URL");
    let host = std::env::var("TEST_POSTGRES_URL")
        .ok()
        .and_then(|u| reqwest::Url::parse(&u).ok())
        .and_then(|u| u.host_str().map(str::to_owned))
        .unwrap_or_else(|| url.host_str().unwrap_or("127.0.0.1").to_owned());
    let port = url.port().unwrap_or(5432);
    let dbname = url.path().trim_start_matches('/');
    crate::postgres_connect(&format!("postgres://postgres@{host}:{port}/{dbname}")).await
}

async fn count(pg: &tokio_postgres::Client, sql: &str, param: &str) -> i64 {
    pg.query_one(sql, &[&param])
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
        .get(0)
}

/// What of one database a shard has: schema, catalog rows, placement.
#[derive(Debug, PartialEq, Eq)]
pub struct ShardCopy {
    pub schema: bool,
    pub database_row: bool,
    /// Catalog tables with rows of the database (placements included).
    pub catalog_rows: Vec<&'static str>,
    /// Publications over the database's schema.
    pub publications: i64,
}

impl ShardCopy {
    pub fn is_empty(&self) -> bool {
        !self.schema && !self.database_row && self.catalog_rows.is_empty() && self.publications == 0
    }
}

/// What `shard` holds of `database_id`.
pub async fn copy_on(shard: &str, database_id: &str) -> ShardCopy {
    let pg = shard_admin(shard).await;
    let schema = count(
        &pg,
        "SELECT count(*) FROM pg_namespace WHERE nspname = $1",
        database_id,
    )
    .await
        > 0;
    let database_row = count(
        &pg,
        "SELECT count(*) FROM databases WHERE id = $1",
        database_id,
    )
    .await
        > 0;
    let mut catalog_rows = Vec::new();
    for table in CATALOG_TABLES {
        let sql = format!("SELECT count(*) FROM {table} WHERE database_id = $1");
        if count(&pg, &sql, database_id).await > 0 {
            catalog_rows.push(table);
        }
    }
    let publications = count(
        &pg,
        "SELECT count(*) FROM pg_publication_namespace pn
           JOIN pg_namespace n ON n.oid = pn.pnnspid WHERE n.nspname = $1",
        database_id,
    )
    .await;
    ShardCopy {
        schema,
        database_row,
        catalog_rows,
        publications,
    }
}

/// Replication objects named `name` on a shard's instance:
/// `[publications, slots, subscriptions]`.
pub async fn replication_objects(shard: &str, name: &str) -> [i64; 3] {
    let pg = shard_admin(shard).await;
    [
        count(
            &pg,
            "SELECT count(*) FROM pg_publication WHERE pubname LIKE $1",
            name,
        )
        .await,
        count(
            &pg,
            "SELECT count(*) FROM pg_replication_slots WHERE slot_name LIKE $1",
            name,
        )
        .await,
        count(
            &pg,
            "SELECT count(*) FROM pg_subscription WHERE subname LIKE $1",
            name,
        )
        .await,
    ]
}

/// After a finished move: the database is on exactly one of the two
/// shards, the one the catalog names, with its placement `owned` at the
/// catalog's epoch; the other has no schema, no catalog row and no
/// placement; neither has the move's publication, slot or subscription.
/// Polled for up to 30 s (the mover drops orphans after every move), then
/// asserted.
pub async fn assert_nothing_left(m: &Move) {
    let deadline = Instant::now() + Duration::from_secs(30);
    let name = replication_name(&m.id);
    loop {
        let placed = database(&m.database_id).await;
        let other = if placed.shard == m.from {
            &m.to
        } else {
            &m.from
        };
        let mut problems = Vec::new();
        for shard in [&m.from, &m.to] {
            let objects = replication_objects(shard, &name).await;
            if objects != [0, 0, 0] {
                problems.push(format!(
                    "{shard} has {name}: publications/slots/subscriptions {objects:?}"
                ));
            }
        }
        let stale = copy_on(other, &m.database_id).await;
        if !stale.is_empty() {
            problems.push(format!("{other} (not holding it) still has {stale:?}"));
        }
        let held = copy_on(&placed.shard, &m.database_id).await;
        if !held.schema || !held.database_row || held.publications != 0 {
            problems.push(format!("{} (holding it) has {held:?}", placed.shard));
        }
        let owned = shard_admin(&placed.shard)
            .await
            .query_opt(
                "SELECT state, epoch FROM placements WHERE database_id = $1",
                &[&m.database_id],
            )
            .await
            .expect("read placements")
            .map(|r| (r.get::<_, String>(0), r.get::<_, i64>(1)));
        if owned != Some(("owned".to_owned(), placed.epoch)) {
            problems.push(format!(
                "{}'s placement is {owned:?}, the catalog's epoch {}",
                placed.shard, placed.epoch
            ));
        }
        if problems.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "move {} ({}) left behind: {}",
            m.id,
            m.state.as_str(),
            problems.join("; ")
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Every `tmv_%` publication, slot and subscription on every shard (the
/// chaos tests run alone, so any is a leftover once their moves finished).
pub async fn all_replication_objects() -> Vec<(String, [i64; 3])> {
    let mut out = Vec::new();
    for shard in shard_names().await {
        let found = replication_objects(&shard, "tmv\\_%").await;
        if found != [0, 0, 0] {
            out.push((shard, found));
        }
    }
    out
}
