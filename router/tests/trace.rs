//! One request through the router is one trace: the router's span and the
//! shard node's span, linked by W3C `traceparent`.
//!
//! How it is wired (a test binary of its own, because it installs the
//! process's global tracing subscriber and propagator):
//! * `OTEL_EXPORTER_OTLP_ENDPOINT` is set before anything reads it, so the
//!   router opens its request span at once and injects `traceparent` from
//!   that span's OpenTelemetry context (`router::edge::trace`), exactly as in
//!   production; nothing is sent to that address, since
//!   `service_kit::telemetry::init` is not called here.
//! * The test installs what `telemetry::init` would: the W3C propagator
//!   and a `tracing-opentelemetry` layer, whose tracer provider exports
//!   every finished span to [`Collected`], an in-memory exporter (the
//!   SDK's `InMemorySpanExporter` sits behind its `testing` feature, which
//!   would rebuild the OpenTelemetry crates and the shard node for this
//!   one test).
//! * The real router (`router::run`) and a real shard node
//!   (`shard_node::run_until`, on a throwaway PostgreSQL database from
//!   TEST_POSTGRES_URL) run in this process, with the real local Redis
//!   (TEST_REDIS_URL) and a small fake control plane (axum) that knows one
//!   API key and allocates new databases on that shard.
//! * One `POST /api/databases` goes through the router to the shard; both
//!   services' request spans are then read back from the exporter.

// Test code: an unwrap that fails is a failed test with its location.
#![allow(clippy::unwrap_used)]

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use argon2::{password_hash::SaltString, Algorithm, Argon2, Params, PasswordHasher, Version};
use axum::extract::{Path, State};
use axum::routing::{get, post};
use axum::{Json, Router};
use cluster_protocol::control::*;
use cluster_protocol::ids::{new_tagged, new_untagged, random_token, Kind};
use opentelemetry::trace::{SpanId, SpanKind, TracerProvider as _};
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{SdkTracerProvider, SpanData, SpanExporter};
use serde_json::{json, Value};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

const CLUSTER_SECRET: &str = "trace-test-cluster-secret";
const SHARD: &str = "trace-shard";

/// Every span the provider finished, kept in memory.
#[derive(Debug, Clone, Default)]
struct Collected(Arc<Mutex<Vec<SpanData>>>);

impl SpanExporter for Collected {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        self.0.lock().unwrap().extend(batch);
        Ok(())
    }
}

impl Collected {
    fn spans(&self) -> Vec<SpanData> {
        self.0.lock().unwrap().clone()
    }
}

fn attribute(span: &SpanData, key: &str) -> Option<String> {
    span.attributes
        .iter()
        .find(|kv| kv.key.as_str() == key)
        .map(|kv| kv.value.to_string())
}

/// The fake control plane: one key, and new databases on `shard_url`.
struct Cp {
    key: KeyRecord,
    shard_url: String,
    redis_url: String,
}

async fn cp_key(State(cp): State<Arc<Cp>>, Path(id): Path<String>) -> axum::response::Response {
    use axum::response::IntoResponse;
    if id != cp.key.id {
        let body = json!({"error":{"code":"not_found","message":"Not found."}});
        return (axum::http::StatusCode::NOT_FOUND, Json(body)).into_response();
    }
    // The control plane seeds the key's liveness version when it answers.
    let target = service_kit::redis_target::Target::parse(&cp.redis_url).unwrap();
    let mut redis = service_kit::redis_target::Conn::connect(&target, Duration::from_secs(5))
        .await
        .unwrap();
    let _: () = redis::cmd("SET")
        .arg(cluster_protocol::control::redis_keys::key_version(
            &cp.key.user.id,
            &id,
        ))
        .arg(cp.key.version)
        .query_async(&mut redis)
        .await
        .unwrap();
    Json(cp.key.clone()).into_response()
}

async fn cp_access(Path(id): Path<String>) -> Json<UserAccess> {
    Json(UserAccess {
        user_id: id,
        version: 1,
        memberships: vec![],
        support: vec![],
    })
}

async fn cp_allocate(State(cp): State<Arc<Cp>>) -> Json<Allocation> {
    let tag = random_token(5);
    Json(Allocation {
        database_id: new_tagged(Kind::Database, &tag),
        tag,
        position: 1,
        shard: ShardRef {
            name: SHARD.into(),
            url: cp.shard_url.clone(),
        },
        epoch: 1,
        limits: Default::default(),
    })
}

async fn cp_ok() -> Json<Value> {
    Json(json!({"ok": true}))
}

async fn spawn(app: Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    addr
}

/// A throwaway database on TEST_POSTGRES_URL, named as the shard node's
/// own tests name theirs (their harness drops it once this process is
/// gone); returns its URL and name.
async fn throwaway_database() -> (String, String) {
    let admin = std::env::var("TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into());
    let (client, conn) = tokio_postgres::connect(&admin, tokio_postgres::NoTls)
        .await
        .expect("connect to TEST_POSTGRES_URL");
    tokio::spawn(conn);
    let name = format!(
        "shard_node_test_{}_{}",
        std::process::id(),
        random_token(6).to_lowercase()
    );
    client
        .batch_execute(&format!("CREATE DATABASE {name}"))
        .await
        .expect("create the test database");
    let (base, _) = admin.rsplit_once('/').expect("URL has a database path");
    (format!("{base}/{name}"), name)
}

async fn drop_database(name: &str) {
    let admin = std::env::var("TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into());
    if let Ok((client, conn)) = tokio_postgres::connect(&admin, tokio_postgres::NoTls).await {
        tokio::spawn(conn);
        let _ = client
            .batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
            .await;
    }
}

async fn spawn_shard(database_url: String) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let config = shard_node::config::Config {
        shard_name: SHARD.into(),
        listen: addr,
        database_url: shard_node::config::Secret::new(database_url),
        cluster_secret: shard_node::config::Secret::new(CLUSTER_SECRET),
        control_plane_url: None,
        control_plane_token: None,
        metrics_token: None,
        pool_size: 4,
        trash: Default::default(),
        db_limits: Default::default(),
        schema_cache_weight: shard_node::schema::cache::DEFAULT_MAX_WEIGHT,
        webhooks: Default::default(),
        blobs: blobstore::Settings::local(
            std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("trace-test-blobs"),
        ),
        attachments: Default::default(),
        public_url: shard_node::config::DEFAULT_PUBLIC_URL.into(),
        metrics: None,
    };
    tokio::spawn(async move {
        if let Err(e) = shard_node::run_until(config, listener, std::future::pending()).await {
            panic!("shard node failed: {e:#}");
        }
    });
    let health = format!("http://{addr}/internal/health");
    for _ in 0..200 {
        if let Ok(r) = reqwest::get(&health).await {
            if r.status() == 200 {
                return addr;
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("shard node did not become healthy");
}

fn key_record(secret: &str) -> KeyRecord {
    let params = Params::new(1024, 1, 1, None).unwrap();
    let salt = SaltString::encode_b64(random_token(16).as_bytes()).unwrap();
    let secret_hash = Argon2::new(Algorithm::Argon2id, Version::V0x13, params)
        .hash_password(secret.as_bytes(), &salt)
        .unwrap()
        .to_string();
    let user_id = new_untagged(Kind::User);
    KeyRecord {
        id: new_untagged(Kind::Key),
        name: "trace key".into(),
        user: User {
            email: format!("{user_id}@example.com"),
            id: user_id,
            name: "Trace".into(),
            suspended: false,
        },
        secret_hash,
        access: Access::ReadWrite,
        databases: DatabaseScope::All,
        created_at: chrono::Utc::now(),
        version: 1,
        requests_per_minute: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_through_the_router_is_one_trace_across_router_and_shard() {
    // Before the router first asks whether spans are exported.
    std::env::set_var("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9");
    let collected = Collected::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(collected.clone())
        .build();
    opentelemetry::global::set_text_map_propagator(
        opentelemetry_sdk::propagation::TraceContextPropagator::new(),
    );
    tracing_subscriber::registry()
        .with(tracing_subscriber::filter::LevelFilter::INFO)
        .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("trace-test")))
        .try_init()
        .expect("the only subscriber of this test binary");

    let redis_url =
        std::env::var("TEST_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    let (database_url, database_name) = throwaway_database().await;
    let shard = spawn_shard(database_url).await;
    let secret = random_token(32);
    let key = key_record(&secret);
    let token = format!("{}.{secret}", key.id);
    let cp = Arc::new(Cp {
        key,
        shard_url: format!("http://{shard}"),
        redis_url: redis_url.clone(),
    });
    let cp_app = Router::new()
        .route("/internal/keys/{id}", get(cp_key))
        .route("/internal/users/{id}/access", get(cp_access))
        .route("/internal/databases/allocate", post(cp_allocate))
        .route("/internal/databases/{id}/confirm", post(cp_ok))
        .route("/internal/databases/{id}/release", post(cp_ok))
        .with_state(cp);
    let cp_addr = spawn(cp_app).await;
    let config = router::Config {
        listen: "127.0.0.1:0".parse().unwrap(),
        control_plane_url: format!("http://{cp_addr}"),
        control_plane_token: router::config::Secret("router".into()),
        metrics_token: None,
        metrics_listen: "127.0.0.1:0".parse().unwrap(),
        redis_url,
        cluster_secret: router::config::Secret(CLUSTER_SECRET.into()),
        key_limit_per_min: 1000,
        address_limit_per_min: 1000,
        anon_limit_per_min: 1000,
        files_limit_per_min: 1000,
        max_in_flight: 100,
        pool_max_idle_per_host: 4,
        shutdown_grace: Duration::from_secs(1),
        hash_limits: router::gate::keys::HashLimits::default(),
        caches: router::config::CacheLimits::default(),
        threads: 1,
        connections: Default::default(),
        metrics: None,
        accounts: Default::default(),
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let router_addr = listener.local_addr().unwrap();
    tokio::spawn(router::run(config, listener, std::future::pending()));

    let client_address = format!("10.9.{}.{}", rand::random::<u8>(), rand::random::<u8>());
    let r = reqwest::Client::new()
        .post(format!("http://{router_addr}/api/databases"))
        .bearer_auth(&token)
        .header("x-forwarded-for", client_address)
        .json(&json!({"name": "Traced"}))
        .send()
        .await
        .unwrap();
    let status = r.status();
    let body: Value = r.json().await.unwrap();
    assert_eq!(status, 200, "{body}");

    // Spans are exported as they end; the router's ends as its answer goes.
    let is_create = |s: &SpanData| {
        s.name == "POST /api/databases"
            && s.span_kind == SpanKind::Server
            && attribute(s, "http.request.method").as_deref() == Some("POST")
            && attribute(s, "http.route").as_deref() == Some("/api/databases")
            && attribute(s, "url.path").as_deref() == Some("/api/databases")
    };
    let mut spans = Vec::new();
    for _ in 0..100 {
        spans = collected.spans().into_iter().filter(is_create).collect();
        if spans.len() >= 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(spans.len(), 2, "the router's and the shard's: {spans:#?}");
    // The router's span starts the trace (the client sent no traceparent).
    let router_span = spans
        .iter()
        .find(|s| s.parent_span_id == SpanId::INVALID)
        .unwrap_or_else(|| panic!("no root span: {spans:#?}"));
    let shard_span = spans
        .iter()
        .find(|s| s.span_context.span_id() != router_span.span_context.span_id())
        .unwrap();
    assert_eq!(
        shard_span.span_context.trace_id(),
        router_span.span_context.trace_id(),
        "one trace"
    );
    assert_eq!(
        shard_span.parent_span_id,
        router_span.span_context.span_id(),
        "the shard's span is the router span's child"
    );
    assert!(
        shard_span.parent_span_is_remote,
        "its parent came over the wire (traceparent)"
    );
    for span in [router_span, shard_span] {
        assert_eq!(
            attribute(span, "http.response.status_code").as_deref(),
            Some("200")
        );
    }
    // The router's calls to the control plane are client spans of its
    // request (the fake control plane is not traced).
    let calls: Vec<_> = collected
        .spans()
        .into_iter()
        .filter(|s| s.span_kind == SpanKind::Client)
        .collect();
    let allocate = calls
        .iter()
        .find(|s| {
            attribute(s, "url.full").is_some_and(|u| u.ends_with("/internal/databases/allocate"))
        })
        .unwrap_or_else(|| panic!("no allocate call in {calls:#?}"));
    assert_eq!(allocate.name, "POST");
    assert_eq!(allocate.parent_span_id, router_span.span_context.span_id());
    assert_eq!(
        allocate.span_context.trace_id(),
        router_span.span_context.trace_id()
    );
    assert_eq!(
        attribute(allocate, "http.request.method").as_deref(),
        Some("POST")
    );
    assert_eq!(
        attribute(allocate, "server.address").as_deref(),
        Some("127.0.0.1")
    );
    assert!(attribute(allocate, "http.response.status_code").is_some());
    drop_database(&database_name).await;
}
