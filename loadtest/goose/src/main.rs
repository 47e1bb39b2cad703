//! GET /api/tables/{id} through the router (scenario `router`) and, side by
//! side in the same run, straight to the owning shard node with the principal
//! the router would sign (scenario `direct`), signed with
//! `cluster_protocol::principal::Principal::sign`: the router's own code.
//!
//! Configuration (environment; goose's own flags such as `--run-time` still work):
//!
//! | variable | default | meaning |
//! |---|---|---|
//! | `FIXTURES` | `../.fixtures.json` | written by `loadtest/setup.sh` |
//! | `ROUTER_URL` | `http://127.0.0.1:8080` | |
//! | `CLUSTER_SECRET` | (required) | signs the direct requests |
//! | `RATE` | `200` | requests/s per scenario (constant arrival) |
//! | `USERS` | `32` | goose users per scenario |
//! | `RUN_TIME` | `30` | seconds |
//! | `WARMUP` | `3` | seconds of samples discarded at the start |
//! | `SUMMARY_JSON` | `../results/goose-compare.json` | machine-readable summary |
//! | `INTERLEAVE` | `0` | `1`: one scenario of `USERS` users at `RATE` whose requests go to the router or the shard by time slice (below) |
//! | `SLICE` | `5` | seconds per slice with `INTERLEAVE=1` |
//!
//! Exits with status 1 after the summary when a measured request failed or a
//! path had none (`Stats::failure`).
//!
//! With `INTERLEAVE=1` the box carries `RATE` at every moment, not twice
//! it: the measured time is cut into slices of `SLICE` seconds that go
//! router, direct, direct, router, then the mirror image
//! (`interleaved::path_of`), each request goes to the path of the slice it
//! is due in, and each path's rate is over its own slices' time. During the
//! warm-up the paths take turns by request.
//!
//! Goose records response times in whole milliseconds, too coarse for a
//! 0.3 ms budget, so each transaction also times its request (send to last
//! body byte) with `Instant` into an HDR histogram in microseconds; that is
//! what the summary printed at the end reports.
//!
//! Constant arrival: goose runs closed-loop users, so each user paces itself
//! on a fixed schedule (one request every `USERS / RATE` seconds, a random
//! phase per user). A request that is late against its schedule is sent at
//! once and counted as `late` (the run then no longer holds the offered rate).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use cluster_protocol::principal::Principal;
use goose::prelude::*;
use loadtest_goose::{env_num, env_or, interleaved, owner_principal, signed, Stats};
use serde::Deserialize;

#[derive(Debug, Clone, Deserialize)]
struct Fixture {
    token: String,
    user_id: String,
    key_id: String,
    database_id: String,
    table_id: String,
    shard_url: String,
}

struct Prepared {
    router_url: String,
    bearer: String,
    direct_url: String,
    principal: Principal,
}

struct Setup {
    fixtures: Vec<Prepared>,
    secret: Vec<u8>,
    interval: Duration,
    warmup: Duration,
    /// `Some(slice)` with `INTERLEAVE=1`.
    slice: Option<Duration>,
    /// Requests due later than this after the start are not counted
    /// (warm-up plus `RUN_TIME`; goose runs on for up to a second).
    until: Duration,
    started: Instant,
    router: Stats,
    direct: Stats,
    /// Round-robin position over the fixtures, per scenario.
    next_router: AtomicUsize,
    next_direct: AtomicUsize,
}

static SETUP: OnceLock<Setup> = OnceLock::new();

fn setup() -> &'static Setup {
    SETUP.get().expect("setup initialised in main")
}

/// Per-user pacing state: when the next request is due.
#[derive(Clone)]
struct Pace {
    next_at: Instant,
}

async fn start_pacing(user: &mut GooseUser) -> TransactionResult {
    let interval = setup().interval;
    let phase = interval.mul_f64(rand::random::<f64>());
    user.set_session_data(Pace {
        next_at: Instant::now() + phase,
    });
    Ok(())
}

/// Waits for this user's next slot; returns whether the slot was missed.
async fn wait_for_slot(user: &mut GooseUser) -> bool {
    let interval = setup().interval;
    let pace = user.get_session_data_unchecked_mut::<Pace>();
    let due = pace.next_at;
    pace.next_at += interval;
    let now = Instant::now();
    if due > now {
        tokio::time::sleep_until(due.into()).await;
        false
    } else {
        let late = now - due > interval;
        if late {
            // Do not try to catch up a backlog: restart the schedule from now.
            pace.next_at = now + interval;
        }
        late
    }
}

async fn send(user: &mut GooseUser, request: GooseRequest<'_>, stats: &Stats) -> TransactionResult {
    let started = Instant::now();
    let goose = user.request(request).await?;
    let ok = match goose.response {
        Ok(r) => {
            let status = r.status().as_u16();
            r.bytes().await.is_ok() && status == 200
        }
        Err(_) => false,
    };
    let s = setup();
    let since = started - s.started;
    stats.record(started, ok, since >= s.warmup && since < s.until);
    Ok(())
}

async fn via_router(user: &mut GooseUser) -> TransactionResult {
    let s = setup();
    if wait_for_slot(user).await {
        s.router.late.fetch_add(1, Ordering::Relaxed);
    }
    send_via_router(user).await
}

async fn send_via_router(user: &mut GooseUser) -> TransactionResult {
    let s = setup();
    let f = &s.fixtures[s.next_router.fetch_add(1, Ordering::Relaxed) % s.fixtures.len()];
    let builder = user
        .get_request_builder(&GooseMethod::Get, &f.router_url)?
        .header("authorization", &f.bearer);
    let request = GooseRequest::builder()
        .set_request_builder(builder)
        .name("router")
        .expect_status_code(200)
        .build();
    send(user, request, &s.router).await
}

async fn direct(user: &mut GooseUser) -> TransactionResult {
    let s = setup();
    if wait_for_slot(user).await {
        s.direct.late.fetch_add(1, Ordering::Relaxed);
    }
    send_direct(user).await
}

/// `INTERLEAVE=1`: the path of the slice the request is due in.
async fn by_slice(user: &mut GooseUser) -> TransactionResult {
    static SENT: AtomicUsize = AtomicUsize::new(0);
    let s = setup();
    let late = wait_for_slot(user).await;
    let slice = s.slice.expect("by_slice runs only with INTERLEAVE=1");
    let sent = SENT.fetch_add(1, Ordering::Relaxed) as u64;
    let router = interleaved::path_at(s.started.elapsed(), s.warmup, slice, sent)
        == interleaved::Path::Router;
    let stats = if router { &s.router } else { &s.direct };
    if late {
        stats.late.fetch_add(1, Ordering::Relaxed);
    }
    if router {
        send_via_router(user).await
    } else {
        send_direct(user).await
    }
}

async fn send_direct(user: &mut GooseUser) -> TransactionResult {
    let s = setup();
    let f = &s.fixtures[s.next_direct.fetch_add(1, Ordering::Relaxed) % s.fixtures.len()];
    let builder = signed(
        user.get_request_builder(&GooseMethod::Get, &f.direct_url)?,
        &f.principal,
        &s.secret,
    );
    let request = GooseRequest::builder()
        .set_request_builder(builder)
        .name("direct")
        .expect_status_code(200)
        .build();
    send(user, request, &s.direct).await
}

#[tokio::main]
async fn main() -> Result<(), GooseError> {
    let fixtures_path = env_or("FIXTURES", "../.fixtures.json");
    let router_url = env_or("ROUTER_URL", "http://127.0.0.1:8080")
        .trim_end_matches('/')
        .to_string();
    let secret = std::env::var("CLUSTER_SECRET").expect("CLUSTER_SECRET is required");
    let rate = env_num("RATE", 200).max(1);
    let users = env_num("USERS", 32).max(1);
    let run_time = env_num("RUN_TIME", 30);
    let warmup = env_num("WARMUP", 3);
    let summary_path = env_or("SUMMARY_JSON", "../results/goose-compare.json");
    let slice =
        (env_num("INTERLEAVE", 0) == 1).then(|| Duration::from_secs(env_num("SLICE", 5).max(1)));

    let text = std::fs::read_to_string(&fixtures_path)
        .unwrap_or_else(|e| panic!("{fixtures_path}: {e} (run loadtest/setup.sh first)"));
    let raw: Vec<Fixture> = serde_json::from_str(&text).expect("fixtures are a JSON array");
    assert!(!raw.is_empty(), "no fixtures in {fixtures_path}");
    let fixtures = raw
        .into_iter()
        .map(|f| Prepared {
            router_url: format!("{router_url}/api/tables/{}", f.table_id),
            bearer: format!("Bearer {}", f.token),
            direct_url: format!(
                "{}/api/tables/{}",
                f.shard_url.trim_end_matches('/'),
                f.table_id
            ),
            principal: owner_principal(f.user_id, f.key_id, f.database_id),
        })
        .collect::<Vec<_>>();
    let n = fixtures.len();

    SETUP
        .set(Setup {
            fixtures,
            secret: secret.into_bytes(),
            interval: Duration::from_secs_f64(users as f64 / rate as f64),
            warmup: Duration::from_secs(warmup),
            slice,
            until: Duration::from_secs(warmup + run_time),
            started: Instant::now(),
            router: Stats::default(),
            direct: Stats::default(),
            next_router: AtomicUsize::new(0),
            next_direct: AtomicUsize::new(0),
        })
        .ok()
        .expect("set once");

    let mode = if slice.is_some() {
        "interleaved"
    } else {
        "per scenario"
    };
    eprintln!(
        "goose: {n} keys, {rate} req/s {mode}, {users} users {mode}, {run_time}s (+{warmup}s warm-up discarded)"
    );
    let started = Instant::now();
    let attack = GooseAttack::initialize()?;
    let (attack, all_users) = match slice {
        Some(_) => (
            attack.register_scenario(
                scenario!("interleaved")
                    .register_transaction(transaction!(start_pacing).set_on_start())
                    .register_transaction(
                        transaction!(by_slice).set_name("GET /api/tables/{id} by slice"),
                    ),
            ),
            users,
        ),
        None => (
            attack
                .register_scenario(
                    scenario!("router")
                        .register_transaction(transaction!(start_pacing).set_on_start())
                        .register_transaction(
                            transaction!(via_router).set_name("GET /api/tables/{id} via router"),
                        ),
                )
                .register_scenario(
                    scenario!("direct")
                        .register_transaction(transaction!(start_pacing).set_on_start())
                        .register_transaction(
                            transaction!(direct).set_name("GET /api/tables/{id} direct to shard"),
                        ),
                ),
            2 * users,
        ),
    };
    attack
        .set_default(GooseDefault::Host, router_url.as_str())?
        .set_default(GooseDefault::Users, all_users as usize)?
        .set_default(GooseDefault::IncreaseRate, all_users.to_string().as_str())?
        .set_default(GooseDefault::RunTime, (run_time + warmup) as usize)?
        .set_default(GooseDefault::NoResetMetrics, true)?
        .execute()
        .await?;
    let measured = (started.elapsed().as_secs_f64() - warmup as f64).clamp(1.0, run_time as f64);
    // Interleaved: each path had the time of its own slices.
    let secs = |path| match slice {
        None => measured,
        Some(slice) => {
            interleaved::time_on(path, Duration::from_secs_f64(measured), slice).as_secs_f64()
        }
    };

    let s = setup();
    let router = s.router.summary("router", secs(interleaved::Path::Router));
    let direct = s.direct.summary("direct", secs(interleaved::Path::Direct));
    let added_p50 = router["p50_ms"].as_f64().unwrap() - direct["p50_ms"].as_f64().unwrap();
    let added_p99 = router["p99_ms"].as_f64().unwrap() - direct["p99_ms"].as_f64().unwrap();
    println!("\nGET /api/tables/{{id}}  goose  {rate} req/s {mode}  {run_time}s  keys={n}");
    println!("scenario  requests     req/s  failed   late   p50 ms   p90 ms   p99 ms   max ms");
    for v in [&router, &direct] {
        println!(
            "{:<8} {:>9} {:>9.1} {:>7} {:>6} {:>8.3} {:>8.3} {:>8.3} {:>8.3}",
            v["scenario"].as_str().unwrap(),
            v["requests"].as_u64().unwrap(),
            v["rate"].as_f64().unwrap(),
            v["failed"].as_u64().unwrap(),
            v["late"].as_u64().unwrap(),
            v["p50_ms"].as_f64().unwrap(),
            v["p90_ms"].as_f64().unwrap(),
            v["p99_ms"].as_f64().unwrap(),
            v["max_ms"].as_f64().unwrap(),
        );
    }
    println!("router adds: p50 {added_p50:.3} ms, p99 {added_p99:.3} ms");
    let out = serde_json::json!({
        "tool": "goose",
        "rate_per_scenario": rate,
        "interleaved_slice_s": slice.map(|d| d.as_secs()),
        "users_per_scenario": users,
        "run_time_s": run_time,
        "fixtures": n,
        "scenarios": { "router": router, "direct": direct },
        "added_ms": { "p50": added_p50, "p99": added_p99 },
    });
    if let Some(dir) = std::path::Path::new(&summary_path).parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    std::fs::write(&summary_path, serde_json::to_string_pretty(&out).unwrap())
        .expect("write summary");
    let failures: Vec<String> = [s.router.failure("router"), s.direct.failure("direct")]
        .into_iter()
        .flatten()
        .collect();
    if !failures.is_empty() {
        eprintln!("goose: the run failed: {}", failures.join("; "));
        std::process::exit(1);
    }
    Ok(())
}
