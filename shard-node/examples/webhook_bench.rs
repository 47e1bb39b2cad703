//! Benchmarks of the webhook deliverer, run by `loadtest/webhooks_throughput.sh`
//! and `loadtest/webhooks_isolation.sh` (see there and loadtest/README.md).
//!
//! Each run makes a throwaway database on `BENCH_POSTGRES_URL` (a superuser
//! DSN; default the machine's PostgreSQL on 5432), migrates it, writes the
//! outbox rows with SQL as record writes would, starts the real shard-node
//! binary (`NODE_BIN`) on it, and receives the deliveries in this process
//! (an HTTP server on 127.0.0.1 that answers `/ok/..` with 200 at once and
//! never answers `/hang/..`). `WEBHOOK_*` variables are passed to the node.
//!
//! * `throughput`: `DELIVERIES` (20000) rows over `WEBHOOKS` (10) webhooks,
//!   enqueued before the node starts; reports deliveries/s from the first
//!   request received to the last, and CPU per delivery of the node, of
//!   the node's PostgreSQL sessions and of the whole PostgreSQL instance
//!   (from /proc, from the first request until every row is recorded).
//! * `isolation`: `HANG_DELIVERIES` (100) rows over `HANG_WEBHOOKS` (1)
//!   webhooks whose receiver never answers; once their attempts are out,
//!   another webhook's deliveries are enqueued one per transaction (with
//!   the outbox's `pg_notify`) at `RATE` (50) per second for `DURATION`
//!   (20) seconds; reports received_at - enqueued_at (p50, p90, p99, max).
//!   `LIVE_DATABASE=other` puts that webhook in a second database (the
//!   fairness between databases of issue 27: `HANG_WEBHOOKS=100` in one
//!   database, the live webhook in another). The enqueueing starts once
//!   the hanging attempts stop growing for 2 s.
//!
//! Prints one JSON object on the last line.

use std::collections::HashMap;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::http::{HeaderMap, StatusCode, Uri};
use cluster_protocol::ids::{self, Kind};
use serde_json::json;
use tokio_postgres::NoTls;

type Result<T> = std::result::Result<T, Box<dyn std::error::Error + Send + Sync>>;

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[tokio::main]
async fn main() -> Result<()> {
    let mode = std::env::args().nth(1).unwrap_or_default();
    let bench = Bench::create().await?;
    let outcome = match mode.as_str() {
        "throughput" => throughput(&bench).await,
        "isolation" => isolation(&bench).await,
        _ => Err("usage: webhook_bench throughput|isolation".into()),
    };
    bench.drop_database().await;
    let report = outcome?;
    println!("{report}");
    Ok(())
}

/// Received requests: delivery id and arrival, by path kind.
#[derive(Default)]
struct Received {
    ok: Vec<(String, Instant)>,
    hanging: usize,
}

#[derive(Clone, Default)]
struct Receiver {
    got: Arc<Mutex<Received>>,
}

impl Receiver {
    async fn start(&self) -> Result<std::net::SocketAddr> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let got = self.got.clone();
        let app = axum::Router::new().fallback(move |uri: Uri, headers: HeaderMap| {
            let got = got.clone();
            async move {
                let at = Instant::now();
                let id = headers
                    .get("x-service-delivery")
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.rsplit_once('.'))
                    .map(|(id, _)| id.to_owned())
                    .unwrap_or_default();
                if uri.path().starts_with("/hang/") {
                    got.lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .hanging += 1;
                    std::future::pending::<()>().await;
                }
                got.lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .ok
                    .push((id, at));
                (StatusCode::OK, "ok")
            }
        });
        tokio::spawn(async move { axum::serve(listener, app).await });
        Ok(addr)
    }

    fn ok_count(&self) -> usize {
        self.got
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .ok
            .len()
    }

    fn hanging(&self) -> usize {
        self.got
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .hanging
    }
}

/// The throwaway database, its tenant database row, and a session to it.
struct Bench {
    admin_url: String,
    name: String,
    url: String,
    pg: tokio_postgres::Client,
    database_id: String,
    tag: String,
}

async fn connect(url: &str) -> Result<tokio_postgres::Client> {
    let (client, conn) = tokio_postgres::connect(url, NoTls).await?;
    tokio::spawn(conn);
    Ok(client)
}

/// The database's placement on this shard: `owned`.
async fn owned_here(pg: &tokio_postgres::Client, database_id: &str) -> Result<()> {
    pg.execute(
        "INSERT INTO placements (database_id, epoch, state) VALUES ($1, 1, 'owned')",
        &[&database_id],
    )
    .await?;
    Ok(())
}

impl Bench {
    async fn create() -> Result<Bench> {
        let admin_url = std::env::var("BENCH_POSTGRES_URL")
            .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into());
        let name = format!("webhook_bench_{}", std::process::id());
        connect(&admin_url)
            .await?
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .await?;
        let (base, _) = admin_url
            .rsplit_once('/')
            .ok_or("BENCH_POSTGRES_URL has no path")?;
        let url = format!("{base}/{name}");
        let db = shard_node::db::Db::connect(&url, 1)?;
        shard_node::migrate(&db).await?;
        let pg = connect(&url).await?;
        let tag = ids::random_token(ids::TAG_LEN);
        let database_id = ids::new_database_id(&tag);
        pg.execute(
            "INSERT INTO databases (id, tag, name, position, owner_id, created_by, updated_by)
             VALUES ($1, $2, 'Bench', 0, 'usr_bench0000000', 'usr_bench0000000',
                     'usr_bench0000000')",
            &[&database_id, &tag],
        )
        .await?;
        // The node delivers only for the databases it serves.
        owned_here(&pg, &database_id).await?;
        Ok(Bench {
            admin_url,
            name,
            url,
            pg,
            database_id,
            tag,
        })
    }

    async fn drop_database(&self) {
        if let Ok(admin) = connect(&self.admin_url).await {
            let _ = admin
                .batch_execute(&format!(
                    "DROP DATABASE IF EXISTS {} WITH (FORCE)",
                    self.name
                ))
                .await;
        }
    }

    async fn webhook(&self, url: &str) -> Result<String> {
        self.webhook_in(&self.database_id, &self.tag, url).await
    }

    async fn webhook_in(&self, database_id: &str, tag: &str, url: &str) -> Result<String> {
        let id = ids::new_tagged(Kind::Webhook, tag);
        let secret = ids::random_token(48);
        self.pg
            .execute(
                "INSERT INTO webhooks (id, database_id, name, url, secret)
                 VALUES ($1, $2, 'bench', $3, $4)",
                &[&id, &database_id, &url, &secret],
            )
            .await?;
        Ok(id)
    }

    /// A second tenant database in the bench database: its id and tag.
    async fn another_database(&self) -> Result<(String, String)> {
        let tag = ids::random_token(ids::TAG_LEN);
        let database_id = ids::new_database_id(&tag);
        self.pg
            .execute(
                "INSERT INTO databases (id, tag, name, position, owner_id, created_by, updated_by)
                 VALUES ($1, $2, 'Other', 1, 'usr_bench0000001', 'usr_bench0000001',
                         'usr_bench0000001')",
                &[&database_id, &tag],
            )
            .await?;
        owned_here(&self.pg, &database_id).await?;
        Ok((database_id, tag))
    }

    /// A payload of the size a record write makes (about 600 bytes).
    fn body(&self, delivery_id: &str, n: usize) -> String {
        json!({
            "delivery_id": delivery_id,
            "event": "record.updated",
            "occurred_at": "2026-11-25T12:00:00.000Z",
            "database": {"id": self.database_id, "name": "Bench"},
            "table": {"id": ids::new_tagged(Kind::Table, &self.tag), "name": "Orders"},
            "record_id": ids::new_tagged(Kind::Record, &self.tag),
            "changed_field_ids": [ids::new_tagged(Kind::Field, &self.tag)],
            "field_ids": {"Name": "fld_AAAAA0000001", "Status": "fld_AAAAA0000002",
                          "Amount": "fld_AAAAA0000003", "Due": "fld_AAAAA0000004"},
            "before": {"fields": {"Name": format!("Order {n}"), "Status": "Open",
                                  "Amount": 125.5, "Due": "2026-12-01"}},
            "after": {"fields": {"Name": format!("Order {n}"), "Status": "Shipped",
                                 "Amount": 125.5, "Due": "2026-12-01"}},
            "test": false
        })
        .to_string()
    }

    /// Enqueues `n` deliveries to each of `webhooks` in batches; ids in order.
    async fn enqueue_bulk(&self, webhooks: &[String], n_each: usize) -> Result<()> {
        let mut ids_ = Vec::new();
        let mut hooks = Vec::new();
        let mut bodies = Vec::new();
        for i in 0..n_each {
            for w in webhooks {
                let id = ids::new_tagged(Kind::Delivery, &self.tag);
                bodies.push(self.body(&id, i));
                ids_.push(id);
                hooks.push(w.clone());
            }
        }
        for ((ids_chunk, hooks_chunk), bodies_chunk) in ids_
            .chunks(1000)
            .zip(hooks.chunks(1000))
            .zip(bodies.chunks(1000))
        {
            self.pg
                .execute(
                    "INSERT INTO deliveries (id, database_id, webhook_id, event, body)
                     SELECT id, $4, webhook_id, 'record.updated', body
                     FROM unnest($1::text[], $2::text[], $3::text[]) AS r(id, webhook_id, body)",
                    &[&ids_chunk, &hooks_chunk, &bodies_chunk, &self.database_id],
                )
                .await?;
        }
        Ok(())
    }

    async fn unfinished(&self) -> Result<i64> {
        Ok(self
            .pg
            .query_one(
                "SELECT count(*) FROM deliveries WHERE finished_at IS NULL",
                &[],
            )
            .await?
            .get(0))
    }
}

/// The real node on the bench database.
struct Node {
    child: tokio::process::Child,
    pid: u32,
}

impl Node {
    async fn start(bench: &Bench) -> Result<Node> {
        let bin = std::env::var("NODE_BIN").map_err(|_| "NODE_BIN is required")?;
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let mut cmd = tokio::process::Command::new(bin);
        cmd.env("SHARD_NAME", "bench")
            .env("SHARD_LISTEN", format!("127.0.0.1:{port}"))
            .env("SHARD_DATABASE_URL", &bench.url)
            .env("CLUSTER_SECRET", "bench-secret")
            .env("EGRESS_ALLOW_CIDRS", "127.0.0.0/8")
            .env(
                "RUST_LOG",
                std::env::var("RUST_LOG").unwrap_or("warn".into()),
            )
            .stdout(Stdio::null())
            .kill_on_drop(true);
        let child = cmd.spawn()?;
        let pid = child.id().ok_or("node exited at once")?;
        Ok(Node { child, pid })
    }

    async fn stop(mut self) {
        let _ = tokio::process::Command::new("kill")
            .arg(self.pid.to_string())
            .status()
            .await;
        let _ = tokio::time::timeout(Duration::from_secs(10), self.child.wait()).await;
    }
}

/// CPU seconds (user + system) of a process, from /proc.
fn cpu_secs(pid: u32, tick: f64) -> f64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0.0;
    };
    // Fields after the parenthesised command name.
    let Some((_, rest)) = stat.rsplit_once(')') else {
        return 0.0;
    };
    let f: Vec<&str> = rest.split_whitespace().collect();
    let utime: f64 = f.get(11).and_then(|v| v.parse().ok()).unwrap_or(0.0);
    let stime: f64 = f.get(12).and_then(|v| v.parse().ok()).unwrap_or(0.0);
    (utime + stime) / tick
}

fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    rest.split_whitespace().nth(1)?.parse().ok()
}

fn children_of(parent: u32) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| parent_of(*pid) == Some(parent))
        .collect()
}

fn clock_tick() -> f64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100.0)
}

/// CPU seconds of the node, of its PostgreSQL sessions, and of every
/// process of the PostgreSQL instance, now.
struct Cpu {
    node: f64,
    sessions: HashMap<u32, f64>,
    instance: f64,
}

async fn sample(bench: &Bench, node: &Node, postmaster: u32, tick: f64) -> Result<Cpu> {
    let rows = bench
        .pg
        .query(
            "SELECT pid FROM pg_stat_activity
             WHERE datname = current_database() AND pid <> pg_backend_pid()
               AND application_name LIKE 'shard-node%'",
            &[],
        )
        .await?;
    let sessions = rows
        .iter()
        .map(|r| {
            let pid = r.get::<_, i32>(0) as u32;
            (pid, cpu_secs(pid, tick))
        })
        .collect();
    let instance = children_of(postmaster)
        .into_iter()
        .map(|p| cpu_secs(p, tick))
        .sum::<f64>()
        + cpu_secs(postmaster, tick);
    Ok(Cpu {
        node: cpu_secs(node.pid, tick),
        sessions,
        instance,
    })
}

async fn postmaster(bench: &Bench) -> Result<u32> {
    let backend: i32 = bench
        .pg
        .query_one("SELECT pg_backend_pid()", &[])
        .await?
        .get(0);
    parent_of(backend as u32).ok_or_else(|| "no postmaster (is PostgreSQL on this machine?)".into())
}

async fn throughput(bench: &Bench) -> Result<serde_json::Value> {
    let total: usize = env_or("DELIVERIES", 20_000);
    let n_webhooks: usize = env_or("WEBHOOKS", 10).max(1);
    let receiver = Receiver::default();
    let addr = receiver.start().await?;
    let mut webhooks = Vec::new();
    for i in 0..n_webhooks {
        webhooks.push(bench.webhook(&format!("http://{addr}/ok/{i}")).await?);
    }
    let each = total.div_ceil(n_webhooks);
    bench.enqueue_bulk(&webhooks, each).await?;
    let total = each * n_webhooks;
    bench.pg.batch_execute("ANALYZE deliveries").await?;
    eprintln!("enqueued {total} deliveries over {n_webhooks} webhooks; starting the node");
    let tick = clock_tick();
    let postmaster = postmaster(bench).await?;
    let node = Node::start(bench).await?;
    let give_up = Instant::now() + Duration::from_secs(env_or("TIMEOUT_SECS", 600));
    while receiver.ok_count() == 0 {
        if Instant::now() > give_up {
            return Err("no delivery arrived".into());
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let before = sample(bench, &node, postmaster, tick).await?;
    let started = Instant::now();
    let mut last_report = Instant::now();
    loop {
        let got = receiver.ok_count();
        if got >= total && bench.unfinished().await? == 0 {
            break;
        }
        if Instant::now() > give_up {
            return Err(format!("gave up with {got} of {total} received").into());
        }
        if last_report.elapsed() > Duration::from_secs(5) {
            eprintln!("  {got} of {total} received");
            last_report = Instant::now();
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let recorded_in = started.elapsed().as_secs_f64();
    let after = sample(bench, &node, postmaster, tick).await?;
    node.stop().await;
    let (first, last) = {
        let got = receiver
            .got
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let first = got
            .ok
            .iter()
            .map(|(_, t)| *t)
            .min()
            .ok_or("nothing received")?;
        let last = got
            .ok
            .iter()
            .map(|(_, t)| *t)
            .max()
            .ok_or("nothing received")?;
        (first, last)
    };
    let received = receiver.ok_count();
    let span = last.duration_since(first).as_secs_f64().max(1e-9);
    let sessions_cpu: f64 = after
        .sessions
        .iter()
        .map(|(pid, s)| s - before.sessions.get(pid).copied().unwrap_or(0.0))
        .sum();
    let per = |secs: f64| secs * 1000.0 / total as f64;
    let failed: i64 = bench
        .pg
        .query_one(
            "SELECT count(*) FROM deliveries WHERE state <> 'succeeded'",
            &[],
        )
        .await?
        .get(0);
    Ok(json!({
        "benchmark": "webhook_throughput",
        "deliveries": total,
        "webhooks": n_webhooks,
        "received_requests": received,
        "not_succeeded": failed,
        "first_to_last_received_s": span,
        "deliveries_per_s": total as f64 / span,
        "first_received_to_all_recorded_s": recorded_in,
        "node_cpu_ms_per_delivery": per(after.node - before.node),
        "pg_sessions_cpu_ms_per_delivery": per(sessions_cpu),
        "pg_instance_cpu_ms_per_delivery": per(after.instance - before.instance),
        "cpu_window_s": recorded_in,
    }))
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

async fn isolation(bench: &Bench) -> Result<serde_json::Value> {
    let hang_total: usize = env_or("HANG_DELIVERIES", 100);
    let hang_webhooks: usize = env_or("HANG_WEBHOOKS", 1).max(1);
    let rate: f64 = env_or("RATE", 50.0);
    let duration: f64 = env_or("DURATION", 20.0);
    let receiver = Receiver::default();
    let addr = receiver.start().await?;
    let mut dead = Vec::new();
    for i in 0..hang_webhooks {
        dead.push(bench.webhook(&format!("http://{addr}/hang/{i}")).await?);
    }
    bench
        .enqueue_bulk(&dead, hang_total.div_ceil(hang_webhooks))
        .await?;
    let other = std::env::var("LIVE_DATABASE").is_ok_and(|v| v == "other");
    let (live_database, live_tag) = if other {
        bench.another_database().await?
    } else {
        (bench.database_id.clone(), bench.tag.clone())
    };
    let live = bench
        .webhook_in(&live_database, &live_tag, &format!("http://{addr}/ok/live"))
        .await?;
    let node = Node::start(bench).await?;
    // Until the hanging attempts stop growing (each webhook's and each
    // database's cap, whatever the node's version enforces).
    let give_up = Instant::now() + Duration::from_secs(120);
    let (mut seen, mut since) = (0, Instant::now());
    while seen == 0 || since.elapsed() < Duration::from_secs(2) {
        if Instant::now() > give_up {
            return Err(format!("{seen} attempts reached the dead receiver").into());
        }
        let now = receiver.hanging();
        if now != seen {
            (seen, since) = (now, Instant::now());
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    eprintln!(
        "{} attempts hanging; enqueueing to another webhook at {rate}/s for {duration}s",
        receiver.hanging()
    );
    let mut enqueued: HashMap<String, Instant> = HashMap::new();
    let interval = Duration::from_secs_f64(1.0 / rate);
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let writer = connect(&bench.url).await?;
    let insert = writer
        .prepare(
            "WITH d AS (INSERT INTO deliveries (id, database_id, webhook_id, event, body)
                        VALUES ($1, $2, $3, 'record.updated', $4) RETURNING 1)
             SELECT pg_notify('webhook_deliveries', '') FROM d",
        )
        .await?;
    let end = Instant::now() + Duration::from_secs_f64(duration);
    let mut n = 0;
    while Instant::now() < end {
        tick.tick().await;
        let id = ids::new_tagged(Kind::Delivery, &live_tag);
        let body = bench.body(&id, n);
        let at = Instant::now();
        writer
            .execute(&insert, &[&id, &live_database, &live, &body])
            .await?;
        enqueued.insert(id, at);
        n += 1;
    }
    let give_up = Instant::now() + Duration::from_secs(30);
    while receiver.ok_count() < enqueued.len() && Instant::now() < give_up {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let hanging = receiver.hanging();
    node.stop().await;
    let mut latencies: Vec<f64> = {
        let got = receiver
            .got
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut first: HashMap<&str, Instant> = HashMap::new();
        for (id, at) in &got.ok {
            first.entry(id.as_str()).or_insert(*at);
        }
        enqueued
            .iter()
            .filter_map(|(id, sent)| {
                first
                    .get(id.as_str())
                    .map(|at| at.duration_since(*sent).as_secs_f64() * 1000.0)
            })
            .collect()
    };
    latencies.sort_by(f64::total_cmp);
    Ok(json!({
        "benchmark": "webhook_isolation",
        "hanging_deliveries": hang_total,
        "hanging_webhooks": hang_webhooks,
        "hanging_attempts_seen": hanging,
        "live_database": if other { "other" } else { "same" },
        "enqueued": enqueued.len(),
        "received": latencies.len(),
        "rate_per_s": rate,
        "latency_ms_p50": percentile(&latencies, 50.0),
        "latency_ms_p90": percentile(&latencies, 90.0),
        "latency_ms_p99": percentile(&latencies, 99.0),
        "latency_ms_max": latencies.last().copied().unwrap_or(f64::NAN),
    }))
}
