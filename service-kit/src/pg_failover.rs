//! Following a PostgreSQL primary that moves (Patroni failover), shared by
//! the shard node's and the control plane's pools.
//!
//! The services connect with a multi-host connection string and
//! `target_session_attrs=read-write`, so every NEW session finds whichever
//! member is the primary now. What this module adds:
//!
//! * [`harden`]: short connect timeouts per host and TCP keepalives plus
//!   `tcp_user_timeout`, so a session to a host that vanished without
//!   closing its sockets fails within seconds instead of hanging a request.
//! * [`classify`] / [`in_anyhow`]: the one mapping from a PostgreSQL or pool
//!   error to "the server went away or is not the primary now" (connection
//!   lost or refused, SQLSTATE class 08, 25006 `read_only_sql_transaction`,
//!   57P01 `admin_shutdown`, 57P02 `crash_shutdown`, 57P03
//!   `cannot_connect_now`). Each service answers those 503 `unavailable`
//!   with `Retry-After` ([`UNAVAILABLE_MESSAGE`]).
//! * [`discard_stale_sessions`]: a `pre_recycle` hook. Classifying an
//!   error as a failover records the moment ([`note`]); every pooled session
//!   opened before the last such moment is discarded at its next checkout
//!   instead of being handed to a request, so no request is given a session
//!   to a demoted or dead member. (The pool's own recycle check already
//!   discards sessions whose connection is closed.) Sessions opened after
//!   it, to the new primary, are kept.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use deadpool_postgres::{HookError, PoolError};
use tokio_postgres::error::SqlState;

/// How long connecting to ONE host of the connection string may take (a
/// multi-host string tries each host in turn).
pub const HOST_CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// Idle time before the first TCP keepalive probe of a session.
pub const KEEPALIVE_IDLE: Duration = Duration::from_secs(5);
/// Time between keepalive probes.
pub const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(1);
/// Unanswered probes before the kernel closes the session (so an idle
/// session to a vanished host is closed about 8 s after its last use).
pub const KEEPALIVE_RETRIES: u32 = 3;
/// How long sent bytes may stay unacknowledged before the kernel closes
/// the session: a statement sent to a vanished host fails after this
/// rather than waiting for its statement timeout. A busy but live server
/// acknowledges at the TCP level, so long statements are not cut short.
pub const TCP_USER_TIMEOUT: Duration = Duration::from_secs(10);
/// `Retry-After` of a failover 503, in seconds.
pub const RETRY_AFTER_SECS: u64 = 1;
/// The message of a failover 503. It says the outcome of a write in
/// progress is unknown: the connection may have been lost during COMMIT.
pub const UNAVAILABLE_MESSAGE: &str = "The database server is unavailable right now (it may be \
     failing over to its standby). Retry in a few seconds. A change sent with this request may \
     or may not have been applied: read before retrying a change that is not idempotent.";

/// Sets the timeouts above on `cfg`, keeping a shorter connect timeout the
/// connection string already names.
pub fn harden(cfg: &mut tokio_postgres::Config) {
    let connect = match cfg.get_connect_timeout() {
        Some(t) if *t < HOST_CONNECT_TIMEOUT => *t,
        _ => HOST_CONNECT_TIMEOUT,
    };
    cfg.connect_timeout(connect)
        .keepalives(true)
        .keepalives_idle(KEEPALIVE_IDLE)
        .keepalives_interval(KEEPALIVE_INTERVAL)
        .keepalives_retries(KEEPALIVE_RETRIES)
        .tcp_user_timeout(TCP_USER_TIMEOUT);
}

/// Why a PostgreSQL error means the session's server is not (or no longer)
/// a usable primary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failover {
    /// The connection broke, timed out or could not be made (no host of
    /// the string accepted, or none of them is read-write now), or the
    /// server reported a connection exception (SQLSTATE class 08).
    ConnectionLost,
    /// The server is read only: a standby, or a primary being demoted
    /// (25006).
    ReadOnly,
    /// The server is stopping, crashed, or is starting up or in recovery
    /// (57P01, 57P02, 57P03).
    ShuttingDown,
}

/// The SQLSTATEs of a server that is not serving as the primary.
fn by_code(code: &SqlState) -> Option<Failover> {
    if code.code().starts_with("08") {
        return Some(Failover::ConnectionLost);
    }
    match code {
        c if *c == SqlState::READ_ONLY_SQL_TRANSACTION => Some(Failover::ReadOnly),
        c if *c == SqlState::ADMIN_SHUTDOWN
            || *c == SqlState::CRASH_SHUTDOWN
            || *c == SqlState::CANNOT_CONNECT_NOW =>
        {
            Some(Failover::ShuttingDown)
        }
        _ => None,
    }
}

/// Whether `e` says the session's server went away or is not the primary.
/// Any other error (a constraint, a syntax error, a statement timeout) is
/// `None`.
pub fn classify(e: &tokio_postgres::Error) -> Option<Failover> {
    if let Some(code) = e.code() {
        return by_code(code);
    }
    if e.is_closed() {
        return Some(Failover::ConnectionLost);
    }
    // tokio-postgres keeps its error kinds private: an I/O cause (refused,
    // reset, "database does not allow writes" from target_session_attrs)
    // or its connect timeout, which has no cause.
    let io = std::error::Error::source(e).is_some_and(|s| s.is::<std::io::Error>());
    if io || e.to_string().starts_with("timeout waiting for server") {
        return Some(Failover::ConnectionLost);
    }
    None
}

/// The failover a pool error means: the pool could not open a session
/// (the server refused or timed out), or its hook refused one.
pub fn classify_pool(e: &PoolError) -> Option<Failover> {
    match e {
        PoolError::Backend(e) => classify(e),
        PoolError::Timeout(deadpool_postgres::TimeoutType::Create) => {
            Some(Failover::ConnectionLost)
        }
        PoolError::PostCreateHook(HookError::Backend(e)) => classify(e),
        _ => None,
    }
}

/// The failover one error of a chain means, if any.
fn in_one(err: &(dyn std::error::Error + 'static)) -> Option<Failover> {
    if let Some(pg) = err.downcast_ref::<tokio_postgres::Error>() {
        return classify(pg);
    }
    classify_pool(err.downcast_ref::<PoolError>()?)
}

/// The first failover along an error's chain (errors are often wrapped
/// with context on their way up), recorded with [`note`].
pub fn in_anyhow(e: &anyhow::Error) -> Option<Failover> {
    let found = e.chain().find_map(in_one)?;
    note(found);
    Some(found)
}

/// When this process last saw a failover error, in nanoseconds after
/// [`epoch`] (0: never). An atomic, not a lock: every pool checkout reads it.
static LAST_FAILOVER: AtomicU64 = AtomicU64::new(0);

/// The instant [`LAST_FAILOVER`] counts from (a moment before any session).
fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

/// The last failover error this process saw, if any.
fn last_failover() -> Option<Instant> {
    match LAST_FAILOVER.load(Ordering::Relaxed) {
        0 => None,
        nanos => Some(epoch() + Duration::from_nanos(nanos)),
    }
}

/// Records that a session saw `failover` now: every session opened before
/// now is discarded at its next checkout ([`discard_stale_sessions`]).
pub fn note(failover: Failover) {
    let base = epoch();
    let now = Instant::now();
    let nanos = u64::try_from(now.duration_since(base).as_nanos())
        .unwrap_or(u64::MAX)
        .max(1);
    let before = LAST_FAILOVER.swap(nanos, Ordering::Relaxed);
    // Logged once per burst (after a quiet second): every request that
    // meets the failover comes here.
    if before == 0 || nanos.saturating_sub(before) >= 1_000_000_000 {
        tracing::warn!(
            ?failover,
            "postgres session lost its primary: older pooled sessions will be reopened"
        );
    }
}

/// Whether a session opened at `created` predates the failover seen at
/// `last` (and must not be handed out again).
fn is_stale(created: Instant, last: Option<Instant>) -> bool {
    last.is_some_and(|last| created <= last)
}

/// The `pre_recycle` hook that discards sessions opened before the last
/// failover error this process saw, and those whose connection is closed.
pub fn discard_stale_sessions() -> deadpool_postgres::Hook {
    deadpool_postgres::Hook::sync_fn(|client, metrics| {
        if client.is_closed() || is_stale(metrics.created, last_failover()) {
            return Err(HookError::message(
                "session predates a failover or is closed",
            ));
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqlstates_of_a_server_that_is_not_the_primary_are_failovers() {
        let cases = [
            ("25006", Some(Failover::ReadOnly)),
            ("57P01", Some(Failover::ShuttingDown)),
            ("57P02", Some(Failover::ShuttingDown)),
            ("57P03", Some(Failover::ShuttingDown)),
            ("08006", Some(Failover::ConnectionLost)),
            ("08001", Some(Failover::ConnectionLost)),
            ("08P01", Some(Failover::ConnectionLost)),
        ];
        for (code, want) in cases {
            assert_eq!(by_code(&SqlState::from_code(code)), want, "{code}");
        }
    }

    #[test]
    fn ordinary_errors_are_not_failovers() {
        for code in [
            "23505", "57014", "55P03", "42P01", "40001", "53300", "25P02",
        ] {
            assert_eq!(by_code(&SqlState::from_code(code)), None, "{code}");
        }
    }

    /// The error of connecting with `cfg` (which must fail).
    async fn refused(cfg: &tokio_postgres::Config) -> tokio_postgres::Error {
        match cfg.connect(tokio_postgres::NoTls).await {
            Ok(_) => panic!("nothing listens there"),
            Err(e) => e,
        }
    }

    #[tokio::test]
    async fn a_refused_connection_is_a_lost_connection_and_is_noted() {
        // Port 1 on loopback: nothing listens there, the kernel refuses.
        let mut cfg: tokio_postgres::Config = "postgres://x@127.0.0.1:1/x".parse().unwrap();
        harden(&mut cfg);
        let e = refused(&cfg).await;
        assert_eq!(classify(&e), Some(Failover::ConnectionLost));
        let before = Instant::now();
        let wrapped = anyhow::Error::new(e).context("catalog query");
        assert_eq!(in_anyhow(&wrapped), Some(Failover::ConnectionLost));
        assert!(
            is_stale(before, last_failover()),
            "the failover was recorded"
        );
    }

    #[test]
    fn a_pool_that_could_not_open_a_session_in_time_is_a_failover() {
        let e = PoolError::Timeout(deadpool_postgres::TimeoutType::Create);
        assert_eq!(classify_pool(&e), Some(Failover::ConnectionLost));
        let busy = PoolError::Timeout(deadpool_postgres::TimeoutType::Wait);
        assert_eq!(classify_pool(&busy), None);
    }

    #[test]
    fn sessions_opened_before_the_last_failover_are_stale() {
        let opened = Instant::now();
        assert!(!is_stale(opened, None));
        let failover = opened + Duration::from_millis(5);
        assert!(is_stale(opened, Some(failover)));
        assert!(!is_stale(
            failover + Duration::from_millis(1),
            Some(failover)
        ));
    }

    #[test]
    fn harden_keeps_a_shorter_connect_timeout_and_sets_keepalives() {
        let mut cfg: tokio_postgres::Config = "postgres://x@h1:1,h2:2/x?connect_timeout=1"
            .parse()
            .unwrap();
        harden(&mut cfg);
        assert_eq!(cfg.get_connect_timeout(), Some(&Duration::from_secs(1)));
        assert!(cfg.get_keepalives());
        assert_eq!(cfg.get_keepalives_idle(), KEEPALIVE_IDLE);
        let mut plain: tokio_postgres::Config = "postgres://x@h1:1/x".parse().unwrap();
        harden(&mut plain);
        assert_eq!(plain.get_connect_timeout(), Some(&HOST_CONNECT_TIMEOUT));
    }
}
