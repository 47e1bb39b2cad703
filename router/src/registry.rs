//! This router in the cluster's registry in Redis, which the control plane
//! reads before it drops a moved database's old copy:
//!
//! * `cluster:routers` (sorted set): member = this process's router id (12
//!   random id characters), score = unix milliseconds of its last
//!   heartbeat, written every `ROUTER_HEARTBEAT_MS`; members silent for a
//!   minute are trimmed now and then, and a router that stops removes
//!   itself.
//! * `cluster:acks:{db}` (hash): field = router id, value = the placement
//!   epoch (decimal) this router routes the database by, written after it
//!   applied a placement invalidation and read the placement again;
//!   expires an hour after the last write.
//!
//! Redis being down never affects serving: failures are logged at debug
//! level (the heartbeat's first failure in a row at warn) and retried on
//! the next beat or invalidation.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use cluster_protocol::control::redis_keys::{placement_acks, ROUTERS, ROUTER_HEARTBEAT_MS};
use cluster_protocol::ids::{random_token, ID_BODY_LEN};
use service_kit::redis_target::{Conn, Target};

use crate::forward::placement::PlacementStore;

/// Members of [`ROUTERS`] older than this are removed by any router.
const FORGET_AFTER_MS: u64 = 60_000;
/// Every this many heartbeats, the stale members are trimmed.
const TRIM_EVERY: u64 = 30;
/// How long an acknowledgement hash lives after its last write.
const ACKS_TTL_SECS: u64 = 3_600;
const TIMEOUT: Duration = Duration::from_secs(1);

pub struct Registry {
    id: String,
    target: Option<Target>,
    conn: tokio::sync::Mutex<Option<Conn>>,
}

impl Registry {
    /// A registry entry with a fresh random id; connects nothing yet.
    pub fn new(redis_url: &str) -> Self {
        let target = Target::parse(redis_url)
            .inspect_err(|e| tracing::warn!(error = %e, "router registry disabled"))
            .ok();
        Self {
            id: random_token(ID_BODY_LEN),
            target,
            conn: tokio::sync::Mutex::new(None),
        }
    }

    /// This process's router id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Runs `pipe` on the shared connection (opened on demand, dropped on
    /// failure so the next call opens a new one).
    async fn run(&self, pipe: &redis::Pipeline) -> redis::RedisResult<()> {
        let Some(target) = &self.target else {
            return Ok(());
        };
        let mut conn = {
            let mut slot = self.conn.lock().await;
            match slot.as_ref() {
                Some(c) => c.clone(),
                None => {
                    let c = Conn::connect(target, TIMEOUT).await?;
                    *slot = Some(c.clone());
                    c
                }
            }
        };
        let result = pipe.query_async::<()>(&mut conn).await;
        if result.is_err() {
            *self.conn.lock().await = None;
        }
        result
    }

    /// Heartbeats into [`ROUTERS`] forever (the first at once).
    pub async fn heartbeat(self: Arc<Self>) {
        let mut tick = tokio::time::interval(Duration::from_millis(ROUTER_HEARTBEAT_MS));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut failing = false;
        for beat in 0u64.. {
            tick.tick().await;
            let now = now_ms();
            let mut pipe = redis::pipe();
            pipe.zadd(ROUTERS, &self.id, now).ignore();
            if beat % TRIM_EVERY == 0 {
                let older = format!("({}", now.saturating_sub(FORGET_AFTER_MS));
                pipe.zrembyscore(ROUTERS, "-inf", older).ignore();
            }
            match self.run(&pipe).await {
                Ok(()) => failing = false,
                Err(e) if !failing => {
                    failing = true;
                    tracing::warn!(error = %e, "router heartbeat failed; retrying every beat");
                }
                Err(e) => tracing::debug!(error = %e, "router heartbeat failed"),
            }
        }
    }

    /// Removes this router from [`ROUTERS`] (on shutdown): the control
    /// plane then stops waiting for its acknowledgements at once.
    pub async fn leave(&self) {
        let mut pipe = redis::pipe();
        pipe.zrem(ROUTERS, &self.id).ignore();
        match tokio::time::timeout(TIMEOUT, self.run(&pipe)).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::debug!(error = %e, "leaving the router registry failed"),
            Err(_) => tracing::debug!("leaving the router registry timed out"),
        }
    }

    /// Records that this router routes `database_id` by `epoch`.
    pub async fn acknowledge(&self, database_id: &str, epoch: i64) {
        let key = placement_acks(database_id);
        let mut pipe = redis::pipe();
        pipe.hset(&key, &self.id, epoch)
            .ignore()
            .expire(&key, ACKS_TTL_SECS as i64)
            .ignore();
        if let Err(e) = self.run(&pipe).await {
            tracing::debug!(error = %e, db = database_id, epoch, "placement ack failed");
        }
    }
}

/// After a placement invalidation of `database_id` (already dropped from
/// the cache): reads the placement again, caching it, and acknowledges the
/// epoch it names. An unknown or inactive database is not acknowledged.
pub async fn refresh_and_acknowledge(
    placements: Arc<PlacementStore>,
    registry: Arc<Registry>,
    database_id: String,
) {
    let Some(tag) =
        cluster_protocol::ids::tag_of(cluster_protocol::ids::Kind::Database, &database_id)
    else {
        return;
    };
    match placements.fetch(tag).await {
        Ok(Some(p)) if p.database_id == database_id => {
            registry.acknowledge(&database_id, p.epoch).await
        }
        Ok(_) => {}
        Err(e) => {
            tracing::warn!(error = %e, db = %database_id, "placement refresh after invalidation failed")
        }
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_random_id_bodies() {
        let (a, b) = (
            Registry::new("redis://127.0.0.1:1"),
            Registry::new("redis://127.0.0.1:1"),
        );
        assert_eq!(a.id().len(), ID_BODY_LEN);
        assert!(a.id().bytes().all(|c| c.is_ascii_alphanumeric()));
        assert_ne!(a.id(), b.id());
    }
}
