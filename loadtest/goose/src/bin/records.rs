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
//! | `PATH_KIND` | `router` | `router` or `direct` |
//! | `QUERY` | `first` | `first`, `deep`, `filter`, `filter_sort`, `sort_deep` (as in `records.js`) |
//! | `USERS` | `8` | closed-loop users (no think time) |
//! | `RUN_TIME` | `30` | measured seconds |
//! | `WARMUP` | `3` | seconds of samples discarded at the start |
//!
//! Prints one JSON line with the fields of `records.js`'s summary
//! (`rps`, `med_ms`, `p90_ms`, `p99_ms`, `max_ms`; latency from send to the
//! last body byte, µs resolution) and writes it to
//! `../results/records-goose-<path>-<query>.json`.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use cluster_protocol::principal::Principal;
use goose::prelude::*;
use loadtest_goose::{env_num, env_or, owner_principal, signed, Stats};
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

struct Setup {
    url: String,
    bearer: String,
    /// `Some` on the direct path: the principal to sign per request.
    principal: Option<Principal>,
    secret: Vec<u8>,
    warmup: Duration,
    started: Instant,
    stats: Stats,
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
    let s = setup();
    let started = Instant::now();
    let mut builder = user.get_request_builder(&GooseMethod::Get, &s.url)?;
    builder = match &s.principal {
        None => builder.header("authorization", &s.bearer),
        Some(p) => signed(builder, p, &s.secret),
    };
    let request = GooseRequest::builder()
        .set_request_builder(builder)
        .name("page")
        .expect_status_code(200)
        .build();
    let goose = user.request(request).await?;
    let ok = match goose.response {
        Ok(r) => r.status().as_u16() == 200 && r.bytes().await.is_ok(),
        Err(_) => false,
    };
    s.stats.record(started, ok, s.started.elapsed() >= s.warmup);
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

    let text = std::fs::read_to_string(&fixture_path)
        .unwrap_or_else(|e| panic!("{fixture_path}: {e} (run loadtest/records_setup.sh first)"));
    let fx: Fixture = serde_json::from_str(&text).expect("the records fixture");
    let q = query_params(&query);
    let bookmark = if query.ends_with("deep") {
        Some(deep_bookmark(&router, &fx, q).await)
    } else {
        None
    };

    let (base, principal, secret) = match path_kind.as_str() {
        "router" => (router.clone(), None, Vec::new()),
        "direct" => {
            let secret = std::env::var("CLUSTER_SECRET")
                .expect("CLUSTER_SECRET is required for PATH_KIND=direct");
            let principal = owner_principal(
                fx.user_id.clone(),
                fx.key_id.clone(),
                fx.database_id.clone(),
            );
            (
                fx.shard_url.trim_end_matches('/').to_string(),
                Some(principal),
                secret.into_bytes(),
            )
        }
        other => panic!("PATH_KIND {other} is not router or direct"),
    };
    let mut url = format!("{base}/api/tables/{}/records?page_size=100", fx.table_id);
    if !q.is_empty() {
        url.push('&');
        url.push_str(q);
    }
    if let Some(b) = &bookmark {
        url.push_str(&format!("&bookmark={}", encode(b)));
    }

    SETUP
        .set(Setup {
            url,
            bearer: format!("Bearer {}", fx.token),
            principal,
            secret,
            warmup: Duration::from_secs(warmup),
            started: Instant::now(),
            stats: Stats::default(),
        })
        .ok()
        .expect("set once");

    let started = Instant::now();
    GooseAttack::initialize()?
        .register_scenario(
            scenario!("records").register_transaction(transaction!(read_page).set_name("page")),
        )
        .set_default(GooseDefault::Host, base.as_str())?
        .set_default(GooseDefault::Users, users as usize)?
        .set_default(GooseDefault::IncreaseRate, users.to_string().as_str())?
        .set_default(GooseDefault::RunTime, (run_time + warmup) as usize)?
        .set_default(GooseDefault::NoResetMetrics, true)?
        .execute()
        .await?;
    let measured = (started.elapsed().as_secs_f64() - warmup as f64).max(1.0);

    let s = setup().stats.summary("page", measured);
    let requests = s["requests"].as_u64().unwrap_or(0).max(1) as f64;
    let out = serde_json::json!({
        "tool": "goose",
        "path": path_kind,
        "query": query,
        "vus": users,
        "duration": format!("{run_time}s"),
        "rps": s["rate"],
        "failed": s["failed"].as_u64().unwrap_or(0) as f64 / requests,
        "med_ms": s["p50_ms"],
        "p90_ms": s["p90_ms"],
        "p99_ms": s["p99_ms"],
        "max_ms": s["max_ms"],
    });
    println!("{out}");
    let path = format!(
        "{}/../results/records-goose-{path_kind}-{query}.json",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::write(&path, serde_json::to_string_pretty(&out).unwrap()).expect("write the summary");
    Ok(())
}
