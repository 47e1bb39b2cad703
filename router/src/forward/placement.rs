//! Placements by routing tag, cached in memory. The control plane is the
//! source; invalidation messages and 421 answers drop entries.
//!
//! The cache holds at most `ROUTER_PLACEMENT_CACHE_ENTRIES` placements (the
//! least recently used one makes room, see `bounded`); an evicted
//! placement is read again on its next use. Eviction is not a drop: it
//! wakes no hold and does not keep a concurrent read from being cached.
//! Each entry is the router's own compact [`Placement`]: the shard it
//! names is one shared [`ShardRef`] per shard, not two strings per entry.
//!
//! Every drop bumps a generation (a `watch` channel) that wakes the requests
//! waiting out a move's hold (`hold`), and a placement read from the control
//! plane is cached only when no drop happened while it was read (a read that
//! started before an invalidation must not put back what it replaced).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cluster_protocol::control::{
    client::{ClientError, ControlPlaneClient},
    DatabaseState, ShardRef,
};
use cluster_protocol::ids::{tag_of, Kind};
use tokio::sync::watch;

use crate::bounded::BoundedMap;
use crate::edge::metrics::{self, Cache};

const NEGATIVE_TTL: Duration = Duration::from_secs(2);

/// Unknown tags remembered at most (for [`NEGATIVE_TTL`]).
const UNKNOWN_ENTRIES: usize = 100_000;

/// An active placement as the router keeps it: the control plane's
/// `Placement` without its state (only active ones are kept) and with the
/// shard shared.
#[derive(Debug, PartialEq, Eq)]
pub struct Placement {
    pub database_id: String,
    pub tag: String,
    pub shard: Arc<ShardRef>,
    pub epoch: i64,
    /// See `cluster_protocol::control::Placement::hold_until`.
    pub hold_until: Option<chrono::DateTime<chrono::Utc>>,
}

/// One shared [`ShardRef`] per shard name (shards: thousands at most; a
/// shard whose URL changed gets a new one, placements still holding the
/// old one keep it until they go).
#[derive(Default)]
struct ShardTable(Mutex<HashMap<String, Arc<ShardRef>>>);

impl ShardTable {
    fn intern(&self, shard: ShardRef) -> Arc<ShardRef> {
        let mut table = self.0.lock().unwrap_or_else(|p| p.into_inner());
        match table.get(&shard.name) {
            Some(known) if **known == shard => known.clone(),
            _ => {
                let shared = Arc::new(shard);
                table.insert(shared.name.clone(), shared.clone());
                shared
            }
        }
    }

    fn len(&self) -> usize {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).len()
    }
}

pub struct PlacementStore {
    control: ControlPlaneClient,
    by_tag: BoundedMap<Arc<Placement>>,
    unknown: BoundedMap<Instant>,
    shards: ShardTable,
    /// Bumped by every drop.
    dropped: watch::Sender<u64>,
}

impl PlacementStore {
    pub fn new(control: ControlPlaneClient) -> Self {
        Self::bounded(control, crate::bounded::DEFAULT_PLACEMENTS)
    }

    /// A store of at most `entries` placements.
    pub fn bounded(control: ControlPlaneClient, entries: usize) -> Self {
        Self {
            control,
            by_tag: BoundedMap::new(entries),
            unknown: BoundedMap::new(UNKNOWN_ENTRIES),
            shards: ShardTable::default(),
            dropped: watch::Sender::new(0),
        }
    }

    /// Placements cached now.
    pub fn len(&self) -> usize {
        self.by_tag.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_tag.is_empty()
    }

    /// Distinct shards the cached placements have pointed at.
    pub fn shards_interned(&self) -> usize {
        self.shards.len()
    }

    /// The router's form of an active placement read from the control plane.
    pub fn compact(&self, p: cluster_protocol::control::Placement) -> Arc<Placement> {
        Arc::new(Placement {
            database_id: p.database_id,
            tag: p.tag,
            shard: self.shards.intern(p.shard),
            epoch: p.epoch,
            hold_until: p.hold_until,
        })
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

    /// The cached placement of `tag` (now the most recently used).
    pub fn cached(&self, tag: &str) -> Option<Arc<Placement>> {
        self.by_tag.get(tag)
    }

    /// The active placement of `tag`; `Ok(None)` for an unknown tag.
    pub async fn get(&self, tag: &str) -> Result<Option<Arc<Placement>>, ClientError> {
        if let Some(p) = self.cached(tag) {
            metrics::cache_hit(Cache::Placement);
            return Ok(Some(p));
        }
        if let Some(at) = self.unknown.peek(tag) {
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
                let p = self.compact(p);
                if self.generation() == before {
                    self.insert(p.clone());
                }
                Ok(Some(p))
            }
            Ok(_) => Ok(None),
            Err(e) if e.is_not_found() => {
                self.unknown.insert(tag, Instant::now());
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// Whether the cache still holds `p` itself for its tag.
    pub fn still_cached(&self, p: &Arc<Placement>) -> bool {
        self.by_tag.peek(&p.tag).is_some_and(|c| Arc::ptr_eq(&c, p))
    }

    /// Drops `p` from the cache if it is still the cached one (a hold that
    /// ran out: the next read asks the control plane).
    pub fn forget_if_cached(&self, p: &Arc<Placement>) {
        if self.by_tag.remove_if(&p.tag, |c| Arc::ptr_eq(c, p)) {
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
                    let p = self.compact(p);
                    self.insert(p.clone());
                    found.push(p);
                }
            }
        }
        Ok(found)
    }

    pub fn insert(&self, p: Arc<Placement>) {
        self.unknown.remove(&p.tag);
        let tag = p.tag.clone();
        self.by_tag.insert(&tag, p);
        metrics::cache_entries(Cache::Placement, self.by_tag.len());
    }

    pub fn forget_tag(&self, tag: &str) {
        self.by_tag.remove(tag);
        self.unknown.remove(tag);
        self.bump();
    }

    /// Drops the placement of a database (by id), as an invalidation says.
    pub fn forget_database(&self, database_id: &str) {
        if let Some(tag) = tag_of(Kind::Database, database_id) {
            self.forget_tag(tag);
        }
    }

    pub fn clear(&self) {
        self.by_tag.clear();
        self.bump();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shard(name: &str, url: &str) -> ShardRef {
        ShardRef {
            name: name.into(),
            url: url.into(),
        }
    }

    #[test]
    fn placements_on_one_shard_share_one_shard_ref() {
        let t = ShardTable::default();
        let a = t.intern(shard("shard-1", "http://a"));
        let b = t.intern(shard("shard-1", "http://a"));
        let c = t.intern(shard("shard-2", "http://c"));
        assert!(Arc::ptr_eq(&a, &b));
        assert!(!Arc::ptr_eq(&a, &c));
        // A new URL for a shard: a new entry, the old one untouched.
        let moved = t.intern(shard("shard-1", "http://a2"));
        assert_eq!(moved.url, "http://a2");
        assert_eq!(a.url, "http://a");
        assert_eq!(t.len(), 2);
    }
}
