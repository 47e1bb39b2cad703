//! Placements by routing tag, cached in memory. The control plane is the
//! source; invalidation messages and 421 answers drop entries.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use cluster_protocol::control::{
    client::{ClientError, ControlPlaneClient},
    DatabaseState, Placement,
};
use cluster_protocol::ids::{tag_of, Kind};

const NEGATIVE_TTL: Duration = Duration::from_secs(2);

pub struct PlacementStore {
    control: ControlPlaneClient,
    by_tag: RwLock<HashMap<String, Arc<Placement>>>,
    unknown: RwLock<HashMap<String, Instant>>,
}

impl PlacementStore {
    pub fn new(control: ControlPlaneClient) -> Self {
        Self {
            control,
            by_tag: RwLock::default(),
            unknown: RwLock::default(),
        }
    }

    pub fn cached(&self, tag: &str) -> Option<Arc<Placement>> {
        self.by_tag
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(tag)
            .cloned()
    }

    /// The active placement of `tag`; `Ok(None)` for an unknown tag.
    pub async fn get(&self, tag: &str) -> Result<Option<Arc<Placement>>, ClientError> {
        if let Some(p) = self.cached(tag) {
            return Ok(Some(p));
        }
        if let Some(at) = self
            .unknown
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(tag)
        {
            if at.elapsed() < NEGATIVE_TTL {
                return Ok(None);
            }
        }
        match self.control.placement(tag).await {
            Ok(p) if p.state == DatabaseState::Active => {
                let p = Arc::new(p);
                self.insert(p.clone());
                Ok(Some(p))
            }
            Ok(_) => Ok(None),
            Err(e) if e.is_not_found() => {
                let mut unknown = self.unknown.write().unwrap_or_else(|p| p.into_inner());
                if unknown.len() > 100_000 {
                    unknown.retain(|_, at| at.elapsed() < NEGATIVE_TTL);
                }
                unknown.insert(tag.to_string(), Instant::now());
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// Placements of many databases: from the cache, the rest in one lookup.
    pub async fn many(&self, database_ids: &[String]) -> Result<Vec<Arc<Placement>>, ClientError> {
        let mut found = Vec::with_capacity(database_ids.len());
        let mut missing = Vec::new();
        for id in database_ids {
            match tag_of(Kind::Database, id).and_then(|t| self.cached(t)) {
                Some(p) if &p.database_id == id => found.push(p),
                _ => missing.push(id.clone()),
            }
        }
        if !missing.is_empty() {
            for p in self.control.placements(missing).await?.placements {
                if p.state == DatabaseState::Active {
                    let p = Arc::new(p);
                    self.insert(p.clone());
                    found.push(p);
                }
            }
        }
        Ok(found)
    }

    pub fn insert(&self, p: Arc<Placement>) {
        self.unknown
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&p.tag);
        self.by_tag
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(p.tag.clone(), p);
    }

    pub fn forget_tag(&self, tag: &str) {
        self.by_tag
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .remove(tag);
        self.unknown
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .remove(tag);
    }

    /// Drops the placement of a database (by id), as an invalidation says.
    pub fn forget_database(&self, database_id: &str) {
        if let Some(tag) = tag_of(Kind::Database, database_id) {
            self.forget_tag(tag);
        }
    }

    pub fn clear(&self) {
        self.by_tag
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
    }
}
