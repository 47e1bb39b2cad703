//! Two control planes run the mover on one catalog (issue 31, part 4;
//! deploy/test's chaos cluster has `CONTROL_PLANES=2`). A rebalance is
//! started through the second one, which then drives its moves; once it
//! drives a move that has not finished and another has, it is killed
//! with `kill -9`. The first finishes every move with no operator
//! action: each ends `done`, the catalog's placement matches the shards'
//! (`assert_nothing_left`), every record is readable through the router,
//! no replication object is left, and `moves list --json`, sampled all
//! along, never shows more moves under way on one shard than
//! `MOVES_PER_SHARD` nor in all than `MOVES_MAX`.
//!
//! The router, the CLI and the tests' client use the first control plane
//! (`CONTROL_PLANE_URL`), which is why the second is the one killed.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use chaos_tests::{assert_no_replication_objects, ensure_shards, record_ids, small_database};
use cluster_protocol::control::{Move, MoveState};
use e2e_tests::cluster_ops::{dev_cluster_up_with, kill9};
use e2e_tests::moves::{
    assert_nothing_left, cli, cli_command, database, env_file, get_move, start_move,
    wait_finished_within,
};
use e2e_tests::Person;

/// The slot limits the control planes run with here: small, so the
/// samples can catch a breach.
const PER_SHARD: usize = 2;
const MAX: usize = 3;

/// The cluster's directory (the env file names it).
fn cluster_dir() -> String {
    env_file()["DEV_CLUSTER_DIR"].clone()
}

/// `kill -9` of every control plane that runs (`run/control-plane*.pid`).
fn kill_control_planes() {
    for name in ["control-plane", "control-plane-2"] {
        let pid_file = format!("{}/run/{name}.pid", cluster_dir());
        let running = std::fs::read_to_string(&pid_file)
            .ok()
            .and_then(|p| p.trim().parse::<u32>().ok())
            .is_some_and(|pid| std::path::Path::new(&format!("/proc/{pid}")).exists());
        if running {
            kill9(name);
        }
    }
}

/// Two control planes with `knobs` (both restarted).
async fn two_control_planes(knobs: &[(&str, &str)]) {
    kill_control_planes();
    let mut env = vec![("CONTROL_PLANES", "2")];
    env.extend_from_slice(knobs);
    dev_cluster_up_with(None, &env).await;
}

/// The unfinished moves, as `moves list --state unfinished --json` prints them.
async fn unfinished() -> Vec<Move> {
    let reply = cli(&[
        "moves",
        "list",
        "--state",
        "unfinished",
        "--limit",
        "1000",
        "--json",
    ])
    .await
    .json();
    serde_json::from_value(reply["moves"].clone()).expect("a moves list")
}

/// Moves under way (past `pending`) in all and per shard.
fn under_way(moves: &[Move]) -> (usize, HashMap<String, usize>) {
    let mut per_shard: HashMap<String, usize> = HashMap::new();
    let mut total = 0;
    for m in moves
        .iter()
        .filter(|m| m.state != MoveState::Pending && !m.state.is_finished())
    {
        total += 1;
        *per_shard.entry(m.from.clone()).or_default() += 1;
        *per_shard.entry(m.to.clone()).or_default() += 1;
    }
    (total, per_shard)
}

/// Whether the second control plane's log says it drives move `id`.
fn second_drives(id: &str) -> bool {
    let log = format!("{}/logs/control-plane-2.log", cluster_dir());
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .any(|l| l.contains("mover: driving") && l.contains(id))
}

#[tokio::test]
async fn a_rebalance_survives_the_kill_of_one_of_two_control_planes() {
    let shards = ensure_shards(3).await;
    let (per_shard, max) = (PER_SHARD.to_string(), MAX.to_string());
    two_control_planes(&[
        ("MOVES_PER_SHARD", per_shard.as_str()),
        ("MOVES_MAX", max.as_str()),
    ])
    .await;

    // Samples of `moves list` from here to the end: (under way, per shard).
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = tokio::spawn({
        let stop = stop.clone();
        async move {
            let mut samples = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                samples.push(under_way(&unfinished().await));
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            samples
        }
    });

    // Twelve databases of ours, all on the first shard: the rebalance
    // gives most of them to the other two.
    let owner = Person::new().await;
    let mut mine = Vec::new();
    for _ in 0..12 {
        mine.push(small_database(&owner, 10).await);
    }
    let crowded = shards[0].clone();
    let mut setup = Vec::new();
    for (db, _, _) in &mine {
        if database(db).await.shard != crowded {
            setup.push(start_move(db, &crowded, &[]).await);
        }
    }
    for m in &setup {
        let m = wait_finished_within(&m.id, Duration::from_secs(300)).await;
        assert_eq!(m.state, MoveState::Done, "{m:?}");
    }

    // The rebalance, through the second control plane: its mover is woken
    // and starts the moves.
    let env = env_file();
    let second = env["CONTROL_PLANE_URLS"]
        .split(',')
        .nth(1)
        .expect("CONTROL_PLANE_URLS names a second control plane")
        .to_owned();
    let out = cli_command(&["rebalance", "--json"])
        .env("CONTROL_PLANE_URL", &second)
        .output()
        .await
        .expect("run rebalance");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let reply: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let started: Vec<Move> =
        serde_json::from_value(reply["started"].clone()).expect("started moves");
    assert!(
        started.len() >= 3,
        "the rebalance moves several databases: {reply}"
    );

    // Mid-way: a move has finished and the second drives one that has not.
    let deadline = Instant::now() + Duration::from_secs(300);
    let victim_move = loop {
        let mut states = Vec::new();
        for m in &started {
            states.push(get_move(&m.id).await);
        }
        let any_done = states.iter().any(|m| m.state.is_finished());
        let held = states.iter().find(|m| {
            !m.state.is_finished() && m.state != MoveState::Pending && second_drives(&m.id)
        });
        if let (true, Some(m)) = (any_done, held) {
            break m.clone();
        }
        assert!(
            states.iter().any(|m| !m.state.is_finished()),
            "every move finished before the second control plane was caught driving one: {states:?}"
        );
        assert!(
            Instant::now() < deadline,
            "no move got under way: {states:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    kill9("control-plane-2");
    eprintln!(
        "chaos: killed control-plane-2 while it drove {} in {}",
        victim_move.id,
        victim_move.state.as_str()
    );

    // The first finishes every move, no operator action.
    for m in &started {
        let ended = wait_finished_within(&m.id, Duration::from_secs(300)).await;
        assert_eq!(ended.state, MoveState::Done, "{ended:?}");
        assert_eq!(database(&m.database_id).await.shard, ended.to, "{ended:?}");
        assert_nothing_left(&ended).await;
    }
    assert!(
        unfinished().await.is_empty(),
        "no move is left in a non-final state"
    );
    stop.store(true, Ordering::Relaxed);
    let samples = sampler.await.expect("the sampler");
    let busiest = samples.iter().map(|(t, _)| *t).max().unwrap_or(0);
    let busiest_shard = samples
        .iter()
        .flat_map(|(_, s)| s.values().copied())
        .max()
        .unwrap_or(0);
    eprintln!(
        "chaos: {} samples, at most {busiest} moves under way, {busiest_shard} on one shard",
        samples.len()
    );
    assert!(busiest >= 1, "the samples saw the moves under way");
    for (total, per) in &samples {
        assert!(
            *total <= MAX,
            "{total} moves under way, MOVES_MAX {MAX}: {per:?}"
        );
        for (shard, n) in per {
            assert!(
                *n <= PER_SHARD,
                "{n} moves under way on {shard}, MOVES_PER_SHARD {PER_SHARD}"
            );
        }
    }
    for (db, records, ids) in &mine {
        let mut ids = ids.clone();
        ids.sort();
        assert_eq!(
            &record_ids(&owner, records).await,
            &ids,
            "{db} kept its records"
        );
    }
    assert_no_replication_objects().await;

    // Both again, with the default knobs, for whatever runs next.
    two_control_planes(&[]).await;
}
