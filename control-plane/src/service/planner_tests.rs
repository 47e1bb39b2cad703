use std::collections::HashMap;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::*;

fn shard(name: &str, weight: u32) -> ShardLoad {
    ShardLoad {
        name: name.into(),
        weight,
        active: true,
    }
}

fn draining(name: &str, weight: u32) -> ShardLoad {
    ShardLoad {
        active: false,
        ..shard(name, weight)
    }
}

/// `n` movable databases on `shard`, positions from `first` up.
fn on(shard: &str, first: i64, n: usize) -> Vec<Placed> {
    (0..n as i64)
        .map(|k| Placed {
            database_id: format!("db_{shard}_{}", first + k),
            shard: shard.into(),
            position: first + k,
            movable: true,
        })
        .collect()
}

fn counts_after(shards: &[ShardLoad], dbs: &[Placed], moves: &[PlannedMove]) -> Vec<usize> {
    let mut at: HashMap<String, String> = dbs
        .iter()
        .map(|d| (d.database_id.clone(), d.shard.clone()))
        .collect();
    for m in moves {
        assert_eq!(at[&m.database_id], m.from, "a move leaves where it is");
        at.insert(m.database_id.clone(), m.to.clone());
    }
    shards
        .iter()
        .map(|s| at.values().filter(|v| **v == s.name).count())
        .collect()
}

#[test]
fn ideal_counts_sum_to_the_total_by_largest_remainder() {
    let shards = [shard("a", 100), shard("b", 100), shard("c", 100)];
    assert_eq!(ideal_counts(&shards, &[0, 0, 0], 10), vec![4, 3, 3]);
    // Equal remainders: the shard already holding more keeps the extra one.
    assert_eq!(ideal_counts(&shards, &[0, 0, 10], 10), vec![3, 3, 4]);
    assert_eq!(ideal_counts(&shards, &[1, 5, 4], 10), vec![3, 4, 3]);
    // Largest remainder first: 7 * 1/6 = 1.17, 7 * 2/6 = 2.33, 7 * 3/6 = 3.5.
    let shards = [shard("a", 1), shard("b", 2), shard("c", 3)];
    assert_eq!(ideal_counts(&shards, &[0, 0, 0], 7), vec![1, 2, 4]);
    assert_eq!(ideal_counts(&shards, &[0, 0, 0], 0), vec![0, 0, 0]);
}

#[test]
fn ideal_counts_follow_weight_and_skip_draining_shards() {
    let shards = [shard("a", 100), shard("b", 300), draining("c", 500)];
    assert_eq!(ideal_counts(&shards, &[0, 0, 8], 8), vec![2, 6, 0]);
    let none = [draining("a", 100), draining("b", 100)];
    assert_eq!(ideal_counts(&none, &[3, 4], 7), vec![0, 0]);
}

#[test]
fn a_balanced_cluster_needs_no_move() {
    let shards = [shard("a", 100), shard("b", 100)];
    let mut dbs = on("a", 0, 3);
    dbs.extend(on("b", 3, 3));
    assert!(plan(&shards, &dbs).is_empty());
    // Off by one with an odd total is balanced too.
    dbs.extend(on("a", 6, 1));
    assert!(plan(&shards, &dbs).is_empty());
    assert!(plan(&shards, &[]).is_empty());
}

#[test]
fn a_new_shard_gets_the_newest_databases_of_the_full_ones() {
    let shards = [shard("a", 100), shard("b", 100), shard("c", 100)];
    let mut dbs = on("a", 0, 5);
    dbs.extend(on("b", 5, 5));
    let moves = plan(&shards, &dbs);
    let mv = |id: &str, from: &str| PlannedMove {
        database_id: id.into(),
        from: from.into(),
        to: "c".into(),
    };
    // Ideals 4, 3, 3 (the one extra goes to a: tied with b, first by name).
    assert_eq!(
        moves,
        vec![mv("db_b_9", "b"), mv("db_b_8", "b"), mv("db_a_4", "a")]
    );
    assert_eq!(counts_after(&shards, &dbs, &moves), vec![4, 3, 3]);
}

#[test]
fn weights_decide_the_shares() {
    let shards = [shard("a", 100), shard("b", 300)];
    let dbs = on("a", 0, 10);
    let moves = plan(&shards, &dbs);
    // 2.5 / 7.5: the tie goes to a, which holds them all.
    assert_eq!(moves.len(), 7);
    assert_eq!(counts_after(&shards, &dbs, &moves), vec![3, 7]);
    // Newest first: positions 9 down to 3 leave a.
    let positions: Vec<&str> = moves.iter().map(|m| m.database_id.as_str()).collect();
    assert_eq!(positions[0], "db_a_9");
    assert_eq!(positions[6], "db_a_3");
}

#[test]
fn never_onto_a_draining_shard_and_draining_shards_empty_out() {
    let shards = [shard("a", 100), draining("b", 100), shard("c", 100)];
    let mut dbs = on("a", 0, 1);
    dbs.extend(on("b", 1, 4));
    dbs.extend(on("c", 5, 1));
    let moves = plan(&shards, &dbs);
    assert!(moves.iter().all(|m| m.to != "b"));
    assert!(moves.iter().all(|m| m.from == "b"));
    assert_eq!(counts_after(&shards, &dbs, &moves), vec![3, 0, 3]);
}

#[test]
fn databases_already_moving_count_at_their_destination_and_stay_out_of_the_plan() {
    let shards = [shard("a", 100), shard("b", 100)];
    // Four on a, of which two are on their way to b (counted at b): balanced.
    let mut dbs = on("a", 0, 2);
    dbs.extend((2..4).map(|p| Placed {
        database_id: format!("db_moving_{p}"),
        shard: "b".into(),
        position: p,
        movable: false,
    }));
    assert!(plan(&shards, &dbs).is_empty());

    // Three moving onto b: b is one above its ideal, but it has nothing
    // movable, so nothing is planned (never a second move of one database).
    let mut dbs = on("a", 0, 1);
    dbs.extend((1..4).map(|p| Placed {
        database_id: format!("db_moving_{p}"),
        shard: "b".into(),
        position: p,
        movable: false,
    }));
    assert!(plan(&shards, &dbs).is_empty());
}

#[test]
fn unmovable_databases_are_skipped_for_older_movable_ones() {
    let shards = [shard("a", 100), shard("b", 100)];
    let mut dbs = on("a", 0, 4);
    dbs[3].movable = false; // the newest is still being created
    let moves = plan(&shards, &dbs);
    let ids: Vec<&str> = moves.iter().map(|m| m.database_id.as_str()).collect();
    assert_eq!(ids, vec!["db_a_2", "db_a_1"]);
}

#[test]
fn no_active_shard_no_plan() {
    let shards = [draining("a", 100), draining("b", 100)];
    let dbs = on("a", 0, 3);
    assert!(plan(&shards, &dbs).is_empty());
}

/// Any cluster: the plan moves exactly the surplus, never a database twice,
/// never onto a draining shard, never an unmovable database, and when all
/// databases are movable it lands every shard on its ideal count.
#[test]
fn plans_are_minimal_and_reach_the_ideal() {
    let mut rng = StdRng::seed_from_u64(16);
    for _ in 0..500 {
        let n_shards = rng.gen_range(1..6);
        let shards: Vec<ShardLoad> = (0..n_shards)
            .map(|i| ShardLoad {
                name: format!("s{i}"),
                weight: rng.gen_range(1..400),
                active: i == 0 || rng.gen_bool(0.8),
            })
            .collect();
        let all_movable = rng.gen_bool(0.5);
        let dbs: Vec<Placed> = (0..rng.gen_range(0..60))
            .map(|p| Placed {
                database_id: format!("db_{p}"),
                shard: shards[rng.gen_range(0..n_shards)].name.clone(),
                position: p,
                movable: all_movable || rng.gen_bool(0.7),
            })
            .collect();
        let moves = plan(&shards, &dbs);

        let mut current = vec![0; shards.len()];
        for d in &dbs {
            current[shards.iter().position(|s| s.name == d.shard).unwrap()] += 1;
        }
        let ideal = ideal_counts(&shards, &current, dbs.len());
        assert_eq!(ideal.iter().sum::<usize>(), dbs.len());
        let surplus: usize = (0..shards.len())
            .map(|i| current[i].saturating_sub(ideal[i]))
            .sum();
        assert!(moves.len() <= surplus);
        let mut seen = std::collections::HashSet::new();
        for m in &moves {
            assert!(seen.insert(m.database_id.clone()), "moved twice");
            let d = dbs.iter().find(|d| d.database_id == m.database_id).unwrap();
            assert!(d.movable);
            let to = shards.iter().find(|s| s.name == m.to).unwrap();
            assert!(to.active, "onto a draining shard");
            assert_ne!(m.from, m.to);
        }
        let after = counts_after(&shards, &dbs, &moves);
        for i in 0..shards.len() {
            // Nobody overshoots its ideal, and nobody under it got worse.
            assert!(after[i] <= ideal[i].max(current[i]));
            assert!(after[i] >= ideal[i].min(current[i]));
        }
        if all_movable {
            assert_eq!(moves.len(), surplus, "the fewest moves");
            assert_eq!(after, ideal);
        }
    }
}

#[test]
fn least_loaded_is_count_over_weight() {
    let shards = [shard("a", 100), shard("b", 300), draining("c", 100)];
    let counts: HashMap<String, usize> = [("a".into(), 2), ("b".into(), 5), ("c".into(), 0)].into();
    // 2/100 > 5/300: b; c is draining.
    assert_eq!(least_loaded(&shards, &counts, "x").unwrap().name, "b");
    assert_eq!(least_loaded(&shards, &counts, "b").unwrap().name, "a");
    let tie: HashMap<String, usize> = [("a".into(), 1), ("b".into(), 3)].into();
    assert_eq!(least_loaded(&shards, &tie, "x").unwrap().name, "a");
    assert!(least_loaded(&[draining("a", 1)], &HashMap::new(), "x").is_none());
    assert!(least_loaded(&[shard("a", 1)], &HashMap::new(), "a").is_none());
}

#[test]
fn drain_targets_spread_by_load() {
    let shards = [draining("a", 100), shard("b", 100), shard("c", 100)];
    let counts: HashMap<String, usize> = [("a".into(), 4), ("c".into(), 2)].into();
    let ids: Vec<String> = (0..4).map(|i| format!("db_{i}")).collect();
    let to: Vec<String> = drain_targets(&shards, counts, "a", &ids)
        .into_iter()
        .map(|m| {
            assert_eq!(m.from, "a");
            m.to
        })
        .collect();
    assert_eq!(to, vec!["b", "b", "b", "c"]);
    let alone = [draining("a", 100)];
    assert!(drain_targets(&alone, HashMap::new(), "a", &ids).is_empty());
}
