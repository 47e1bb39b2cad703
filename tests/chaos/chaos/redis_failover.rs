//! A Redis Cluster master killed (`kill -9`) while writers write through
//! the router (issue 31). Runs when the chaos cluster's `REDIS_URL` names a
//! Redis Cluster (deploy/dev-cluster `REDIS_CLUSTER=1`, as deploy/test's
//! chaos phase starts it); skipped otherwise.
//!
//! The master killed is the one holding the writers' user's hash slot, so
//! their keys' budgets, liveness and access versions are on it. While the
//! cluster fails over (its replica is promoted, `cluster-node-timeout` 1 s
//! in the test cluster) the router counts in process and keeps answering;
//! a key revoked and a membership removed during the failover (retried
//! while the control plane answers 503: a change that takes rights away is
//! refused until Redis confirms) stop working afterwards. Every write is
//! answered 200, or 503 with `Retry-After`, never anything else.

use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chaos_tests::small_database;
use cluster_protocol::control::{Access, DatabaseScope, Role};
use e2e_tests::cluster_ops::{dev_cluster_up, kill9};
use e2e_tests::{cluster, Person};
use serde_json::json;

const WRITERS: usize = 3;
const PACE: Duration = Duration::from_millis(150);
/// Patience for the failover, a change to be accepted, a right to be gone.
const PATIENCE: Duration = Duration::from_secs(60);

/// The first node's port when `REDIS_URL` is a `redis+cluster://` URL.
fn cluster_first_port() -> Option<u16> {
    let url = cluster().var("REDIS_URL")?;
    let rest = url.strip_prefix("redis+cluster://")?;
    let first = rest.split(',').next()?;
    first.rsplit_once(':')?.1.parse().ok()
}

fn redis_cli(port: u16, args: &[&str]) -> String {
    let out = Command::new("redis-cli")
        .arg("-p")
        .arg(port.to_string())
        .args(args)
        .output()
        .expect("run redis-cli");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The port of the live master serving `slot`, asking any node that answers.
fn master_of(first_port: u16, slot: u16) -> Option<u16> {
    for port in first_port..first_port + 6 {
        let nodes = redis_cli(port, &["cluster", "nodes"]);
        for line in nodes.lines() {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() < 9 || !f[2].contains("master") || f[2].contains("fail") {
                continue;
            }
            let serves = f[8..].iter().any(|range| {
                let (a, b) = range.split_once('-').unwrap_or((range, range));
                matches!((a.parse::<u16>(), b.parse::<u16>()), (Ok(a), Ok(b)) if a <= slot && slot <= b)
            });
            if serves {
                let address = f[1].split('@').next()?;
                return address.rsplit_once(':')?.1.parse().ok();
            }
        }
    }
    None
}

#[derive(Debug)]
struct Answer {
    sent: Instant,
    status: u16,
    retry_after: bool,
}

#[tokio::test]
async fn a_redis_master_killed_during_writes() {
    let Some(first_port) = cluster_first_port() else {
        eprintln!("skip: REDIS_URL is not a Redis Cluster (deploy/dev-cluster REDIS_CLUSTER=1)");
        return;
    };
    let cp = &cluster().control_plane;
    let owner = Person::new().await;
    let (db, records, _) = small_database(&owner, 3).await;
    let (doomed_key, doomed_api) = owner
        .another_key(Access::ReadWrite, DatabaseScope::All)
        .await;
    let member = Person::member(&db, Role::Editor).await;
    let tables = format!("/api/databases/{db}/tables");
    assert_eq!(doomed_api.get(&tables).await.status, 200);
    assert_eq!(member.api.get(&tables).await.status, 200);

    let slot: u16 = redis_cli(
        first_port,
        &["cluster", "keyslot", &format!("{{{}}}", owner.user_id)],
    )
    .trim()
    .parse()
    .expect("CLUSTER KEYSLOT answers a number");
    let old_master = master_of(first_port, slot).expect("a master serves the slot");
    let victim = format!("redis-c{}", old_master - first_port + 1);

    let answers = Arc::new(Mutex::new(Vec::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let mut writers = Vec::new();
    for w in 0..WRITERS {
        let (_, api) = owner
            .another_key(Access::ReadWrite, DatabaseScope::All)
            .await;
        let (answers, stop, records) = (answers.clone(), stop.clone(), records.clone());
        writers.push(tokio::spawn(async move {
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                n += 1;
                let sent = Instant::now();
                let r = api
                    .post(
                        &records,
                        json!({"records": [{"fields": {"Name": format!("w{w}-{n}")}}]}),
                    )
                    .await;
                answers.lock().unwrap().push(Answer {
                    sent,
                    status: r.status,
                    retry_after: r.header("retry-after").is_some(),
                });
                tokio::time::sleep(PACE).await;
            }
        }));
    }
    tokio::time::sleep(Duration::from_secs(2)).await;

    let killed_at = Instant::now();
    kill9(&victim);
    // Changes that take rights away, made while the cluster fails over:
    // refused (503, nothing changed) until Redis confirms, then accepted.
    let deadline = Instant::now() + PATIENCE;
    let mut refused = 0;
    loop {
        match cp.revoke_key(&doomed_key).await {
            Ok(_) => break,
            Err(e) if e.status() == Some(503) && Instant::now() < deadline => refused += 1,
            Err(e) => panic!("revoking during the failover: {e}"),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    loop {
        match cp.remove_member(&db, &member.user_id).await {
            Ok(_) => break,
            Err(e) if e.status() == Some(503) && Instant::now() < deadline => refused += 1,
            Err(e) => panic!("removing a member during the failover: {e}"),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let changed_at = Instant::now();

    // The cluster's own failover: another master serves the slot.
    let new_master = loop {
        match master_of(first_port, slot) {
            Some(port) if port != old_master => break port,
            _ => {
                assert!(
                    Instant::now() < deadline,
                    "no replica took over slot {slot}"
                );
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    };
    let failed_over_at = Instant::now();

    // The revoked key and the removed member lose their rights.
    let key_gone = loop {
        let status = doomed_api.get(&tables).await.status;
        if status == 401 {
            break Instant::now();
        }
        assert!(
            Instant::now() < deadline && (status == 200 || status == 503),
            "revoked key answered {status}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let member_gone = loop {
        let status = member.api.get(&tables).await.status;
        if status == 404 || status == 403 {
            break Instant::now();
        }
        assert!(
            Instant::now() < deadline && (status == 200 || status == 503),
            "removed member answered {status}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    // A little load after the failover, then stop.
    tokio::time::sleep(Duration::from_secs(2)).await;
    stop.store(true, Ordering::Relaxed);
    for w in writers {
        w.await.unwrap();
    }
    dev_cluster_up(None).await; // the killed node rejoins as a replica

    let answers = std::mem::take(&mut *answers.lock().unwrap());
    let after_kill: Vec<&Answer> = answers.iter().filter(|a| a.sent >= killed_at).collect();
    let ok = after_kill.iter().filter(|a| a.status == 200).count();
    let unavailable = after_kill.iter().filter(|a| a.status == 503).count();
    eprintln!(
        "chaos: redis master :{old_master} ({victim}) killed; slot {slot} on :{new_master} after {:?}; \
         {} writes after the kill: {ok} x 200, {unavailable} x 503; changes refused {refused} times, \
         accepted after {:?}; revoked key 401 {:?} and removed member refused {:?} after acceptance",
        failed_over_at - killed_at,
        after_kill.len(),
        changed_at - killed_at,
        key_gone.saturating_duration_since(changed_at),
        member_gone.saturating_duration_since(changed_at),
    );
    for a in &answers {
        assert!(
            a.status == 200 || (a.status == 503 && a.retry_after),
            "a write during the failover answered {} (Retry-After: {})",
            a.status,
            a.retry_after
        );
    }
    assert!(ok > 0, "the router kept answering writes after the kill");
    // The rights stay gone once Redis is whole again.
    assert_eq!(doomed_api.get(&tables).await.status, 401);
    let status = member.api.get(&tables).await.status;
    assert!(status == 404 || status == 403, "removed member: {status}");
}
