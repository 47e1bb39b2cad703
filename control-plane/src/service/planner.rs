//! Where databases should live: the pure arithmetic behind `rebalance` and
//! `shards drain` (docs/moves.md, "Drain and rebalance"). No I/O here, so
//! every rule is pinned by the unit tests below.
//!
//! * Load is a **database count**: a database counts on the shard it is
//!   moving to while a move of it is unfinished, otherwise on its shard.
//! * A shard's ideal count is the total in proportion to its weight over
//!   the active shards (a draining shard's ideal is zero), rounded by
//!   largest remainder so the ideals sum to the total.
//! * Each shard above its ideal gives its newest databases (highest
//!   `position`) to shards below theirs, so the plan has exactly as many
//!   moves as the movable surplus: the fewest that reach the ideals.
//! * Never onto a draining shard; a database already moving (or not yet
//!   active) is never planned.

use std::cmp::Ordering;
use std::collections::HashMap;

use cluster_protocol::control::{PlannedMove, Shard, ShardState};

/// A shard as the planner sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardLoad {
    pub name: String,
    pub weight: u32,
    /// `false` for a draining shard: its ideal count is zero.
    pub active: bool,
}

impl From<&Shard> for ShardLoad {
    fn from(s: &Shard) -> Self {
        ShardLoad {
            name: s.name.clone(),
            weight: s.weight,
            active: s.state == ShardState::Active,
        }
    }
}

/// A database as the planner sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placed {
    pub database_id: String,
    /// Where it counts: the destination of its unfinished move, else its shard.
    pub shard: String,
    pub position: i64,
    /// `false` when it is already moving or still being created.
    pub movable: bool,
}

/// Ideal database count of each shard (same order as `shards`) for `total`
/// databases. `current` (databases counted on each shard) breaks exact ties
/// of the remainders in favour of the shard that already holds more, which
/// never adds a move; then the name decides. All zero without an active shard.
pub fn ideal_counts(shards: &[ShardLoad], current: &[usize], total: usize) -> Vec<usize> {
    let weight_sum: u128 = shards
        .iter()
        .filter(|s| s.active)
        .map(|s| u128::from(s.weight))
        .sum();
    if weight_sum == 0 {
        return vec![0; shards.len()];
    }
    let total = total as u128;
    let mut ideal = Vec::with_capacity(shards.len());
    let mut remainders = Vec::new();
    for (i, s) in shards.iter().enumerate() {
        if !s.active {
            ideal.push(0);
            continue;
        }
        let share = total * u128::from(s.weight);
        ideal.push((share / weight_sum) as usize);
        remainders.push((i, share % weight_sum));
    }
    let given: usize = ideal.iter().sum();
    let left = (total as usize).saturating_sub(given);
    remainders.sort_by(|(a, ra), (b, rb)| {
        rb.cmp(ra)
            .then_with(|| current.get(*b).cmp(&current.get(*a)))
            .then_with(|| shards[*a].name.cmp(&shards[*b].name))
    });
    for (i, _) in remainders.into_iter().take(left) {
        ideal[i] += 1;
    }
    ideal
}

/// The rebalance plan: moves from shards above their ideal count to shards
/// below theirs, newest databases first.
pub fn plan(shards: &[ShardLoad], databases: &[Placed]) -> Vec<PlannedMove> {
    let index: HashMap<&str, usize> = shards
        .iter()
        .enumerate()
        .map(|(i, s)| (s.name.as_str(), i))
        .collect();
    let mut current = vec![0usize; shards.len()];
    for d in databases {
        if let Some(&i) = index.get(d.shard.as_str()) {
            current[i] += 1;
        }
    }
    let counted: usize = current.iter().sum();
    let ideal = ideal_counts(shards, &current, counted);
    if ideal.iter().sum::<usize>() == 0 {
        return Vec::new();
    }

    // What each shard above its ideal gives: its newest movable databases.
    let mut given: Vec<(&Placed, usize)> = Vec::new();
    for (i, _) in shards.iter().enumerate() {
        let surplus = current[i].saturating_sub(ideal[i]);
        if surplus == 0 {
            continue;
        }
        let mut mine: Vec<&Placed> = databases
            .iter()
            .filter(|d| d.movable && index.get(d.shard.as_str()) == Some(&i))
            .collect();
        mine.sort_by_key(|d| std::cmp::Reverse(d.position));
        given.extend(mine.into_iter().take(surplus).map(|d| (d, i)));
    }
    given.sort_by_key(|(d, _)| std::cmp::Reverse(d.position));

    // Each goes to the shard furthest below its ideal (then the one with
    // the lowest count per weight, then by name).
    let mut deficit: Vec<usize> = (0..shards.len())
        .map(|i| ideal[i].saturating_sub(current[i]))
        .collect();
    let mut moves = Vec::with_capacity(given.len());
    for (d, from) in given {
        let to = (0..shards.len())
            .filter(|&i| deficit[i] > 0 && shards[i].active && i != from)
            .max_by(|&a, &b| {
                deficit[a]
                    .cmp(&deficit[b])
                    .then_with(|| load_cmp(&shards[b], current[b], &shards[a], current[a]))
                    .then_with(|| shards[b].name.cmp(&shards[a].name))
            });
        let Some(to) = to else { break };
        deficit[to] -= 1;
        current[to] += 1;
        current[from] -= 1;
        moves.push(PlannedMove {
            database_id: d.database_id.clone(),
            from: shards[from].name.clone(),
            to: shards[to].name.clone(),
        });
    }
    moves
}

/// Compares `count_a / weight_a` with `count_b / weight_b` exactly.
fn load_cmp(a: &ShardLoad, count_a: usize, b: &ShardLoad, count_b: usize) -> Ordering {
    let left = count_a as u128 * u128::from(b.weight.max(1));
    let right = count_b as u128 * u128::from(a.weight.max(1));
    left.cmp(&right)
}

/// The active shard other than `except` with the fewest databases per unit
/// of weight (`counts` by shard name; ties by name), or `None`.
pub fn least_loaded<'a>(
    shards: &'a [ShardLoad],
    counts: &HashMap<String, usize>,
    except: &str,
) -> Option<&'a ShardLoad> {
    let count = |s: &ShardLoad| counts.get(&s.name).copied().unwrap_or(0);
    shards
        .iter()
        .filter(|s| s.active && s.weight > 0 && s.name != except)
        .min_by(|a, b| load_cmp(a, count(a), b, count(b)).then_with(|| a.name.cmp(&b.name)))
}

/// A target for each of `databases` (leaving `from`), each chosen as the
/// least loaded active shard given the choices before it. Stops early when
/// there is no active shard other than `from`.
pub fn drain_targets(
    shards: &[ShardLoad],
    mut counts: HashMap<String, usize>,
    from: &str,
    databases: &[String],
) -> Vec<PlannedMove> {
    let mut moves = Vec::with_capacity(databases.len());
    for id in databases {
        let Some(to) = least_loaded(shards, &counts, from) else {
            break;
        };
        *counts.entry(to.name.clone()).or_insert(0) += 1;
        if let Some(c) = counts.get_mut(from) {
            *c = c.saturating_sub(1);
        }
        moves.push(PlannedMove {
            database_id: id.clone(),
            from: from.to_string(),
            to: to.name.clone(),
        });
    }
    moves
}

#[cfg(test)]
#[path = "planner_tests.rs"]
mod tests;
