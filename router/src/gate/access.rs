//! Cached `UserAccess` (memberships and support grants) per user, checked on
//! each request against the access version Redis holds. At most
//! `ROUTER_ACCESS_CACHE_ENTRIES` users are kept (least recently used first
//! out, see `bounded`); an evicted user's access is read again on its next
//! use.

use std::sync::Arc;
use std::time::Instant;

use cluster_protocol::control::{client::ClientError, client::ControlPlaneClient, UserAccess};

use crate::bounded::BoundedMap;
use crate::edge::metrics::{self, Cache};
use crate::gate::keys::FALLBACK_MAX_AGE;

#[derive(Clone)]
struct Entry {
    access: Arc<UserAccess>,
    fetched_at: Instant,
}

pub struct AccessStore {
    control: ControlPlaneClient,
    users: BoundedMap<Entry>,
}

impl AccessStore {
    pub fn new(control: ControlPlaneClient) -> Self {
        Self::bounded(control, crate::bounded::DEFAULT_USERS)
    }

    /// A store of at most `entries` users.
    pub fn bounded(control: ControlPlaneClient, entries: usize) -> Self {
        Self {
            control,
            users: BoundedMap::new(entries),
        }
    }

    /// Users held now.
    pub fn len(&self) -> usize {
        self.users.len()
    }

    pub fn is_empty(&self) -> bool {
        self.users.is_empty()
    }

    /// The user's access. `version` is what Redis says (`Some(None)`: absent),
    /// or `None` when Redis could not be asked (then re-fetch when old).
    pub async fn get(
        &self,
        user_id: &str,
        version: Option<Option<i64>>,
    ) -> Result<Arc<UserAccess>, ClientError> {
        if let Some(e) = self.users.get(user_id) {
            let fresh = match version {
                Some(Some(v)) => v == e.access.version,
                Some(None) => false,
                None => e.fetched_at.elapsed() < FALLBACK_MAX_AGE,
            };
            if fresh {
                metrics::cache_hit(Cache::Access);
                return Ok(e.access);
            }
        }
        metrics::cache_miss(Cache::Access);
        let access = Arc::new(self.control.user_access(user_id).await?);
        self.users.insert(
            user_id,
            Entry {
                access: access.clone(),
                fetched_at: Instant::now(),
            },
        );
        metrics::cache_entries(Cache::Access, self.users.len());
        Ok(access)
    }

    pub fn forget(&self, user_id: &str) {
        self.users.remove(user_id);
    }
}
