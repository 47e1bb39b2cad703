//! The router's connection hygiene, in process: a request body that does
//! not arrive in time is cut off with 408 and frees its in-flight slot, an
//! idle keep-alive connection is closed, the connection cap holds, the
//! budget of buffered body bytes refuses a body past it with 503 and gives
//! its bytes back, and a shard that never answers earns a 504. Clients are raw TCP sockets where
//! the test must control the bytes and their timing. The control plane and
//! the shards are fakes; Redis is the test Redis (TEST_REDIS_URL).

// Test code: an unwrap that fails is a failed test with its location.
#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use argon2::{password_hash::SaltString, Algorithm, Argon2, Params, PasswordHasher, Version};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use cluster_protocol::control::*;
use cluster_protocol::ids::{new_tagged, new_untagged, random_token, Kind};
use router::config::ConnectionLimits;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Bounds every wait, so a missing limit fails the test instead of hanging it.
const PATIENCE: Duration = Duration::from_secs(15);

fn redis_url() -> String {
    std::env::var("TEST_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into())
}

fn redis_set(key: String, version: i64) {
    use service_kit::redis_target::Target;
    let mut conn: Box<dyn redis::ConnectionLike> = match Target::parse(&redis_url()).unwrap() {
        Target::Single(url) => {
            Box::new(redis::Client::open(url).unwrap().get_connection().unwrap())
        }
        Target::Cluster(seeds) => Box::new(
            redis::cluster::ClusterClient::new(seeds)
                .unwrap()
                .get_connection()
                .unwrap(),
        ),
    };
    let _: () = redis::cmd("SET")
        .arg(key)
        .arg(version)
        .query(&mut *conn)
        .unwrap();
}

/// The fake control plane: one key, its user's memberships, placements.
#[derive(Default)]
struct Cp {
    keys: Mutex<HashMap<String, KeyRecord>>,
    access: Mutex<HashMap<String, UserAccess>>,
    placements: Mutex<HashMap<String, Placement>>,
}

fn not_found() -> Response {
    let body = json!({"error":{"code":"not_found","message":"Not found."}});
    (StatusCode::NOT_FOUND, Json(body)).into_response()
}

async fn cp_key(State(cp): State<Arc<Cp>>, Path(id): Path<String>) -> Response {
    let Some(rec) = cp.keys.lock().unwrap().get(&id).cloned() else {
        return not_found();
    };
    redis_set(
        cluster_protocol::control::redis_keys::key_version(&rec.user.id, &id),
        rec.version,
    );
    Json(rec).into_response()
}

async fn cp_access(State(cp): State<Arc<Cp>>, Path(id): Path<String>) -> Response {
    let Some(access) = cp.access.lock().unwrap().get(&id).cloned() else {
        return not_found();
    };
    redis_set(
        cluster_protocol::control::redis_keys::user_version(&id),
        access.version,
    );
    Json(access).into_response()
}

async fn cp_placement(State(cp): State<Arc<Cp>>, Path(tag): Path<String>) -> Response {
    match cp.placements.lock().unwrap().get(&tag).cloned() {
        Some(p) => Json(p).into_response(),
        None => not_found(),
    }
}

async fn spawn(app: Router) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    addr
}

/// A shard that answers every request with 200 once it has read the body.
async fn answering_shard() -> String {
    let app = Router::new()
        .fallback(|body: axum::body::Bytes| async move { Json(json!({ "received": body.len() })) });
    format!("http://{}", spawn(app).await)
}

/// A shard that accepts connections and never answers.
async fn silent_shard() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });
    format!("http://{addr}")
}

struct Env {
    router: SocketAddr,
    /// `Bearer` token of a member (editor) of `table`'s database.
    token: String,
    /// A table id of that database.
    table: String,
    address: String,
}

/// A router with `limits` and `max_in_flight`, one member's key, and one
/// database placed on `shard_url`.
async fn env(limits: ConnectionLimits, max_in_flight: usize, shard_url: &str) -> Env {
    let cp = Arc::new(Cp::default());
    let user_id = new_untagged(Kind::User);
    let key_id = new_untagged(Kind::Key);
    let secret = random_token(32);
    let params = Params::new(1024, 1, 1, None).unwrap();
    let salt = SaltString::encode_b64(random_token(16).as_bytes()).unwrap();
    let secret_hash = Argon2::new(Algorithm::Argon2id, Version::V0x13, params)
        .hash_password(secret.as_bytes(), &salt)
        .unwrap()
        .to_string();
    let tag = random_token(5);
    let database_id = new_tagged(Kind::Database, &tag);
    cp.keys.lock().unwrap().insert(
        key_id.clone(),
        KeyRecord {
            id: key_id.clone(),
            name: "edge".into(),
            user: User {
                id: user_id.clone(),
                email: format!("{user_id}@example.com"),
                name: "Edge".into(),
                suspended: false,
            },
            secret_hash,
            access: Access::ReadWrite,
            databases: DatabaseScope::All,
            created_at: chrono::Utc::now(),
            version: 1,
            requests_per_minute: None,
        },
    );
    cp.access.lock().unwrap().insert(
        user_id.clone(),
        UserAccess {
            user_id,
            version: 1,
            memberships: vec![Membership {
                database_id: database_id.clone(),
                role: Role::Editor,
            }],
            support: vec![],
        },
    );
    cp.placements.lock().unwrap().insert(
        tag.clone(),
        Placement {
            database_id,
            tag: tag.clone(),
            shard: ShardRef {
                name: "s1".into(),
                url: shard_url.to_string(),
            },
            epoch: 1,
            state: DatabaseState::Active,
            hold_until: None,
        },
    );
    let cp_app = Router::new()
        .route(
            "/internal/health",
            get(|| async { Json(json!({"ok": true})) }),
        )
        .route("/internal/keys/{id}", get(cp_key))
        .route("/internal/users/{id}/access", get(cp_access))
        .route("/internal/placements/{tag}", get(cp_placement))
        .with_state(cp);
    let cp_addr = spawn(cp_app).await;
    let config = router::Config {
        listen: "127.0.0.1:0".parse().unwrap(),
        control_plane_url: format!("http://{cp_addr}"),
        control_plane_token: router::config::Secret("t".into()),
        metrics_token: None,
        metrics_listen: "127.0.0.1:0".parse().unwrap(),
        redis_url: redis_url(),
        cluster_secret: router::config::Secret("s".into()),
        key_limit_per_min: 10_000,
        address_limit_per_min: 10_000,
        anon_limit_per_min: 10_000,
        files_limit_per_min: 10_000,
        max_in_flight,
        pool_max_idle_per_host: 16,
        shutdown_grace: Duration::from_secs(1),
        hash_limits: router::gate::keys::HashLimits::default(),
        caches: router::config::CacheLimits::default(),
        threads: 1,
        connections: limits,
        metrics: None,
        accounts: Default::default(),
    };
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let router = listener.local_addr().unwrap();
    tokio::spawn(router::run(config, listener, std::future::pending()));
    let n = || rand::random::<u8>();
    Env {
        router,
        token: format!("{key_id}.{secret}"),
        table: new_tagged(Kind::Table, &tag),
        address: format!("10.{}.{}.{}", n(), n(), n()),
    }
}

impl Env {
    /// The head of a request to the table's records, with `extra` headers.
    fn head(&self, method: &str, extra: &str) -> String {
        format!(
            "{method} /api/tables/{}/records HTTP/1.1\r\nhost: router\r\n\
             authorization: Bearer {}\r\nx-forwarded-for: {}\r\n{extra}\r\n",
            self.table, self.token, self.address
        )
    }

    async fn connect(&self) -> TcpStream {
        TcpStream::connect(self.router).await.unwrap()
    }

    /// A whole request on a connection of its own; the status and body.
    async fn get_records(&self) -> (u16, Value) {
        let mut s = self.connect().await;
        s.write_all(self.head("GET", "connection: close\r\n").as_bytes())
            .await
            .unwrap();
        read_response(&mut s).await.expect("a response")
    }
}

/// Reads one response (head, then a `content-length` body); `None` when
/// the connection closed first. Panics past [`PATIENCE`].
async fn read_response(s: &mut TcpStream) -> Option<(u16, Value)> {
    read_reply(s).await.map(|(status, _, body)| (status, body))
}

/// [`read_response`] with the response head (lowercased).
async fn read_reply(s: &mut TcpStream) -> Option<(u16, String, Value)> {
    let read = async {
        let mut buf = Vec::new();
        let mut chunk = [0u8; 4096];
        loop {
            if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&buf[..end]).to_lowercase();
                let length: usize = head
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length:"))
                    .map_or(0, |v| v.trim().parse().unwrap());
                if buf.len() >= end + 4 + length {
                    let status = head[9..12].parse().unwrap();
                    let body = serde_json::from_slice(&buf[end + 4..end + 4 + length])
                        .unwrap_or(Value::Null);
                    return Some((status, head, body));
                }
            }
            let n = s.read(&mut chunk).await.unwrap_or(0);
            if n == 0 {
                return None;
            }
            buf.extend_from_slice(&chunk[..n]);
        }
    };
    tokio::time::timeout(PATIENCE, read)
        .await
        .expect("the router answered or closed within the test's patience")
}

/// Whether the router closes `s` (no bytes, end of stream) within [`PATIENCE`].
async fn closed_by_router(s: &mut TcpStream) -> bool {
    let mut byte = [0u8; 1];
    matches!(
        tokio::time::timeout(PATIENCE, s.read(&mut byte)).await,
        Ok(Ok(0)) | Ok(Err(_))
    )
}

fn limits() -> ConnectionLimits {
    ConnectionLimits {
        body_timeout: Duration::from_secs(1),
        ..ConnectionLimits::default()
    }
}

/// Sends a head announcing `length` bytes and only part of the body; the
/// router answers 408, closes the connection, and its one in-flight slot
/// serves the next request.
async fn slow_body_is_cut_off(length: usize) {
    let shard = answering_shard().await;
    let e = env(limits(), 1, &shard).await;
    let mut slow = e.connect().await;
    let head = e.head(
        "POST",
        &format!("content-type: application/json\r\ncontent-length: {length}\r\n"),
    );
    slow.write_all(head.as_bytes()).await.unwrap();
    slow.write_all(&vec![b' '; 1000]).await.unwrap();

    let (status, body) = read_response(&mut slow).await.expect("an answer");
    assert_eq!(status, 408, "{body}");
    assert_eq!(body["error"]["code"], "request_timeout", "{body}");
    assert!(closed_by_router(&mut slow).await);
    // The slow client still holds its socket; the slot is free all the same.
    let (status, body) = e.get_records().await;
    assert_eq!(status, 200, "{body}");
}

#[tokio::test]
async fn a_slow_buffered_body_is_cut_off_with_408_and_frees_its_slot() {
    slow_body_is_cut_off(10_000).await;
}

#[tokio::test]
async fn a_slow_streamed_body_is_cut_off_with_408_and_frees_its_slot() {
    // Above the 64 KiB retry buffer: streamed to the shard as it arrives.
    slow_body_is_cut_off(200_000).await;
}

#[tokio::test]
async fn an_idle_keep_alive_connection_is_closed() {
    let shard = answering_shard().await;
    let limits = ConnectionLimits {
        idle_timeout: Duration::from_secs(1),
        ..ConnectionLimits::default()
    };
    let e = env(limits, 100, &shard).await;
    let mut s = e.connect().await;
    s.write_all(e.head("GET", "").as_bytes()).await.unwrap();
    let (status, body) = read_response(&mut s).await.expect("an answer");
    assert_eq!(status, 200, "{body}");
    // Kept alive, then idle: closed by the router.
    assert!(closed_by_router(&mut s).await);
}

#[tokio::test]
async fn connections_beyond_the_cap_wait_for_one_to_close() {
    let shard = answering_shard().await;
    let limits = ConnectionLimits {
        max_connections: 2,
        ..ConnectionLimits::default()
    };
    let e = env(limits, 100, &shard).await;
    let mut open = Vec::new();
    for _ in 0..2 {
        let mut s = e.connect().await;
        s.write_all(e.head("GET", "").as_bytes()).await.unwrap();
        let (status, _) = read_response(&mut s).await.expect("an answer");
        assert_eq!(status, 200);
        open.push(s);
    }
    let mut third = e.connect().await;
    third.write_all(e.head("GET", "").as_bytes()).await.unwrap();
    let mut byte = [0u8; 1];
    let early = tokio::time::timeout(Duration::from_millis(500), third.read(&mut byte)).await;
    assert!(early.is_err(), "a third connection was served at once");

    drop(open.pop());
    let (status, body) = read_response(&mut third).await.expect("an answer");
    assert_eq!(status, 200, "{body}");
}

#[tokio::test]
async fn a_shard_that_does_not_answer_earns_a_504() {
    let shard = silent_shard().await;
    let limits = ConnectionLimits {
        shard_timeout: Duration::from_millis(500),
        ..ConnectionLimits::default()
    };
    let e = env(limits, 100, &shard).await;
    let (status, body) = e.get_records().await;
    assert_eq!(status, 504, "{body}");
    assert_eq!(body["error"]["code"], "gateway_timeout", "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("did not answer in time"),
        "{body}"
    );
}

/// A POST of `length` bytes to the table's records, sent whole on a
/// connection of its own: status, head and body of the answer.
async fn post_whole(e: &Env, length: usize) -> (u16, String, Value) {
    let mut s = e.connect().await;
    let head = e.head(
        "POST",
        &format!(
            "content-type: application/json\r\ncontent-length: {length}\r\nconnection: close\r\n"
        ),
    );
    s.write_all(head.as_bytes()).await.unwrap();
    s.write_all(&vec![b' '; length]).await.unwrap();
    read_reply(&mut s).await.expect("an answer")
}

/// A chunked POST whose first `length` bytes are sent, then nothing more.
async fn slow_chunked(e: &Env, length: usize) -> TcpStream {
    let mut slow = e.connect().await;
    let head = e.head(
        "POST",
        "content-type: application/json\r\ntransfer-encoding: chunked\r\n",
    );
    slow.write_all(head.as_bytes()).await.unwrap();
    slow.write_all(format!("{length:x}\r\n").as_bytes())
        .await
        .unwrap();
    slow.write_all(&vec![b' '; length]).await.unwrap();
    slow.write_all(b"\r\n").await.unwrap();
    slow
}

#[tokio::test]
async fn bodies_past_the_buffered_byte_budget_are_refused_with_503_until_given_back() {
    let shard = answering_shard().await;
    let limits = ConnectionLimits {
        body_budget_bytes: 16_000,
        ..ConnectionLimits::default()
    };
    let e = env(limits, 100, &shard).await;
    // Within the budget, a body goes through.
    let (status, _, body) = post_whole(&e, 8_000).await;
    assert_eq!(status, 200, "{body}");

    // A chunked body (no declared length) of 12,000 bytes so far, then
    // silence: its bytes are reserved as they arrive and stay held.
    let mut slow = slow_chunked(&e, 12_000).await;

    // So 8,000 more bytes do not fit: 503, unavailable, Retry-After.
    let deadline = tokio::time::Instant::now() + PATIENCE;
    let (head, body) = loop {
        let (status, head, body) = post_whole(&e, 8_000).await;
        if status == 503 {
            break (head, body);
        }
        assert_eq!(status, 200, "{body}");
        assert!(
            tokio::time::Instant::now() < deadline,
            "a body past the budget was still buffered"
        );
        // The slow body may have reached the router while this 8,000-byte
        // one held the budget, and been refused itself: then send it again.
        let mut byte = [0u8; 1];
        if slow.try_read(&mut byte).is_ok() {
            slow = slow_chunked(&e, 12_000).await;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(body["error"]["code"], "unavailable", "{body}");
    assert_eq!(
        body["error"]["message"],
        router::forward::body_budget::BODY_BUDGET_MESSAGE,
        "{body}"
    );
    assert!(head.lines().any(|l| l == "retry-after: 1"), "{head}");
    // A smaller body still fits beside the held one.
    let (status, _, body) = post_whole(&e, 3_000).await;
    assert_eq!(status, 200, "{body}");

    // The slow body ends: its request is done and its bytes are given back.
    slow.write_all(b"0\r\n\r\n").await.unwrap();
    let (status, body) = read_response(&mut slow).await.expect("an answer");
    assert_eq!(status, 200, "{body}");
    let (status, _, body) = post_whole(&e, 8_000).await;
    assert_eq!(status, 200, "{body}");
}
