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
