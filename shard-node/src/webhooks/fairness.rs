//! What each database may still claim, so one tenant's webhooks never hold
//! the deliverer for the others: attempts in flight per database
//! (`WEBHOOK_CONCURRENCY_PER_DATABASE`) and attempts started per database
//! per minute (`WEBHOOK_ATTEMPTS_PER_DATABASE_PER_MINUTE`, fixed one-minute
//! windows from a database's first attempt in each). Both are counted on
//! this node, in memory, like the request rate limits. A database over
//! either is left out of the claim: its deliveries stay queued and due,
//! with no attempt counted, and go out when it has room again.

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// The window `WEBHOOK_ATTEMPTS_PER_DATABASE_PER_MINUTE` counts over.
pub const RATE_WINDOW: Duration = Duration::from_secs(60);

/// Attempts in flight and attempts started in the current window, per
/// database.
#[derive(Debug)]
pub struct DatabaseShares {
    in_flight_cap: usize,
    per_window: usize,
    in_flight: HashMap<String, usize>,
    /// When each database's current window opened, and attempts started
    /// in it.
    windows: HashMap<String, (Instant, usize)>,
}

impl DatabaseShares {
    pub fn new(in_flight_cap: usize, per_window: usize) -> Self {
        DatabaseShares {
            in_flight_cap,
            per_window,
            in_flight: HashMap::new(),
            windows: HashMap::new(),
        }
    }

    /// How many attempts a database with nothing counted may start.
    pub fn fresh_room(&self) -> usize {
        self.in_flight_cap.min(self.per_window)
    }

    /// Forgets windows that have closed (so the map holds only databases
    /// with attempts in the last minute).
    fn expire(&mut self, now: Instant) {
        self.windows
            .retain(|_, (opened, _)| now.duration_since(*opened) < RATE_WINDOW);
    }

    /// Every database with something counted, and the attempts it may
    /// still start now (0 when at either cap); a database not listed has
    /// [`Self::fresh_room`].
    pub fn rooms(&mut self, now: Instant) -> Vec<(String, usize)> {
        self.expire(now);
        let only_windows = self
            .windows
            .keys()
            .filter(|d| !self.in_flight.contains_key(*d));
        self.in_flight
            .keys()
            .chain(only_windows)
            .map(|d| (d.clone(), self.room(d)))
            .collect()
    }

    fn room(&self, database_id: &str) -> usize {
        let flying = self.in_flight.get(database_id).copied().unwrap_or(0);
        let started = self.windows.get(database_id).map(|(_, n)| *n).unwrap_or(0);
        self.in_flight_cap
            .saturating_sub(flying)
            .min(self.per_window.saturating_sub(started))
    }

    /// An attempt of the database starts.
    pub fn started(&mut self, database_id: &str, now: Instant) {
        *self.in_flight.entry(database_id.to_owned()).or_default() += 1;
        let window = self
            .windows
            .entry(database_id.to_owned())
            .or_insert((now, 0));
        if now.duration_since(window.0) >= RATE_WINDOW {
            *window = (now, 0);
        }
        window.1 += 1;
    }

    /// An attempt of the database ended (however).
    pub fn finished(&mut self, database_id: &str) {
        if let Some(n) = self.in_flight.get_mut(database_id) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.in_flight.remove(database_id);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn room_of(s: &mut DatabaseShares, db: &str, now: Instant) -> usize {
        s.rooms(now)
            .into_iter()
            .find(|(d, _)| d == db)
            .map(|(_, r)| r)
            .unwrap_or_else(|| s.fresh_room())
    }

    #[test]
    fn attempts_in_flight_are_capped_per_database() {
        let now = Instant::now();
        let mut s = DatabaseShares::new(3, 100);
        assert_eq!(s.fresh_room(), 3);
        for _ in 0..3 {
            s.started("dba", now);
        }
        assert_eq!(room_of(&mut s, "dba", now), 0);
        // Another database is untouched.
        assert_eq!(room_of(&mut s, "dbb", now), 3);
        s.finished("dba");
        assert_eq!(room_of(&mut s, "dba", now), 1);
    }

    #[test]
    fn attempts_per_minute_are_capped_until_the_window_closes() {
        let now = Instant::now();
        let mut s = DatabaseShares::new(100, 5);
        for _ in 0..5 {
            s.started("dba", now);
            s.finished("dba");
        }
        // Nothing in flight, but the minute's attempts are spent.
        assert_eq!(room_of(&mut s, "dba", now), 0);
        let later = now + Duration::from_secs(59);
        assert_eq!(room_of(&mut s, "dba", later), 0);
        let next = now + RATE_WINDOW;
        assert_eq!(room_of(&mut s, "dba", next), 5);
        // The closed window is forgotten: the map does not grow.
        assert!(s.rooms(next).is_empty());
        s.started("dba", next);
        assert_eq!(room_of(&mut s, "dba", next), 4);
    }

    #[test]
    fn the_tighter_cap_wins() {
        let now = Instant::now();
        let mut s = DatabaseShares::new(4, 6);
        for _ in 0..4 {
            s.started("dba", now);
        }
        assert_eq!(room_of(&mut s, "dba", now), 0);
        for _ in 0..4 {
            s.finished("dba");
        }
        assert_eq!(room_of(&mut s, "dba", now), 2);
    }
}
