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
    /// Admin token every `/internal/*` route but health requires.
    pub token: Secret,
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
        let token = required("CONTROL_PLANE_TOKEN")?;
        Ok(Self {
            listen,
            database_url: Secret::new(database_url),
            token: Secret::new(token),
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
}
