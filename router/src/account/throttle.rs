//! Sign-in limits in Redis: attempts per client address
//! (`SIGNIN_LIMIT_PER_ADDRESS` per [`ADDRESS_WINDOW_SECS`], sign-ups
//! included) and failed sign-ins per account (`SIGNIN_LIMIT_PER_ACCOUNT`
//! per [`ACCOUNT_WINDOW_SECS`], by lowercased email whether or not it
//! exists, so a throttled answer says nothing about the account). Fixed
//! windows: a counter with a TTL set by its first increment.
//!
//! Each call touches one key, named with a hash tag (`signin:{addr:…}`,
//! `signin:{acct:…}`) so it runs on Redis Cluster. While Redis does not
//! answer, sign-in is not throttled (logged): the argon2 verification per
//! attempt still bounds guessing.

use std::sync::LazyLock;

use crate::gate::limiter_lua::Limiter;
use crate::gate::redis_conn::Script;
use crate::gate::resp::{Reply, ScriptCall};

pub const ADDRESS_WINDOW_SECS: u64 = 10 * 60;
pub const ACCOUNT_WINDOW_SECS: u64 = 15 * 60;
/// Longest email kept in a counter's name.
const MAX_EMAIL_IN_KEY: usize = 320;

/// `INCR`, the window's TTL on the first count; replies `{count, ttl}`.
static COUNT: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        "local n = redis.call('INCR', KEYS[1]) \
         if n == 1 or redis.call('TTL', KEYS[1]) < 0 then redis.call('EXPIRE', KEYS[1], ARGV[1]) end \
         return {n, redis.call('TTL', KEYS[1])}",
    )
});
/// Replies `{count, ttl}` without counting.
static PEEK: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        "local n = tonumber(redis.call('GET', KEYS[1]) or '0') \
         return {n, redis.call('TTL', KEYS[1])}",
    )
});
static FORGET: LazyLock<Script> =
    LazyLock::new(|| Script::new("return redis.call('DEL', KEYS[1])"));

/// The counter of a client address.
pub fn address_key(address: &str) -> [&str; 3] {
    ["signin:{addr:", address, "}"]
}

/// The account's name in its counter: the trimmed, lowercased email.
pub fn account_name(email: &str) -> String {
    let mut e = email.trim().to_lowercase();
    if e.len() > MAX_EMAIL_IN_KEY {
        let mut cut = MAX_EMAIL_IN_KEY;
        while !e.is_char_boundary(cut) {
            cut -= 1;
        }
        e.truncate(cut);
    }
    e
}

fn account_key(name: &str) -> [&str; 3] {
    ["signin:{acct:", name, "}"]
}

/// A count and the seconds left in its window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Count {
    pub n: u64,
    pub ttl_secs: u64,
}

/// Whether a count over `limit` refuses; `Some(retry_after_secs)` if so.
pub fn refused(count: Option<Count>, limit: u64, window: u64) -> Option<u64> {
    let c = count?;
    (c.n > limit).then_some(if c.ttl_secs == 0 { window } else { c.ttl_secs })
}

async fn run(limiter: &Limiter, script: &Script, key: [&str; 3], arg: u64) -> Option<Count> {
    let call = |call: &mut ScriptCall<'_>| {
        call.key(&key, None);
        call.arg(arg);
    };
    match limiter.eval(script, call).await {
        Some(Reply::Array(items)) => {
            let at = |i: usize| items.get(i).and_then(Reply::as_i64);
            Some(Count {
                n: at(0)?.max(0) as u64,
                ttl_secs: at(1)?.max(0) as u64,
            })
        }
        _ => {
            tracing::warn!("redis: sign-in counter unavailable; not throttling this attempt");
            None
        }
    }
}

/// Counts an attempt from `address`; `Some(retry_after_secs)` when over.
pub async fn charge_address(limiter: &Limiter, address: &str, limit: u64) -> Option<u64> {
    let count = run(limiter, &COUNT, address_key(address), ADDRESS_WINDOW_SECS).await;
    refused(count, limit, ADDRESS_WINDOW_SECS)
}

/// Whether the account is at its limit of failures (nothing counted).
pub async fn account_blocked(limiter: &Limiter, account: &str, limit: u64) -> Option<u64> {
    let count = run(limiter, &PEEK, account_key(account), 0).await;
    // The attempt about to be made would be one more failure.
    refused(
        count.map(|c| Count { n: c.n + 1, ..c }),
        limit,
        ACCOUNT_WINDOW_SECS,
    )
}

/// Counts a failed sign-in of the account.
pub async fn count_failure(limiter: &Limiter, account: &str) {
    run(limiter, &COUNT, account_key(account), ACCOUNT_WINDOW_SECS).await;
}

/// Forgets the account's failures (after a successful sign-in).
pub async fn forget(limiter: &Limiter, account: &str) {
    let call = |call: &mut ScriptCall<'_>| call.key(&account_key(account), None);
    let _ = limiter.eval(&FORGET, call).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn over_the_limit_refuses_until_the_window_ends() {
        let c = |n, ttl_secs| Some(Count { n, ttl_secs });
        assert_eq!(refused(c(5, 100), 5, 600), None);
        assert_eq!(refused(c(6, 100), 5, 600), Some(100));
        assert_eq!(refused(c(6, 0), 5, 600), Some(600));
        assert_eq!(refused(None, 5, 600), None);
    }

    #[test]
    fn keys_are_single_slot_and_case_insensitive() {
        assert_eq!(address_key("1.2.3.4").concat(), "signin:{addr:1.2.3.4}");
        let name = account_name("  Demo@Example.COM ");
        assert_eq!(
            account_key(&name).concat(),
            "signin:{acct:demo@example.com}"
        );
        let long = "é".repeat(400);
        assert!(account_name(&long).len() <= MAX_EMAIL_IN_KEY);
    }
}
