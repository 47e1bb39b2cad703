//! Bookkeeping of cold key verifications (argon2id), counted BEFORE hashing.
//!
//! * Per key id, one verification runs at a time ([`Admission::turn`]):
//!   concurrent requests for a key wait for the one ahead, then find its
//!   result in the verified cache (a digest comparison) instead of hashing.
//! * Per (key id, address), [`MAX_FAILURES`] failures within
//!   [`FAILURE_WINDOW`] refuse that address without hashing. The count is
//!   read again when the attempt's turn comes, so of a burst of wrong
//!   secrets from one address at most [`MAX_FAILURES`] are hashed. Another
//!   address is not affected, so guesses from one address never lock the
//!   owner out from elsewhere (and a key already verified on this router is
//!   checked from memory, never here).
//! * At most [`MAX_WAITING`] attempts of one address wait for one key;
//!   more are refused as busy (503), not as a wrong credential.
//! * A secret that just failed for a key is refused again without hashing.
//!
//! Counts live in this router's memory: N routers allow N times the budget.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub const FAILURE_WINDOW: Duration = Duration::from_secs(60);
pub const MAX_FAILURES: u32 = 5;
/// Attempts of one address on one key waiting for their turn at once.
pub const MAX_WAITING: u32 = 64;
/// Failed secret digests remembered per key.
const REMEMBERED_FAILURES: usize = 32;
/// Beyond this many key ids the idle ones are dropped.
const MAX_TRACKED: usize = 100_000;

#[derive(Default)]
struct PerAddress {
    since: Option<Instant>,
    failures: u32,
    pending: u32,
}

impl PerAddress {
    fn window_over(&self) -> bool {
        self.since.is_none_or(|s| s.elapsed() >= FAILURE_WINDOW)
    }
}

#[derive(Default)]
struct PerKey {
    turn: Arc<tokio::sync::Mutex<()>>,
    /// sha256 of secrets that failed, with when.
    failed: Vec<([u8; 32], Instant)>,
    addresses: HashMap<String, PerAddress>,
}

impl PerKey {
    fn idle(&self) -> bool {
        Arc::strong_count(&self.turn) == 1
            && self
                .addresses
                .values()
                .all(|a| a.pending == 0 && a.window_over())
    }

    fn failed_recently(&self, digest: &[u8; 32]) -> bool {
        self.failed
            .iter()
            .any(|(d, at)| d == digest && at.elapsed() < FAILURE_WINDOW)
    }
}

#[derive(Default)]
pub struct Attempts {
    keys: Mutex<HashMap<String, PerKey>>,
}

/// Why an attempt is refused before any hashing.
#[derive(Debug, PartialEq, Eq)]
pub enum Refusal {
    /// This address has used its failures.
    TooManyFailures,
    /// This very secret failed moments ago.
    KnownWrong,
    /// Too many attempts of this address are already waiting.
    Busy,
}

/// A counted attempt: holds the address's pending slot until dropped
/// (also when the request is cancelled).
pub struct Admission<'a> {
    attempts: &'a Attempts,
    key_id: String,
    address: String,
    digest: [u8; 32],
    /// Taken to verify: one verification per key id at a time.
    pub turn: Arc<tokio::sync::Mutex<()>>,
}

impl Attempts {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, PerKey>> {
        self.keys.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Counts an attempt of `address` on `key_id` with a secret of sha256
    /// `digest`, or refuses it.
    pub fn admit(
        &self,
        key_id: &str,
        address: &str,
        digest: [u8; 32],
    ) -> Result<Admission<'_>, Refusal> {
        let mut keys = self.lock();
        if keys.len() > MAX_TRACKED {
            keys.retain(|_, k| !k.idle());
        }
        let key = keys.entry(key_id.to_string()).or_default();
        if key.failed_recently(&digest) {
            return Err(Refusal::KnownWrong);
        }
        let slot = key.addresses.entry(address.to_string()).or_default();
        if slot.window_over() && slot.failures > 0 {
            slot.since = None;
            slot.failures = 0;
        }
        if slot.failures >= MAX_FAILURES {
            return Err(Refusal::TooManyFailures);
        }
        if slot.pending >= MAX_WAITING {
            return Err(Refusal::Busy);
        }
        slot.pending += 1;
        Ok(Admission {
            attempts: self,
            key_id: key_id.to_string(),
            address: address.to_string(),
            digest,
            turn: key.turn.clone(),
        })
    }
}

impl Admission<'_> {
    /// Checked when the turn comes: whether the attempts ahead found this
    /// secret wrong or used this address's failures.
    pub fn settled(&self) -> Option<Refusal> {
        let keys = self.attempts.lock();
        let key = keys.get(&self.key_id)?;
        if key.failed_recently(&self.digest) {
            return Some(Refusal::KnownWrong);
        }
        let slot = key.addresses.get(&self.address)?;
        (!slot.window_over() && slot.failures >= MAX_FAILURES).then_some(Refusal::TooManyFailures)
    }

    /// The secret was checked and is wrong.
    pub fn failed(&self) {
        let mut keys = self.attempts.lock();
        let Some(key) = keys.get_mut(&self.key_id) else {
            return;
        };
        key.failed.retain(|(_, at)| at.elapsed() < FAILURE_WINDOW);
        if key.failed.len() >= REMEMBERED_FAILURES {
            key.failed.remove(0);
        }
        key.failed.push((self.digest, Instant::now()));
        let slot = key.addresses.entry(self.address.clone()).or_default();
        if slot.window_over() {
            slot.since = Some(Instant::now());
            slot.failures = 0;
        }
        slot.failures += 1;
    }

    /// The secret is right: this address starts afresh.
    pub fn succeeded(&self) {
        let mut keys = self.attempts.lock();
        if let Some(slot) = keys
            .get_mut(&self.key_id)
            .and_then(|k| k.addresses.get_mut(&self.address))
        {
            slot.failures = 0;
            slot.since = None;
        }
    }
}

impl Drop for Admission<'_> {
    fn drop(&mut self) {
        let mut keys = self.attempts.lock();
        if let Some(slot) = keys
            .get_mut(&self.key_id)
            .and_then(|k| k.addresses.get_mut(&self.address))
        {
            slot.pending = slot.pending.saturating_sub(1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(n: u8) -> [u8; 32] {
        [n; 32]
    }

    #[test]
    fn failures_are_read_again_when_the_turn_comes() {
        let a = Attempts::default();
        let waiting: Vec<_> = (0..10u8)
            .map(|n| a.admit("key_a", "1.1.1.1", d(n)).expect("admitted"))
            .collect();
        for w in &waiting[..MAX_FAILURES as usize] {
            assert_eq!(w.settled(), None);
            w.failed();
        }
        for w in &waiting[MAX_FAILURES as usize..] {
            assert_eq!(w.settled(), Some(Refusal::TooManyFailures));
        }
        // Another address, and another key, are not affected.
        assert!(a.admit("key_a", "2.2.2.2", d(99)).is_ok());
        assert!(a.admit("key_b", "1.1.1.1", d(99)).is_ok());
    }

    #[test]
    fn too_many_waiting_is_busy() {
        let a = Attempts::default();
        let held: Vec<_> = (0..MAX_WAITING)
            .map(|_| a.admit("key_a", "1.1.1.1", d(1)).expect("admitted"))
            .collect();
        assert_eq!(a.admit("key_a", "1.1.1.1", d(1)).err(), Some(Refusal::Busy));
        drop(held);
        assert!(a.admit("key_a", "1.1.1.1", d(1)).is_ok());
    }

    #[test]
    fn failures_lock_one_address_and_a_failed_secret_is_remembered() {
        let a = Attempts::default();
        for n in 0..MAX_FAILURES as u8 {
            a.admit("key_a", "1.1.1.1", d(n)).unwrap().failed();
        }
        assert_eq!(
            a.admit("key_a", "1.1.1.1", d(50)).err(),
            Some(Refusal::TooManyFailures)
        );
        assert_eq!(
            a.admit("key_a", "2.2.2.2", d(0)).err(),
            Some(Refusal::KnownWrong)
        );
        let ok = a.admit("key_a", "2.2.2.2", d(50)).unwrap();
        assert_eq!(ok.settled(), None);
        ok.succeeded();
    }

    #[test]
    fn success_clears_the_address() {
        let a = Attempts::default();
        for n in 0..MAX_FAILURES as u8 - 1 {
            a.admit("key_a", "1.1.1.1", d(n)).unwrap().failed();
        }
        a.admit("key_a", "1.1.1.1", d(60)).unwrap().succeeded();
        for n in 10..10 + MAX_FAILURES as u8 - 1 {
            a.admit("key_a", "1.1.1.1", d(n)).unwrap().failed();
        }
        assert!(a.admit("key_a", "1.1.1.1", d(70)).is_ok());
    }
}
