//! Each database's fair share of the request pool.
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
//! Each database in use has a counting semaphore of its own, created on
//! first use and removed when no request of the database holds or waits
//! for a session, so the map holds only the databases in use. The map is
//! split into [`STRIPES`] locks by a hash of the database id, each held for
//! a lookup only: taking a share costs one uncontended lock and, while the
//! database is under its cap, a semaphore permit taken at once.

use std::collections::hash_map::RandomState;
use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::Semaphore;

use crate::error::{ApiError, ApiResult, DATABASE_BUSY_MESSAGE};

/// Locks the map is split into.
pub const STRIPES: usize = 32;

/// The sessions of one database in use.
struct Entry {
    database_id: Box<str>,
    sessions: Semaphore,
}

type Stripe = HashMap<Box<str>, Arc<Entry>>;

/// The per-database caps of one pool. See the module documentation.
pub struct FairShare {
    per_database: usize,
    stripes: Box<[Mutex<Stripe>]>,
    hasher: RandomState,
}

impl FairShare {
    /// At most `per_database` sessions (at least one) per database.
    pub fn new(per_database: usize) -> Self {
        Self {
            per_database: per_database.max(1),
            stripes: (0..STRIPES).map(|_| Mutex::default()).collect(),
            hasher: RandomState::new(),
        }
    }

    fn stripe(&self, database_id: &str) -> MutexGuard<'_, Stripe> {
        let i = (self.hasher.hash_one(database_id) % STRIPES as u64) as usize;
        // A panic while the lock is held leaves the map consistent (every
        // change is a single insert or remove).
        self.stripes[i]
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// One of `database_id`'s sessions, waiting at most `wait` for one of
    /// its own to be given back; then 503 naming the database's requests in
    /// progress. Held until the returned [`Share`] is dropped.
    pub async fn acquire(self: &Arc<Self>, database_id: &str, wait: Duration) -> ApiResult<Share> {
        let entry = {
            let mut stripe = self.stripe(database_id);
            match stripe.get(database_id) {
                Some(entry) => Arc::clone(entry),
                None => {
                    let entry = Arc::new(Entry {
                        database_id: database_id.into(),
                        sessions: Semaphore::new(self.per_database),
                    });
                    stripe.insert(database_id.into(), Arc::clone(&entry));
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
                        database_id = %user.entry.database_id,
                        cap = self.per_database,
                        "a database's requests hold all of its share of the pool"
                    );
                    return Err(ApiError::Unavailable(DATABASE_BUSY_MESSAGE));
                }
            },
        };
        // Given back by `Share`'s drop; nothing can fail in between.
        permit.forget();
        Ok(Share { user })
    }

    /// Databases with a session held or awaited (for tests).
    pub fn databases_in_use(&self) -> usize {
        self.stripes
            .iter()
            .map(|s| s.lock().unwrap_or_else(PoisonError::into_inner).len())
            .sum()
    }
}

/// A request holding or waiting for one of a database's sessions; its drop
/// removes the database's entry when nobody else uses it.
struct User {
    entry: Arc<Entry>,
    owner: Arc<FairShare>,
}

impl Drop for User {
    fn drop(&mut self) {
        let mut stripe = self.owner.stripe(&self.entry.database_id);
        // Clones are made under this lock only, so two references (the
        // map's and this one) mean nobody else holds or awaits a session.
        let idle = stripe
            .get(&self.entry.database_id)
            .is_some_and(|e| Arc::ptr_eq(e, &self.entry) && Arc::strong_count(e) == 2);
        if idle {
            stripe.remove(&self.entry.database_id);
        }
    }
}

/// One session of a database's share, given back when dropped.
pub struct Share {
    user: User,
}

impl Drop for Share {
    fn drop(&mut self) {
        // Back to the database first; then `user` drops, removing the entry
        // if it was the last use.
        self.user.entry.sessions.add_permits(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NO_WAIT: Duration = Duration::from_millis(1);

    #[tokio::test]
    async fn a_database_at_its_cap_waits_while_another_gets_a_session() {
        let fair = Arc::new(FairShare::new(2));
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
        let fair = Arc::new(FairShare::new(1));
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
        let fair = Arc::new(FairShare::new(1));
        let a = fair.acquire("db_a", NO_WAIT).await.unwrap();
        let b = fair.acquire("db_b", NO_WAIT).await.unwrap();
        // A refused waiter leaves the entry to its holder.
        assert!(fair.acquire("db_a", NO_WAIT).await.is_err());
        assert_eq!(fair.databases_in_use(), 2);
        drop(a);
        assert_eq!(fair.databases_in_use(), 1);
        drop(b);
        assert_eq!(fair.databases_in_use(), 0);
        // A waiter dropped while it waits leaves nothing behind either.
        let held = fair.acquire("db_c", NO_WAIT).await.unwrap();
        let waiting = fair.acquire("db_c", Duration::from_secs(30));
        let abandoned = tokio::time::timeout(NO_WAIT, waiting).await;
        assert!(abandoned.is_err());
        drop(held);
        assert_eq!(fair.databases_in_use(), 0);
    }
}
