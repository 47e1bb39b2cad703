//! What the control plane writes to Redis for routers: key liveness
//! (`cluster:{user}:key:{id}` = version), user access versions
//! (`cluster:{user}:user` = version) and invalidation messages. `REDIS_URL`
//! may name a Redis Cluster (`service_kit::redis_target`): every command
//! here touches one hash slot (a user's names share the user's tag).
//!
//! Failure policy: PostgreSQL is the source of truth, and a router trusts its
//! cached copy of a key or of a user's access only while Redis holds the
//! same version (an absent version makes it ask the control plane again).
//! So every change that can take rights away (revocation, suspension, a
//! key's update, any membership or support change) fails closed: with the
//! catalog row locked, the version key is DELETED before the commit, and if
//! Redis does not confirm the delete the transaction is rolled back and the
//! change fails ([`Liveness::clear_keys`], [`Liveness::clear_user`]: 503,
//! nothing changed). After the commit, storing the new version and
//! publishing an invalidation are best effort (a warning): if they fail the
//! version stays absent and routers keep asking the control plane.
//! Re-seeds (`GET /internal/keys/{id}`, `GET /internal/users/{id}/access`)
//! write while holding a share lock on the rows they read, so a re-seed of
//! an old version cannot land after a change's delete.
//!
//! On a Redis Cluster a delete confirmed by a master could still be lost
//! if the master died before its replica had it and the replica took over
//! (replication is asynchronous): a revoked key would come back to life.
//! So there a fail-closed delete counts as confirmed only once `WAIT`
//! says a replica has it, or `ROLE` says the master has no replica that
//! could take over without it.

use cluster_protocol::control::redis_keys::{self, Invalidation, INVALIDATION_CHANNEL};
use std::sync::Arc;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{Route, SingleNodeRoutingInfo, SlotAddr};
use redis::AsyncCommands;
use service_kit::redis_target::{cluster_client, key_slot, Conn, Target};

use crate::config::REDIS_TIMEOUT;

/// Sets KEYS[1] to ARGV[1] unless it already holds a greater version, so a
/// slow re-seed never overwrites a newer version.
const SET_MAX: &str = r"
local current = tonumber(redis.call('GET', KEYS[1]))
local wanted = tonumber(ARGV[1])
if current == nil or current < wanted then
  redis.call('SET', KEYS[1], ARGV[1])
  return 1
end
return 0
";

/// How long a fail-closed delete waits for a replica on a Redis Cluster.
const WAIT_REPLICA_MS: u64 = 500;

#[derive(Clone)]
enum Backend {
    Single(ConnectionManager),
    /// Connected on first use (the cluster client needs a live node).
    Cluster(Arc<LazyCluster>),
}

struct LazyCluster {
    client: ClusterClient,
    conn: tokio::sync::Mutex<Option<ClusterConnection>>,
}

#[derive(Clone)]
pub struct Liveness {
    backend: Backend,
    set_max: Arc<redis::Script>,
}

impl Liveness {
    /// Connects lazily: a control plane starts even while Redis is down.
    pub fn new(url: &str) -> anyhow::Result<Self> {
        let backend = match Target::parse(url).map_err(anyhow::Error::msg)? {
            Target::Single(url) => {
                let client = redis::Client::open(url)?;
                let config = ConnectionManagerConfig::new()
                    .set_connection_timeout(Some(REDIS_TIMEOUT))
                    .set_response_timeout(Some(REDIS_TIMEOUT))
                    .set_number_of_retries(2);
                Backend::Single(ConnectionManager::new_lazy_with_config(client, config)?)
            }
            Target::Cluster(seeds) => Backend::Cluster(Arc::new(LazyCluster {
                client: cluster_client(&seeds, REDIS_TIMEOUT)?,
                conn: tokio::sync::Mutex::new(None),
            })),
        };
        Ok(Self {
            backend,
            set_max: Arc::new(redis::Script::new(SET_MAX)),
        })
    }

    async fn conn(&self) -> anyhow::Result<Conn> {
        match &self.backend {
            Backend::Single(c) => Ok(Conn::Managed(c.clone())),
            Backend::Cluster(lazy) => Ok(Conn::Cluster(lazy.connection().await?)),
        }
    }

    /// Deletes `names` (all in one hash slot) and, on a Redis Cluster,
    /// makes sure the delete survives a failover (see the module's doc).
    async fn delete_durably(&self, names: Vec<String>) -> anyhow::Result<()> {
        let Some(first) = names.first() else {
            return Ok(());
        };
        match &self.backend {
            Backend::Single(c) => {
                let mut c = c.clone();
                Self::bounded(c.del::<_, ()>(names)).await
            }
            Backend::Cluster(lazy) => {
                let mut c = lazy.connection().await?;
                let route = SingleNodeRoutingInfo::SpecificNode(Route::new(
                    key_slot(first.as_bytes()),
                    SlotAddr::Master,
                ));
                let mut pipe = redis::pipe();
                pipe.del(&names).cmd("WAIT").arg(1).arg(WAIT_REPLICA_MS);
                let replies: Vec<redis::Value> =
                    Self::bounded(c.route_pipeline(pipe, 0, 2, route.clone())).await?;
                let acked: i64 = match replies.get(1) {
                    Some(v) => redis::from_redis_value_ref(v)?,
                    None => anyhow::bail!("redis: no reply to WAIT"),
                };
                if acked >= 1 {
                    return Ok(());
                }
                let mut role = redis::pipe();
                role.cmd("ROLE");
                let replies: Vec<redis::Value> =
                    Self::bounded(c.route_pipeline(role, 0, 1, route)).await?;
                if has_replicas(replies.first()) {
                    anyhow::bail!(
                        "redis: no replica confirmed the delete within {WAIT_REPLICA_MS} ms"
                    );
                }
                Ok(())
            }
        }
    }

    async fn bounded<T>(
        fut: impl std::future::Future<Output = redis::RedisResult<T>>,
    ) -> anyhow::Result<T> {
        match tokio::time::timeout(REDIS_TIMEOUT, fut).await {
            Ok(r) => Ok(r?),
            Err(_) => anyhow::bail!("redis did not answer within {REDIS_TIMEOUT:?}"),
        }
    }

    async fn set_max(&self, name: String, version: i64) -> anyhow::Result<()> {
        let mut c = self.conn().await?;
        let mut invocation = self.set_max.key(name);
        invocation.arg(version);
        Self::bounded(invocation.invoke_async::<i64>(&mut c))
            .await
            .map(drop)
    }

    pub async fn set_key_version(
        &self,
        user_id: &str,
        key_id: &str,
        version: i64,
    ) -> anyhow::Result<()> {
        self.set_max(redis_keys::key_version(user_id, key_id), version)
            .await
    }

    /// Deletes the liveness keys of `key_ids`, keys of `user_id`. Callers
    /// must fail on error.
    pub async fn clear_keys(&self, user_id: &str, key_ids: &[String]) -> anyhow::Result<()> {
        let names: Vec<String> = key_ids
            .iter()
            .map(|k| redis_keys::key_version(user_id, k))
            .collect();
        self.delete_durably(names).await
    }

    /// Deletes a user's access version. Callers must fail on error.
    pub async fn clear_user(&self, user_id: &str) -> anyhow::Result<()> {
        self.delete_durably(vec![redis_keys::user_version(user_id)])
            .await
    }

    pub async fn set_user_version(&self, user_id: &str, version: i64) -> anyhow::Result<()> {
        self.set_max(redis_keys::user_version(user_id), version)
            .await
    }

    pub async fn publish(&self, message: &Invalidation) -> anyhow::Result<()> {
        let payload = serde_json::to_string(message)?;
        let mut c = self.conn().await?;
        Self::bounded(c.publish::<_, _, ()>(INVALIDATION_CHANNEL, payload)).await
    }

    /// Routers whose last heartbeat in `cluster:routers` is at or after
    /// `since_ms` (unix milliseconds).
    pub async fn live_routers(&self, since_ms: i64) -> anyhow::Result<Vec<String>> {
        let mut c = self.conn().await?;
        Self::bounded(c.zrangebyscore::<_, _, _, Vec<String>>(
            redis_keys::ROUTERS,
            since_ms,
            "+inf",
        ))
        .await
    }

    /// The epochs routers acknowledged for a database (router id -> epoch;
    /// values that are not numbers are left out).
    pub async fn placement_acks(
        &self,
        database_id: &str,
    ) -> anyhow::Result<std::collections::HashMap<String, i64>> {
        let mut c = self.conn().await?;
        let raw: std::collections::HashMap<String, String> =
            Self::bounded(c.hgetall(redis_keys::placement_acks(database_id))).await?;
        Ok(raw
            .into_iter()
            .filter_map(|(k, v)| v.trim().parse().ok().map(|e| (k, e)))
            .collect())
    }

    /// Lets a database's acknowledgements expire `secs` from now.
    pub async fn expire_acks(&self, database_id: &str, secs: i64) -> anyhow::Result<()> {
        let mut c = self.conn().await?;
        Self::bounded(c.expire::<_, ()>(redis_keys::placement_acks(database_id), secs)).await
    }

    // ---- best effort (after a committed catalog write) ----

    /// Seeds a key's liveness (when `version` is given) and announces the change.
    pub async fn announce_key(&self, user_id: &str, key_id: &str, version: Option<i64>) {
        if let Some(v) = version {
            warn_on(
                self.set_key_version(user_id, key_id, v).await,
                "seed key liveness",
                key_id,
            );
        }
        warn_on(
            self.publish(&Invalidation::Key(key_id.to_string())).await,
            "publish key invalidation",
            key_id,
        );
    }

    /// Stores a user's access version and announces the change.
    pub async fn announce_user(&self, user_id: &str, version: i64) {
        warn_on(
            self.set_user_version(user_id, version).await,
            "store user access version",
            user_id,
        );
        warn_on(
            self.publish(&Invalidation::User(user_id.to_string())).await,
            "publish user invalidation",
            user_id,
        );
    }

    pub async fn announce_placement(&self, database_id: &str) {
        let message = Invalidation::Placement(database_id.to_string());
        warn_on(
            self.publish(&message).await,
            "publish placement invalidation",
            database_id,
        );
    }
}

impl LazyCluster {
    async fn connection(&self) -> anyhow::Result<ClusterConnection> {
        let mut slot = self.conn.lock().await;
        if let Some(c) = slot.as_ref() {
            return Ok(c.clone());
        }
        let c = Liveness::bounded(self.client.get_async_connection()).await?;
        *slot = Some(c.clone());
        Ok(c)
    }
}

/// Whether a `ROLE` reply of a master lists connected replicas.
fn has_replicas(role: Option<&redis::Value>) -> bool {
    match role {
        Some(redis::Value::Array(items)) => {
            matches!(items.get(2), Some(redis::Value::Array(replicas)) if !replicas.is_empty())
        }
        // Not a master's reply: assume the worst.
        _ => true,
    }
}

fn warn_on(result: anyhow::Result<()>, action: &str, id: &str) {
    if let Err(e) = result {
        tracing::warn!(
            error = format!("{e:#}"),
            id,
            "redis: {action} failed; continuing"
        );
    }
}
