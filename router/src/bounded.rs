//! A map of at most a fixed number of entries, shared by every core: the
//! least recently used entry makes room for a new one. Split into up to
//! [`SHARDS`] independently locked LRU lists (by a hash of the key) so the
//! cores rarely wait on each other; the bound is split exactly among them,
//! so the map never holds more than its capacity.
//!
//! The router's caches (keys, user access, placements) are built on it:
//! an evicted entry is simply read again from the control plane on its next
//! use, exactly like an entry never cached.

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::num::NonZeroUsize;
use std::sync::{Mutex, MutexGuard};

use lru::LruCache;

// The defaults: 331 MiB of RSS when all three are full and evicting (340 MiB
// high-water mark), the rest of the router included, measured
// (docs/capacity.md, "Router caches"): under 512 MiB.

/// `ROUTER_PLACEMENT_CACHE_ENTRIES` when not set.
pub const DEFAULT_PLACEMENTS: usize = 250_000;
/// `ROUTER_KEY_CACHE_ENTRIES` when not set.
pub const DEFAULT_KEYS: usize = 125_000;
/// `ROUTER_ACCESS_CACHE_ENTRIES` when not set.
pub const DEFAULT_USERS: usize = 125_000;

/// Locks of a map at most (fewer when the capacity is smaller).
pub const SHARDS: usize = 16;

/// One independently locked part of a [`BoundedMap`].
type Shard<V> = Mutex<LruCache<Box<str>, V>>;

pub struct BoundedMap<V> {
    shards: Box<[Shard<V>]>,
    hasher: RandomState,
    capacity: usize,
}

impl<V: Clone> BoundedMap<V> {
    /// A map of at most `capacity` entries (at least 1).
    pub fn new(capacity: usize) -> Self {
        let capacity = capacity.max(1);
        let n = capacity.min(SHARDS);
        let shards = (0..n)
            .map(|i| {
                // The first `capacity % n` shards take one more: the sum is
                // exactly `capacity`.
                let cap = capacity / n + usize::from(i < capacity % n);
                let cap = NonZeroUsize::new(cap).unwrap_or(NonZeroUsize::MIN);
                // `sparse`: memory grows with the entries, not the bound.
                Mutex::new(LruCache::sparse(cap))
            })
            .collect();
        Self {
            shards,
            hasher: RandomState::new(),
            capacity,
        }
    }

    fn shard(&self, key: &str) -> MutexGuard<'_, LruCache<Box<str>, V>> {
        let i = (self.hasher.hash_one(key) as usize) % self.shards.len();
        self.shards[i].lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The entry of `key`, now the most recently used.
    pub fn get(&self, key: &str) -> Option<V> {
        self.shard(key).get(key).cloned()
    }

    /// The entry of `key`, its place in the order unchanged.
    pub fn peek(&self, key: &str) -> Option<V> {
        self.shard(key).peek(key).cloned()
    }

    /// Inserts or replaces; evicts the least recently used entry of the
    /// key's shard when that shard is full.
    pub fn insert(&self, key: &str, value: V) {
        self.shard(key).put(key.into(), value);
    }

    pub fn remove(&self, key: &str) -> Option<V> {
        self.shard(key).pop(key)
    }

    /// Removes the entry of `key` when `pred` holds for it (one lock).
    pub fn remove_if(&self, key: &str, pred: impl FnOnce(&V) -> bool) -> bool {
        let mut shard = self.shard(key);
        if shard.peek(key).is_some_and(pred) {
            shard.pop(key);
            true
        } else {
            false
        }
    }

    /// Replaces the entry of `key`, if there is one, with `f` of it (one
    /// lock; the order is unchanged). Absent stays absent.
    pub fn replace_with(&self, key: &str, f: impl FnOnce(&V) -> V) {
        let mut shard = self.shard(key);
        if let Some(v) = shard.peek_mut(key) {
            *v = f(v);
        }
    }

    pub fn clear(&self) {
        for s in self.shards.iter() {
            s.lock().unwrap_or_else(|p| p.into_inner()).clear();
        }
    }

    /// Entries held now.
    pub fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.lock().unwrap_or_else(|p| p.into_inner()).len())
            .sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The bound.
    pub fn capacity(&self) -> usize {
        self.capacity
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn never_holds_more_than_its_capacity() {
        for cap in [1, 5, 16, 17, 1000] {
            let m = BoundedMap::new(cap);
            for i in 0..cap * 3 {
                m.insert(&format!("k{i}"), i);
                assert!(m.len() <= cap, "cap {cap}: {} entries", m.len());
            }
            assert_eq!(m.capacity(), cap);
            // Full once every shard has seen more than its share.
            assert!(m.len() > cap / 2, "cap {cap}: only {}", m.len());
        }
    }

    #[test]
    fn the_least_recently_used_goes_first() {
        // Below SHARDS, one entry per shard: use capacity 1 for an exact order.
        let m = BoundedMap::new(1);
        m.insert("a", 1);
        m.insert("b", 2);
        assert_eq!((m.get("a"), m.get("b")), (None, Some(2)));

        // Within one shard: a read moves an entry to the front.
        let m = BoundedMap::<u32>::new(SHARDS * 2);
        let (a, b, c) = three_keys_of_one_shard(&m);
        m.insert(&a, 1);
        m.insert(&b, 2);
        assert_eq!(m.get(&a), Some(1));
        m.insert(&c, 3);
        assert_eq!(m.peek(&b), None, "b was the least recently used");
        assert_eq!((m.peek(&a), m.peek(&c)), (Some(1), Some(3)));
    }

    fn three_keys_of_one_shard(m: &BoundedMap<u32>) -> (String, String, String) {
        let shard_of = |k: &str| (m.hasher.hash_one(k) as usize) % m.shards.len();
        let mut same = (0..).map(|i| format!("k{i}")).filter(|k| shard_of(k) == 0);
        let mut next = || same.next().unwrap_or_default();
        (next(), next(), next())
    }

    #[test]
    fn remove_if_and_replace_with_touch_only_a_matching_entry() {
        let m = BoundedMap::new(8);
        m.insert("a", 1);
        assert!(!m.remove_if("a", |v| *v == 2));
        assert!(!m.remove_if("absent", |_| true));
        m.replace_with("absent", |v| v + 1);
        assert_eq!(m.peek("absent"), None);
        m.replace_with("a", |v| v + 1);
        assert_eq!(m.peek("a"), Some(2));
        assert!(m.remove_if("a", |v| *v == 2));
        assert!(m.is_empty());
    }
}
