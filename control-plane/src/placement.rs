//! Choosing a shard for a new database: a weighted consistent hash ring over
//! the active shards, keyed by the database id. A shard's weight is its
//! number of virtual nodes, so its share of new databases is proportional to
//! its weight; draining shards are not on the ring.

use cluster_protocol::control::{Shard, ShardState};
use consistent_hash_ring::RingBuilder;

/// Weights above this are clamped, which keeps the ring small.
const MAX_VNODES: usize = 10_000;

/// The shard that receives `database_id`, or `None` if no shard is active.
pub fn choose<'a>(shards: &'a [Shard], database_id: &str) -> Option<&'a Shard> {
    let nodes = shards
        .iter()
        .enumerate()
        .filter(|(_, s)| s.state == ShardState::Active && s.weight > 0)
        .map(|(i, s)| (i, (s.weight as usize).min(MAX_VNODES)));
    let ring = RingBuilder::default().weighted_nodes_iter(nodes).build();
    if ring.is_empty() {
        return None;
    }
    ring.try_get(database_id).map(|&i| &shards[i])
}

#[cfg(test)]
mod tests {
    use super::*;
    use cluster_protocol::ids;
    use std::collections::HashMap;

    fn shard(name: &str, weight: u32, state: ShardState) -> Shard {
        Shard {
            name: name.into(),
            url: format!("http://{name}"),
            postgres: String::new(),
            weight,
            state,
            databases: None,
            bytes: None,
        }
    }

    fn spread(shards: &[Shard], n: usize) -> HashMap<String, usize> {
        let mut counts = HashMap::new();
        for i in 0..n {
            let id = ids::new_database_id(&ids::tag_for_counter(i as u64));
            let s = choose(shards, &id).expect("an active shard");
            *counts.entry(s.name.clone()).or_insert(0) += 1;
        }
        counts
    }

    #[test]
    fn share_follows_weight() {
        let shards = [
            shard("a", 100, ShardState::Active),
            shard("b", 300, ShardState::Active),
        ];
        let counts = spread(&shards, 20_000);
        let b = counts["b"] as f64 / 20_000.0;
        assert!((0.65..0.85).contains(&b), "b got {b}, expected about 0.75");
    }

    #[test]
    fn draining_shards_get_nothing() {
        let shards = [
            shard("a", 100, ShardState::Active),
            shard("b", 100, ShardState::Draining),
            shard("c", 100, ShardState::Active),
        ];
        let counts = spread(&shards, 2_000);
        assert_eq!(counts.get("b"), None);
        assert!(counts["a"] > 0 && counts["c"] > 0);
    }

    #[test]
    fn no_active_shard_is_none() {
        let shards = [shard("a", 100, ShardState::Draining)];
        assert!(choose(&shards, "db_abcdefghijkl").is_none());
        assert!(choose(&[], "db_abcdefghijkl").is_none());
    }

    #[test]
    fn choice_is_stable() {
        let shards = [
            shard("a", 100, ShardState::Active),
            shard("b", 100, ShardState::Active),
        ];
        let first = choose(&shards, "db_abcdefghijkl").map(|s| s.name.clone());
        for _ in 0..10 {
            assert_eq!(
                choose(&shards, "db_abcdefghijkl").map(|s| s.name.clone()),
                first
            );
        }
    }
}
