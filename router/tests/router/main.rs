//! The real router, in process, against the real local Redis (TEST_REDIS_URL,
//! default redis://127.0.0.1:6379) and a fake control plane and fake shards
//! written with axum. Every test uses its own key ids, users, tags and client
//! addresses, so tests run in parallel.

// Test code: an unwrap that fails is a failed test with its location.
#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use argon2::{password_hash::SaltString, Algorithm, Argon2, Params, PasswordHasher, Version};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::IntoResponse;
use axum::routing::{get, post};
use axum::{Json, Router};
use cluster_protocol::control::*;
use cluster_protocol::error::forbidden;
use cluster_protocol::ids::{new_tagged, new_untagged, random_token, Kind};
use cluster_protocol::principal::{
    body_matches, Presented, Principal, Target, HEADER_BODY_SHA256, HEADER_PRINCIPAL,
    HEADER_SIGNATURE, HEADER_SIGNATURE_VERSION, HEADER_TIMESTAMP, STREAMED_BODY,
};
use serde_json::{json, Value};

const SECRET: &str = "test-cluster-secret";
/// The router's `CONTROL_PLANE_ROUTER_TOKEN`: the fake control plane
/// answers nothing without it.
const ROUTER_TOKEN: &str = "test-router-token";
/// The router's `METRICS_TOKEN`: the one credential `/metrics` takes.
const METRICS_TOKEN: &str = "test-metrics-token";
/// An operator's `CONTROL_PLANE_TOKEN`: the router never holds it.
const ADMIN_TOKEN: &str = "test-admin-token";

fn redis_url() -> String {
    std::env::var("TEST_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into())
}

/// A connection to the test Redis, or to the test Redis Cluster when
/// TEST_REDIS_URL names one (`service_kit::redis_target`).
fn redis_conn() -> Box<dyn redis::ConnectionLike> {
    use service_kit::redis_target::Target;
    match Target::parse(&redis_url()).unwrap() {
        Target::Single(url) => {
            Box::new(redis::Client::open(url).unwrap().get_connection().unwrap())
        }
        Target::Cluster(seeds) => Box::new(
            redis::cluster::ClusterClient::new(seeds)
                .unwrap()
                .get_connection()
                .unwrap(),
        ),
    }
}

fn hash(secret: &str) -> String {
    let params = Params::new(1024, 1, 1, None).unwrap();
    let salt = SaltString::encode_b64(random_token(16).as_bytes()).unwrap();
    Argon2::new(Algorithm::Argon2id, Version::V0x13, params)
        .hash_password(secret.as_bytes(), &salt)
        .unwrap()
        .to_string()
}

#[derive(Default)]
struct Cp {
    keys: Mutex<HashMap<String, KeyRecord>>,
    access: Mutex<HashMap<String, UserAccess>>,
    /// tag -> list of placements to hand out in turn (the last one repeats).
    placements: Mutex<HashMap<String, Vec<Placement>>>,
    placement_calls: AtomicUsize,
    /// Shard URL new databases are allocated to.
    allocate_to: Mutex<Option<String>>,
    confirmed: AtomicUsize,
    /// Member-management calls: (method, path, body).
    member_calls: Mutex<Vec<(String, String, Value)>>,
    /// When set, every member-management call answers this (status, body).
    member_answer: Mutex<Option<(u16, Value)>>,
}

async fn cp_allocate(
    State(cp): State<Arc<Cp>>,
    Json(req): Json<AllocateRequest>,
) -> axum::response::Response {
    let Some(url) = cp.allocate_to.lock().unwrap().clone() else {
        return not_found();
    };
    let _ = req.user_id;
    let tag = random_token(5);
    Json(Allocation {
        database_id: new_tagged(Kind::Database, &tag),
        tag,
        position: 1,
        shard: ShardRef {
            name: "s1".into(),
            url,
        },
        epoch: 1,
        limits: Default::default(),
    })
    .into_response()
}

async fn cp_confirm(State(cp): State<Arc<Cp>>) -> Json<Value> {
    cp.confirmed.fetch_add(1, Ordering::SeqCst);
    Json(json!({"ok": true}))
}

async fn cp_key(State(cp): State<Arc<Cp>>, Path(id): Path<String>) -> axum::response::Response {
    let rec = cp.keys.lock().unwrap().get(&id).cloned();
    match rec {
        Some(r) => {
            let _: () = redis::cmd("SET")
                .arg(redis_keys::key_version(&r.user.id, &id))
                .arg(r.version)
                .query(&mut *redis_conn())
                .unwrap();
            Json(r).into_response()
        }
        None => not_found(),
    }
}

fn not_found() -> axum::response::Response {
    (
        StatusCode::NOT_FOUND,
        Json(json!({"error":{"code":"not_found","message":"Not found."}})),
    )
        .into_response()
}

async fn cp_access(State(cp): State<Arc<Cp>>, Path(id): Path<String>) -> axum::response::Response {
    let a = cp
        .access
        .lock()
        .unwrap()
        .get(&id)
        .cloned()
        .unwrap_or(UserAccess {
            user_id: id.clone(),
            version: 1,
            memberships: vec![],
            support: vec![],
        });
    let _: () = redis::cmd("SET")
        .arg(redis_keys::user_version(&id))
        .arg(a.version)
        .query(&mut *redis_conn())
        .unwrap();
    Json(a).into_response()
}

async fn cp_placement(
    State(cp): State<Arc<Cp>>,
    Path(tag): Path<String>,
) -> axum::response::Response {
    cp.placement_calls.fetch_add(1, Ordering::SeqCst);
    let mut map = cp.placements.lock().unwrap();
    match map.get_mut(&tag) {
        Some(list) if list.len() > 1 => Json(list.remove(0)).into_response(),
        Some(list) if !list.is_empty() => Json(list[0].clone()).into_response(),
        _ => not_found(),
    }
}

async fn cp_lookup(
    State(cp): State<Arc<Cp>>,
    Json(req): Json<PlacementLookup>,
) -> Json<Placements> {
    let map = cp.placements.lock().unwrap();
    let placements = map
        .values()
        .filter_map(|l| l.last().cloned())
        .filter(|p| req.database_ids.contains(&p.database_id))
        .collect();
    Json(Placements { placements })
}

async fn spawn(app: Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    addr
}

async fn spawn_cp(cp: Arc<Cp>) -> SocketAddr {
    let app = Router::new()
        .route(
            "/internal/health",
            get(|| async { Json(json!({"ok": true})) }),
        )
        .route("/internal/keys/{id}", get(cp_key))
        .route("/internal/users/{id}/access", get(cp_access))
        .route("/internal/placements/{tag}", get(cp_placement))
        .route("/internal/placements/lookup", post(cp_lookup))
        .route("/internal/databases/allocate", post(cp_allocate))
        .route("/internal/databases/{id}/confirm", post(cp_confirm))
        .route(
            "/internal/databases/{id}/members",
            get(members::cp_members).post(members::cp_members),
        )
        .route(
            "/internal/databases/{id}/members/{user_id}",
            axum::routing::patch(members::cp_members).delete(members::cp_members),
        )
        .route_layer(axum::middleware::from_fn(cp_requires_router_token))
        .with_state(cp);
    spawn(app).await
}

/// The real control plane's check, for the router tier: its token or 401.
async fn cp_requires_router_token(
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let expected = format!("Bearer {ROUTER_TOKEN}");
    let presented = req.headers().get("authorization").map(|v| v.as_bytes());
    if presented != Some(expected.as_bytes()) {
        let body = json!({"error": {"code": "unauthorized", "message": "wrong token"}});
        return (StatusCode::UNAUTHORIZED, Json(body)).into_response();
    }
    next.run(req).await
}

/// A fake shard: verifies the principal and echoes it; `misplaced` answers 421.
#[derive(Default)]
struct Shard {
    hits: AtomicUsize,
    misplaced: bool,
    /// Answers 421 to this many requests first.
    misplaced_first: AtomicUsize,
    databases: Vec<Value>,
}

async fn shard_any(
    State(s): State<Arc<Shard>>,
    method: axum::http::Method,
    headers: HeaderMap,
    uri: Uri,
    body: axum::body::Bytes,
) -> axum::response::Response {
    s.hits.fetch_add(1, Ordering::SeqCst);
    let h = |n: &str| headers.get(n).and_then(|v| v.to_str().ok());
    let now = chrono::Utc::now().timestamp();
    let presented = Presented {
        principal: h(HEADER_PRINCIPAL),
        timestamp: h(HEADER_TIMESTAMP),
        signature: h(HEADER_SIGNATURE),
        version: h(HEADER_SIGNATURE_VERSION),
        body_sha256: h(HEADER_BODY_SHA256),
    };
    let target = Target {
        method: method.as_str(),
        path_and_query: uri.path_and_query().map_or("/", |p| p.as_str()),
    };
    // A streamed body (uploads, imports) is signed with the marker, which
    // verify_request accepts on those routes only.
    let digest = h(HEADER_BODY_SHA256).unwrap_or_default();
    let verified = Principal::verify_request(SECRET.as_bytes(), presented, target, now)
        .ok()
        .filter(|_| digest == STREAMED_BODY || body_matches(digest, &body));
    let p = match verified {
        Some(p) => p,
        None => {
            return (
                StatusCode::UNAUTHORIZED,
                Json(json!({"error":{"code":"unauthorized","message":"bad principal"}})),
            )
                .into_response()
        }
    };
    let misplaced_now = s
        .misplaced_first
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
        .is_ok();
    if s.misplaced || misplaced_now {
        return (
            StatusCode::MISDIRECTED_REQUEST,
            Json(json!({"error":{"code":"not_found","message":"Not found."}})),
        )
            .into_response();
    }
    if uri.path() == "/internal/databases/lookup" {
        let req: Value = serde_json::from_slice(&body).unwrap();
        let ids: Vec<&str> = req["database_ids"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        let dbs: Vec<&Value> = s
            .databases
            .iter()
            .filter(|d| ids.contains(&d["id"].as_str().unwrap()))
            .collect();
        return Json(json!({"databases": dbs})).into_response();
    }
    Json(json!({
        "principal": p,
        "path": uri.to_string(),
        "authorization": h("authorization"),
        "traceparent": h("traceparent"),
        "body_sha256": digest,
        "body": String::from_utf8_lossy(&body),
    }))
    .into_response()
}

async fn spawn_shard(s: Arc<Shard>) -> String {
    let app = Router::new().fallback(shard_any).with_state(s);
    format!("http://{}", spawn(app).await)
}

struct Env {
    cp: Arc<Cp>,
    router: String,
    /// The internal metrics listener (`ROUTER_METRICS_LISTEN`), when served.
    metrics: Option<String>,
    http: reqwest::Client,
    address: String,
}

async fn env(key_limit: u64, anon_limit: u64) -> Env {
    env_with_redis(key_limit, anon_limit, redis_url()).await
}

async fn env_with_redis(key_limit: u64, anon_limit: u64, redis_url: String) -> Env {
    env_with_config(key_limit, anon_limit, redis_url, |_| {}).await
}

/// Like `env_with_redis`, with `tweak` applied to the router's configuration.
async fn env_with_config(
    key_limit: u64,
    anon_limit: u64,
    redis_url: String,
    tweak: impl FnOnce(&mut router::Config),
) -> Env {
    let cp = Arc::new(Cp::default());
    let cp_addr = spawn_cp(cp.clone()).await;
    let mut config = router::Config {
        listen: "127.0.0.1:0".parse().unwrap(),
        control_plane_url: format!("http://{cp_addr}"),
        control_plane_token: router::config::Secret(ROUTER_TOKEN.into()),
        metrics_token: Some(router::config::Secret(METRICS_TOKEN.into())),
        metrics_listen: "127.0.0.1:0".parse().unwrap(),
        redis_url,
        cluster_secret: router::config::Secret(SECRET.into()),
        key_limit_per_min: key_limit,
        address_limit_per_min: 3000,
        anon_limit_per_min: anon_limit,
        files_limit_per_min: 10_000,
        max_in_flight: 1000,
        pool_max_idle_per_host: 16,
        shutdown_grace: std::time::Duration::from_secs(1),
        hash_limits: router::gate::keys::HashLimits::default(),
        caches: router::config::CacheLimits::default(),
        threads: 1,
        connections: Default::default(),
        // One recorder for the whole test process: every router shares it.
        metrics: Some(service_kit::metrics::install_once()),
        accounts: Default::default(),
    };
    tweak(&mut config);
    // The internal metrics listener, as `cores::run` binds it.
    let metrics = match (&config.metrics, &config.metrics_token) {
        (Some(handle), Some(token)) => {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            let page = router::edge::metrics::Page::new(handle.clone(), token.clone());
            tokio::spawn(page.serve(listener));
            Some(format!("http://{addr}"))
        }
        _ => None,
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(router::run(config, listener, std::future::pending()));
    let n = || rand::random::<u8>();
    Env {
        cp,
        router: format!("http://{addr}"),
        metrics,
        http: reqwest::Client::new(),
        address: format!("10.{}.{}.{}", n(), n(), n()),
    }
}

impl Env {
    /// Registers a user with one key; returns (user_id, key_id, token).
    fn user_with_key(&self, access: Access, databases: DatabaseScope) -> (String, String, String) {
        let user_id = new_untagged(Kind::User);
        let key_id = new_untagged(Kind::Key);
        let secret = random_token(32);
        let rec = KeyRecord {
            id: key_id.clone(),
            name: "test key".into(),
            user: User {
                id: user_id.clone(),
                email: format!("{user_id}@example.com"),
                name: "Tess".into(),
                suspended: false,
            },
            secret_hash: hash(&secret),
            access,
            databases,
            created_at: chrono::Utc::now(),
            version: 1,
            requests_per_minute: None,
        };
        self.cp.keys.lock().unwrap().insert(key_id.clone(), rec);
        (user_id, key_id.clone(), format!("{key_id}.{secret}"))
    }

    fn member(&self, user_id: &str, database_id: &str, role: Role) {
        let mut access = self.cp.access.lock().unwrap();
        let a = access.entry(user_id.to_string()).or_insert(UserAccess {
            user_id: user_id.to_string(),
            version: 1,
            memberships: vec![],
            support: vec![],
        });
        a.memberships.push(Membership {
            database_id: database_id.to_string(),
            role,
        });
        a.version += 1;
    }

    /// A database on the given shards (handed out in turn); returns (db id, tag).
    fn database(&self, shard_urls: &[&str]) -> (String, String) {
        let tag = random_token(5);
        let db = new_tagged(Kind::Database, &tag);
        let list = shard_urls
            .iter()
            .enumerate()
            .map(|(i, url)| Placement {
                database_id: db.clone(),
                tag: tag.clone(),
                shard: ShardRef {
                    name: format!("s{i}"),
                    url: url.to_string(),
                },
                epoch: i as i64 + 1,
                state: DatabaseState::Active,
                hold_until: None,
            })
            .collect();
        self.cp.placements.lock().unwrap().insert(tag.clone(), list);
        (db, tag)
    }

    async fn get(&self, path: &str, token: Option<&str>) -> reqwest::Response {
        let mut req = self
            .http
            .get(format!("{}{path}", self.router))
            .header("x-forwarded-for", format!("203.0.113.9, {}", self.address));
        if let Some(t) = token {
            req = req.header("authorization", format!("Bearer {t}"));
        }
        req.send().await.unwrap()
    }
}

fn header(r: &reqwest::Response, name: &str) -> Option<String> {
    r.headers()
        .get(name)
        .map(|v| v.to_str().unwrap().to_string())
}

mod bounded;
mod gate;
mod help;
mod keys;
mod liveness;
mod logs;
mod members;
mod metrics;
mod moves;
mod share;
mod streamed;
