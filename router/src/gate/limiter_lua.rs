//! The hot path's single Redis round trip: one Lua script (EVALSHA, cached)
//! that charges the address shield, then (if allowed and a verified key is
//! given) the key's budget, reads the key's liveness version and the user's
//! access version, and swaps the key's last-used stamp. When Redis does not
//! answer, the same arithmetic runs in process ([`LocalLimiter`]).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::edge::metrics;
use crate::gate::keys::VerifiedKey;
use crate::gate::limiter::{bucket_of, decide, Decision, LocalLimiter, WINDOW_MS};
use crate::gate::redis_conn::{self, RedisPool, Script};
use crate::gate::resp::{Reply, ScriptCall};

/// KEYS: shield cur, shield prev, [key cur, key prev, key liveness, user version, last used].
/// ARGV: elapsed ms in bucket, window ms, shield limit (0 = skip), key limit, now ms.
/// Returns {shield_allowed, shield_cur, shield_prev, key_allowed, key_cur, key_prev,
///          key_version, user_version, previous_last_used}.
const SCRIPT: &str = r#"
local elapsed = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local shield_limit = tonumber(ARGV[3])
local key_limit = tonumber(ARGV[4])
local function charge(cur_key, prev_key, limit)
  local cur = tonumber(redis.call('GET', cur_key) or '0')
  local prev = tonumber(redis.call('GET', prev_key) or '0')
  if prev * (window - elapsed) / window + cur + 1 <= limit then
    cur = redis.call('INCR', cur_key)
    if cur == 1 then redis.call('PEXPIRE', cur_key, window * 2) end
    return 1, cur, prev
  end
  return 0, cur, prev
end
local sa, sc, sp = 1, 0, 0
if shield_limit > 0 then sa, sc, sp = charge(KEYS[1], KEYS[2], shield_limit) end
if #KEYS < 7 then return {sa, sc, sp} end
local ka, kc, kp = 0, 0, 0
if sa == 1 then ka, kc, kp = charge(KEYS[3], KEYS[4], key_limit) end
local kv = redis.call('GET', KEYS[5])
local uv = redis.call('GET', KEYS[6])
local lu = redis.call('GET', KEYS[7])
if sa == 1 then redis.call('SET', KEYS[7], ARGV[5]) end
return {sa, sc, sp, ka, kc, kp, kv, uv, lu}
"#;

/// Whether the Redis versions could be read at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Versions {
    /// From Redis: `None` means the key is absent.
    Redis { key: Option<i64>, user: Option<i64> },
    /// Redis unreachable: callers fall back to time-based re-fetching.
    Unknown,
}

#[derive(Debug, Clone, Copy)]
pub struct Outcome {
    pub shield: Decision,
    /// Present when a key was charged (and the shield allowed).
    pub key: Option<Decision>,
    pub versions: Versions,
    /// Previous last-used stamp (unix ms).
    pub last_used_ms: Option<i64>,
}

/// What to charge for one request.
pub struct Charge<'a> {
    pub address: &'a str,
    /// 0 skips the shield (already charged on the cold path).
    pub shield_limit: u64,
    /// A verified key and its budget per window.
    pub key: Option<(&'a VerifiedKey, u64)>,
}

pub struct Limiter {
    redis: RedisPool,
    script: Arc<Script>,
    /// Shared by every core, so the fallback counts one budget per name.
    local: Arc<LocalLimiter>,
    /// Unix ms until which Redis is considered down (skip it).
    down_until: AtomicU64,
    last_warning: AtomicU64,
    timeout: Duration,
}

pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

impl Limiter {
    pub fn new(redis: RedisPool) -> Self {
        Self {
            redis,
            script: Arc::new(Script::new(SCRIPT)),
            local: Arc::default(),
            down_until: AtomicU64::new(0),
            last_warning: AtomicU64::new(0),
            timeout: Duration::from_millis(250),
        }
    }

    /// A limiter on other connections (another core's) sharing this one's
    /// script and fallback counters.
    pub fn with_connections(&self, redis: RedisPool) -> Self {
        Self {
            redis,
            script: self.script.clone(),
            local: self.local.clone(),
            down_until: AtomicU64::new(0),
            last_warning: AtomicU64::new(0),
            timeout: self.timeout,
        }
    }

    pub async fn charge(&self, c: Charge<'_>) -> Outcome {
        let now = now_ms();
        if now >= self.down_until.load(Ordering::Relaxed) {
            let started = std::time::Instant::now();
            let result = tokio::time::timeout(self.timeout, self.run_script(&c, now)).await;
            metrics::redis_round_trip(matches!(result, Ok(Ok(_))), started.elapsed());
            match result {
                Ok(Ok(out)) => return out,
                Ok(Err(e)) => self.redis_down(now, &e.to_string()),
                Err(_) => self.redis_down(now, "timed out"),
            }
        }
        self.charge_locally(&c, now)
    }

    /// Charges one request to a budget of its own (not the address shield
    /// nor a key's): `limit` per window under the Redis keys
    /// `{prefix}{name}:{bucket}`, or in process while Redis is unreachable.
    pub async fn charge_budget(&self, prefix: &str, name: &str, limit: u64) -> Decision {
        let now = now_ms();
        let (bucket, elapsed) = bucket_of(now);
        let previous = bucket.wrapping_sub(1);
        let call = |call: &mut ScriptCall<'_>| {
            call.key(&[prefix, name, ":"], Some(bucket));
            call.key(&[prefix, name, ":"], Some(previous));
            // The script's shield slot is the one budget; no key follows.
            for arg in [elapsed, WINDOW_MS, limit, 0, now] {
                call.arg(arg);
            }
        };
        match self.eval(&self.script, call).await {
            Some(Reply::Array(items)) => {
                let n = |i: usize| items.get(i).and_then(Reply::as_i64).unwrap_or(0).max(0) as u64;
                decide(n(0) == 1, n(2), n(1), elapsed, limit)
            }
            _ => self
                .local
                .charge(&format!("{prefix}{name}"), limit, now_ms()),
        }
    }

    /// Runs `script` on this limiter's connections, with the same
    /// detection of a Redis that does not answer: `None` while it is down
    /// (the caller then counts in process), else the script's reply.
    pub async fn eval<F>(&self, script: &Script, call: F) -> Option<Reply>
    where
        F: Fn(&mut ScriptCall<'_>),
    {
        let now = now_ms();
        if now < self.down_until.load(Ordering::Relaxed) {
            return None;
        }
        let started = std::time::Instant::now();
        let result = tokio::time::timeout(self.timeout, self.redis.eval(script, call)).await;
        metrics::redis_round_trip(matches!(result, Ok(Ok(_))), started.elapsed());
        match result {
            Ok(Ok(reply)) => Some(reply),
            Ok(Err(e)) => {
                self.redis_down(now, &e.to_string());
                None
            }
            Err(_) => {
                self.redis_down(now, "timed out");
                None
            }
        }
    }

    fn redis_down(&self, now: u64, why: &str) {
        self.down_until.store(now + 1_000, Ordering::Relaxed);
        let last = self.last_warning.load(Ordering::Relaxed);
        if now.saturating_sub(last) >= 5_000
            && self
                .last_warning
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            tracing::warn!(
                error = why,
                "redis unreachable: rate limits fall back to this process's memory"
            );
        }
    }

    fn charge_locally(&self, c: &Charge<'_>, now: u64) -> Outcome {
        let shield = if c.shield_limit > 0 {
            self.local
                .charge(&format!("a:{}", c.address), c.shield_limit, now)
        } else {
            Decision {
                allowed: true,
                limit: 0,
                remaining: 0,
                retry_after_ms: 0,
            }
        };
        let key = match c.key {
            Some((key, limit)) if shield.allowed => Some(self.local.charge(
                &format!("k:{}", key.record.id),
                limit,
                now,
            )),
            _ => None,
        };
        Outcome {
            shield,
            key,
            versions: Versions::Unknown,
            last_used_ms: None,
        }
    }

    async fn run_script(&self, c: &Charge<'_>, now: u64) -> Result<Outcome, redis_conn::Error> {
        let (bucket, elapsed) = bucket_of(now);
        let previous = bucket.wrapping_sub(1);
        let key_limit = c.key.map(|k| k.1).unwrap_or(0);
        let call = |call: &mut ScriptCall<'_>| {
            let address = c.address;
            call.key(&["router:rl:addr:", address, ":"], Some(bucket));
            call.key(&["router:rl:addr:", address, ":"], Some(previous));
            if let Some((key, _)) = c.key {
                let id = key.record.id.as_str();
                call.key(&["router:rl:key:", id, ":"], Some(bucket));
                call.key(&["router:rl:key:", id, ":"], Some(previous));
                call.key(&[&key.redis.key_version], None);
                call.key(&[&key.redis.user_version], None);
                call.key(&[&key.redis.last_used], None);
            }
            for arg in [elapsed, WINDOW_MS, c.shield_limit, key_limit, now] {
                call.arg(arg);
            }
        };
        let reply = match self.redis.eval(&self.script, call).await? {
            Reply::Array(items) => items,
            _ => return Err(redis_conn::Error::Protocol),
        };
        let at = |i: usize| reply.get(i).and_then(Reply::as_i64);
        let n = |i: usize| at(i).unwrap_or(0).max(0) as u64;
        let shield = if c.shield_limit > 0 {
            decide(n(0) == 1, n(2), n(1), elapsed, c.shield_limit)
        } else {
            Decision {
                allowed: true,
                limit: 0,
                remaining: 0,
                retry_after_ms: 0,
            }
        };
        if c.key.is_none() {
            return Ok(Outcome {
                shield,
                key: None,
                versions: Versions::Unknown,
                last_used_ms: None,
            });
        }
        let key = shield
            .allowed
            .then(|| decide(n(3) == 1, n(5), n(4), elapsed, key_limit));
        Ok(Outcome {
            shield,
            key,
            versions: Versions::Redis {
                key: at(6),
                user: at(7),
            },
            last_used_ms: at(8),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn script_mentions_every_key_slot() {
        for i in 1..=7 {
            assert!(SCRIPT.contains(&format!("KEYS[{i}]")));
        }
    }
}
