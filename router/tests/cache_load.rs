//! The router's bounded caches under load (docs/capacity.md, "Router
//! caches"). A measurement, not a test: ignored unless asked for, it
//! asserts nothing about speed and prints JSON lines.
//!
//! Against a dev cluster (its control plane, catalog and Redis) and a router
//! started apart with the bounds to measure:
//!
//! ```sh
//! # a dev cluster (PORT_BASE 15400), then a router of its own on PORT_BASE+100:
//! set -a; . .dev-cluster/env; set +a
//! ROUTER_LISTEN=127.0.0.1:15500 ROUTER_METRICS_LISTEN=127.0.0.1:15501 \
//!   ROUTER_ADDRESS_LIMIT_PER_MIN=1000000000 ROUTER_KEY_LIMIT_PER_MIN=1000000 RUST_LOG=warn \
//!   ROUTER_KEY_CACHE_ENTRIES=20000 ... target/debug/router & echo $! > router.pid
//! LOAD_ROUTER_PID=$(cat router.pid) LOAD_N=1000000 LOAD_STEPS=fill,cp,latency,uniform \
//!   cargo test -p router --test cache_load -- --ignored --nocapture
//! ```
//!
//! Steps (`LOAD_STEPS`, comma-separated):
//! - `fill`: N users `usr_000000000001`.., one key each `key_...` (all with
//!   one argon2id hash of one secret, of cheap parameters so the load
//!   measures the caches, not argon2), N databases (tag `z` + 4 base-62
//!   digits) each owned by its user, all placed on a shard `cacheload-null`
//!   whose URL is this program's null shard (`LOAD_NULL_SHARD`, default
//!   127.0.0.1:15502, PORT_BASE+102): it answers 200 `{}` to anything. A real shard would
//!   answer 421 for a database it does not hold, and the router would then
//!   read the placement again up to five times per request (the move
//!   protocol), which measures that path instead of the caches. Bulk SQL in
//!   the catalog (`CONTROL_PLANE_DATABASE_URL`); when present, only the
//!   keys' hash is set again.
//! - `cp`: the control plane's lookup rate (key, user access, placement, as
//!   a full miss asks them) at concurrency 1 (latency) and `LOAD_CP_CONC`
//!   (throughput, `LOAD_CP_SECS`).
//! - `latency`: `LOAD_PAIRS` pairs, one at a time: a request for a database
//!   and key this router has not seen (a miss of all three caches), then the
//!   same request again (hits); p50/p99 of each.
//! - `uniform`: `LOAD_CONC` clients for `LOAD_SECS`, each request for `i`
//!   uniform in 1..=N (key i, database i); every `LOAD_REPORT_SECS` the
//!   router's RSS, requests per second, statuses and each cache's hit rate
//!   in the window (from its /metrics).
//!
//! The router needs `ROUTER_ADDRESS_LIMIT_PER_MIN` and
//! `ROUTER_KEY_LIMIT_PER_MIN` raised (one client address sends everything).

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use argon2::{password_hash::SaltString, Algorithm, Argon2, Params, PasswordHasher, Version};
use cluster_protocol::control::client::ControlPlaneClient;
use serde_json::json;
use tokio_postgres::types::ToSql;

const SECRET: &str = "cacheload-secret-7f3a9c1e5b2d4a6f";
const SHARD: &str = "cacheload-null";
const ALPHABET: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

fn env(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_string())
}

fn num(name: &str, default: u64) -> u64 {
    env(name, &default.to_string()).parse().unwrap()
}

fn key_id(i: u64) -> String {
    format!("key_{i:012}")
}

fn user_id(i: u64) -> String {
    format!("usr_{i:012}")
}

fn tag(i: u64) -> String {
    let mut t = String::from("z");
    for p in [238_328u64, 3_844, 62, 1] {
        t.push(ALPHABET[((i / p) % 62) as usize] as char);
    }
    t
}

fn db_id(i: u64) -> String {
    format!("db_{}0000000", tag(i))
}

/// The same tag in SQL, of the series value `g`.
const SQL_TAG: &str =
    "'z' || substr(a, (g / 238328)::int % 62 + 1, 1) || substr(a, (g / 3844)::int % 62 + 1, 1) \
     || substr(a, (g / 62)::int % 62 + 1, 1) || substr(a, (g % 62)::int + 1, 1)";

fn print(v: serde_json::Value) {
    println!("{v}");
}

fn pct(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

async fn fill(n: u64, null_url: &str) {
    let dsn = env("CONTROL_PLANE_DATABASE_URL", "");
    let (db, conn) = tokio_postgres::connect(&dsn, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    db.execute(
        "INSERT INTO shards (name, url, postgres, weight) VALUES ($1, $2, 'postgres://unused@127.0.0.1:1/none', 1)
         ON CONFLICT (name) DO UPDATE SET url = EXCLUDED.url",
        &[&SHARD, &null_url],
    )
    .await
    .unwrap();
    let salt = SaltString::encode_b64(b"cacheload-salt-1").unwrap();
    let params = Params::new(1024, 1, 1, None).unwrap();
    let hash = Argon2::new(Algorithm::Argon2id, Version::V0x13, params)
        .hash_password(SECRET.as_bytes(), &salt)
        .unwrap()
        .to_string();
    let last = user_id(n);
    let have: bool = db
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM users WHERE id = $1)",
            &[&last],
        )
        .await
        .unwrap()
        .get(0);
    if have {
        // Filled before (perhaps by hand, with another hash): this hash.
        let updated = db
            .execute(
                "UPDATE api_keys SET secret_hash = $1 WHERE id LIKE 'key\\_0%' AND secret_hash <> $1",
                &[&hash],
            )
            .await
            .unwrap();
        print(json!({"step": "fill", "skipped": "already filled", "n": n, "hashes_set": updated}));
        return;
    }
    let n = n as i64;
    let started = Instant::now();
    let steps: [(&str, String); 4] = [
        ("users", "INSERT INTO users (id, email, name)
          SELECT 'usr_' || lpad(g::text, 12, '0'), 'load' || g || '@example.com', 'Load User ' || g
          FROM generate_series(1::bigint, $1) AS g".into()),
        ("api_keys", "INSERT INTO api_keys (id, user_id, name, secret_hash, access, databases)
          SELECT 'key_' || lpad(g::text, 12, '0'), 'usr_' || lpad(g::text, 12, '0'), 'load key ' || g, $2,
                 'read_write', NULL
          FROM generate_series(1::bigint, $1) AS g".into()),
        ("databases", format!("INSERT INTO databases (id, tag, owner_id, shard, state, position, epoch)
          SELECT 'db_' || t || '0000000', t, 'usr_' || lpad(g::text, 12, '0'), '{SHARD}', 'active',
                 1000000000000 + g, 1
          FROM generate_series(1::bigint, $1) AS g,
               LATERAL (SELECT '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz'::text AS a) x,
               LATERAL (SELECT {SQL_TAG} AS t) y")),
        ("memberships", "INSERT INTO memberships (database_id, user_id, role)
          SELECT id, owner_id, 'owner' FROM databases WHERE shard = 'cacheload-null'".into()),
    ];
    for (what, sql) in steps {
        let t = Instant::now();
        let rows = if what == "api_keys" {
            db.execute(sql.as_str(), &[&n as &(dyn ToSql + Sync), &hash])
                .await
                .unwrap()
        } else if what == "memberships" {
            db.execute(sql.as_str(), &[]).await.unwrap()
        } else {
            db.execute(sql.as_str(), &[&n]).await.unwrap()
        };
        print(
            json!({"step": "fill", "table": what, "rows": rows, "secs": t.elapsed().as_secs_f64()}),
        );
    }
    db.execute("ANALYZE users, api_keys, databases, memberships", &[])
        .await
        .unwrap();
    print(json!({"step": "fill", "done_secs": started.elapsed().as_secs_f64()}));
}

async fn null_shard(listen: &str) {
    let app = axum::Router::new().fallback(|| async { axum::Json(json!({})) });
    let listener = tokio::net::TcpListener::bind(listen).await.unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
}

struct Target {
    http: reqwest::Client,
    router: String,
}

impl Target {
    async fn get(&self, i: u64) -> (u16, Duration) {
        let t = Instant::now();
        let r = self
            .http
            .get(format!("{}/api/databases/{}/tables", self.router, db_id(i)))
            .header("authorization", format!("Bearer {}.{SECRET}", key_id(i)))
            .send()
            .await;
        let status = match r {
            Ok(r) => {
                let s = r.status().as_u16();
                let _ = r.bytes().await;
                s
            }
            Err(_) => 0,
        };
        (status, t.elapsed())
    }
}

fn rss_mib(pid: &str) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

/// `series{cache="x"}` values of the router's cache series.
async fn scrape(http: &reqwest::Client, url: &str) -> BTreeMap<String, f64> {
    let token = env("METRICS_TOKEN", "");
    let page = http
        .get(format!("{url}/metrics"))
        .bearer_auth(token)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    page.lines()
        .filter(|l| l.starts_with("tabula_router_cache_"))
        .filter_map(|l| {
            let (name, value) = l.rsplit_once(' ')?;
            Some((name.to_string(), value.parse().ok()?))
        })
        .collect()
}

fn series(m: &BTreeMap<String, f64>, name: &str, cache: &str) -> f64 {
    m.get(&format!("{name}{{cache=\"{cache}\"}}"))
        .copied()
        .unwrap_or(0.0)
}

async fn control_plane() {
    let cp = ControlPlaneClient::new(
        &env("CONTROL_PLANE_URL", ""),
        &env("CONTROL_PLANE_ROUTER_TOKEN", ""),
    );
    let n = num("LOAD_N", 1_000_000);
    let one = |cp: ControlPlaneClient, i: u64, kind: usize| async move {
        match kind {
            0 => cp.key(&key_id(i)).await.map(|_| ()),
            1 => cp.user_access(&user_id(i)).await.map(|_| ()),
            _ => cp.placement(&tag(i)).await.map(|_| ()),
        }
    };
    for (kind, name) in ["key", "access", "placement"].iter().enumerate() {
        let mut times = Vec::new();
        for _ in 0..num("LOAD_CP_SAMPLES", 500) {
            let i = rand::random::<u64>() % n + 1;
            let t = Instant::now();
            one(cp.clone(), i, kind).await.unwrap();
            times.push(ms(t.elapsed()));
        }
        times.sort_by(f64::total_cmp);
        print(json!({"step": "cp", "lookup": name, "concurrency": 1,
            "p50_ms": pct(&times, 0.5), "p99_ms": pct(&times, 0.99)}));
    }
    let conc = num("LOAD_CP_CONC", 8);
    let secs = num("LOAD_CP_SECS", 15);
    let done = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let tasks: Vec<_> = (0..conc)
        .map(|c| {
            let (cp, done, errors, stop) = (cp.clone(), done.clone(), errors.clone(), stop.clone());
            tokio::spawn(async move {
                let mut kind = c as usize;
                while !stop.load(Ordering::Relaxed) {
                    let i = rand::random::<u64>() % n + 1;
                    match one(cp.clone(), i, kind % 3).await {
                        Ok(()) => done.fetch_add(1, Ordering::Relaxed),
                        Err(_) => errors.fetch_add(1, Ordering::Relaxed),
                    };
                    kind += 1;
                }
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_secs(secs)).await;
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        t.await.unwrap();
    }
    let per_sec = done.load(Ordering::Relaxed) as f64 / secs as f64;
    print(
        json!({"step": "cp", "mix": "key, access, placement in turn", "concurrency": conc,
        "lookups_per_sec": per_sec, "full_misses_per_sec": per_sec / 3.0,
        "errors": errors.load(Ordering::Relaxed)}),
    );
}

async fn latency(target: &Target) {
    let n = num("LOAD_N", 1_000_000);
    let (mut miss, mut hit) = (Vec::new(), Vec::new());
    let mut statuses = BTreeMap::<u16, u64>::new();
    for _ in 0..num("LOAD_PAIRS", 1000) {
        let i = rand::random::<u64>() % n + 1;
        let (s1, t1) = target.get(i).await;
        let (s2, t2) = target.get(i).await;
        *statuses.entry(s1).or_default() += 1;
        *statuses.entry(s2).or_default() += 1;
        miss.push(ms(t1));
        hit.push(ms(t2));
    }
    miss.sort_by(f64::total_cmp);
    hit.sort_by(f64::total_cmp);
    print(json!({"step": "latency", "pairs": miss.len(),
        "miss_p50_ms": pct(&miss, 0.5), "miss_p99_ms": pct(&miss, 0.99),
        "hit_p50_ms": pct(&hit, 0.5), "hit_p99_ms": pct(&hit, 0.99),
        "statuses": statuses}));
}

async fn uniform(target: Arc<Target>) {
    let n = num("LOAD_N", 1_000_000);
    let conc = num("LOAD_CONC", 32);
    let secs = num("LOAD_SECS", 300);
    let every = num("LOAD_REPORT_SECS", 30);
    let pid = env("LOAD_ROUTER_PID", "");
    let metrics_url = env("LOAD_ROUTER_METRICS_URL", "http://127.0.0.1:15501");
    let statuses = Arc::new(Mutex::new(BTreeMap::<u16, u64>::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let tasks: Vec<_> = (0..conc)
        .map(|_| {
            let (target, statuses, stop) = (target.clone(), statuses.clone(), stop.clone());
            tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    let i = rand::random::<u64>() % n + 1;
                    let (s, _) = target.get(i).await;
                    *statuses.lock().unwrap().entry(s).or_default() += 1;
                }
            })
        })
        .collect();
    let started = Instant::now();
    let mut before = scrape(&target.http, &metrics_url).await;
    let mut peak = 0f64;
    while started.elapsed() < Duration::from_secs(secs) {
        let t = Instant::now();
        tokio::time::sleep(Duration::from_secs(every)).await;
        let window = std::mem::take(&mut *statuses.lock().unwrap());
        let after = scrape(&target.http, &metrics_url).await;
        let mut caches = serde_json::Map::new();
        for c in ["key", "access", "placement"] {
            let h = series(&after, "tabula_router_cache_hits_total", c)
                - series(&before, "tabula_router_cache_hits_total", c);
            let m = series(&after, "tabula_router_cache_misses_total", c)
                - series(&before, "tabula_router_cache_misses_total", c);
            caches.insert(
                c.into(),
                json!({"hit_rate": h / (h + m), "misses_per_sec": m / t.elapsed().as_secs_f64(),
                    "entries": series(&after, "tabula_router_cache_entries", c)}),
            );
        }
        before = after;
        let rss = rss_mib(&pid);
        peak = peak.max(rss);
        let total: u64 = window.values().sum();
        print(
            json!({"step": "uniform", "t_secs": started.elapsed().as_secs(),
            "requests_per_sec": total as f64 / t.elapsed().as_secs_f64(),
            "statuses": window, "rss_mib": rss, "peak_rss_mib": peak, "caches": caches}),
        );
    }
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        t.await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement against a running cluster (see the module doc)"]
async fn router_cache_load() {
    let n = num("LOAD_N", 1_000_000);
    let null = env("LOAD_NULL_SHARD", "127.0.0.1:15502");
    let steps = env("LOAD_STEPS", "fill,cp,latency,uniform");
    let steps: Vec<&str> = steps.split(',').collect();
    null_shard(&null).await;
    let target = Arc::new(Target {
        http: reqwest::Client::builder()
            .pool_max_idle_per_host(256)
            .build()
            .unwrap(),
        router: env("LOAD_ROUTER_URL", "http://127.0.0.1:15500"),
    });
    print(json!({"n": n, "steps": steps, "tag_1": tag(1), "db_1": db_id(1)}));
    if steps.contains(&"fill") {
        fill(n, &format!("http://{null}")).await;
    }
    if steps.contains(&"cp") {
        control_plane().await;
    }
    if steps.contains(&"latency") {
        latency(&target).await;
    }
    if steps.contains(&"uniform") {
        uniform(target).await;
    }
}
