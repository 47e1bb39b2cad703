//! Router configuration: [`Settings`], one clap struct read from flags
//! and the environment (`router --help`), and the [`Config`] it makes.

use std::{net::SocketAddr, time::Duration};

use service_kit::parse;

use crate::gate::keys::HashLimits;

/// A value that never prints (`Secret(***)`).
pub use service_kit::Secret;

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
    /// `ROUTER_METRICS_LISTEN`: the internal listener of `GET /metrics`
    /// (never the public port), bound when `METRICS_TOKEN` is set.
    pub metrics_listen: SocketAddr,
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
    /// Entries each in-memory cache holds at most.
    pub caches: CacheLimits,
    /// Renders `GET /metrics` (`metrics`). Not from the environment: `main`
    /// installs the process's recorder and puts its handle here; `None`
    /// (tests, library use) answers that path like any unknown one.
    pub metrics: Option<service_kit::metrics::PrometheusHandle>,
    /// The account pages' cookies and sign-in limits (`account`).
    pub accounts: AccountLimits,
}

/// The account pages' settings (docs/security.md, "Sessions").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AccountLimits {
    /// `COOKIE_SECURE=1`: cookies are `Secure` and `__Host-` prefixed.
    pub cookie_secure: bool,
    /// Sign-in (and sign-up) attempts per client address per 10 minutes.
    pub signin_per_address: u64,
    /// Failed sign-ins per account (email) per 15 minutes.
    pub signin_per_account: u64,
}

impl Default for AccountLimits {
    fn default() -> Self {
        Self {
            cookie_secure: true,
            signin_per_address: 20,
            signin_per_account: 5,
        }
    }
}

fn flag01(s: &str) -> Result<bool, String> {
    match s {
        "1" => Ok(true),
        "0" => Ok(false),
        _ => Err(format!("must be 1 or 0, not {s:?}")),
    }
}

/// What keeps slow or idle clients, and a shard that does not answer, from
/// holding the router's connections and in-flight slots
/// ([`Settings`], `router --help`).
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

/// Entries each of the router's caches holds at most; beyond it the least
/// recently used entry goes (`bounded`) and is read from the control plane
/// again on its next use. The defaults keep a router's RSS under 512 MiB
/// whatever the fleet's size (docs/capacity.md, "Router caches").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheLimits {
    /// `ROUTER_PLACEMENT_CACHE_ENTRIES`: placements, by routing tag.
    pub placements: usize,
    /// `ROUTER_KEY_CACHE_ENTRIES`: verified API keys.
    pub keys: usize,
    /// `ROUTER_ACCESS_CACHE_ENTRIES`: users' memberships and grants.
    pub users: usize,
}

impl Default for CacheLimits {
    fn default() -> Self {
        Self {
            placements: crate::bounded::DEFAULT_PLACEMENTS,
            keys: crate::bounded::DEFAULT_KEYS,
            users: crate::bounded::DEFAULT_USERS,
        }
    }
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

/// The router's settings, from flags or the environment (`router --help`
/// lists each with its variable and default). [`Config::from_settings`]
/// turns them into a [`Config`].
#[derive(Debug, Clone, clap::Parser)]
#[command(
    name = "router",
    version,
    about = "The stateless edge of the cluster: rate shield, key verification, per-key budget, placement and forwarding to shard nodes."
)]
pub struct Settings {
    /// Listen address (host:port).
    #[arg(long, env = "ROUTER_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,
    /// The control plane's internal API.
    #[arg(
        long,
        env = "CONTROL_PLANE_URL",
        default_value = "http://127.0.0.1:8090"
    )]
    pub control_plane_url: String,
    /// The router tier's control-plane token (never the admin's).
    #[arg(
        long = "control-plane-router-token",
        value_name = "TOKEN",
        env = "CONTROL_PLANE_ROUTER_TOKEN",
        hide_env_values = true
    )]
    pub control_plane_token: Secret,
    /// The only credential `GET /metrics` (on ROUTER_METRICS_LISTEN) takes;
    /// unset: no page. Must differ from CONTROL_PLANE_ROUTER_TOKEN.
    #[arg(long, env = "METRICS_TOKEN", hide_env_values = true)]
    pub metrics_token: Option<Secret>,
    /// Internal listen address (host:port) of `GET /metrics`, apart from the
    /// public port; bound when METRICS_TOKEN is set.
    #[arg(long, env = "ROUTER_METRICS_LISTEN", default_value = "127.0.0.1:9464")]
    pub metrics_listen: SocketAddr,
    #[command(flatten)]
    pub log: service_kit::telemetry::LogSettings,
    /// Redis: rate limits, key and access versions, invalidations.
    #[arg(long, env = "REDIS_URL", default_value = "redis://127.0.0.1:6379")]
    pub redis_url: String,
    /// HMAC key of the principals signed for shard nodes.
    #[arg(long, env = "CLUSTER_SECRET", hide_env_values = true)]
    pub cluster_secret: Secret,
    /// Per-key budget per minute.
    #[arg(long, env = "ROUTER_KEY_LIMIT_PER_MIN", default_value = "600", value_parser = parse::number::<u64>)]
    pub key_limit_per_min: u64,
    /// Per-address shield per minute, bearer present.
    #[arg(long, env = "ROUTER_ADDRESS_LIMIT_PER_MIN", default_value = "3000", value_parser = parse::number::<u64>)]
    pub address_limit_per_min: u64,
    /// Per-address shield per minute, no bearer.
    #[arg(long, env = "ROUTER_ANON_LIMIT_PER_MIN", default_value = "60", value_parser = parse::number::<u64>)]
    pub anon_limit_per_min: u64,
    /// Per-address shield per minute of the public file links (`GET`/`HEAD
    /// /api/files/...`, no key), a counter of its own.
    #[arg(long, env = "ROUTER_FILES_LIMIT_PER_MIN", default_value = "3000", value_parser = parse::number::<u64>)]
    pub files_limit_per_min: u64,
    /// Requests handled at once; beyond it 429 at once.
    #[arg(long, env = "ROUTER_MAX_IN_FLIGHT", default_value = "4096", value_parser = parse::number::<usize>)]
    pub max_in_flight: usize,
    /// Idle pooled connections kept per shard.
    #[arg(long, env = "ROUTER_POOL_IDLE_PER_SHARD", default_value = "256", value_parser = parse::number::<usize>)]
    pub pool_idle_per_shard: usize,
    /// How long graceful shutdown waits for in-flight requests, in seconds.
    #[arg(long, env = "ROUTER_SHUTDOWN_GRACE_SECS", default_value = "30", value_parser = parse::number::<u64>)]
    pub shutdown_grace_secs: u64,
    /// argon2id verifications of first-seen keys at once (at least 1).
    #[arg(long, env = "ROUTER_HASH_CONCURRENCY", default_value = "2", value_parser = parse::number::<usize>)]
    pub hash_concurrency: usize,
    /// Longest wait, in milliseconds, for an argon2id slot (and for the
    /// key's turn) before 503 `unavailable` with `Retry-After`.
    #[arg(long, env = "ROUTER_HASH_WAIT_MS", default_value = "5000", value_parser = parse::number::<u64>)]
    pub hash_wait_ms: u64,
    /// Serving threads, each with its own runtime and listener; 0: one per
    /// CPU.
    #[arg(long, env = "ROUTER_THREADS", default_value = "0", value_parser = parse::number::<usize>)]
    pub threads: usize,
    /// Client connections open at once (all cores); beyond it new
    /// connections wait in the listen backlog.
    #[arg(long, env = "ROUTER_MAX_CONNECTIONS", default_value = "4096", value_parser = parse::positive::<usize>)]
    pub max_connections: usize,
    /// Seconds a connection may take to send the whole head of its next
    /// request (idle keep-alive time included); then closed.
    #[arg(long, env = "ROUTER_IDLE_TIMEOUT_SECS", default_value = "30", value_parser = parse::secs)]
    pub idle_timeout_secs: Duration,
    /// Seconds a request body may take to arrive whole; then 408
    /// `request_timeout` and the connection is closed (not on the streamed
    /// routes).
    #[arg(long, env = "ROUTER_BODY_TIMEOUT_SECS", default_value = "30", value_parser = parse::secs)]
    pub body_timeout_secs: Duration,
    /// On the streamed routes (uploads, imports): the longest wait, in
    /// seconds, for the next piece of the body; then 408 `request_timeout`.
    ///
    /// No overall deadline: a 100 MB upload at a steady pace may take
    /// minutes. The shard's answer is awaited ROUTER_SHARD_TIMEOUT_MS from
    /// the end of the body.
    #[arg(long, env = "ROUTER_STREAM_IDLE_TIMEOUT_SECS", default_value = "30", value_parser = parse::secs)]
    pub stream_idle_timeout_secs: Duration,
    /// Milliseconds a shard may take to answer (response head); then 504
    /// `gateway_timeout`.
    ///
    /// The dropped connection makes the shard cancel its statement. Keep it
    /// above SHARD_SCHEMA_TIMEOUT_MS and the 60 s attachment URL fetches may
    /// take.
    #[arg(long, env = "ROUTER_SHARD_TIMEOUT_MS", default_value = "90000", value_parser = parse::millis)]
    pub shard_timeout_ms: Duration,
    /// Bytes of buffered request bodies held at once (256 MiB).
    ///
    /// The declared length is reserved before reading, else bytes as they
    /// arrive; a body that does not fit is 503 `unavailable` with
    /// `Retry-After: 1` (not the streamed routes).
    #[arg(long, env = "ROUTER_BODY_BUDGET_BYTES", default_value = "268435456", value_parser = parse::positive::<u64>)]
    pub body_budget_bytes: u64,
    /// Placements cached at most (least recently used out first).
    #[arg(long, env = "ROUTER_PLACEMENT_CACHE_ENTRIES", default_value = "250000", value_parser = parse::positive::<usize>)]
    pub placement_cache_entries: usize,
    /// Verified API keys cached at most (least recently used out first;
    /// an evicted key is verified with argon2id again on its next use).
    #[arg(long, env = "ROUTER_KEY_CACHE_ENTRIES", default_value = "125000", value_parser = parse::positive::<usize>)]
    pub key_cache_entries: usize,
    /// Users' access (memberships, grants) cached at most (least recently
    /// used out first).
    #[arg(long, env = "ROUTER_ACCESS_CACHE_ENTRIES", default_value = "125000", value_parser = parse::positive::<usize>)]
    pub access_cache_entries: usize,
    /// Account-page cookies `Secure` and `__Host-` prefixed (1), or neither
    /// (0: only for plain-HTTP deployments not on localhost).
    #[arg(long, env = "COOKIE_SECURE", default_value = "1", value_parser = flag01)]
    pub cookie_secure: bool,
    /// Sign-in and sign-up attempts per client address per 10 minutes.
    #[arg(long, env = "SIGNIN_LIMIT_PER_ADDRESS", default_value = "20", value_parser = parse::positive::<u64>)]
    pub signin_limit_per_address: u64,
    /// Failed sign-ins per account (email, known or not) per 15 minutes.
    #[arg(long, env = "SIGNIN_LIMIT_PER_ACCOUNT", default_value = "5", value_parser = parse::positive::<u64>)]
    pub signin_limit_per_account: u64,
}

impl Config {
    /// From the environment alone (no command line).
    pub fn from_env() -> anyhow::Result<Self> {
        Self::from_settings(parse::try_args_from::<Settings, _, _>(["router"])?)
    }

    /// From parsed settings; checks what one setting alone cannot.
    pub fn from_settings(s: Settings) -> anyhow::Result<Self> {
        let config = Self {
            listen: s.listen,
            control_plane_url: s.control_plane_url,
            control_plane_token: s.control_plane_token,
            metrics_token: s.metrics_token,
            metrics_listen: s.metrics_listen,
            redis_url: s.redis_url,
            cluster_secret: s.cluster_secret,
            key_limit_per_min: s.key_limit_per_min,
            address_limit_per_min: s.address_limit_per_min,
            anon_limit_per_min: s.anon_limit_per_min,
            files_limit_per_min: s.files_limit_per_min,
            max_in_flight: s.max_in_flight,
            pool_max_idle_per_host: s.pool_idle_per_shard,
            shutdown_grace: Duration::from_secs(s.shutdown_grace_secs),
            hash_limits: HashLimits {
                concurrency: s.hash_concurrency.max(1),
                wait: Duration::from_millis(s.hash_wait_ms),
            },
            threads: match s.threads {
                0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
                n => n,
            },
            connections: ConnectionLimits {
                max_connections: s.max_connections,
                idle_timeout: s.idle_timeout_secs,
                body_timeout: s.body_timeout_secs,
                stream_idle_timeout: s.stream_idle_timeout_secs,
                shard_timeout: s.shard_timeout_ms,
                body_budget_bytes: s.body_budget_bytes,
            },
            caches: CacheLimits {
                placements: s.placement_cache_entries,
                keys: s.key_cache_entries,
                users: s.access_cache_entries,
            },
            metrics: None,
            accounts: AccountLimits {
                cookie_secure: s.cookie_secure,
                signin_per_address: s.signin_limit_per_address,
                signin_per_account: s.signin_limit_per_account,
            },
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

#[cfg(test)]
mod tests {

    use super::*;

    #[test]
    fn defaults_are_the_configs_defaults() {
        let s = service_kit::parse::try_args_only::<Settings, _, _>([
            "router",
            "--control-plane-router-token=t",
            "--cluster-secret=s",
        ])
        .unwrap();
        let c = Config::from_settings(s).unwrap();
        assert_eq!(c.connections, ConnectionLimits::default());
        assert_eq!(c.caches, CacheLimits::default());
        assert_eq!(c.accounts, AccountLimits::default());
        let h = HashLimits::default();
        assert_eq!(
            (c.hash_limits.concurrency, c.hash_limits.wait),
            (h.concurrency, h.wait)
        );
        assert_eq!(c.listen.to_string(), "127.0.0.1:8080");
        assert_eq!(c.metrics_listen.to_string(), "127.0.0.1:9464");
        assert!(c.threads >= 1);
    }

    #[test]
    fn metrics_token_must_differ() {
        let s = service_kit::parse::try_args_only::<Settings, _, _>([
            "router",
            "--control-plane-router-token=t",
            "--metrics-token=t",
            "--cluster-secret=s",
        ])
        .unwrap();
        let e = Config::from_settings(s).unwrap_err().to_string();
        assert_eq!(
            e,
            "METRICS_TOKEN and CONTROL_PLANE_ROUTER_TOKEN must differ"
        );
    }
}
