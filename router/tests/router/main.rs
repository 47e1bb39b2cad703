//! The real router, in process, against the real local Redis (TEST_REDIS_URL,
//! default redis://127.0.0.1:6379) and a fake control plane and fake shards
//! written with axum. Every test uses its own key ids, users, tags and client
//! addresses, so tests run in parallel.

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
/// The routers' `CONTROL_PLANE_TOKEN`: it also opens `/metrics`.
const ADMIN_TOKEN: &str = "test-admin-token";

fn redis_url() -> String {
    std::env::var("TEST_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into())
}

fn redis_conn() -> redis::Connection {
    redis::Client::open(redis_url())
        .unwrap()
        .get_connection()
        .unwrap()
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
                .arg(format!("cluster:key:{id}"))
                .arg(r.version)
                .query(&mut redis_conn())
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
        .arg(format!("cluster:user:{id}"))
        .arg(a.version)
        .query(&mut redis_conn())
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
        .with_state(cp);
    spawn(app).await
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
        control_plane_token: router::config::Secret(ADMIN_TOKEN.into()),
        redis_url,
        cluster_secret: router::config::Secret(SECRET.into()),
        key_limit_per_min: key_limit,
        address_limit_per_min: 3000,
        anon_limit_per_min: anon_limit,
        files_limit_per_min: 10_000,
        max_in_flight: 1000,
        pool_max_idle_per_host: 16,
        shutdown_grace: std::time::Duration::from_secs(1),
        hash_limits: router::keys::HashLimits::default(),
        threads: 1,
        connections: Default::default(),
        // One recorder for the whole test process: every router shares it.
        metrics: Some(cluster_protocol::metrics::install_once()),
    };
    tweak(&mut config);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(router::run(config, listener, std::future::pending()));
    let n = || rand::random::<u8>();
    Env {
        cp,
        router: format!("http://{addr}"),
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

#[tokio::test]
async fn every_401_is_identical_and_unstamped() {
    let e = env(100, 1000).await;
    let (_, key_id, token) = e.user_with_key(Access::ReadWrite, DatabaseScope::All);
    let unknown = format!("{}.whatever", new_untagged(Kind::Key));
    let wrong = format!("{key_id}.wrongsecret");
    let mut bodies = Vec::new();
    for t in [
        None,
        Some("garbage"),
        Some(unknown.as_str()),
        Some(wrong.as_str()),
    ] {
        let r = e.get("/api/meta/whoami", t).await;
        assert_eq!(r.status(), 401);
        assert!(header(&r, "x-ratelimit-limit").is_none());
        bodies.push(r.text().await.unwrap());
    }
    assert!(bodies.iter().all(|b| b == &bodies[0]));
    let v: Value = serde_json::from_str(&bodies[0]).unwrap();
    assert_eq!(v["error"]["code"], "unauthorized");
    assert_eq!(
        v["error"]["message"],
        cluster_protocol::error::UNAUTHORIZED_MESSAGE
    );
    // The right secret still works after wrong ones, and a wrong one after it is 401.
    assert_eq!(e.get("/api/meta/whoami", Some(&token)).await.status(), 200);
    assert_eq!(e.get("/api/meta/whoami", Some(&wrong)).await.status(), 401);
}

#[tokio::test]
async fn key_budget_headers_429_and_two_keys_two_budgets() {
    let e = env(5, 1000).await;
    let (_, _, token) = e.user_with_key(Access::ReadWrite, DatabaseScope::All);
    let (_, _, other) = e.user_with_key(Access::ReadWrite, DatabaseScope::All);
    for expected in (0..5).rev() {
        let r = e.get("/api/meta/whoami", Some(&token)).await;
        assert_eq!(r.status(), 200);
        assert_eq!(header(&r, "x-ratelimit-limit").as_deref(), Some("5"));
        assert_eq!(
            header(&r, "x-ratelimit-remaining"),
            Some(expected.to_string())
        );
    }
    let r = e.get("/api/meta/whoami", Some(&token)).await;
    assert_eq!(r.status(), 429);
    let retry: u64 = header(&r, "retry-after").unwrap().parse().unwrap();
    // At most the rest of this minute's bucket plus the time the next one
    // needs for 5 old requests to decay below 4 (a fifth of the window):
    // 72 s when all five fell at the very start of a bucket.
    assert!((1..=72).contains(&retry), "retry-after {retry}");
    assert_eq!(header(&r, "x-ratelimit-limit").as_deref(), Some("5"));
    assert_eq!(header(&r, "x-ratelimit-remaining").as_deref(), Some("0"));
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"]["code"], "rate_limited");
    assert_eq!(
        v["error"]["message"],
        format!("Too many requests. Retry in about {retry}s.")
    );
    // A 404 for a verified key is stamped too; the other key has its own budget.
    let r = e.get("/api/nothing/here", Some(&other)).await;
    assert_eq!(r.status(), 404);
    assert_eq!(header(&r, "x-ratelimit-remaining").as_deref(), Some("4"));
}

#[tokio::test]
async fn anonymous_shield_per_address() {
    let e = env(100, 4).await;
    for _ in 0..4 {
        assert_eq!(e.get("/api/databases", None).await.status(), 401);
    }
    let r = e.get("/api/databases", None).await;
    assert_eq!(r.status(), 429);
    assert!(header(&r, "retry-after").is_some());
    assert!(header(&r, "x-ratelimit-limit").is_none());
    // Another address (last x-forwarded-for entry) has its own shield.
    let r = e
        .http
        .get(format!("{}/api/databases", e.router))
        .header(
            "x-forwarded-for",
            format!("{}, 192.0.2.{}", e.address, rand::random::<u8>()),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    // Health counts against the address like every request.
    assert_eq!(e.get("/api/health", None).await.status(), 429);
}

#[tokio::test]
async fn deleted_liveness_means_401_on_the_next_request() {
    let e = env(100, 1000).await;
    let (_, key_id, token) = e.user_with_key(Access::ReadWrite, DatabaseScope::All);
    assert_eq!(e.get("/api/meta/whoami", Some(&token)).await.status(), 200);
    assert_eq!(e.get("/api/meta/whoami", Some(&token)).await.status(), 200);
    // Revoke: the control plane forgets the key and deletes its liveness.
    e.cp.keys.lock().unwrap().remove(&key_id);
    let _: () = redis::cmd("DEL")
        .arg(format!("cluster:key:{key_id}"))
        .query(&mut redis_conn())
        .unwrap();
    assert_eq!(e.get("/api/meta/whoami", Some(&token)).await.status(), 401);
}

#[tokio::test]
async fn whoami_shape_and_last_used() {
    let e = env(100, 1000).await;
    let (user_id, key_id, token) = e.user_with_key(
        Access::ReadOnly,
        DatabaseScope::Only(vec!["db_Ab3dZ1234567".into()]),
    );
    let v: Value = e
        .get("/api/meta/whoami", Some(&token))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(v["user"]["id"], user_id);
    assert_eq!(v["key"]["id"], key_id);
    assert_eq!(v["key"]["access"], "read_only");
    assert_eq!(v["key"]["databases"], json!(["db_Ab3dZ1234567"]));
    assert!(v["key"]["created_at"].as_str().unwrap().ends_with('Z'));
    let v: Value = e
        .get("/api/meta/whoami", Some(&token))
        .await
        .json()
        .await
        .unwrap();
    assert!(v["key"]["last_used_at"]
        .as_str()
        .is_some_and(|s| s.ends_with('Z')));
}

#[tokio::test]
async fn non_members_and_unknown_tags_never_reach_a_shard() {
    let e = env(100, 1000).await;
    let shard = Arc::new(Shard::default());
    let url = spawn_shard(shard.clone()).await;
    let (_, tag) = e.database(&[&url]);
    let (_, _, token) = e.user_with_key(Access::ReadWrite, DatabaseScope::All);
    for path in [
        format!("/api/tables/{}", new_tagged(Kind::Table, &tag)),
        format!("/api/tables/{}", new_tagged(Kind::Table, &random_token(5))),
        "/api/tables/tbl_bad".to_string(),
    ] {
        let r = e.get(&path, Some(&token)).await;
        assert_eq!(r.status(), 404, "{path}");
        let v: Value = r.json().await.unwrap();
        assert_eq!(v["error"]["code"], "not_found");
    }
    assert_eq!(shard.hits.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn members_reach_the_shard_with_a_verified_principal() {
    let e = env(100, 1000).await;
    let shard = Arc::new(Shard::default());
    let url = spawn_shard(shard.clone()).await;
    let (db, tag) = e.database(&[&url]);
    let (user_id, key_id, token) = e.user_with_key(Access::ReadWrite, DatabaseScope::All);
    e.member(&user_id, &db, Role::Editor);
    let path = format!(
        "/api/tables/{}/records?page_size=5",
        new_tagged(Kind::Table, &tag)
    );
    let r = e.get(&path, Some(&token)).await;
    assert_eq!(r.status(), 200);
    assert_eq!(header(&r, "x-ratelimit-limit").as_deref(), Some("100"));
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["path"], path);
    assert_eq!(v["principal"]["role"], "editor");
    assert_eq!(v["principal"]["database_id"], db);
    assert_eq!(v["principal"]["key_id"], key_id);
    assert_eq!(v["authorization"], Value::Null);
    assert!(v["traceparent"]
        .as_str()
        .is_some_and(|t| t.starts_with("00-")));

    // A narrowed key away from the database: 404.
    let (uid2, _, narrowed) = e.user_with_key(Access::ReadWrite, DatabaseScope::Only(vec![]));
    e.member(&uid2, &db, Role::Owner);
    assert_eq!(e.get(&path, Some(&narrowed)).await.status(), 404);
    assert_eq!(shard.hits.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn misplaced_answers_are_retried_on_the_fresh_placement() {
    let e = env(100, 1000).await;
    let old = Arc::new(Shard {
        misplaced: true,
        ..Shard::default()
    });
    let new = Arc::new(Shard::default());
    let (old_url, new_url) = (
        spawn_shard(old.clone()).await,
        spawn_shard(new.clone()).await,
    );
    let (db, tag) = e.database(&[&old_url, &new_url]);
    let (user_id, _, token) = e.user_with_key(Access::ReadWrite, DatabaseScope::All);
    e.member(&user_id, &db, Role::Viewer);
    let r = e
        .http
        .post(format!(
            "{}/api/tables/{}/records/list",
            e.router,
            new_tagged(Kind::Table, &tag)
        ))
        .header("authorization", format!("Bearer {token}"))
        .header("x-forwarded-for", &e.address)
        .json(&json!({"page_size": 1}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["principal"]["epoch"], 2);
    assert_eq!(v["body"], r#"{"page_size":1}"#);
    assert_eq!(old.hits.load(Ordering::SeqCst), 1);
    assert_eq!(new.hits.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn import_skips_the_membership_check() {
    let e = env(100, 1000).await;
    let shard = Arc::new(Shard::default());
    let url = spawn_shard(shard.clone()).await;
    let (db, _) = e.database(&[&url]);
    let (_, _, token) = e.user_with_key(Access::ReadWrite, DatabaseScope::All);
    let r = e
        .http
        .post(format!("{}/api/databases/{db}/import", e.router))
        .header("authorization", format!("Bearer {token}"))
        .header("x-forwarded-for", &e.address)
        .body("file")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["principal"]["role"], Value::Null);
    assert_eq!(v["body"], "file", "streamed through whole");
    assert_eq!(v["body_sha256"], STREAMED_BODY);
    assert_eq!(
        e.get(&format!("/api/databases/{db}/tables"), Some(&token))
            .await
            .status(),
        404
    );
}

#[tokio::test]
async fn database_list_fans_out_and_merges() {
    let e = env(100, 1000).await;
    let (user_id, _, token) = e.user_with_key(Access::ReadWrite, DatabaseScope::All);
    let mk = |id: &str, position: i64, created: &str| json!({"id": id, "name": id, "position": position, "created_at": created});
    let (tag_a, tag_b, tag_c) = (random_token(5), random_token(5), random_token(5));
    let (a, b, c) = (
        new_tagged(Kind::Database, &tag_a),
        new_tagged(Kind::Database, &tag_b),
        new_tagged(Kind::Database, &tag_c),
    );
    let s1 = Arc::new(Shard {
        databases: vec![mk(&a, 2, "2026-01-01T00:00:00.000Z")],
        ..Shard::default()
    });
    let s2 = Arc::new(Shard {
        databases: vec![
            mk(&b, 1, "2026-01-02T00:00:00.000Z"),
            mk(&c, 1, "2026-01-01T00:00:00.000Z"),
        ],
        ..Shard::default()
    });
    let (u1, u2) = (spawn_shard(s1).await, spawn_shard(s2).await);
    for (db, tag, url) in [(&a, &tag_a, &u1), (&b, &tag_b, &u2), (&c, &tag_c, &u2)] {
        let p = Placement {
            database_id: db.clone(),
            tag: tag.clone(),
            shard: ShardRef {
                name: url.clone(),
                url: url.clone(),
            },
            epoch: 1,
            state: DatabaseState::Active,
            hold_until: None,
        };
        e.cp.placements.lock().unwrap().insert(tag.clone(), vec![p]);
        e.member(&user_id, db, Role::Viewer);
    }
    let r = e.get("/api/databases", Some(&token)).await;
    assert_eq!(r.status(), 200);
    let v: Value = r.json().await.unwrap();
    let ids: Vec<&str> = v["databases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, vec![c.as_str(), b.as_str(), a.as_str()]);
}

mod keys;
mod liveness;
mod members;
mod metrics;
mod moves;
mod streamed;

#[tokio::test]
async fn share_reads_need_no_key_and_carry_a_share_principal() {
    let e = env(100, 3).await;
    let old = Arc::new(Shard {
        misplaced_first: AtomicUsize::new(1),
        ..Shard::default()
    });
    let url = spawn_shard(old.clone()).await;
    let (db, tag) = e.database(&[&url]);
    let token = cluster_protocol::ids::new_share_token(&tag);
    let path = format!("/api/share/{token}/records?page_size=2");

    // No key: forwarded (after one 421 retried) with a share principal.
    let r = e.get(&path, None).await;
    assert_eq!(r.status(), 200);
    assert!(header(&r, "x-ratelimit-limit").is_none());
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["path"], path);
    assert_eq!(v["principal"]["share"], true);
    assert_eq!(v["principal"]["database_id"], db);
    assert_eq!(v["principal"]["user_id"], "");
    assert_eq!(v["principal"]["key_id"], "");
    assert!(v["principal"].get("role").is_none());
    assert_eq!(v["authorization"], Value::Null);
    assert_eq!(old.hits.load(Ordering::SeqCst), 2);

    // A caller's key is not forwarded, and not verified either.
    let mut req = e
        .http
        .get(format!("{}{path}", e.router))
        .header("x-forwarded-for", format!("203.0.113.9, {}", e.address))
        .header("authorization", "Bearer key_nothingatall.nope");
    req = req.header("cookie", "session=1");
    let r = req.send().await.unwrap();
    assert_eq!(r.status(), 200);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["authorization"], Value::Null);
    assert_eq!(v["principal"]["share"], true);

    // Malformed tokens and unknown tags never reach a shard; other methods
    // are not the share read.
    let hits = old.hits.load(Ordering::SeqCst);
    let other = Env {
        address: format!("10.9.{}.{}", rand::random::<u8>(), rand::random::<u8>()),
        ..env(100, 100).await
    };
    for bad in [
        "/api/share/short/records".to_string(),
        format!(
            "/api/share/{}/records",
            cluster_protocol::ids::new_share_token("zZzZz")
        ),
    ] {
        let r = other.get(&bad, None).await;
        assert_eq!(r.status(), 404, "{bad}");
    }
    let r = other
        .http
        .post(format!("{}{path}", other.router))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401, "not a share read: the keyed gate answers");
    assert_eq!(old.hits.load(Ordering::SeqCst), hits);

    // The anonymous shield (3 a minute here; two spent above without a
    // bearer... one with): the next ones are 429.
    let mut statuses = Vec::new();
    for _ in 0..3 {
        statuses.push(e.get(&path, None).await.status().as_u16());
    }
    assert!(statuses.contains(&429), "{statuses:?}");
}
