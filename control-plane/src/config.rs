//! Configuration of `control-plane serve`: one struct, read from the
//! environment (see docs/CONVENTIONS.md). Limits and timings live here too.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Context;

/// How many databases one user may own (part C).
pub const MAX_OWNED_DATABASES: i64 = 100;
/// A database still `creating` after this long is released by the reaper.
pub const CREATING_TTL: Duration = Duration::from_secs(10 * 60);
/// How often the reaper looks for abandoned allocations.
pub const REAPER_INTERVAL: Duration = Duration::from_secs(60);
/// Most ids one placement lookup may ask for.
pub const MAX_LOOKUP_IDS: usize = 1000;
/// Redis operations give up after this long (the request then proceeds or fails
/// as documented in `liveness`).
pub const REDIS_TIMEOUT: Duration = Duration::from_secs(2);

/// How often the mover sweeps `tmv_%` leftovers off the shard instances
/// (besides at start and after every move; docs/moves.md).
pub const ORPHAN_SWEEP_INTERVAL: Duration = Duration::from_secs(60);

/// A value that must never reach a log: `Debug` prints `Secret(***)`.
#[derive(Clone)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(***)")
    }
}

#[derive(Debug, Clone)]
pub struct Config {
    pub listen: SocketAddr,
    /// Catalog PostgreSQL DSN (may hold a password).
    pub database_url: Secret,
    /// The credentials of the callers, one per tier (README "Between the tiers").
    pub tokens: Tokens,
    pub redis_url: Secret,
    pub creating_ttl: Duration,
    pub reaper_interval: Duration,
    /// The mover's knobs (docs/moves.md, "Knobs").
    pub moves: MoveConfig,
    /// Renders `GET /metrics`. Not from the environment: `serve` installs
    /// the process's recorder and puts its handle here; `None` (library
    /// use) answers that path 404.
    pub metrics: Option<cluster_protocol::metrics::PrometheusHandle>,
}

/// One token per tier; `http::routes` says which routes each may call.
#[derive(Debug, Clone)]
pub struct Tokens {
    /// `CONTROL_PLANE_TOKEN` (required): the operator's; every route.
    pub admin: Secret,
    /// `CONTROL_PLANE_ROUTER_TOKEN` (required): what routers read and ask for.
    pub router: Secret,
    /// `CONTROL_PLANE_SHARD_TOKEN` (optional): placement reads for shard nodes.
    pub shard: Option<Secret>,
    /// `METRICS_TOKEN` (optional): `GET /metrics` only.
    pub metrics: Option<Secret>,
}

impl Tokens {
    pub fn from_env() -> anyhow::Result<Self> {
        let tokens = Self {
            admin: Secret::new(required("CONTROL_PLANE_TOKEN")?),
            router: Secret::new(required("CONTROL_PLANE_ROUTER_TOKEN")?),
            shard: optional("CONTROL_PLANE_SHARD_TOKEN").map(Secret::new),
            metrics: optional("METRICS_TOKEN").map(Secret::new),
        };
        tokens.check_distinct()?;
        Ok(tokens)
    }

    /// Each tier's token must be its own: a shared value would give one
    /// tier the other's routes.
    pub fn check_distinct(&self) -> anyhow::Result<()> {
        let named = [
            ("CONTROL_PLANE_TOKEN", Some(&self.admin)),
            ("CONTROL_PLANE_ROUTER_TOKEN", Some(&self.router)),
            ("CONTROL_PLANE_SHARD_TOKEN", self.shard.as_ref()),
            ("METRICS_TOKEN", self.metrics.as_ref()),
        ];
        for (i, (a, x)) in named.iter().enumerate() {
            for (b, y) in &named[i + 1..] {
                if let (Some(x), Some(y)) = (x, y) {
                    anyhow::ensure!(x.expose() != y.expose(), "{a} and {b} must differ");
                }
            }
        }
        Ok(())
    }
}

/// Knobs of database moves (docs/moves.md, "Knobs (control plane)").
#[derive(Debug, Clone)]
pub struct MoveConfig {
    /// Role the mover connects to shard instances as (a superuser).
    pub admin_user: String,
    pub admin_password: Option<Secret>,
    /// TLS of every PostgreSQL connection of the control plane, the
    /// catalog's included (`CONTROL_PLANE_PG_SSLMODE`, `pg_tls`).
    pub pg_tls: crate::pg_tls::PgTls,
    /// Path, on every shard instance's host, of the libpq password file a
    /// move's subscription reads the password from (never in its SQL text).
    pub replication_passfile: Option<String>,
    /// Longest hold of a database's requests at cutover (default per move).
    pub pause_budget: Duration,
    /// Cutover attempts before a move is aborted.
    pub cutover_attempts: i32,
    /// Moves at once touching one shard (as source or target).
    pub per_shard: usize,
    /// Moves at once in the cluster.
    pub max: usize,
    /// Longest wait for routers' acknowledgements before the old copy goes.
    pub ack_timeout: Duration,
    /// How often cutover polls the target for the marker.
    pub poll: Duration,
    /// Test hook: wait after entering each state and after the fence.
    pub step_delay: Duration,
}

impl Default for MoveConfig {
    fn default() -> Self {
        Self {
            admin_user: "postgres".to_string(),
            admin_password: None,
            pg_tls: crate::pg_tls::PgTls::default(),
            replication_passfile: None,
            pause_budget: Duration::from_millis(400),
            cutover_attempts: 3,
            per_shard: 2,
            max: 4,
            ack_timeout: Duration::from_millis(10_000),
            poll: Duration::from_millis(2),
            step_delay: Duration::ZERO,
        }
    }
}

impl MoveConfig {
    pub fn from_env() -> anyhow::Result<Self> {
        let d = Self::default();
        Ok(Self {
            admin_user: env_or("MOVE_ADMIN_USER", &d.admin_user),
            admin_password: std::env::var("MOVE_ADMIN_PASSWORD")
                .ok()
                .filter(|v| !v.is_empty())
                .map(Secret::new),
            pg_tls: crate::pg_tls::PgTls::from_env()?,
            replication_passfile: std::env::var("MOVE_REPLICATION_PASSFILE")
                .ok()
                .filter(|v| !v.trim().is_empty()),
            pause_budget: millis("MOVE_PAUSE_BUDGET_MS", d.pause_budget)?,
            cutover_attempts: number("MOVE_CUTOVER_ATTEMPTS", d.cutover_attempts)?,
            per_shard: number("MOVES_PER_SHARD", d.per_shard)?,
            max: number("MOVES_MAX", d.max)?,
            ack_timeout: millis("MOVE_ACK_TIMEOUT_MS", d.ack_timeout)?,
            poll: millis("MOVE_POLL_MS", d.poll)?,
            step_delay: millis("MOVE_STEP_DELAY_MS", d.step_delay)?,
        })
    }
}

fn number<T: std::str::FromStr>(name: &str, default: T) -> anyhow::Result<T> {
    match std::env::var(name).ok().filter(|v| !v.is_empty()) {
        None => Ok(default),
        Some(v) => v
            .trim()
            .parse()
            .map_err(|_| anyhow::anyhow!("{name} must be a non-negative integer")),
    }
}

fn millis(name: &str, default: Duration) -> anyhow::Result<Duration> {
    let ms: u64 = number(name, u64::try_from(default.as_millis()).unwrap_or(u64::MAX))?;
    Ok(Duration::from_millis(ms))
}

impl Config {
    pub fn from_env() -> anyhow::Result<Self> {
        let listen = env_or("CONTROL_PLANE_LISTEN", "127.0.0.1:8090")
            .parse()
            .context("CONTROL_PLANE_LISTEN must be host:port")?;
        let database_url = required("CONTROL_PLANE_DATABASE_URL")?;
        Ok(Self {
            listen,
            database_url: Secret::new(database_url),
            tokens: Tokens::from_env()?,
            redis_url: Secret::new(env_or("REDIS_URL", "redis://127.0.0.1:6379")),
            creating_ttl: CREATING_TTL,
            reaper_interval: REAPER_INTERVAL,
            moves: MoveConfig::from_env()?,
            metrics: None,
        })
    }
}

fn env_or(name: &str, default: &str) -> String {
    std::env::var(name)
        .ok()
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| default.to_string())
}

fn optional(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

fn required(name: &str) -> anyhow::Result<String> {
    std::env::var(name)
        .ok()
        .filter(|v| !v.is_empty())
        .with_context(|| format!("{name} must be set"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_do_not_print() {
        let s = Secret::new("hunter2");
        assert_eq!(format!("{s:?}"), "Secret(***)");
        assert_eq!(s.expose(), "hunter2");
    }

    #[test]
    fn tokens_must_differ() {
        let mut t = Tokens {
            admin: Secret::new("a"),
            router: Secret::new("r"),
            shard: Some(Secret::new("s")),
            metrics: None,
        };
        assert!(t.check_distinct().is_ok());
        t.metrics = Some(Secret::new("a"));
        let e = t.check_distinct().unwrap_err().to_string();
        assert_eq!(e, "CONTROL_PLANE_TOKEN and METRICS_TOKEN must differ");
    }
}
