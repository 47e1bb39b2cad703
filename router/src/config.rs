//! Router configuration: one struct, read from the environment (CONVENTIONS.md).

use std::{fmt, net::SocketAddr, time::Duration};

use anyhow::Context;

use crate::keys::HashLimits;

/// A secret that never prints.
#[derive(Clone)]
pub struct Secret(pub String);

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(***)")
    }
}

#[derive(Debug, Clone)]
pub struct Config {
    pub listen: SocketAddr,
    pub control_plane_url: String,
    /// `CONTROL_PLANE_ROUTER_TOKEN`: the routers' own control-plane
    /// credential (reads keys, access and placements; never the admin's).
    pub control_plane_token: Secret,
    /// `METRICS_TOKEN`: the only credential `GET /metrics` accepts; unset,
    /// the router serves no page.
    pub metrics_token: Option<Secret>,
    pub redis_url: String,
    pub cluster_secret: Secret,
    /// Per-key budget per minute (`ROUTER_KEY_LIMIT_PER_MIN`).
    pub key_limit_per_min: u64,
    /// Per-address shield when an Authorization header is present.
    pub address_limit_per_min: u64,
    /// Per-address shield without an Authorization header.
    pub anon_limit_per_min: u64,
    /// Per-address shield of the public file links (`GET`/`HEAD
    /// /api/files/...`, no API key), a counter of its own
    /// (`ROUTER_FILES_LIMIT_PER_MIN`): a grid shows many thumbnails at once.
    pub files_limit_per_min: u64,
    /// Requests handled at once before new ones are shed with 429.
    pub max_in_flight: usize,
    /// Idle pooled connections kept per shard.
    pub pool_max_idle_per_host: usize,
    /// How long graceful shutdown waits for in-flight requests.
    pub shutdown_grace: Duration,
    /// argon2id slots and how long a cold key verification waits for one
    /// (`ROUTER_HASH_CONCURRENCY`, `ROUTER_HASH_WAIT_MS`).
    pub hash_limits: HashLimits,
    /// Serving threads (`ROUTER_THREADS`, default one per CPU): each runs its
    /// own single-threaded runtime and listener (see `cores`).
    pub threads: usize,
    /// Bounds on client connections and on waits for clients and shards.
    pub connections: ConnectionLimits,
    /// Renders `GET /metrics` (`metrics`). Not from the environment: `main`
    /// installs the process's recorder and puts its handle here; `None`
    /// (tests, library use) answers that path like any unknown one.
    pub metrics: Option<cluster_protocol::metrics::PrometheusHandle>,
}

/// What keeps slow or idle clients, and a shard that does not answer, from
/// holding the router's connections and in-flight slots
/// (docs/CONVENTIONS.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// `ROUTER_MAX_CONNECTIONS`: client connections open at once, across
    /// cores; beyond it new connections wait in the listen backlog until
    /// one closes.
    pub max_connections: usize,
    /// `ROUTER_IDLE_TIMEOUT_SECS`: how long a connection may take to send
    /// the whole head of its next request, idle keep-alive time included;
    /// then it is closed.
    pub idle_timeout: Duration,
    /// `ROUTER_BODY_TIMEOUT_SECS`: how long a request body may take to
    /// arrive whole, from when the router starts reading it; then 408.
    /// Not applied to the streamed routes (uploads, imports).
    pub body_timeout: Duration,
    /// `ROUTER_STREAM_IDLE_TIMEOUT_SECS`: on the streamed routes (uploads,
    /// imports), the longest wait for the next piece of the body; then 408.
    /// A large upload at a steady pace has no overall deadline.
    pub stream_idle_timeout: Duration,
    /// `ROUTER_SHARD_TIMEOUT_MS`: how long a shard may take to answer (the
    /// response head); then 504. Above the shard's own schema time limit
    /// and the 60 s an attachment URL fetch may take before its write.
    pub shard_timeout: Duration,
    /// `ROUTER_BODY_BUDGET_BYTES`: bytes of request bodies the router holds
    /// at once across all its connections (`body_budget`); a body that does
    /// not fit is answered 503 with `Retry-After`. The default, 256 MiB, is
    /// 25 bodies of the 10 MiB maximum at once, or thousands of ordinary
    /// JSON bodies, well within a router's memory.
    pub body_budget_bytes: u64,
}

/// [`ConnectionLimits::body_budget_bytes`] when not set.
pub const DEFAULT_BODY_BUDGET_BYTES: u64 = 256 * 1024 * 1024;

impl Default for ConnectionLimits {
    fn default() -> Self {
        Self {
            max_connections: 4096,
            idle_timeout: Duration::from_secs(30),
            body_timeout: Duration::from_secs(30),
            stream_idle_timeout: Duration::from_secs(30),
            shard_timeout: Duration::from_secs(90),
            body_budget_bytes: DEFAULT_BODY_BUDGET_BYTES,
        }
    }
}

impl ConnectionLimits {
    fn from_env() -> anyhow::Result<Self> {
        let d = Self::default();
        let positive = |name: &str, n: u64| {
            anyhow::ensure!(n > 0, "{name} must be positive");
            Ok(n)
        };
        Ok(Self {
            max_connections: positive(
                "ROUTER_MAX_CONNECTIONS",
                number("ROUTER_MAX_CONNECTIONS", d.max_connections as u64)?,
            )? as usize,
            idle_timeout: Duration::from_secs(positive(
                "ROUTER_IDLE_TIMEOUT_SECS",
                number("ROUTER_IDLE_TIMEOUT_SECS", d.idle_timeout.as_secs())?,
            )?),
            body_timeout: Duration::from_secs(positive(
                "ROUTER_BODY_TIMEOUT_SECS",
                number("ROUTER_BODY_TIMEOUT_SECS", d.body_timeout.as_secs())?,
            )?),
            stream_idle_timeout: Duration::from_secs(positive(
                "ROUTER_STREAM_IDLE_TIMEOUT_SECS",
                number(
                    "ROUTER_STREAM_IDLE_TIMEOUT_SECS",
                    d.stream_idle_timeout.as_secs(),
                )?,
            )?),
            shard_timeout: Duration::from_millis(positive(
                "ROUTER_SHARD_TIMEOUT_MS",
                number(
                    "ROUTER_SHARD_TIMEOUT_MS",
                    d.shard_timeout.as_millis() as u64,
                )?,
            )?),
            body_budget_bytes: positive(
                "ROUTER_BODY_BUDGET_BYTES",
                number("ROUTER_BODY_BUDGET_BYTES", d.body_budget_bytes)?,
            )?,
        })
    }
}

fn var_or(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_string())
}

fn required(name: &str) -> anyhow::Result<String> {
    std::env::var(name).with_context(|| format!("{name} must be set"))
}

fn number<T: std::str::FromStr>(name: &str, default: T) -> anyhow::Result<T> {
    match std::env::var(name) {
        Ok(v) => v
            .trim()
            .parse()
            .map_err(|_| anyhow::anyhow!("{name} must be a number, got {v:?}")),
        Err(_) => Ok(default),
    }
}

impl Config {
    pub fn from_env() -> anyhow::Result<Self> {
        let config = Self {
            listen: var_or("ROUTER_LISTEN", "127.0.0.1:8080")
                .parse()
                .context("ROUTER_LISTEN must be host:port")?,
            control_plane_url: var_or("CONTROL_PLANE_URL", "http://127.0.0.1:8090"),
            control_plane_token: Secret(required("CONTROL_PLANE_ROUTER_TOKEN")?),
            metrics_token: std::env::var("METRICS_TOKEN")
                .ok()
                .filter(|v| !v.is_empty())
                .map(Secret),
            redis_url: var_or("REDIS_URL", "redis://127.0.0.1:6379"),
            cluster_secret: Secret(required("CLUSTER_SECRET")?),
            key_limit_per_min: number("ROUTER_KEY_LIMIT_PER_MIN", 600)?,
            address_limit_per_min: number("ROUTER_ADDRESS_LIMIT_PER_MIN", 3000)?,
            anon_limit_per_min: number("ROUTER_ANON_LIMIT_PER_MIN", 60)?,
            files_limit_per_min: number("ROUTER_FILES_LIMIT_PER_MIN", 3000)?,
            max_in_flight: number("ROUTER_MAX_IN_FLIGHT", 4096)?,
            pool_max_idle_per_host: number("ROUTER_POOL_IDLE_PER_SHARD", 256)?,
            shutdown_grace: Duration::from_secs(number("ROUTER_SHUTDOWN_GRACE_SECS", 30)?),
            hash_limits: HashLimits {
                concurrency: number("ROUTER_HASH_CONCURRENCY", 2usize)?.max(1),
                wait: Duration::from_millis(number("ROUTER_HASH_WAIT_MS", 5000)?),
            },
            threads: match number("ROUTER_THREADS", 0usize)? {
                0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
                n => n,
            },
            connections: ConnectionLimits::from_env()?,
            metrics: None,
        };
        if let Some(m) = &config.metrics_token {
            anyhow::ensure!(
                m.0 != config.control_plane_token.0,
                "METRICS_TOKEN and CONTROL_PLANE_ROUTER_TOKEN must differ"
            );
        }
        Ok(config)
    }
}
