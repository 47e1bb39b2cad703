//! Disturbing the whole test cluster, for the `chaos-tests` package (its
//! tests run one at a time): `kill -9` of one component by its pid file
//! (`DEV_CLUSTER_DIR/run/<component>.pid`: `router`, `control-plane`,
//! `shard-<i>`, `redis`; HA=1 also `etcd`, `patroni-<member>`), a fast
//! shutdown of one PostgreSQL instance (`pg/<instance>/postmaster.pid`;
//! HA=1: its Patroni members, see [`stop_postgres`]), and `deploy/dev-cluster up` to start
//! whatever is not running, or to grow the cluster (`SHARDS=N`). Never
//! used by the parallel e2e suite.

use std::time::{Duration, Instant};

use crate::moves::env_file;

/// The repository's root (this crate lives in `tests/`).
pub fn repo_root() -> String {
    concat!(env!("CARGO_MANIFEST_DIR"), "/..").to_owned()
}

fn cluster_dir() -> String {
    env_file()
        .get("DEV_CLUSTER_DIR")
        .cloned()
        .expect("the env file names DEV_CLUSTER_DIR (deploy/dev-cluster writes it)")
}

/// The pid in `run/<component>.pid`.
pub fn pid_of(component: &str) -> u32 {
    let path = format!("{}/run/{component}.pid", cluster_dir());
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("read {path}: {e}"))
        .trim()
        .parse()
        .unwrap_or_else(|e| panic!("{path} holds a pid: {e}"))
}

fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // A zombie (state Z after the command name) is dead for us.
        Ok(stat) => stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| !rest.starts_with('Z')),
        Err(_) => false,
    }
}

/// `kill -9` of a component; returns once its process is gone.
pub fn kill9(component: &str) {
    let pid = pid_of(component);
    assert!(alive(pid), "{component} (pid {pid}) is not running");
    let status = std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .expect("run kill");
    assert!(status.success(), "kill -9 {pid} ({component})");
    let deadline = Instant::now() + Duration::from_secs(10);
    while alive(pid) {
        assert!(Instant::now() < deadline, "{component} survived kill -9");
        std::thread::sleep(Duration::from_millis(20));
    }
    eprintln!("chaos: killed {component} (pid {pid})");
}

/// The postmaster's pid of the data directory `pg/<dir>` (first line of
/// its `postmaster.pid`), if it has one.
fn postmaster_pid(dir: &str) -> Option<u32> {
    let path = format!("{}/pg/{dir}/postmaster.pid", cluster_dir());
    std::fs::read_to_string(path)
        .ok()?
        .lines()
        .next()
        .and_then(|l| l.trim().parse().ok())
}

/// Waits until process `pid` (`what`) is gone.
fn wait_gone(pid: u32, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while alive(pid) {
        assert!(Instant::now() < deadline, "{what} did not stop");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// One line of an HA=1 cluster's members file (`ha/members`).
#[derive(Debug, Clone)]
pub struct HaMember {
    pub instance: String,
    pub member: String,
    pub pg_port: u16,
    pub rest_port: u16,
}

/// The members of an HA=1 cluster (`HA_MEMBERS_FILE` of the env file);
/// empty for a single-instance cluster.
pub fn ha_members() -> Vec<HaMember> {
    let Some(path) = env_file().get("HA_MEMBERS_FILE").cloned() else {
        return Vec::new();
    };
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {path}: {e}"));
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            Some(HaMember {
                instance: f.first()?.to_string(),
                member: f.get(1)?.to_string(),
                pg_port: f.get(2)?.parse().ok()?,
                rest_port: f.get(3)?.parse().ok()?,
            })
        })
        .collect()
}

/// Makes PostgreSQL instance `instance` (`control`, `shard-<i>`)
/// unreachable; returns once it is gone. Single-instance cluster: a fast
/// shutdown (SIGINT) of its postmaster. HA=1: every member's Patroni is
/// stopped (SIGTERM; it shuts its PostgreSQL down), the replicas first so
/// none is promoted, since stopping only the primary would fail over.
/// `dev_cluster_up` starts it again.
pub fn stop_postgres(instance: &str) {
    let members: Vec<HaMember> = ha_members()
        .into_iter()
        .filter(|m| m.instance == instance)
        .collect();
    if members.is_empty() {
        let pid = postmaster_pid(instance)
            .unwrap_or_else(|| panic!("pg/{instance}/postmaster.pid names the postmaster"));
        signal("-INT", pid, &format!("postgres {instance}"));
        wait_gone(pid, &format!("postgres {instance}"));
        eprintln!("chaos: stopped postgres {instance} (pid {pid})");
        return;
    }
    let mut ordered: Vec<(HaMember, bool)> = members
        .into_iter()
        .map(|m| {
            let leader = is_ha_primary(&m);
            (m, leader)
        })
        .collect();
    ordered.sort_by_key(|(_, leader)| *leader);
    for (m, _) in ordered {
        let postmaster = postmaster_pid(&m.member).filter(|p| alive(*p));
        let patroni = pid_of(&format!("patroni-{}", m.member));
        if alive(patroni) {
            signal("-TERM", patroni, &format!("patroni {}", m.member));
            wait_gone(patroni, &format!("patroni {}", m.member));
        }
        if let Some(pid) = postmaster {
            wait_gone(pid, &format!("postgres {}", m.member));
        }
        eprintln!("chaos: stopped patroni and postgres {}", m.member);
    }
}

/// Whether Patroni calls `member` the primary (`GET /primary` answers 200).
pub fn is_ha_primary(member: &HaMember) -> bool {
    use std::io::{Read, Write};
    let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", member.rest_port)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(3)));
    let request = format!(
        "GET /primary HTTP/1.0\r\nHost: 127.0.0.1:{}\r\n\r\n",
        member.rest_port
    );
    if s.write_all(request.as_bytes()).is_err() {
        return false;
    }
    let mut head = [0u8; 12];
    s.read_exact(&mut head).is_ok() && head.starts_with(b"HTTP/1.") && &head[9..12] == b"200"
}

fn signal(sig: &str, pid: u32, what: &str) {
    let status = std::process::Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .expect("run kill");
    assert!(status.success(), "kill {sig} {pid} ({what})");
}

/// `deploy/dev-cluster up` on the running test cluster: starts whatever
/// is not running, keeping data; with `shards`, grows it to that many.
/// Uses the built binaries (`DEV_CLUSTER_BIN_DIR`: no cargo build while
/// the tests run) and the cluster's own directory; the knobs deploy/test
/// exported (blob stores, timeouts, ports) pass through, and the env
/// file's blob-store settings fill in what a hand run lacks.
pub async fn dev_cluster_up(shards: Option<u32>) {
    dev_cluster_up_with(shards, &[]).await
}

/// [`dev_cluster_up`] with `extra` in its environment: the services it
/// starts inherit them (e.g. `OTEL_EXPORTER_OTLP_ENDPOINT`).
pub async fn dev_cluster_up_with(shards: Option<u32>, extra: &[(&str, &str)]) {
    let env = env_file();
    let mut cmd = tokio::process::Command::new(format!("{}/deploy/dev-cluster", repo_root()));
    cmd.envs(extra.iter().copied());
    cmd.arg("up")
        .env("DEV_CLUSTER_DIR", cluster_dir())
        .env("DEV_CLUSTER_BIN_DIR", &env["BIN_DIR"])
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true);
    for name in [
        "SHARD_BLOB_STORES",
        "S3_ENDPOINT",
        "S3_REGION",
        "S3_BUCKET",
        "S3_ACCESS_KEY_ID",
        "S3_SECRET_ACCESS_KEY",
        "S3_FORCE_PATH_STYLE",
    ] {
        if std::env::var_os(name).is_none() {
            if let Some(v) = env.get(name) {
                cmd.env(name, v);
            }
        }
    }
    match shards {
        Some(n) => cmd.env("SHARDS", n.to_string()),
        // The layout file knows the count; an inherited SHARDS must not shrink it.
        None => cmd.env_remove("SHARDS"),
    };
    let limit = Duration::from_secs(300);
    let out = tokio::time::timeout(limit, cmd.output())
        .await
        .unwrap_or_else(|_| panic!("deploy/dev-cluster up still running after {limit:?}"))
        .expect("run deploy/dev-cluster up");
    assert!(
        out.status.success(),
        "deploy/dev-cluster up failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!(
        "chaos: deploy/dev-cluster up{} done",
        shards.map(|n| format!(" (SHARDS={n})")).unwrap_or_default()
    );
}
