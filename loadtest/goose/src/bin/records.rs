//! Records benchmark with goose, the counterpart of `k6/records.js`:
//! closed-loop users reading 100-record pages of the records fixture
//! (`records_setup.sh`), through the router or straight to the owning shard
//! node with the principal the router would sign.
//!
//! | variable | default | meaning |
//! |---|---|---|
//! | `FIXTURE` | `../.records-fixture.json` | written by `records_setup.sh` |
//! | `ROUTER_URL` | `http://127.0.0.1:8080` | also used to find the deep bookmark |
//! | `CLUSTER_SECRET` | (required for `direct`) | signs the direct requests |
//! | `PATH_KIND` | `router` | `router`, `direct`, or `interleaved`: both, in alternating slices |
//! | `SLICE` | `5` | seconds per slice with `interleaved` |
//! | `QUERY` | `first` | `first`, `deep`, `filter`, `filter_sort`, `sort_deep` (as in `records.js`) |
//! | `USERS` | `8` | closed-loop users (no think time) |
//! | `RUN_TIME` | `30` | measured seconds |
//! | `WARMUP` | `3` | seconds of samples discarded at the start |
//! | `PAUSE_MS` | `0` | each user's pause between requests (the smoke run's pacing) |
//! | `RESULTS` | `../results` (of this crate) | where the summary files go |
//!
//! Prints one JSON line with the fields of `records.js`'s summary
//! (`rps`, `med_ms`, `p90_ms`, `p99_ms`, `max_ms`; latency from send to the
//! last body byte, µs resolution) and writes it to
//! `RESULTS/records-goose-<path>-<query>.json`. Exits with status 1 after
//! that when a measured request failed or a path had none.
//!
//! `interleaved` runs both paths in one run: the measured time is cut into
//! slices of `SLICE` seconds, every user sends each request to the path of
//! the slice it starts in, and the slices go router, direct, direct, router,
//! then direct, router, router, direct, and so on (`interleaved::path_of`),
//! so a box that speeds up or slows down during the run weighs on both
//! paths alike. One JSON line per path; each path's `rps` is its requests
//! over the time of its own slices (`interleaved::time_on`: half of
//! `RUN_TIME` when that is a whole number of slice pairs). `RUN_TIME` is
//! then both paths' time together.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use cluster_protocol::principal::Principal;
use goose::prelude::*;
use loadtest_goose::{env_num, env_or, interleaved, owner_principal, signed, Stats};
use serde::Deserialize;

#[derive(Deserialize)]
struct Fixture {
    token: String,
    user_id: String,
    key_id: String,
    database_id: String,
    table_id: String,
    shard_url: String,
}

/// One path the pages are read through.
struct Target {
    kind: &'static str,
    url: String,
    /// `Some` on the direct path: the principal to sign per request.
    principal: Option<Principal>,
    stats: Stats,
}

struct Setup {
    /// One target, or with `interleaved` the router's and the direct one.
    targets: Vec<Target>,
    /// With `interleaved`: how long each slice lasts.
    slice: Duration,
    bearer: String,
    secret: Vec<u8>,
    warmup: Duration,
    /// `RUN_TIME`: requests starting later than this after the warm-up are
    /// not counted (goose runs on for up to a second).
    run_time: Duration,
    /// When the first request started: the clock of the warm-up, the
    /// slices and the measured time (goose starts its users over a while).
    first: OnceLock<Instant>,
    /// When the last request ended, in µs after `first`.
    last_end_us: AtomicU64,
}

impl Setup {
    /// The target of a request starting `elapsed` after the first
    /// (`interleaved::path_at`).
    fn target(&self, elapsed: Duration, sent: u64) -> &Target {
        if self.targets.len() == 1 {
            return &self.targets[0];
        }
        match interleaved::path_at(elapsed, self.warmup, self.slice, sent) {
            interleaved::Path::Router => &self.targets[0],
            interleaved::Path::Direct => &self.targets[1],
        }
    }
}

static SETUP: OnceLock<Setup> = OnceLock::new();

fn setup() -> &'static Setup {
    SETUP.get().expect("setup initialised in main")
}

/// Percent-encodes a query parameter value (RFC 3986 unreserved kept).
fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len() * 3);
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The query string of each benchmark query (`records.js`'s `QUERIES`).
fn query_params(query: &str) -> &'static str {
    static FILTER: OnceLock<String> = OnceLock::new();
    let filter = FILTER.get_or_init(|| {
        let f = serde_json::json!({ "conditions": [
            { "field": "Status", "op": "is", "value": "doing" },
            { "field": "Score", "op": "greater", "value": 200 } ] });
        format!("filter={}", encode(&f.to_string()))
    });
    static FILTER_SORT: OnceLock<String> = OnceLock::new();
    match query {
        "first" | "deep" => "",
        "filter" => filter,
        "sort_deep" => "sort=-Score",
        "filter_sort" => FILTER_SORT.get_or_init(|| format!("{filter}&sort=-Score")),
        other => panic!("QUERY {other} is not one of first, deep, filter, filter_sort, sort_deep"),
    }
}

/// The bookmark near record 90,000 of the query's order: 90 pages of 1000
/// through the router, as `records.js`'s `setup()` finds it.
async fn deep_bookmark(router: &str, fx: &Fixture, q: &str) -> String {
    let client = reqwest::Client::new();
    let mut bookmark: Option<String> = None;
    for _ in 0..90 {
        let mut url = format!(
            "{router}/api/tables/{}/records?page_size=1000&fields=Name",
            fx.table_id
        );
        if !q.is_empty() {
            url.push('&');
            url.push_str(q);
        }
        if let Some(b) = &bookmark {
            url.push_str(&format!("&bookmark={}", encode(b)));
        }
        let reply: serde_json::Value = client
            .get(&url)
            .bearer_auth(&fx.token)
            .timeout(Duration::from_secs(120))
            .send()
            .await
            .expect("deep bookmark: request")
            .json()
            .await
            .expect("deep bookmark: JSON reply");
        bookmark = reply["bookmark"].as_str().map(str::to_owned);
        assert!(
            bookmark.is_some(),
            "deep bookmark: the order ran out before page 90"
        );
    }
    bookmark.unwrap()
}

async fn read_page(user: &mut GooseUser) -> TransactionResult {
    static SENT: AtomicU64 = AtomicU64::new(0);
    let s = setup();
    let first = *s.first.get_or_init(Instant::now);
    let started = Instant::now();
    let elapsed = started - first;
    let t = s.target(elapsed, SENT.fetch_add(1, Ordering::Relaxed));
    let mut builder = user.get_request_builder(&GooseMethod::Get, &t.url)?;
    builder = match &t.principal {
        None => builder.header("authorization", &s.bearer),
        Some(p) => signed(builder, p, &s.secret),
    };
    let request = GooseRequest::builder()
        .set_request_builder(builder)
        .name(t.kind)
        .expect_status_code(200)
        .build();
    let goose = user.request(request).await?;
    let ok = match goose.response {
        Ok(r) => r.status().as_u16() == 200 && r.bytes().await.is_ok(),
        Err(_) => false,
    };
    let measuring = elapsed >= s.warmup && elapsed - s.warmup < s.run_time;
    t.stats.record(started, ok, measuring);
    s.last_end_us
        .fetch_max(first.elapsed().as_micros() as u64, Ordering::Relaxed);
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), GooseError> {
    let fixture_path = env_or("FIXTURE", "../.records-fixture.json");
    let router = env_or("ROUTER_URL", "http://127.0.0.1:8080")
        .trim_end_matches('/')
        .to_string();
    let path_kind = env_or("PATH_KIND", "router");
    let query = env_or("QUERY", "first");
    let users = env_num("USERS", 8).max(1);
    let run_time = env_num("RUN_TIME", 30);
    let warmup = env_num("WARMUP", 3);
    let pause = Duration::from_millis(env_num("PAUSE_MS", 0));
    let results = env_or(
        "RESULTS",
        concat!(env!("CARGO_MANIFEST_DIR"), "/../results"),
    );

    let text = std::fs::read_to_string(&fixture_path)
        .unwrap_or_else(|e| panic!("{fixture_path}: {e} (run loadtest/records_setup.sh first)"));
    let fx: Fixture = serde_json::from_str(&text).expect("the records fixture");
    let q = query_params(&query);
    let bookmark = if query.ends_with("deep") {
        Some(deep_bookmark(&router, &fx, q).await)
    } else {
        None
    };

    let secret = || {
        std::env::var("CLUSTER_SECRET")
            .expect("CLUSTER_SECRET is required for PATH_KIND=direct and interleaved")
            .into_bytes()
    };
    let mut suffix = String::new();
    if !q.is_empty() {
        suffix.push('&');
        suffix.push_str(q);
    }
    if let Some(b) = &bookmark {
        suffix.push_str(&format!("&bookmark={}", encode(b)));
    }
    let target = |kind: &'static str| {
        let (base, principal) = match kind {
            "router" => (router.clone(), None),
            _ => (
                fx.shard_url.trim_end_matches('/').to_string(),
                Some(owner_principal(
                    fx.user_id.clone(),
                    fx.key_id.clone(),
                    fx.database_id.clone(),
                )),
            ),
        };
        Target {
            kind,
            url: format!(
                "{base}/api/tables/{}/records?page_size=100{suffix}",
                fx.table_id
            ),
            principal,
            stats: Stats::default(),
        }
    };
    let (targets, secret) = match path_kind.as_str() {
        "router" => (vec![target("router")], Vec::new()),
        "direct" => (vec![target("direct")], secret()),
        "interleaved" => (vec![target("router"), target("direct")], secret()),
        other => panic!("PATH_KIND {other} is not router, direct or interleaved"),
    };
    let base = targets[0].url.clone();

    SETUP
        .set(Setup {
            targets,
            slice: Duration::from_secs(env_num("SLICE", 5).max(1)),
            bearer: format!("Bearer {}", fx.token),
            secret,
            warmup: Duration::from_secs(warmup),
            run_time: Duration::from_secs(run_time),
            first: OnceLock::new(),
            last_end_us: AtomicU64::new(0),
        })
        .ok()
        .expect("set once");

    let mut scenario =
        scenario!("records").register_transaction(transaction!(read_page).set_name("page"));
    if !pause.is_zero() {
        scenario = scenario.set_wait_time(pause, pause)?;
    }
    GooseAttack::initialize()?
        .register_scenario(scenario)
        .set_default(GooseDefault::Host, base.as_str())?
        .set_default(GooseDefault::Users, users as usize)?
        .set_default(GooseDefault::IncreaseRate, users.to_string().as_str())?
        .set_default(GooseDefault::RunTime, (run_time + warmup) as usize)?
        .set_default(GooseDefault::NoResetMetrics, true)?
        .execute()
        .await?;
    let s = setup();
    let measured = (s.last_end_us.load(Ordering::Relaxed) as f64 / 1e6 - warmup as f64)
        .clamp(1.0, run_time as f64);
    let mut failures = Vec::new();
    for t in &s.targets {
        // Each path of an interleaved run had the time of its slices.
        let path_secs = match (s.targets.len(), t.kind) {
            (1, _) => measured,
            (_, kind) => {
                let path = if kind == "router" {
                    interleaved::Path::Router
                } else {
                    interleaved::Path::Direct
                };
                interleaved::time_on(path, Duration::from_secs_f64(measured), s.slice).as_secs_f64()
            }
        };
        let sum = t.stats.summary(t.kind, path_secs);
        let requests = sum["requests"].as_u64().unwrap_or(0).max(1) as f64;
        let mut out = serde_json::json!({
            "tool": "goose",
            "path": t.kind,
            "query": query,
            "vus": users,
            "duration": format!("{run_time}s"),
            "rps": sum["rate"],
            "failed": sum["failed"].as_u64().unwrap_or(0) as f64 / requests,
            "med_ms": sum["p50_ms"],
            "p90_ms": sum["p90_ms"],
            "p99_ms": sum["p99_ms"],
            "max_ms": sum["max_ms"],
        });
        if s.targets.len() > 1 {
            out["interleaved"] = format!("{}s slices", s.slice.as_secs()).into();
        }
        println!("{out}");
        let file = format!("{results}/records-goose-{}-{query}.json", t.kind);
        std::fs::write(&file, serde_json::to_string_pretty(&out).unwrap())
            .expect("write the summary");
        failures.extend(t.stats.failure(t.kind));
    }
    if !failures.is_empty() {
        eprintln!("records: the run failed: {}", failures.join("; "));
        std::process::exit(1);
    }
    Ok(())
}
