//! Harness for the end-to-end suite: reads the env file a running cluster
//! wrote (`CLUSTER_ENV_FILE`, default `.dev-cluster-test/env`, then
//! `.dev-cluster/env`) and gives tests a client that talks to the router
//! like any API user would. Every test makes its own users, keys and
//! databases, so tests run in parallel in any order.

pub mod cluster_ops;
pub mod files;
pub mod leftovers;
pub mod moves;
pub mod placements;
pub mod receiver;
pub mod stores;

use std::collections::HashMap;
use std::sync::OnceLock;

use cluster_protocol::control::client::ControlPlaneClient;
use cluster_protocol::control::{Access, CreateKey, DatabaseScope, Role};
use rand::Rng;
use serde_json::Value;

pub struct Cluster {
    pub router_url: String,
    pub control_plane: ControlPlaneClient,
    pub cluster_secret: String,
    env: HashMap<String, String>,
}

impl Cluster {
    pub fn var(&self, name: &str) -> Option<&str> {
        self.env.get(name).map(String::as_str)
    }
}

pub(crate) fn parse_env_file(text: &str) -> HashMap<String, String> {
    text.lines()
        .filter_map(|line| {
            let line = line.trim().strip_prefix("export ").unwrap_or(line.trim());
            let (k, v) = line.split_once('=')?;
            let v = v.trim().trim_matches('"').trim_matches('\'');
            Some((k.trim().to_string(), v.to_string()))
        })
        .collect()
}

/// The running cluster. Panics with a clear message when none is up:
/// `deploy/test` starts one before running this suite.
pub fn cluster() -> &'static Cluster {
    static CLUSTER: OnceLock<Cluster> = OnceLock::new();
    CLUSTER.get_or_init(|| {
        let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
        let candidates = [
            std::env::var("CLUSTER_ENV_FILE").ok(),
            Some(format!("{root}/.dev-cluster-test/env")),
            Some(format!("{root}/.dev-cluster/env")),
        ];
        let (path, text) = candidates
            .into_iter()
            .flatten()
            .find_map(|p| std::fs::read_to_string(&p).ok().map(|t| (p, t)))
            .expect(
                "no cluster env file: run the suite with deploy/test (it starts a test cluster)",
            );
        let env = parse_env_file(&text);
        let get = |k: &str| {
            env.get(k)
                .cloned()
                .unwrap_or_else(|| panic!("{path} lacks {k}"))
        };
        Cluster {
            router_url: get("ROUTER_URL"),
            control_plane: ControlPlaneClient::unpooled(
                &get("CONTROL_PLANE_URL"),
                &get("CONTROL_PLANE_TOKEN"),
            ),
            cluster_secret: get("CLUSTER_SECRET"),
            env,
        }
    })
}

/// A unique client address for the rate shield (sent as `x-forwarded-for`,
/// never contacted), so parallel tests do not share a budget: addresses of
/// 198.18.0.0/15 handed out in turn from a random start, so no two calls in
/// one test process get the same one (random draws collided: a test then
/// found its address spent by a rate-limit test).
pub fn fresh_address() -> String {
    static NEXT: std::sync::OnceLock<std::sync::atomic::AtomicU32> = std::sync::OnceLock::new();
    let n = NEXT
        .get_or_init(|| std::sync::atomic::AtomicU32::new(rand::thread_rng().gen_range(0..1 << 17)))
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        % (1 << 17);
    format!("198.{}.{}.{}", 18 + (n >> 16), (n >> 8) & 0xff, n & 0xff)
}

pub fn unique(prefix: &str) -> String {
    format!(
        "{prefix}-{}",
        cluster_protocol::ids::random_token(10).to_lowercase()
    )
}

/// A reply: status, headers and JSON body (Null when the body is not JSON).
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub body: Value,
}

impl Reply {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
    /// Asserts the error envelope with this status and code; returns the message.
    #[track_caller]
    pub fn expect_error(&self, status: u16, code: &str) -> String {
        assert_eq!(
            self.status, status,
            "unexpected status, body: {}",
            self.body
        );
        assert_eq!(self.body["error"]["code"], code, "body: {}", self.body);
        self.body["error"]["message"]
            .as_str()
            .expect("message is a string")
            .to_string()
    }
    #[track_caller]
    pub fn expect_ok(&self) -> &Value {
        assert_eq!(self.status, 200, "expected 200, body: {}", self.body);
        &self.body
    }
}

/// An API caller: one key, one client address.
#[derive(Clone)]
pub struct Api {
    pub http: reqwest::Client,
    pub base: String,
    pub token: Option<String>,
    pub address: String,
}

impl Api {
    pub fn anonymous() -> Self {
        Api {
            http: reqwest::Client::new(),
            base: cluster().router_url.clone(),
            token: None,
            address: fresh_address(),
        }
    }

    pub fn with_token(token: &str) -> Self {
        Api {
            token: Some(token.to_string()),
            ..Api::anonymous()
        }
    }

    pub async fn send(&self, method: reqwest::Method, path: &str, body: Option<Vec<u8>>) -> Reply {
        let mut req = self
            .http
            .request(method, format!("{}{}", self.base, path))
            .header("x-forwarded-for", &self.address);
        if let Some(t) = &self.token {
            req = req.header("authorization", format!("Bearer {t}"));
        }
        if let Some(b) = body {
            req = req.header("content-type", "application/json").body(b);
        }
        let resp = req.send().await.expect("router reachable");
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let bytes = resp.bytes().await.expect("body readable");
        let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        Reply {
            status,
            headers,
            body,
        }
    }

    /// Sends `body` serialized as JSON.
    pub async fn send_json(&self, method: reqwest::Method, path: &str, body: &Value) -> Reply {
        let bytes = serde_json::to_vec(body).expect("a JSON value serializes");
        self.send(method, path, Some(bytes)).await
    }

    pub async fn get(&self, path: &str) -> Reply {
        self.send(reqwest::Method::GET, path, None).await
    }
    pub async fn post(&self, path: &str, body: Value) -> Reply {
        self.send_json(reqwest::Method::POST, path, &body).await
    }
    pub async fn post_raw(&self, path: &str, raw: &str) -> Reply {
        self.send(reqwest::Method::POST, path, Some(raw.as_bytes().to_vec()))
            .await
    }
    pub async fn patch(&self, path: &str, body: Value) -> Reply {
        self.send_json(reqwest::Method::PATCH, path, &body).await
    }
    pub async fn patch_raw(&self, path: &str, raw: &str) -> Reply {
        self.send(reqwest::Method::PATCH, path, Some(raw.as_bytes().to_vec()))
            .await
    }
    pub async fn put(&self, path: &str, body: Value) -> Reply {
        self.send_json(reqwest::Method::PUT, path, &body).await
    }
    pub async fn delete_with(&self, path: &str, body: Value) -> Reply {
        self.send_json(reqwest::Method::DELETE, path, &body).await
    }
    pub async fn delete(&self, path: &str) -> Reply {
        self.send(reqwest::Method::DELETE, path, None).await
    }

    /// Creates a database and returns it.
    pub async fn create_database(&self, name: &str) -> Value {
        let r = self
            .post("/api/databases", serde_json::json!({ "name": name }))
            .await;
        r.expect_ok()["database"].clone()
    }

    /// Creates a database named `unique(prefix)`; returns its id.
    pub async fn new_database(&self, prefix: &str) -> String {
        id(&self.create_database(&unique(prefix)).await)
    }

    /// Creates a table and returns it.
    pub async fn create_table(&self, database_id: &str, name: &str) -> Value {
        let r = self
            .post(
                &format!("/api/databases/{database_id}/tables"),
                serde_json::json!({ "name": name }),
            )
            .await;
        r.expect_ok()["table"].clone()
    }
}

impl Api {
    /// POSTs a `multipart/form-data` body whose parts are separated by
    /// `boundary` to `path`, with the caller's key (uploads and imports).
    pub async fn post_multipart(&self, path: &str, boundary: &str, body: Vec<u8>) -> Reply {
        let mut req = self
            .http
            .post(format!("{}{path}", self.base))
            .header("x-forwarded-for", &self.address)
            .header(
                "content-type",
                format!("multipart/form-data; boundary={boundary}"),
            )
            .body(body);
        if let Some(t) = &self.token {
            req = req.header("authorization", format!("Bearer {t}"));
        }
        let resp = req.send().await.expect("router reachable");
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let bytes = resp.bytes().await.expect("body readable");
        Reply {
            status,
            headers,
            body: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        }
    }
}

impl Api {
    /// Creates a field (`{name, type, options}`) on a table and returns it.
    pub async fn create_field(&self, table_id: &str, body: Value) -> Value {
        let r = self
            .post(&format!("/api/tables/{table_id}/fields"), body)
            .await;
        r.expect_ok()["field"].clone()
    }
}

/// A user of the service made through the control plane, with one key.
pub struct Person {
    pub user_id: String,
    pub email: String,
    pub key_id: String,
    pub api: Api,
}

impl Person {
    pub async fn new() -> Self {
        Self::with_key(Access::ReadWrite, DatabaseScope::All).await
    }

    pub async fn with_key(access: Access, databases: DatabaseScope) -> Self {
        let cp = &cluster().control_plane;
        let email = format!("{}@example.test", unique("user"));
        let user = cp.create_user(&email, None).await.expect("create user");
        let key = cp
            .create_key(&CreateKey {
                user_id: user.id.clone(),
                name: "test".into(),
                access,
                databases,
            })
            .await
            .expect("create key");
        Person {
            user_id: user.id,
            email,
            key_id: key.id,
            api: Api::with_token(&key.token),
        }
    }

    /// Mints another key for the same user.
    pub async fn another_key(&self, access: Access, databases: DatabaseScope) -> (String, Api) {
        let key = cluster()
            .control_plane
            .create_key(&CreateKey {
                user_id: self.user_id.clone(),
                name: "extra".into(),
                access,
                databases,
            })
            .await
            .expect("create key");
        (key.id, Api::with_token(&key.token))
    }

    /// A new person who is a member of `database_id` with `role`.
    pub async fn member(database_id: &str, role: Role) -> Self {
        let person = Self::new().await;
        person.join(database_id, role).await;
        person
    }

    pub async fn join(&self, database_id: &str, role: Role) {
        cluster()
            .control_plane
            .add_member(database_id, &self.user_id, role)
            .await
            .expect("add member");
    }
}

/// The `id` of an API object.
pub fn id(v: &Value) -> String {
    v["id"].as_str().expect("an id").to_owned()
}

/// The ids of the objects listed under `key` in a reply, in order.
pub fn ids_in(reply: &Value, key: &str) -> Vec<String> {
    reply[key]
        .as_array()
        .unwrap_or_else(|| panic!("a list under {key}: {reply}"))
        .iter()
        .map(id)
        .collect()
}

/// Connects to the PostgreSQL of the shard that holds `database_id`.
pub async fn database_postgres(database_id: &str) -> tokio_postgres::Client {
    let placement = cluster()
        .control_plane
        .database(database_id)
        .await
        .expect("placement");
    shard_postgres(&placement.shard).await
}

/// Connects to a shard's PostgreSQL by its registered DSN.
pub async fn shard_postgres(shard_name: &str) -> tokio_postgres::Client {
    let shards = cluster().control_plane.shards().await.expect("list shards");
    let shard = shards
        .shards
        .iter()
        .find(|s| s.name == shard_name)
        .expect("shard registered");
    postgres_connect(&shard.postgres).await
}

/// Connects to PostgreSQL with `dsn` (e.g. one of the env file's DSNs).
pub async fn postgres_connect(dsn: &str) -> tokio_postgres::Client {
    let (client, conn) = tokio_postgres::connect(dsn, tokio_postgres::NoTls)
        .await
        .unwrap_or_else(|e| panic!("postgres reachable at {dsn}: {e}"));
    tokio::spawn(conn);
    client
}
