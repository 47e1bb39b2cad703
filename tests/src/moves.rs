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

use cluster_protocol::control::{Move, MoveState};
use serde_json::Value;

use crate::cluster;

pub use crate::leftovers::{
    all_replication_objects, assert_nothing_left, copy_on, replication_name, replication_objects,
    shard_admin, ShardCopy, CATALOG_TABLES,
};
pub use crate::placements::{database, shard_names};

/// How long a move may take in the tests before it counts as hung.
pub const MOVE_DEADLINE: Duration = Duration::from_secs(120);

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
    /// The exit code (`None`: killed by a signal).
    pub code: Option<i32>,
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

/// `$BIN_DIR/control-plane ARGS` with the cluster's URL and token, its
/// output piped, killed when dropped: not started yet.
pub fn cli_command(args: &[&str]) -> tokio::process::Command {
    let env = env_file();
    let var = |k: &str| {
        env.get(k)
            .cloned()
            .unwrap_or_else(|| panic!("the env file lacks {k}"))
    };
    let mut command = tokio::process::Command::new(format!("{}/control-plane", var("BIN_DIR")));
    command
        .args(args)
        .env("CONTROL_PLANE_URL", var("CONTROL_PLANE_URL"))
        .env("CONTROL_PLANE_TOKEN", var("CONTROL_PLANE_TOKEN"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    command
}

/// Runs `$BIN_DIR/control-plane ARGS` with the cluster's URL and token;
/// killed (and the test failed) after `limit`.
pub async fn cli_within(args: &[&str], limit: Duration) -> CliRun {
    let child = cli_command(args)
        .spawn()
        .unwrap_or_else(|e| panic!("run the control-plane CLI: {e}"));
    let out = tokio::time::timeout(limit, child.wait_with_output())
        .await
        .unwrap_or_else(|_| panic!("control-plane {args:?} still running after {limit:?}"))
        .expect("the CLI's output");
    CliRun {
        success: out.status.success(),
        code: out.status.code(),
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
