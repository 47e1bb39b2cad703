//! `record_matches` memory: which records matched a webhook's conditions
//! when last evaluated (`webhook_matches`). Only a transition from not
//! matching to matching fires (creation counts: a record that did not exist
//! matched nothing); a record that stops matching leaves the memory, so it
//! fires again when it next comes to match. Trashed and purged records
//! leave the memory too.
//!
//! The decisions are pure functions here; `webhooks::outbox` (writes) and
//! `webhooks::clock` (the time-driven pass) read and write the memory.

use std::collections::HashSet;

/// Which records were evaluated.
#[derive(Debug, Clone, Copy)]
pub enum Scope<'a> {
    /// The records a write touched (others keep their memory).
    Records(&'a [String]),
    /// Every live record the webhook is about (a clock pass): what the
    /// memory holds beyond the matches leaves it.
    All,
}

/// How the memory moves after an evaluation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Transitions {
    /// Matching now, not remembered: remember them (and fire, see
    /// [`announces`]).
    pub entered: Vec<String>,
    /// Remembered, not matching now: forget them.
    pub left: Vec<String>,
}

/// The transitions of `scope` given the records matching now and those the
/// memory holds. Ordered as `scope` (a write) or by id (a pass).
pub fn transitions(
    scope: Scope<'_>,
    matching: &HashSet<String>,
    remembered: &HashSet<String>,
) -> Transitions {
    let mut t = Transitions::default();
    match scope {
        Scope::Records(ids) => {
            let mut seen = HashSet::with_capacity(ids.len());
            for id in ids {
                if !seen.insert(id) {
                    continue;
                }
                match (matching.contains(id), remembered.contains(id)) {
                    (true, false) => t.entered.push(id.clone()),
                    (false, true) => t.left.push(id.clone()),
                    _ => {}
                }
            }
        }
        Scope::All => {
            t.entered = matching.difference(remembered).cloned().collect();
            t.left = remembered.difference(matching).cloned().collect();
            t.entered.sort();
            t.left.sort();
        }
    }
    t
}

/// What made a record enter the match set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cause {
    /// Created, upserted as new, or restored from the trash.
    Creation,
    /// Updated, or matched by an upsert.
    Update,
    /// A clock pass (no write).
    Clock,
}

/// Whether entering the set fires `record.matches`. Once the webhook's
/// first clock pass has run (`matches_recorded`) the memory knows what
/// matched, and every entry is a transition. Before it (just created,
/// changed, switched on or resumed) the memory does not know what already
/// matched: a record that did not exist fires, and an update fires when
/// the write read the record before it changed and it did not match then
/// (`matched_before`, `None` when the write did not read it); the pass
/// then records the rest without delivering.
pub fn announces(cause: Cause, matches_recorded: bool, matched_before: Option<bool>) -> bool {
    matches_recorded
        || match cause {
            Cause::Creation => true,
            Cause::Update => matched_before == Some(false),
            Cause::Clock => false,
        }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(ids: &[&str]) -> HashSet<String> {
        ids.iter().map(|s| s.to_string()).collect()
    }

    fn ids(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_write_moves_only_its_records() {
        let written = ids(&["a", "b", "c", "d"]);
        let t = transitions(
            Scope::Records(&written),
            &set(&["a", "b", "x"]),
            &set(&["b", "c", "y"]),
        );
        // a: not matching -> matching (fires); b: keeps matching (no fire);
        // c: stops matching (forgotten); d: never matched; x, y: not written.
        assert_eq!(t.entered, ids(&["a"]));
        assert_eq!(t.left, ids(&["c"]));
    }

    #[test]
    fn creation_counts_as_a_transition() {
        let created = ids(&["n"]);
        let t = transitions(Scope::Records(&created), &set(&["n"]), &set(&[]));
        assert_eq!(t.entered, ids(&["n"]));
        assert!(announces(Cause::Creation, true, None));
    }

    #[test]
    fn continuing_to_match_fires_once() {
        let r = ids(&["a"]);
        let mut memory = set(&[]);
        let first = transitions(Scope::Records(&r), &set(&["a"]), &memory);
        memory.extend(first.entered.iter().cloned());
        let second = transitions(Scope::Records(&r), &set(&["a"]), &memory);
        assert_eq!(first.entered, ids(&["a"]));
        assert_eq!(second, Transitions::default());
        // Stops matching, then matches again: fires again.
        let third = transitions(Scope::Records(&r), &set(&[]), &memory);
        assert_eq!(third.left, ids(&["a"]));
        memory.remove("a");
        let fourth = transitions(Scope::Records(&r), &set(&["a"]), &memory);
        assert_eq!(fourth.entered, ids(&["a"]));
    }

    #[test]
    fn duplicates_in_a_write_count_once() {
        let r = ids(&["a", "a"]);
        let t = transitions(Scope::Records(&r), &set(&["a"]), &set(&[]));
        assert_eq!(t.entered, ids(&["a"]));
    }

    #[test]
    fn a_pass_diffs_everything() {
        let t = transitions(Scope::All, &set(&["c", "a", "b"]), &set(&["b", "z", "y"]));
        assert_eq!(t.entered, ids(&["a", "c"]));
        // y, z: no longer matching, trashed or purged.
        assert_eq!(t.left, ids(&["y", "z"]));
    }

    #[test]
    fn before_the_first_pass_a_write_fires_on_what_it_saw_change() {
        assert!(announces(Cause::Creation, false, None));
        // Updated from not matching to matching: a transition.
        assert!(announces(Cause::Update, false, Some(false)));
        // Matched before the webhook knew: no transition, only remembered.
        assert!(!announces(Cause::Update, false, Some(true)));
        // Not read before the write: unknown, the pass records it.
        assert!(!announces(Cause::Update, false, None));
        assert!(!announces(Cause::Clock, false, None));
        assert!(announces(Cause::Update, true, None));
        assert!(announces(Cause::Update, true, Some(true)));
        assert!(announces(Cause::Clock, true, None));
    }
}
