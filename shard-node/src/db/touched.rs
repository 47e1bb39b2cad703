//! Sessions retired after serving too many databases.
//!
//! A PostgreSQL backend keeps the catalog cache entries (relcache,
//! catcache, the plans of its prepared statements) of every relation it
//! has opened until the session ends: PostgreSQL 15 never evicts them. A
//! tenant database is a schema of a few tables, connector tables and their
//! indexes, so a pooled session that serves thousands of databases grows
//! to hold the catalog of thousands of relations (docs/capacity.md, "A
//! shard with 10,000 databases": about 100 to 200 kB per database of
//! three tables served). So each pool counts the distinct databases each of its
//! sessions has served ([`Touched::touch`]); once a session has served
//! more than `SHARD_SESSION_MAX_DATABASES` it is closed at its next
//! checkout ([`Touched::retire_hook`], a `pre_recycle` hook beside
//! `service_kit::pg_failover`'s) and the pool opens a fresh one. A session
//! that keeps serving the same databases is never retired.
//!
//! Sessions are told apart by the address of their statement cache (an
//! `Arc` that lives as long as the session) and the instant they were
//! opened, so a new session at a reused address starts from nothing.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use deadpool_postgres::{ClientWrapper, HookError, Object};

/// One session, as the pool's hooks and its checkouts both see it.
type SessionKey = (usize, Instant);

fn key_of(client: &ClientWrapper, created: Instant) -> SessionKey {
    (Arc::as_ptr(&client.statement_cache) as usize, created)
}

/// Databases one session served, and when it last served one.
struct Served {
    databases: HashSet<Box<str>>,
    last: Instant,
}

/// The distinct databases each session of one pool has served.
pub struct Touched {
    /// Past this many databases a session is retired.
    max_databases: usize,
    /// Sessions kept track of at most before the least recently used
    /// entries are dropped (entries of sessions closed for another reason
    /// are never told apart from idle ones).
    max_sessions: usize,
    sessions: Mutex<HashMap<SessionKey, Served>>,
}

impl Touched {
    /// For a pool of `pool_size` sessions, each retired past
    /// `max_databases` databases.
    pub fn new(max_databases: usize, pool_size: usize) -> Arc<Self> {
        Arc::new(Self {
            max_databases: max_databases.max(1),
            max_sessions: 2 * pool_size.max(1) + 8,
            sessions: Mutex::default(),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<SessionKey, Served>> {
        self.sessions.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Counts `database_id` as served by the session `object`.
    pub fn touch(&self, object: &Object, database_id: &str) {
        let key = key_of(object, Object::metrics(object).created);
        self.touch_key(key, database_id);
    }

    fn touch_key(&self, key: SessionKey, database_id: &str) {
        let now = Instant::now();
        let mut sessions = self.lock();
        let served = sessions.entry(key).or_insert_with(|| Served {
            databases: HashSet::new(),
            last: now,
        });
        served.last = now;
        // Past the bound the set stops growing: the session is retired
        // at its next checkout anyway.
        if served.databases.len() <= self.max_databases && !served.databases.contains(database_id) {
            served.databases.insert(database_id.into());
        }
        if sessions.len() > self.max_sessions {
            forget_oldest(&mut sessions, self.max_sessions / 2);
        }
    }

    /// Whether the session has served more databases than the bound; it
    /// is forgotten when it has (it is about to be closed).
    fn retire(&self, key: SessionKey) -> bool {
        let mut sessions = self.lock();
        let over = sessions
            .get(&key)
            .is_some_and(|s| s.databases.len() > self.max_databases);
        if over {
            sessions.remove(&key);
        }
        over
    }

    /// The bound: past this many databases a session is retired.
    pub fn max_databases(&self) -> usize {
        self.max_databases
    }

    /// Databases the session has served (for tests and metrics).
    pub fn served(&self, object: &Object) -> usize {
        let key = key_of(object, Object::metrics(object).created);
        self.lock().get(&key).map_or(0, |s| s.databases.len())
    }

    /// The `pre_recycle` hook closing a session that served more than the
    /// bound.
    pub fn retire_hook(self: &Arc<Self>) -> deadpool_postgres::Hook {
        let this = Arc::clone(self);
        deadpool_postgres::Hook::sync_fn(move |client, metrics| {
            if this.retire(key_of(client, metrics.created)) {
                return Err(HookError::message(
                    "session served more databases than SHARD_SESSION_MAX_DATABASES",
                ));
            }
            Ok(())
        })
    }
}

/// Keeps the `keep` most recently used entries.
fn forget_oldest(sessions: &mut HashMap<SessionKey, Served>, keep: usize) {
    let mut by_age: Vec<(Instant, SessionKey)> =
        sessions.iter().map(|(k, s)| (s.last, *k)).collect();
    by_age.sort_unstable_by_key(|(last, _)| std::cmp::Reverse(*last));
    for (_, key) in by_age.into_iter().skip(keep) {
        sessions.remove(&key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_is_retired_only_past_the_bound_of_distinct_databases() {
        let touched = Touched::new(3, 4);
        let session = (1, Instant::now());
        for db in ["db_a", "db_b", "db_a", "db_c", "db_c", "db_b"] {
            touched.touch_key(session, db);
        }
        assert!(!touched.retire(session), "three distinct: at the bound");
        touched.touch_key(session, "db_d");
        assert!(touched.retire(session), "a fourth: past it");
        assert!(!touched.retire(session), "forgotten once retired");
    }

    #[test]
    fn sessions_count_apart_and_a_reused_address_starts_afresh() {
        let touched = Touched::new(1, 4);
        let opened = Instant::now();
        let first = (7, opened);
        let other = (8, opened);
        touched.touch_key(first, "db_a");
        touched.touch_key(other, "db_b");
        assert!(!touched.retire(first));
        assert!(!touched.retire(other));
        touched.touch_key(first, "db_b");
        // A new session at the first one's address, opened later.
        let reused = (7, opened + std::time::Duration::from_millis(1));
        touched.touch_key(reused, "db_c");
        assert!(!touched.retire(reused));
        assert!(touched.retire(first));
    }

    #[test]
    fn entries_of_sessions_gone_without_recycling_are_dropped() {
        let touched = Touched::new(10, 2);
        let base = Instant::now();
        for i in 0..100 {
            touched.touch_key((i, base), "db_a");
        }
        assert!(touched.lock().len() <= touched.max_sessions);
    }
}
