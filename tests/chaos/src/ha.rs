//! The HA test cluster (issue 30, `HA=1 deploy/dev-cluster up`): each
//! PostgreSQL instance (`control`, `shard-<i>`) is a Patroni cluster of two
//! members (`<instance>-a`, `<instance>-b`), listed one per line in
//! `HA_MEMBERS_FILE` as `<instance> <member> <pg_port> <rest_port>
//! <data_dir>`. Roles come from Patroni's REST API (`GET /cluster`).
//! Losing a machine is `kill -9` of the member's Patroni agent and of its
//! postmaster together.

use std::time::{Duration, Instant};

use e2e_tests::moves::env_file;
use serde_json::Value;

/// One Patroni member.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    pub instance: String,
    pub name: String,
    pub pg_port: u16,
    pub rest_port: u16,
    pub data_dir: String,
}

/// Set to `1` to let the HA tests pass without running on a cluster that
/// is not HA (a hand run on a plain dev cluster). Without it they fail
/// there: deploy/test's chaos phase runs on an HA cluster, and a test
/// that silently passes without its cluster would assert nothing.
pub const SKIP_WITHOUT_HA: &str = "CHAOS_SKIP_WITHOUT_HA";

/// The members of the HA cluster; `None` (after saying why on stderr)
/// when the cluster is not HA and `CHAOS_SKIP_WITHOUT_HA=1`. Panics when
/// it is not HA otherwise.
pub fn members_or_skip(test: &str) -> Option<Vec<Member>> {
    let env = env_file();
    let ha = env.get("HA").is_some_and(|v| v == "1");
    let file = env.get("HA_MEMBERS_FILE");
    match (ha, file) {
        (true, Some(file)) => Some(parse_members(
            &std::fs::read_to_string(file).unwrap_or_else(|e| panic!("read {file}: {e}")),
        )),
        _ if std::env::var(SKIP_WITHOUT_HA).is_ok_and(|v| v == "1") => {
            eprintln!(
                "chaos: SKIPPED {test}: the test cluster is not HA (its env file has no HA=1 \
                 and HA_MEMBERS_FILE; start it with HA=1 deploy/dev-cluster up)"
            );
            None
        }
        _ => panic!(
            "{test} needs an HA test cluster (HA=1 deploy/dev-cluster up: its env file has \
             HA=1 and HA_MEMBERS_FILE); set {SKIP_WITHOUT_HA}=1 to skip it on a plain cluster"
        ),
    }
}

/// The lines of `HA_MEMBERS_FILE`.
fn parse_members(text: &str) -> Vec<Member> {
    text.lines()
        .filter(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            assert!(f.len() >= 5, "a members line has 5 fields: {l:?}");
            Member {
                instance: f[0].to_owned(),
                name: f[1].to_owned(),
                pg_port: f[2].parse().expect("a pg port"),
                rest_port: f[3].parse().expect("a REST port"),
                data_dir: f[4].to_owned(),
            }
        })
        .collect()
}

/// The members of one instance (`control`, `shard-<i>`).
pub fn of_instance(members: &[Member], instance: &str) -> Vec<Member> {
    let found: Vec<Member> = members
        .iter()
        .filter(|m| m.instance == instance)
        .cloned()
        .collect();
    assert!(found.len() >= 2, "{instance} has two members: {members:?}");
    found
}

fn http() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(2))
        .build()
        .expect("an HTTP client")
}

/// `(role, state)` of each member of `instance` by name, from the first
/// member whose Patroni answers `GET /cluster`; empty when none answers.
pub async fn roles(members: &[Member], instance: &str) -> Vec<(String, String, String)> {
    let client = http();
    for m in of_instance(members, instance) {
        let url = format!("http://127.0.0.1:{}/cluster", m.rest_port);
        let Ok(resp) = client.get(&url).send().await else {
            continue;
        };
        let Ok(body) = resp.json::<Value>().await else {
            continue;
        };
        return body["members"]
            .as_array()
            .map(|list| {
                list.iter()
                    .map(|x| {
                        let s = |k: &str| x[k].as_str().unwrap_or_default().to_owned();
                        (s("name"), s("role"), s("state"))
                    })
                    .collect()
            })
            .unwrap_or_default();
    }
    Vec::new()
}

/// The member of `instance` that is the running leader, waited for up
/// to `limit`.
pub async fn wait_leader(members: &[Member], instance: &str, limit: Duration) -> Member {
    let deadline = Instant::now() + limit;
    loop {
        let now = roles(members, instance).await;
        let leader = now
            .iter()
            .find(|(_, role, state)| role == "leader" && state == "running");
        if let Some((name, _, _)) = leader {
            if let Some(m) = members.iter().find(|m| &m.name == name) {
                return m.clone();
            }
        }
        assert!(
            Instant::now() < deadline,
            "{instance} has no running leader after {limit:?}: {now:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Waits up to `limit` until `member` is the synchronous standby of its
/// instance, replicating (Patroni names only a streaming replica the
/// synchronous one), and another member leads.
pub async fn wait_sync_standby(members: &[Member], member: &Member, limit: Duration) {
    let deadline = Instant::now() + limit;
    loop {
        let now = roles(members, &member.instance).await;
        let standby = now.iter().any(|(name, role, state)| {
            name == &member.name
                && role == "sync_standby"
                && (state == "streaming" || state == "running")
        });
        let led = now.iter().any(|(name, role, state)| {
            name != &member.name && role == "leader" && state == "running"
        });
        if standby && led {
            eprintln!("chaos: {} is a synchronous standby again", member.name);
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{} is not a synchronous standby after {limit:?}: {now:?}",
            member.name
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Waits up to `limit` until `instance` has a running leader and a
/// synchronous standby (whichever member is which).
pub async fn wait_healthy(members: &[Member], instance: &str, limit: Duration) {
    let deadline = Instant::now() + limit;
    loop {
        let now = roles(members, instance).await;
        let has = |r: &str| now.iter().any(|(_, role, _)| role == r);
        if has("leader") && has("sync_standby") {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{instance} has no leader and synchronous standby after {limit:?}: {now:?}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

fn cluster_dir() -> String {
    env_file()
        .get("DEV_CLUSTER_DIR")
        .cloned()
        .expect("the env file names DEV_CLUSTER_DIR")
}

fn read_pid(path: &str) -> u32 {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("read {path}: {e}"))
        .lines()
        .next()
        .and_then(|l| l.trim().parse().ok())
        .unwrap_or_else(|| panic!("{path} starts with a pid"))
}

/// The pid of `member`'s Patroni agent (`run/patroni-<member>.pid`).
pub fn patroni_pid(member: &Member) -> u32 {
    read_pid(&format!(
        "{}/run/patroni-{}.pid",
        cluster_dir(),
        member.name
    ))
}

/// The pid of `member`'s postmaster (first line of its `postmaster.pid`).
pub fn postmaster_pid(member: &Member) -> u32 {
    read_pid(&format!("{}/postmaster.pid", member.data_dir))
}

fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| !rest.starts_with('Z')),
        Err(_) => false,
    }
}

/// `kill -9` of every pid in `pids` at once; returns once all are gone.
fn kill9_all(pids: &[u32], what: &str) {
    let mut args = vec!["-9".to_owned()];
    args.extend(pids.iter().map(u32::to_string));
    let status = std::process::Command::new("kill")
        .args(&args)
        .status()
        .expect("run kill");
    assert!(status.success(), "kill -9 {pids:?} ({what})");
    let deadline = Instant::now() + Duration::from_secs(10);
    while pids.iter().any(|p| alive(*p)) {
        assert!(Instant::now() < deadline, "{what} survived kill -9");
        std::thread::sleep(Duration::from_millis(20));
    }
    eprintln!("chaos: killed {what} (pids {pids:?})");
}

/// A lost machine: `kill -9` of `member`'s Patroni agent and postmaster
/// together. `deploy/dev-cluster up` starts the agent again.
pub fn lose_machine(member: &Member) {
    let pids = [patroni_pid(member), postmaster_pid(member)];
    kill9_all(&pids, &format!("{} (patroni and postgres)", member.name));
}

/// `kill -9` of `member`'s postmaster alone: its Patroni agent restarts
/// it (or the other member takes over).
pub fn kill_postmaster(member: &Member) {
    let pid = postmaster_pid(member);
    kill9_all(&[pid], &format!("{} (postgres only)", member.name));
}
