//! Cached `UserAccess` (memberships and support grants) per user, checked on
//! each request against the access version Redis holds.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::Instant;

use cluster_protocol::control::{client::ClientError, client::ControlPlaneClient, UserAccess};

use crate::edge::metrics::{self, Cache};
use crate::gate::keys::FALLBACK_MAX_AGE;

struct Entry {
    access: Arc<UserAccess>,
    fetched_at: Instant,
}

pub struct AccessStore {
    control: ControlPlaneClient,
    users: RwLock<HashMap<String, Entry>>,
}

impl AccessStore {
    pub fn new(control: ControlPlaneClient) -> Self {
        Self {
            control,
            users: RwLock::default(),
        }
    }

    /// The user's access. `version` is what Redis says (`Some(None)`: absent),
    /// or `None` when Redis could not be asked (then re-fetch when old).
    pub async fn get(
        &self,
        user_id: &str,
        version: Option<Option<i64>>,
    ) -> Result<Arc<UserAccess>, ClientError> {
        {
            let users = self.users.read().unwrap_or_else(|p| p.into_inner());
            if let Some(e) = users.get(user_id) {
                let fresh = match version {
                    Some(Some(v)) => v == e.access.version,
                    Some(None) => false,
                    None => e.fetched_at.elapsed() < FALLBACK_MAX_AGE,
                };
                if fresh {
                    metrics::cache_hit(Cache::Access);
                    return Ok(e.access.clone());
                }
            }
        }
        metrics::cache_miss(Cache::Access);
        let access = Arc::new(self.control.user_access(user_id).await?);
        self.users
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(
                user_id.to_string(),
                Entry {
                    access: access.clone(),
                    fetched_at: Instant::now(),
                },
            );
        Ok(access)
    }

    pub fn forget(&self, user_id: &str) {
        self.users
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .remove(user_id);
    }
}
