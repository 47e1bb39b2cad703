//! Each database's, and each owner's, fair share of the request pool.
//!
//! Every tenant database on a shard draws its request sessions from one
//! pool (`SHARD_POOL_SIZE`). Without a cap, one database sending a few slow
//! reads at once (each allowed up to the statement time limit) could hold
//! every session, and every other database on the shard would wait and be
//! answered 503. [`FairShare`] bounds the sessions the requests of one
//! database hold at once (`SHARD_SESSIONS_PER_DATABASE`, by default the pool
//! size minus one): a request of a database at its cap waits for one of
//! that database's own sessions, never for another database's, and never
//! queues in the pool where other databases wait. With the default, one
//! busy database always leaves a session to the others.
//!
//! One owner with several databases on the shard could still hold every
//! session, a few per database; so a second [`FairShare`], keyed by the
//! databases' owner ([`Kind::Owner`], `SHARD_SESSIONS_PER_OWNER`, by
//! default the pool size minus one too), bounds the sessions the requests
//! of all of one owner's databases hold at once. A request takes its
//! database's share first, then its owner's ([`Shares`]).
//!
//! Each key (database or owner) in use has a counting semaphore of its
//! own, created on first use and removed when no request of it holds or
//! waits for a session, so the map holds only the keys in use. The map is
//! split into [`STRIPES`] locks by a hash of the key, each held for a
//! lookup only: taking a share costs one uncontended lock and, while the
//! key is under its cap, a semaphore permit taken at once.

use std::collections::hash_map::RandomState;
use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::Semaphore;

use crate::error::{ApiError, ApiResult, DATABASE_BUSY_MESSAGE, OWNER_BUSY_MESSAGE};

/// Locks the map is split into.
pub const STRIPES: usize = 32;

/// What a [`FairShare`] is keyed by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A database id (`SHARD_SESSIONS_PER_DATABASE`).
    Database,
    /// The owner (user id) of the databases (`SHARD_SESSIONS_PER_OWNER`).
    Owner,
}

impl Kind {
    /// The 503's message when the key's share stays taken.
    fn busy_message(self) -> &'static str {
        match self {
            Kind::Database => DATABASE_BUSY_MESSAGE,
            Kind::Owner => OWNER_BUSY_MESSAGE,
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            Kind::Database => "database",
            Kind::Owner => "owner",
        }
    }
}

/// The sessions of one key in use.
struct Entry {
    key: Box<str>,
    sessions: Semaphore,
}

type Stripe = HashMap<Box<str>, Arc<Entry>>;

/// The per-key caps of one pool. See the module documentation.
pub struct FairShare {
    kind: Kind,
    per_key: usize,
    stripes: Box<[Mutex<Stripe>]>,
    hasher: RandomState,
}

impl FairShare {
    /// At most `per_key` sessions (at least one) per database or owner.
    pub fn new(kind: Kind, per_key: usize) -> Self {
        Self {
            kind,
            per_key: per_key.max(1),
            stripes: (0..STRIPES).map(|_| Mutex::default()).collect(),
            hasher: RandomState::new(),
        }
    }

    fn stripe(&self, key: &str) -> MutexGuard<'_, Stripe> {
        let i = (self.hasher.hash_one(key) % STRIPES as u64) as usize;
        // A panic while the lock is held leaves the map consistent (every
        // change is a single insert or remove).
        self.stripes[i]
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// One of `key`'s sessions, waiting at most `wait` for one of its own
    /// to be given back; then 503 naming the database's (or the owner's)
    /// requests in progress. Held until the returned [`Share`] is dropped.
    pub async fn acquire(self: &Arc<Self>, key: &str, wait: Duration) -> ApiResult<Share> {
        let entry = {
            let mut stripe = self.stripe(key);
            match stripe.get(key) {
                Some(entry) => Arc::clone(entry),
                None => {
                    let entry = Arc::new(Entry {
                        key: key.into(),
                        sessions: Semaphore::new(self.per_key),
                    });
                    stripe.insert(key.into(), Arc::clone(&entry));
                    entry
                }
            }
        };
        // From here on, dropping `user` (a timeout, or the request dropped
        // while it waits) removes the entry if it is left idle.
        let user = User {
            entry,
            owner: Arc::clone(self),
        };
        let permit = match user.entry.sessions.try_acquire() {
            Ok(permit) => permit,
            Err(_) => match tokio::time::timeout(wait, user.entry.sessions.acquire()).await {
                Ok(Ok(permit)) => permit,
                // The semaphore is never closed.
                Ok(Err(_)) | Err(_) => {
                    tracing::warn!(
                        share = self.kind.as_str(),
                        key = %user.entry.key,
                        cap = self.per_key,
                        "the requests of a database (or of an owner's databases) hold all of its share of the pool"
                    );
                    return Err(ApiError::Unavailable(self.kind.busy_message()));
                }
            },
        };
        // Given back by `Share`'s drop; nothing can fail in between.
        permit.forget();
        Ok(Share { user })
    }

    /// Keys with a session held or awaited (for tests).
    pub fn keys_in_use(&self) -> usize {
        self.stripes
            .iter()
            .map(|s| s.lock().unwrap_or_else(PoisonError::into_inner).len())
            .sum()
    }
}

/// A request holding or waiting for one of a key's sessions; its drop
/// removes the key's entry when nobody else uses it.
struct User {
    entry: Arc<Entry>,
    owner: Arc<FairShare>,
}

impl Drop for User {
    fn drop(&mut self) {
        let mut stripe = self.owner.stripe(&self.entry.key);
        // Clones are made under this lock only, so two references (the
        // map's and this one) mean nobody else holds or awaits a session.
        let idle = stripe
            .get(&self.entry.key)
            .is_some_and(|e| Arc::ptr_eq(e, &self.entry) && Arc::strong_count(e) == 2);
        if idle {
            stripe.remove(&self.entry.key);
        }
    }
}

/// One session of a key's share, given back when dropped.
pub struct Share {
    user: User,
}

impl Drop for Share {
    fn drop(&mut self) {
        // Back to the key first; then `user` drops, removing the entry if
        // it was the last use.
        self.user.entry.sessions.add_permits(1);
    }
}

/// The two places a request's session takes: one in its database's share,
/// one in its owner's. Given back when dropped.
pub struct Shares {
    pub database: Share,
    pub owner: Share,
}

#[cfg(test)]
mod tests {
    use super::*;

    const NO_WAIT: Duration = Duration::from_millis(1);

    #[tokio::test]
    async fn a_database_at_its_cap_waits_while_another_gets_a_session() {
        let fair = Arc::new(FairShare::new(Kind::Database, 2));
        let a1 = fair.acquire("db_a", NO_WAIT).await.unwrap();
        let _a2 = fair.acquire("db_a", NO_WAIT).await.unwrap();
        let refused = fair.acquire("db_a", NO_WAIT).await;
        assert!(
            matches!(refused, Err(ApiError::Unavailable(m)) if m == DATABASE_BUSY_MESSAGE),
            "a third session of db_a was given"
        );
        let _b = fair.acquire("db_b", NO_WAIT).await.unwrap();
        drop(a1);
        let _a3 = fair.acquire("db_a", NO_WAIT).await.unwrap();
    }

    #[tokio::test]
    async fn a_waiter_gets_the_session_given_back() {
        let fair = Arc::new(FairShare::new(Kind::Database, 1));
        let held = fair.acquire("db_a", NO_WAIT).await.unwrap();
        let waiter = tokio::spawn({
            let fair = Arc::clone(&fair);
            async move { fair.acquire("db_a", Duration::from_secs(30)).await.is_ok() }
        });
        tokio::task::yield_now().await;
        drop(held);
        assert!(waiter.await.unwrap());
    }

    #[tokio::test]
    async fn entries_are_removed_when_idle() {
        let fair = Arc::new(FairShare::new(Kind::Database, 1));
        let a = fair.acquire("db_a", NO_WAIT).await.unwrap();
        let b = fair.acquire("db_b", NO_WAIT).await.unwrap();
        // A refused waiter leaves the entry to its holder.
        assert!(fair.acquire("db_a", NO_WAIT).await.is_err());
        assert_eq!(fair.keys_in_use(), 2);
        drop(a);
        assert_eq!(fair.keys_in_use(), 1);
        drop(b);
        assert_eq!(fair.keys_in_use(), 0);
        // A waiter dropped while it waits leaves nothing behind either.
        let held = fair.acquire("db_c", NO_WAIT).await.unwrap();
        let waiting = fair.acquire("db_c", Duration::from_secs(30));
        let abandoned = tokio::time::timeout(NO_WAIT, waiting).await;
        assert!(abandoned.is_err());
        drop(held);
        assert_eq!(fair.keys_in_use(), 0);
    }

    #[tokio::test]
    async fn an_owner_share_refuses_with_the_owner_message() {
        let owners = Arc::new(FairShare::new(Kind::Owner, 1));
        let _held = owners.acquire("usr_a", NO_WAIT).await.unwrap();
        let refused = owners.acquire("usr_a", NO_WAIT).await;
        assert!(
            matches!(refused, Err(ApiError::Unavailable(m)) if m == OWNER_BUSY_MESSAGE),
            "a second session of usr_a's databases was given"
        );
        let _other = owners.acquire("usr_b", NO_WAIT).await.unwrap();
    }
}
