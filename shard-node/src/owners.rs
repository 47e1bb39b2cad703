//! Each database's owner, for the owner's share of the request pool
//! (`crate::fair_share`, [`crate::fair_share::Kind::Owner`]).
//!
//! The owner is the `owner_id` of the database's catalog row on this
//! shard: its creator, set once and never changed (a move copies the row
//! as it is). So it is read once per database and kept: a request of a
//! database seen before finds its owner in memory (one read lock), and
//! only the first request of a database after the node starts reads the
//! row (`catalog::databases::owner_of`). The signed principal does not
//! carry it (the router knows placements and memberships, not owners), and
//! asking the control plane would put a network call in front of requests.
//!
//! The map holds one short entry per database served since the node
//! started; past [`MAX_CACHED`] entries it is emptied and fills again.

use std::collections::HashMap;
use std::sync::{Arc, PoisonError, RwLock};

/// Databases whose owner is kept at most.
pub const MAX_CACHED: usize = 100_000;

/// Database id to owner id. See the module documentation.
#[derive(Default)]
pub struct Owners {
    known: RwLock<HashMap<Box<str>, Arc<str>>>,
}

impl Owners {
    /// The owner of `database_id`, when known.
    pub fn get(&self, database_id: &str) -> Option<Arc<str>> {
        self.known
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(database_id)
            .cloned()
    }

    /// Keeps `owner_id` as the owner of `database_id`; returns it.
    pub fn remember(&self, database_id: &str, owner_id: &str) -> Arc<str> {
        let owner: Arc<str> = Arc::from(owner_id);
        let mut known = self.known.write().unwrap_or_else(PoisonError::into_inner);
        if known.len() >= MAX_CACHED {
            known.clear();
        }
        known.insert(database_id.into(), Arc::clone(&owner));
        owner
    }

    /// Databases whose owner is kept (for tests).
    pub fn len(&self) -> usize {
        self.known
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_owner_is_kept_once_read() {
        let owners = Owners::default();
        assert!(owners.get("db_a").is_none());
        owners.remember("db_a", "usr_1");
        owners.remember("db_b", "usr_1");
        assert_eq!(owners.get("db_a").as_deref(), Some("usr_1"));
        assert_eq!(owners.get("db_b").as_deref(), Some("usr_1"));
        assert_eq!(owners.len(), 2);
    }
}
