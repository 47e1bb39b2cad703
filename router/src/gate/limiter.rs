//! Sliding-window-counter arithmetic (two fixed one-minute buckets, the
//! previous one weighted by how much of it still overlaps the sliding
//! window), shared by the Redis script's callers and the in-process fallback
//! limiter used while Redis is unreachable.
//!
//! The estimate of requests in the last `window` ms at `elapsed` ms into the
//! current bucket is `prev * (window - elapsed) / window + cur`. A request is
//! allowed when `estimate + 1 <= limit`, and then counted in `cur`.

use std::collections::HashMap;
use std::sync::Mutex;

pub const WINDOW_MS: u64 = 60_000;

/// What one budget said about one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    pub allowed: bool,
    pub limit: u64,
    /// Whole requests still free after this one (if it was allowed).
    pub remaining: u64,
    /// When denied: ms until one request would be allowed again.
    pub retry_after_ms: u64,
}

/// Index of the fixed bucket holding `now_ms`, and ms elapsed inside it.
pub fn bucket_of(now_ms: u64) -> (u64, u64) {
    (now_ms / WINDOW_MS, now_ms % WINDOW_MS)
}

/// Requests in the sliding window (fractional).
pub fn estimate(prev: u64, cur: u64, elapsed_ms: u64) -> f64 {
    let elapsed = elapsed_ms.min(WINDOW_MS) as f64;
    prev as f64 * (WINDOW_MS as f64 - elapsed) / WINDOW_MS as f64 + cur as f64
}

/// Whether one more request fits; mirrors the Lua script exactly.
pub fn fits(prev: u64, cur: u64, elapsed_ms: u64, limit: u64) -> bool {
    estimate(prev, cur, elapsed_ms) + 1.0 <= limit as f64
}

/// The decision given the counters *after* the script ran: when `allowed`,
/// `cur` already includes this request.
pub fn decide(allowed: bool, prev: u64, cur: u64, elapsed_ms: u64, limit: u64) -> Decision {
    let free = (limit as f64 - estimate(prev, cur, elapsed_ms)).max(0.0);
    // A tiny epsilon keeps 599.9999999 from flooring to 599.
    let remaining = (free + 1e-9).floor() as u64;
    let retry_after_ms = if allowed {
        0
    } else {
        retry_after_ms(prev, cur, elapsed_ms, limit)
    };
    Decision {
        allowed,
        limit,
        remaining: remaining.min(limit),
        retry_after_ms,
    }
}

/// Ms until `fits` becomes true, assuming no further requests are counted.
pub fn retry_after_ms(prev: u64, cur: u64, elapsed_ms: u64, limit: u64) -> u64 {
    if fits(prev, cur, elapsed_ms, limit) {
        return 0;
    }
    let w = WINDOW_MS as f64;
    let budget = limit as f64 - 1.0;
    if limit == 0 {
        return WINDOW_MS;
    }
    if (cur as f64) <= budget && prev > 0 {
        // Wait inside this bucket until the previous one has decayed enough:
        // prev * (w - e) / w <= budget - cur.
        let e = w - w * (budget - cur as f64) / prev as f64;
        return ((e - elapsed_ms as f64).ceil().max(1.0)) as u64;
    }
    // Wait for the next bucket, where `cur` becomes the decaying one.
    let to_next = WINDOW_MS - elapsed_ms.min(WINDOW_MS);
    let e2 = if cur == 0 {
        0.0
    } else {
        (w - w * budget / cur as f64).max(0.0)
    };
    to_next + e2.ceil() as u64
}

/// Retry-After in whole seconds, rounded up, at least 1.
pub fn retry_after_secs(ms: u64) -> u64 {
    ms.div_ceil(1000).max(1)
}

#[derive(Debug, Clone, Copy)]
struct Counter {
    bucket: u64,
    cur: u64,
    prev: u64,
}

/// The in-process limiter used while Redis is unreachable; same arithmetic.
#[derive(Default)]
pub struct LocalLimiter {
    shards: [Mutex<HashMap<String, Counter>>; 16],
}

impl LocalLimiter {
    fn shard(&self, name: &str) -> &Mutex<HashMap<String, Counter>> {
        let h = name
            .bytes()
            .fold(0u32, |h, b| h.wrapping_mul(31).wrapping_add(b as u32));
        &self.shards[(h as usize) % self.shards.len()]
    }

    /// Charges one request to `name` under `limit` per window.
    pub fn charge(&self, name: &str, limit: u64, now_ms: u64) -> Decision {
        let (bucket, elapsed) = bucket_of(now_ms);
        let mut map = self.shard(name).lock().unwrap_or_else(|p| p.into_inner());
        if map.len() > 50_000 {
            map.retain(|_, c| c.bucket + 1 >= bucket);
        }
        let c = map.entry(name.to_string()).or_insert(Counter {
            bucket,
            cur: 0,
            prev: 0,
        });
        if c.bucket != bucket {
            c.prev = if c.bucket + 1 == bucket { c.cur } else { 0 };
            c.cur = 0;
            c.bucket = bucket;
        }
        let allowed = fits(c.prev, c.cur, elapsed, limit);
        if allowed {
            c.cur += 1;
        }
        decide(allowed, c.prev, c.cur, elapsed, limit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn estimate_weights_the_previous_bucket() {
        assert_eq!(estimate(600, 0, 0), 600.0);
        assert_eq!(estimate(600, 0, 30_000), 300.0);
        assert_eq!(estimate(600, 10, 45_000), 160.0);
        assert_eq!(estimate(600, 10, 60_000), 10.0);
    }

    #[test]
    fn remaining_counts_what_is_left() {
        let d = decide(true, 0, 1, 0, 600);
        assert_eq!((d.allowed, d.remaining), (true, 599));
        let d = decide(true, 0, 600, 10, 600);
        assert_eq!(d.remaining, 0);
        // Denied with half the previous bucket decayed: what is genuinely free.
        let d = decide(false, 600, 300, 30_000, 600);
        assert_eq!((d.allowed, d.remaining), (false, 0));
        let d = decide(false, 100, 5, 59_000, 4);
        assert_eq!(d.remaining, 0);
    }

    #[test]
    fn retry_after_within_the_bucket() {
        // prev 600 decays to allow one more at e where 600*(60000-e)/60000 <= 99.
        let ms = retry_after_ms(600, 500, 0, 600);
        assert!(fits(600, 500, ms, 600));
        assert!(!fits(600, 500, ms - 1, 600));
    }

    #[test]
    fn retry_after_crosses_into_the_next_bucket() {
        let ms = retry_after_ms(0, 600, 20_000, 600);
        // 40 s to the next bucket, then the old bucket must decay by one request.
        assert_eq!(ms, 40_000 + 100);
        assert_eq!(retry_after_secs(ms), 41);
    }

    #[test]
    fn retry_after_seconds_round_up_and_are_at_least_one() {
        assert_eq!(retry_after_secs(0), 1);
        assert_eq!(retry_after_secs(1), 1);
        assert_eq!(retry_after_secs(1000), 1);
        assert_eq!(retry_after_secs(1001), 2);
        assert_eq!(retry_after_secs(59_999), 60);
    }

    #[test]
    fn local_limiter_enforces_the_budget() {
        let l = LocalLimiter::default();
        let t = 5 * WINDOW_MS + 100;
        for i in 0..3 {
            let d = l.charge("a", 3, t);
            assert!(d.allowed);
            assert_eq!(d.remaining, 2 - i);
        }
        let d = l.charge("a", 3, t);
        assert!(!d.allowed);
        assert!(d.retry_after_ms > 0);
        assert!(l.charge("b", 3, t).allowed, "two names, two budgets");
        // Two windows later everything has decayed.
        assert!(l.charge("a", 3, t + 2 * WINDOW_MS).allowed);
    }
}
