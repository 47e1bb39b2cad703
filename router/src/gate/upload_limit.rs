//! Part C's upload limit: at most [`UPLOADS_PER_WINDOW`] attachment
//! uploads per account (the key's user) in any [`UPLOAD_WINDOW_MS`],
//! answered 400 (a reached ceiling), not 429. Charged by the router on
//! `POST /api/tables/{id}/attachments` once the key is verified and before
//! the body is read.
//!
//! URL fetches into attachment cells count in the same log: a record
//! write that may name URLs carries the account's [`Allowance`] to the
//! shard, which refuses a write naming more URLs than remain (the same
//! 400) and answers how many it fetched; those are added here
//! ([`UploadLimiter::add_fetches`]).
//!
//! Unlike the request budgets (a sliding-window counter), uploads are few
//! and the limit is exact: a sorted set per account in Redis holds the
//! times of the uploads of the last window, so every router shares one
//! count. While Redis does not answer, the same log is kept in process
//! (shared by this router's cores), as the other limits do.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use crate::errors::ApiError;
use crate::gate::limiter::retry_after_secs;
use crate::gate::limiter_lua::{now_ms, Limiter};
use crate::gate::redis_conn::Script;
use crate::gate::resp::{Reply, ScriptCall};

/// Uploads one account may start per window (part C).
pub const UPLOADS_PER_WINDOW: u64 = 60;
/// The window, in ms (part C: 60 s).
pub const UPLOAD_WINDOW_MS: u64 = 60_000;

/// KEYS: the account's log. ARGV: now ms, window ms, limit, a random
/// number (two uploads in one ms are two entries).
/// Returns {allowed, ms until one more upload would be allowed}.
const SCRIPT: &str = r#"
local now = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local limit = tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
local n = redis.call('ZCARD', KEYS[1])
if n < limit then
  redis.call('ZADD', KEYS[1], now, ARGV[1] .. ':' .. ARGV[4])
  redis.call('PEXPIRE', KEYS[1], window)
  return {1, 0}
end
local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
return {0, tonumber(oldest[2]) + window - now}
"#;

/// The allowance of an account (URL fetches of a record write, charged by
/// the shard that fetches them: `shard-node` `attachments::fetch_charge`).
/// KEYS: the account's log. ARGV: now ms, window ms, limit.
/// Returns {uploads left in the window, ms until one more is allowed}.
const ALLOWANCE_SCRIPT: &str = r#"
local now = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local limit = tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
local n = redis.call('ZCARD', KEYS[1])
local wait = 0
if n > 0 then
  local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  wait = tonumber(oldest[2]) + window - now
end
return {math.max(limit - n, 0), wait}
"#;

/// Adds fetches a shard made to the account's log. KEYS: the log. ARGV:
/// now ms, window ms, count, a random number.
const ADD_SCRIPT: &str = r#"
local now = tonumber(ARGV[1])
for i = 1, tonumber(ARGV[3]) do
  redis.call('ZADD', KEYS[1], now, ARGV[1] .. ':' .. ARGV[4] .. ':' .. i)
end
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[2]))
return 1
"#;

/// Most fetches one reply may add (a write fetches at most 20 URLs).
const MAX_FETCHES_PER_REPLY: u64 = 100;

/// Beyond this many accounts the fallback forgets those with no upload in
/// the window.
const MAX_LOCAL_ACCOUNTS: usize = 50_000;

/// The script and the in-process fallback log, shared by every core.
pub struct UploadLimiter {
    script: Script,
    allowance: Script,
    add: Script,
    local: Mutex<HashMap<String, VecDeque<u64>>>,
}

impl Default for UploadLimiter {
    fn default() -> Self {
        Self {
            script: Script::new(SCRIPT),
            allowance: Script::new(ALLOWANCE_SCRIPT),
            add: Script::new(ADD_SCRIPT),
            local: Mutex::default(),
        }
    }
}

/// What is left of an account's window: uploads (or URL fetches) it may
/// still start, and ms until one more would be allowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Allowance {
    pub remaining: u64,
    pub retry_after_ms: u64,
}

impl Allowance {
    /// The value of the header the shard reads
    /// (`x-cluster-upload-allowance`).
    pub fn header_value(self) -> String {
        format!("{} {}", self.remaining, self.retry_after_ms)
    }
}

/// What the limit said about one upload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Allowed,
    /// Refused: ms until one more upload would be allowed.
    Refused {
        retry_after_ms: u64,
    },
}

impl UploadLimiter {
    /// Counts an upload of `user_id` now, or refuses it (400 naming the
    /// limit and when to try again).
    pub async fn charge(&self, limiter: &Limiter, user_id: &str) -> Result<(), ApiError> {
        match self.verdict(limiter, user_id).await {
            Verdict::Allowed => Ok(()),
            Verdict::Refused { retry_after_ms } => {
                Err(ApiError::BadRequest(refusal_message(retry_after_ms)))
            }
        }
    }

    async fn verdict(&self, limiter: &Limiter, user_id: &str) -> Verdict {
        let now = now_ms();
        let nonce: u64 = rand::random();
        let call = |call: &mut ScriptCall<'_>| {
            call.key(&["router:rl:upload:", user_id], None);
            for arg in [now, UPLOAD_WINDOW_MS, UPLOADS_PER_WINDOW, nonce] {
                call.arg(arg);
            }
        };
        if let Some(Reply::Array(items)) = limiter.eval(&self.script, call).await {
            let at = |i: usize| items.get(i).and_then(Reply::as_i64);
            if let (Some(allowed), Some(wait)) = (at(0), at(1)) {
                return if allowed == 1 {
                    Verdict::Allowed
                } else {
                    Verdict::Refused {
                        retry_after_ms: wait.max(1) as u64,
                    }
                };
            }
        }
        self.charge_locally(user_id, now)
    }

    /// What is left of `user_id`'s window now (nothing is counted).
    pub async fn allowance(&self, limiter: &Limiter, user_id: &str) -> Allowance {
        let now = now_ms();
        let call = |call: &mut ScriptCall<'_>| {
            call.key(&["router:rl:upload:", user_id], None);
            for arg in [now, UPLOAD_WINDOW_MS, UPLOADS_PER_WINDOW] {
                call.arg(arg);
            }
        };
        if let Some(Reply::Array(items)) = limiter.eval(&self.allowance, call).await {
            let at = |i: usize| items.get(i).and_then(Reply::as_i64);
            if let (Some(remaining), Some(wait)) = (at(0), at(1)) {
                return Allowance {
                    remaining: remaining.max(0) as u64,
                    retry_after_ms: wait.max(1) as u64,
                };
            }
        }
        let mut logs = self.local.lock().unwrap_or_else(|p| p.into_inner());
        let log = logs.entry(user_id.to_string()).or_default();
        allowance_of(log, now, UPLOAD_WINDOW_MS, UPLOADS_PER_WINDOW)
    }

    /// Adds `n` URL fetches a shard made for `user_id` to its log (they
    /// were checked against the allowance the shard was sent).
    pub async fn add_fetches(&self, limiter: &Limiter, user_id: &str, n: u64) {
        let n = n.min(MAX_FETCHES_PER_REPLY);
        if n == 0 {
            return;
        }
        let now = now_ms();
        let nonce: u64 = rand::random();
        let call = |call: &mut ScriptCall<'_>| {
            call.key(&["router:rl:upload:", user_id], None);
            for arg in [now, UPLOAD_WINDOW_MS, n, nonce] {
                call.arg(arg);
            }
        };
        if limiter.eval(&self.add, call).await.is_some() {
            return;
        }
        let mut logs = self.local.lock().unwrap_or_else(|p| p.into_inner());
        let log = logs.entry(user_id.to_string()).or_default();
        log.extend(std::iter::repeat_n(now, n as usize));
    }

    fn charge_locally(&self, user_id: &str, now: u64) -> Verdict {
        let mut logs = self.local.lock().unwrap_or_else(|p| p.into_inner());
        if logs.len() > MAX_LOCAL_ACCOUNTS {
            logs.retain(|_, log| log.back().is_some_and(|t| t + UPLOAD_WINDOW_MS > now));
        }
        let log = logs.entry(user_id.to_string()).or_default();
        charge_log(log, now, UPLOAD_WINDOW_MS, UPLOADS_PER_WINDOW)
    }
}

/// Charges one upload at `now` to `log` (times of the uploads still in the
/// window, oldest first), exactly as the Redis script does.
pub fn charge_log(log: &mut VecDeque<u64>, now: u64, window: u64, limit: u64) -> Verdict {
    while log.front().is_some_and(|t| t + window <= now) {
        log.pop_front();
    }
    if (log.len() as u64) < limit {
        log.push_back(now);
        return Verdict::Allowed;
    }
    let oldest = log.front().copied().unwrap_or(now);
    Verdict::Refused {
        retry_after_ms: (oldest + window).saturating_sub(now).max(1),
    }
}

/// What is left of `log` (times of the uploads still in the window, oldest
/// first) at `now`, exactly as the allowance script reckons it.
pub fn allowance_of(log: &mut VecDeque<u64>, now: u64, window: u64, limit: u64) -> Allowance {
    while log.front().is_some_and(|t| t + window <= now) {
        log.pop_front();
    }
    let oldest = log.front().copied().unwrap_or(now);
    Allowance {
        remaining: limit.saturating_sub(log.len() as u64),
        retry_after_ms: (oldest + window).saturating_sub(now).max(1),
    }
}

/// Router to shard: the account's [`Allowance`] (`<remaining> <ms>`).
pub const ALLOWANCE_HEADER: &str = "x-cluster-upload-allowance";
/// Shard to router: how many URLs the request fetched.
pub const FETCHED_HEADER: &str = "x-cluster-attachment-fetches";

/// Whether a request may fetch attachment URLs: a record write (create,
/// update, upsert) whose body could spell `http` (literally, in any case,
/// or through a JSON `\u` escape). Other requests carry no allowance.
pub fn may_fetch(method: &http::Method, path: &str, body: &[u8]) -> bool {
    let writes = matches!(
        *method,
        http::Method::POST | http::Method::PATCH | http::Method::PUT
    );
    writes
        && path.starts_with("/api/tables/")
        && path.ends_with("/records")
        && body
            .windows(4)
            .any(|w| w.eq_ignore_ascii_case(b"http") || w.starts_with(b"\\u"))
}

/// The fetches a shard's reply reports, taking the header off it.
pub fn take_fetched(headers: &mut http::HeaderMap) -> u64 {
    headers
        .remove(FETCHED_HEADER)
        .and_then(|v| v.to_str().ok().and_then(|t| t.trim().parse().ok()))
        .unwrap_or(0)
}

/// The 400's message: the limit, and when one more upload is allowed.
pub fn refusal_message(retry_after_ms: u64) -> String {
    format!(
        "Upload limit reached: at most {UPLOADS_PER_WINDOW} uploads per account per {} seconds; \
         try again in {} s.",
        UPLOAD_WINDOW_MS / 1000,
        retry_after_secs(retry_after_ms)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_log_allows_the_limit_and_refuses_the_next_until_the_oldest_leaves() {
        let mut log = VecDeque::new();
        let t0 = 1_000_000;
        for i in 0..3 {
            assert_eq!(charge_log(&mut log, t0 + i * 10, 1000, 3), Verdict::Allowed);
        }
        // The fourth within the window: refused until the first is 1000 ms old.
        assert_eq!(
            charge_log(&mut log, t0 + 500, 1000, 3),
            Verdict::Refused {
                retry_after_ms: 500
            }
        );
        assert_eq!(log.len(), 3, "a refusal is not counted");
        assert_eq!(
            charge_log(&mut log, t0 + 999, 1000, 3),
            Verdict::Refused { retry_after_ms: 1 }
        );
        // Exactly one window after the first upload, it no longer counts.
        assert_eq!(charge_log(&mut log, t0 + 1000, 1000, 3), Verdict::Allowed);
        assert_eq!(
            charge_log(&mut log, t0 + 1001, 1000, 3),
            Verdict::Refused { retry_after_ms: 9 }
        );
    }

    #[test]
    fn the_message_names_the_limit_and_whole_seconds_to_wait() {
        assert_eq!(
            refusal_message(41_200),
            "Upload limit reached: at most 60 uploads per account per 60 seconds; \
             try again in 42 s."
        );
        assert!(refusal_message(1).ends_with("try again in 1 s."));
    }

    #[test]
    fn the_fallback_counts_per_account() {
        let l = UploadLimiter::default();
        let now = 5_000_000;
        for _ in 0..UPLOADS_PER_WINDOW {
            assert_eq!(l.charge_locally("usr_a", now), Verdict::Allowed);
        }
        assert!(matches!(
            l.charge_locally("usr_a", now + 1),
            Verdict::Refused { .. }
        ));
        assert_eq!(l.charge_locally("usr_b", now + 1), Verdict::Allowed);
        assert_eq!(
            l.charge_locally("usr_a", now + UPLOAD_WINDOW_MS),
            Verdict::Allowed
        );
    }

    #[test]
    fn the_script_reads_what_it_is_given() {
        for needle in ["KEYS[1]", "ARGV[1]", "ARGV[2]", "ARGV[3]", "ARGV[4]"] {
            assert!(SCRIPT.contains(needle), "{needle}");
            assert!(ADD_SCRIPT.contains(needle), "{needle}");
        }
        for needle in ["KEYS[1]", "ARGV[1]", "ARGV[2]", "ARGV[3]"] {
            assert!(ALLOWANCE_SCRIPT.contains(needle), "{needle}");
        }
    }

    #[test]
    fn only_record_writes_that_may_spell_a_url_carry_an_allowance() {
        use http::Method;
        let records = "/api/tables/tbl_x/records";
        let url = br#"{"records":[{"fields":{"F":["HTTPS://a.example/x"]}}]}"#;
        assert!(may_fetch(&Method::POST, records, url));
        assert!(may_fetch(&Method::PATCH, records, url));
        assert!(may_fetch(
            &Method::PUT,
            records,
            br#"{"u":"\u0068ttps://x"}"#
        ));
        assert!(!may_fetch(&Method::POST, records, br#"{"records":[]}"#));
        assert!(!may_fetch(&Method::GET, records, url));
        assert!(!may_fetch(&Method::POST, "/api/tables/tbl_x/fields", url));
        let mut h = http::HeaderMap::new();
        h.insert(FETCHED_HEADER, http::HeaderValue::from_static("3"));
        assert_eq!(take_fetched(&mut h), 3);
        assert!(h.is_empty());
        assert_eq!(take_fetched(&mut h), 0);
    }

    #[test]
    fn the_allowance_counts_what_is_left_and_the_wait_for_one_more() {
        let mut log = VecDeque::new();
        let t0 = 1_000_000;
        assert_eq!(
            allowance_of(&mut log, t0, 1000, 3),
            Allowance {
                remaining: 3,
                retry_after_ms: 1000
            }
        );
        log.extend([t0, t0 + 100]);
        let a = allowance_of(&mut log, t0 + 200, 1000, 3);
        assert_eq!(a.remaining, 1);
        assert_eq!(a.retry_after_ms, 800);
        assert_eq!(a.header_value(), "1 800");
        assert_eq!(allowance_of(&mut log, t0 + 1000, 1000, 3).remaining, 2);
    }
}
