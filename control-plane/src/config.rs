//! Configuration of `control-plane serve`: [`Settings`], one clap struct
//! read from flags and the environment (`control-plane serve --help`), and
//! the [`Config`] it makes. Limits and timings live here too.

use std::net::SocketAddr;
use std::time::Duration;

use service_kit::parse;

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

/// A value that never prints (`Secret(***)`).
pub use service_kit::Secret;

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
    pub metrics: Option<service_kit::metrics::PrometheusHandle>,
    /// Sign-up and sessions of the account pages (docs/security.md).
    pub accounts: AccountConfig,
}

/// Sign-up and sessions of the router's account pages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AccountConfig {
    /// `SIGNUP=open`: anyone may sign up; `closed`: only operators make users.
    pub signup_open: bool,
    /// `SESSION_TTL_SECS`: a session ends this long after sign-in.
    pub session_ttl: Duration,
    /// `SESSION_IDLE_SECS`: a session unused this long ends.
    pub session_idle: Duration,
}

impl Default for AccountConfig {
    fn default() -> Self {
        Self {
            signup_open: false,
            session_ttl: Duration::from_secs(14 * 24 * 3600),
            session_idle: Duration::from_secs(24 * 3600),
        }
    }
}

fn signup_mode(s: &str) -> Result<bool, String> {
    match s {
        "open" => Ok(true),
        "closed" => Ok(false),
        _ => Err(format!("SIGNUP must be open or closed, not {s:?}")),
    }
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
    /// Moves at once in the cluster. Each one under way holds a catalog
    /// session (its driver's lock), so this bounds those too
    /// (docs/capacity.md, "Rebalancing, measured").
    pub max: usize,
    /// Longest wait for routers' acknowledgements before the old copy goes.
    pub ack_timeout: Duration,
    /// How often cutover polls the target for the marker.
    pub poll: Duration,
    /// Test hook: wait after entering each state and after the fence.
    pub step_delay: Duration,
    /// `RESTORE_SCRATCH_COMMAND`: the program that restores a shard's
    /// backups into a scratch instance and drops it (docs/restore.md);
    /// `None`: point-in-time restore is not configured. Restores connect
    /// to shard instances like moves (`MOVE_ADMIN_USER`, ...).
    pub restore_scratch_command: Option<String>,
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
            per_shard: 3,
            max: 64,
            ack_timeout: Duration::from_millis(10_000),
            poll: Duration::from_millis(2),
            step_delay: Duration::ZERO,
            restore_scratch_command: None,
        }
    }
}

/// The settings of `control-plane serve`, from flags or the environment
/// (`control-plane serve --help` lists each with its variable and
/// default). [`Config::from_settings`] turns them into a [`Config`].
#[derive(Debug, Clone, clap::Args)]
pub struct Settings {
    /// Listen address (host:port).
    #[arg(long, env = "CONTROL_PLANE_LISTEN", default_value = "127.0.0.1:8090")]
    pub listen: SocketAddr,
    #[command(flatten)]
    pub log: service_kit::telemetry::LogSettings,
    /// Its catalog PostgreSQL.
    #[arg(long, env = "CONTROL_PLANE_DATABASE_URL", hide_env_values = true)]
    pub database_url: Secret,
    /// The operator's admin token: every route.
    #[arg(
        long = "control-plane-token",
        value_name = "TOKEN",
        env = "CONTROL_PLANE_TOKEN",
        hide_env_values = true
    )]
    pub token: Secret,
    /// Routers' token: the routes routers call.
    #[arg(
        long = "control-plane-router-token",
        value_name = "TOKEN",
        env = "CONTROL_PLANE_ROUTER_TOKEN",
        hide_env_values = true
    )]
    pub router_token: Secret,
    /// Shard nodes' token: placement reads.
    #[arg(
        long = "control-plane-shard-token",
        value_name = "TOKEN",
        env = "CONTROL_PLANE_SHARD_TOKEN",
        hide_env_values = true
    )]
    pub shard_token: Option<Secret>,
    /// `GET /metrics` only. All four tokens must differ.
    #[arg(long, env = "METRICS_TOKEN", hide_env_values = true)]
    pub metrics_token: Option<Secret>,
    /// Redis: liveness, versions, invalidations.
    #[arg(
        long,
        env = "REDIS_URL",
        default_value = "redis://127.0.0.1:6379",
        hide_env_values = true
    )]
    pub redis_url: Secret,
    /// TLS of every PostgreSQL connection of the control plane: disable,
    /// prefer, require or verify-full [default: each DSN's own sslmode].
    #[arg(long, env = "CONTROL_PLANE_PG_SSLMODE")]
    pub pg_sslmode: Option<String>,
    /// The PEM file of the CAs `verify-full` trusts.
    #[arg(long, env = "CONTROL_PLANE_PG_SSLROOTCERT")]
    pub pg_sslrootcert: Option<String>,
    /// Role the mover connects to shard instances as (a superuser).
    #[arg(long, env = "MOVE_ADMIN_USER", default_value = "postgres")]
    pub move_admin_user: String,
    /// That role's password.
    #[arg(long, env = "MOVE_ADMIN_PASSWORD", hide_env_values = true)]
    pub move_admin_password: Option<Secret>,
    /// Path, on every shard instance's host, of the libpq password file a
    /// move's subscription reads the password from.
    #[arg(long, env = "MOVE_REPLICATION_PASSFILE")]
    pub move_replication_passfile: Option<String>,
    /// Longest hold (ms) of a database's requests at cutover.
    #[arg(long, env = "MOVE_PAUSE_BUDGET_MS", default_value = "400", value_parser = parse::millis_or_zero)]
    pub move_pause_budget_ms: Duration,
    /// Cutover attempts before a move is aborted.
    #[arg(long, env = "MOVE_CUTOVER_ATTEMPTS", default_value = "3", value_parser = parse::number::<i32>)]
    pub move_cutover_attempts: i32,
    /// Moves at once touching one shard (as source or target).
    #[arg(long, env = "MOVES_PER_SHARD", default_value = "3", value_parser = parse::number::<usize>)]
    pub moves_per_shard: usize,
    /// Moves at once in the cluster.
    #[arg(long, env = "MOVES_MAX", default_value = "64", value_parser = parse::number::<usize>)]
    pub moves_max: usize,
    /// Longest wait (ms) for routers' acknowledgements before the old copy
    /// goes.
    #[arg(long, env = "MOVE_ACK_TIMEOUT_MS", default_value = "10000", value_parser = parse::millis_or_zero)]
    pub move_ack_timeout_ms: Duration,
    /// How often (ms) cutover polls the target for the marker.
    #[arg(long, env = "MOVE_POLL_MS", default_value = "2", value_parser = parse::millis_or_zero)]
    pub move_poll_ms: Duration,
    /// Test hook: wait (ms) after entering each state and after the fence.
    #[arg(long, env = "MOVE_STEP_DELAY_MS", default_value = "0", value_parser = parse::millis_or_zero)]
    pub move_step_delay_ms: Duration,
    /// Program run as `PROGRAM restore <shard> <as-of RFC 3339> <name>`
    /// (prints the DSN of a scratch PostgreSQL restored from that shard's
    /// backups) and `PROGRAM drop <name>`; unset: point-in-time restore is
    /// not configured (docs/restore.md).
    #[arg(long, env = "RESTORE_SCRATCH_COMMAND")]
    pub restore_scratch_command: Option<String>,
    /// Whether anyone may sign up on the account pages (`open`) or only
    /// operators make users (`closed`).
    #[arg(long, env = "SIGNUP", default_value = "closed", value_parser = signup_mode)]
    pub signup: bool,
    /// A browser session ends this many seconds after sign-in.
    #[arg(long, env = "SESSION_TTL_SECS", default_value = "1209600", value_parser = parse::secs)]
    pub session_ttl_secs: Duration,
    /// A browser session unused for this many seconds ends.
    #[arg(long, env = "SESSION_IDLE_SECS", default_value = "86400", value_parser = parse::secs)]
    pub session_idle_secs: Duration,
}

impl Config {
    /// From the environment alone (no command line).
    pub fn from_env() -> anyhow::Result<Self> {
        #[derive(clap::Parser)]
        struct Serve {
            #[command(flatten)]
            settings: Settings,
        }
        let serve: Serve = parse::try_args_from(["control-plane"])?;
        Self::from_settings(serve.settings)
    }

    /// From parsed settings; checks what one setting alone cannot.
    pub fn from_settings(s: Settings) -> anyhow::Result<Self> {
        let tokens = Tokens {
            admin: s.token,
            router: s.router_token,
            shard: s.shard_token,
            metrics: s.metrics_token,
        };
        tokens.check_distinct()?;
        let pg_sslmode = s.pg_sslmode.as_deref().map(str::parse).transpose()?;
        let moves = MoveConfig {
            admin_user: s.move_admin_user,
            admin_password: s.move_admin_password,
            pg_tls: crate::pg_tls::PgTls::new(pg_sslmode, s.pg_sslrootcert.as_deref())?,
            replication_passfile: s.move_replication_passfile,
            pause_budget: s.move_pause_budget_ms,
            cutover_attempts: s.move_cutover_attempts,
            per_shard: s.moves_per_shard,
            max: s.moves_max,
            ack_timeout: s.move_ack_timeout_ms,
            poll: s.move_poll_ms,
            step_delay: s.move_step_delay_ms,
            restore_scratch_command: s.restore_scratch_command.filter(|c| !c.trim().is_empty()),
        };
        Ok(Self {
            listen: s.listen,
            database_url: s.database_url,
            tokens,
            redis_url: s.redis_url,
            creating_ttl: CREATING_TTL,
            reaper_interval: REAPER_INTERVAL,
            moves,
            metrics: None,
            accounts: AccountConfig {
                signup_open: s.signup,
                session_ttl: s.session_ttl_secs,
                session_idle: s.session_idle_secs,
            },
        })
    }
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
    fn defaults_are_the_configs_defaults() {
        let settings = service_kit::parse::try_args_only::<Settings, _, _>([
            "control-plane",
            "--database-url=postgres://x",
            "--control-plane-token=a",
            "--control-plane-router-token=r",
        ])
        .unwrap();
        let c = Config::from_settings(settings).unwrap();
        let d = MoveConfig::default();
        let m = &c.moves;
        assert_eq!(
            (
                &m.admin_user,
                m.pause_budget,
                m.cutover_attempts,
                m.per_shard
            ),
            (
                &d.admin_user,
                d.pause_budget,
                d.cutover_attempts,
                d.per_shard
            )
        );
        assert_eq!(
            (m.max, m.ack_timeout, m.poll, m.step_delay),
            (d.max, d.ack_timeout, d.poll, d.step_delay)
        );
        assert_eq!(c.listen.to_string(), "127.0.0.1:8090");
        assert_eq!(c.accounts, AccountConfig::default());
        assert_eq!(c.redis_url.expose(), "redis://127.0.0.1:6379");
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
