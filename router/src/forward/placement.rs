//! Placements by routing tag, cached in memory. The control plane is the
//! source; invalidation messages and 421 answers drop entries.
//!
//! Every drop bumps a generation (a `watch` channel) that wakes the requests
//! waiting out a move's hold (`hold`), and a placement read from the control
//! plane is cached only when no drop happened while it was read (a read that
//! started before an invalidation must not put back what it replaced).

use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use cluster_protocol::control::{
    client::{ClientError, ControlPlaneClient},
    DatabaseState, Placement,
};
use cluster_protocol::ids::{tag_of, Kind};
use tokio::sync::watch;

use crate::edge::metrics::{self, Cache};

const NEGATIVE_TTL: Duration = Duration::from_secs(2);

pub struct PlacementStore {
    control: ControlPlaneClient,
    by_tag: RwLock<HashMap<String, Arc<Placement>>>,
    unknown: RwLock<HashMap<String, Instant>>,
    /// Bumped by every drop.
    dropped: watch::Sender<u64>,
}

impl PlacementStore {
    pub fn new(control: ControlPlaneClient) -> Self {
        Self {
            control,
            by_tag: RwLock::default(),
            unknown: RwLock::default(),
            dropped: watch::Sender::new(0),
        }
    }

    /// A receiver that sees every later drop (`forget_*`, `clear`) as a change.
    pub fn drops(&self) -> watch::Receiver<u64> {
        self.dropped.subscribe()
    }

    fn generation(&self) -> u64 {
        *self.dropped.borrow()
    }

    fn bump(&self) {
        self.dropped.send_modify(|g| *g = g.wrapping_add(1));
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
            metrics::cache_hit(Cache::Placement);
            return Ok(Some(p));
        }
        if let Some(at) = self
            .unknown
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(tag)
        {
            if at.elapsed() < NEGATIVE_TTL {
                metrics::cache_hit(Cache::Placement);
                return Ok(None);
            }
        }
        metrics::cache_miss(Cache::Placement);
        self.fetch(tag).await
    }

    /// The active placement of `tag` read from the control plane (never the
    /// cache), cached unless a drop happened meanwhile; `Ok(None)` for an
    /// unknown tag or a database not active.
    pub async fn fetch(&self, tag: &str) -> Result<Option<Arc<Placement>>, ClientError> {
        let before = self.generation();
        match self.control.placement(tag).await {
            Ok(p) if p.state == DatabaseState::Active => {
                let p = Arc::new(p);
                if self.generation() == before {
                    self.insert(p.clone());
                }
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

    /// Whether the cache still holds `p` itself for its tag.
    pub fn still_cached(&self, p: &Arc<Placement>) -> bool {
        self.cached(&p.tag).is_some_and(|c| Arc::ptr_eq(&c, p))
    }

    /// Drops `p` from the cache if it is still the cached one (a hold that
    /// ran out: the next read asks the control plane).
    pub fn forget_if_cached(&self, p: &Arc<Placement>) {
        let removed = {
            let mut by_tag = self.by_tag.write().unwrap_or_else(|p| p.into_inner());
            match by_tag.get(&p.tag) {
                Some(c) if Arc::ptr_eq(c, p) => by_tag.remove(&p.tag).is_some(),
                _ => false,
            }
        };
        if removed {
            self.bump();
        }
    }

    /// Placements of many databases: from the cache, the rest in one lookup.
    pub async fn many(&self, database_ids: &[String]) -> Result<Vec<Arc<Placement>>, ClientError> {
        let mut found = Vec::with_capacity(database_ids.len());
        let mut missing = Vec::new();
        for id in database_ids {
            match tag_of(Kind::Database, id).and_then(|t| self.cached(t)) {
                Some(p) if &p.database_id == id => {
                    metrics::cache_hit(Cache::Placement);
                    found.push(p)
                }
                _ => {
                    metrics::cache_miss(Cache::Placement);
                    missing.push(id.clone())
                }
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
        self.bump();
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
        self.bump();
    }
}
