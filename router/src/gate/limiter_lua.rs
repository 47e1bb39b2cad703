//! The hot path's Redis calls, each on one hash slot so that they run on
//! one Redis or a Redis Cluster alike: the address shield's script (keys
//! tagged by the address) and, when a verified key is given, the key's
//! script (keys tagged by the key's user: the key's budget, its liveness
//! version, the user's access version, the last-used stamp swapped), sent
//! together (pipelined on one Redis, concurrently to two cluster nodes). A
//! key charge made for a request the shield refused is given back
//! (`REFUND_SCRIPT`), so the key budget counts only what the shield let
//! through, as when the two were one script. The scripts are cached
//! (`EVALSHA`) and read with one `MGET`. When Redis does not answer, the same arithmetic runs in process
//! ([`LocalLimiter`]).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::edge::metrics;
use crate::gate::keys::VerifiedKey;
use crate::gate::limiter::{bucket_of, decide, Decision, LocalLimiter, WINDOW_MS};
use crate::gate::redis_conn::{self, Redis, Script};
use crate::gate::resp::{Reply, ScriptCall};

/// One sliding-window budget. KEYS: cur, prev (one hash tag).
/// ARGV: elapsed ms in bucket, window ms, limit.
/// Returns {allowed, cur, prev}.
const BUDGET_SCRIPT: &str = r#"
local elapsed = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local v = redis.call('MGET', KEYS[1], KEYS[2])
local cur = tonumber(v[1] or '0')
local prev = tonumber(v[2] or '0')
if prev * (window - elapsed) / window + cur + 1 <= tonumber(ARGV[3]) then
  cur = redis.call('INCR', KEYS[1])
  if cur == 1 then redis.call('PEXPIRE', KEYS[1], window * 2) end
  return {1, cur, prev}
end
return {0, cur, prev}
"#;

/// Gives back one request counted in KEYS[1] (a key charge made together
/// with a shield charge that refused the request).
const REFUND_SCRIPT: &str = r#"
if redis.call('EXISTS', KEYS[1]) == 1 then return redis.call('DECR', KEYS[1]) end
return 0
"#;

/// A key's budget and state. KEYS (all tagged by the key's user): budget
/// cur, budget prev, key liveness, user version, last used.
/// ARGV: elapsed ms in bucket, window ms, key limit, now ms.
/// Returns {key_allowed, key_cur, key_prev, key_version, user_version,
///          previous_last_used}.
const KEY_SCRIPT: &str = r#"
local elapsed = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local v = redis.call('MGET', KEYS[1], KEYS[2], KEYS[3], KEYS[4])
local cur = tonumber(v[1] or '0')
local prev = tonumber(v[2] or '0')
local allowed = 0
if prev * (window - elapsed) / window + cur + 1 <= tonumber(ARGV[3]) then
  cur = redis.call('INCR', KEYS[1])
  if cur == 1 then redis.call('PEXPIRE', KEYS[1], window * 2) end
  allowed = 1
end
local lu = redis.call('SET', KEYS[5], ARGV[4], 'GET')
return {allowed, cur, prev, v[3], v[4], lu}
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
    redis: Redis,
    budget: Arc<Script>,
    key_script: Arc<Script>,
    refund: Arc<Script>,
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
    pub fn new(redis: Redis) -> Self {
        Self {
            redis,
            budget: Arc::new(Script::new(BUDGET_SCRIPT)),
            key_script: Arc::new(Script::new(KEY_SCRIPT)),
            refund: Arc::new(Script::new(REFUND_SCRIPT)),
            local: Arc::default(),
            down_until: AtomicU64::new(0),
            last_warning: AtomicU64::new(0),
            timeout: Duration::from_millis(250),
        }
    }

    /// A limiter on other connections (another core's) sharing this one's
    /// script and fallback counters.
    pub fn with_connections(&self, redis: Redis) -> Self {
        Self {
            redis,
            budget: self.budget.clone(),
            key_script: self.key_script.clone(),
            refund: self.refund.clone(),
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
    /// `{prefix}{{name}}:{bucket}` (`name` is the hash tag), or in process
    /// while Redis is unreachable.
    pub async fn charge_budget(&self, prefix: &str, name: &str, limit: u64) -> Decision {
        let now = now_ms();
        let (bucket, elapsed) = bucket_of(now);
        let previous = bucket.wrapping_sub(1);
        let call = |call: &mut ScriptCall<'_>| {
            call.key(&[prefix, "{", name, "}:"], Some(bucket));
            call.key(&[prefix, "{", name, "}:"], Some(previous));
            for arg in [elapsed, WINDOW_MS, limit] {
                call.arg(arg);
            }
        };
        match self.eval(&self.budget, call).await {
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
        let shield_call = |call: &mut ScriptCall<'_>| {
            call.key(&["router:rl:addr:{", c.address, "}:"], Some(bucket));
            call.key(&["router:rl:addr:{", c.address, "}:"], Some(previous));
            for arg in [elapsed, WINDOW_MS, c.shield_limit] {
                call.arg(arg);
            }
        };
        let shield_of = |items: &[Reply]| {
            decide(
                n(items, 0) == 1,
                n(items, 2),
                n(items, 1),
                elapsed,
                c.shield_limit,
            )
        };
        let no_shield = Decision {
            allowed: true,
            limit: 0,
            remaining: 0,
            retry_after_ms: 0,
        };
        let Some((key, key_limit)) = c.key else {
            let shield = if c.shield_limit > 0 {
                shield_of(&array(self.redis.eval(&self.budget, shield_call).await?)?)
            } else {
                no_shield
            };
            return Ok(Outcome {
                shield,
                key: None,
                versions: Versions::Unknown,
                last_used_ms: None,
            });
        };
        let id = key.record.id.as_str();
        let user = key.record.user.id.as_str();
        let key_call = |call: &mut ScriptCall<'_>| {
            call.key(&["router:rl:key:{", user, "}:", id, ":"], Some(bucket));
            call.key(&["router:rl:key:{", user, "}:", id, ":"], Some(previous));
            call.key(&[&key.redis.key_version], None);
            call.key(&[&key.redis.user_version], None);
            call.key(&[&key.redis.last_used], None);
            for arg in [elapsed, WINDOW_MS, key_limit, now] {
                call.arg(arg);
            }
        };
        // Shield and key at once (one round trip); a key charge the shield
        // turns out to refuse is given back.
        let (shield, items) = if c.shield_limit > 0 {
            let (s, k) = self
                .redis
                .eval_pair((&self.budget, shield_call), (&self.key_script, key_call))
                .await?;
            let shield = shield_of(&array(s?)?);
            let items = array(k?)?;
            if !shield.allowed {
                if n(&items, 0) == 1 {
                    let refund = |call: &mut ScriptCall<'_>| {
                        call.key(&["router:rl:key:{", user, "}:", id, ":"], Some(bucket));
                    };
                    self.redis.eval(&self.refund, refund).await?;
                }
                return Ok(Outcome {
                    shield,
                    key: None,
                    versions: Versions::Unknown,
                    last_used_ms: None,
                });
            }
            (shield, items)
        } else {
            let items = array(self.redis.eval(&self.key_script, key_call).await?)?;
            (no_shield, items)
        };
        let at = |i: usize| items.get(i).and_then(Reply::as_i64);
        Ok(Outcome {
            shield,
            key: Some(decide(
                n(&items, 0) == 1,
                n(&items, 2),
                n(&items, 1),
                elapsed,
                key_limit,
            )),
            versions: Versions::Redis {
                key: at(3),
                user: at(4),
            },
            last_used_ms: at(5),
        })
    }
}

/// Item `i` of a script's reply as a count (absent or negative: 0).
fn n(items: &[Reply], i: usize) -> u64 {
    items.get(i).and_then(Reply::as_i64).unwrap_or(0).max(0) as u64
}

fn array(reply: Reply) -> Result<Vec<Reply>, redis_conn::Error> {
    match reply {
        Reply::Array(items) => Ok(items),
        _ => Err(redis_conn::Error::Protocol),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scripts_mention_every_key_slot() {
        for i in 1..=2 {
            assert!(BUDGET_SCRIPT.contains(&format!("KEYS[{i}]")));
        }
        for i in 1..=5 {
            assert!(KEY_SCRIPT.contains(&format!("KEYS[{i}]")));
        }
    }
}
