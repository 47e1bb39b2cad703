//! Everything a request handler needs, built once at start-up.
//!
//! The caches (keys, users, placements, signatures, health; the first three
//! bounded by `ROUTER_*_CACHE_ENTRIES`), the fallback
//! limiter's counters and the in-flight bound are shared by every core; the
//! Redis connections and the pooled shard connections belong to one core
//! (see `cores`), so a request never waits on a socket another thread drives.

use std::sync::Arc;

use cluster_protocol::control::client::ControlPlaneClient;
use tokio::sync::Semaphore;

use crate::answers::health::HealthCache;
use crate::config::Config;
use crate::forward::{client::Forwarder, placement::PlacementStore, principal_sign::Signer};
use crate::gate::{
    access::AccessStore, keys::KeyStore, limiter_lua::Limiter, redis_conn::Redis,
    upload_limit::UploadLimiter,
};
use crate::registry::Registry;

/// Idle Redis connections kept for the limiter (one per request in flight).
const REDIS_MAX_IDLE: usize = 64;
const REDIS_CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_millis(500);

pub struct AppState {
    pub config: Arc<Config>,
    pub control: ControlPlaneClient,
    pub keys: Arc<KeyStore>,
    pub access: Arc<AccessStore>,
    pub placements: Arc<PlacementStore>,
    /// This process's router id, heartbeat and placement acknowledgements.
    pub registry: Arc<Registry>,
    pub health: Arc<HealthCache>,
    pub signer: Arc<Signer>,
    /// Requests handled at once, across all cores.
    pub in_flight: Arc<Semaphore>,
    /// Client connections open at once, across all cores.
    pub connections: Arc<Semaphore>,
    /// Bytes of request bodies held at once, across all cores.
    pub body_budget: Arc<crate::forward::body_budget::BodyBudget>,
    /// This core's Redis connections (the counters of its fallback are shared).
    pub limiter: Limiter,
    /// The per-account upload limit (script and fallback log, shared).
    pub uploads: Arc<UploadLimiter>,
    /// This core's pooled connections to the shards.
    pub forwarder: Forwarder,
}

impl AppState {
    /// Builds the state; Redis is connected lazily so the router starts (and
    /// serves with the fallback limiter) even when Redis is down.
    pub fn new(config: Config) -> anyhow::Result<Self> {
        crate::edge::metrics::describe();
        let control =
            ControlPlaneClient::new(&config.control_plane_url, &config.control_plane_token.0)
                .traced(service_kit::trace::inject);
        let redis = Redis::new(&config.redis_url, REDIS_MAX_IDLE, REDIS_CONNECT_TIMEOUT)?;
        Ok(Self {
            keys: Arc::new(KeyStore::bounded(
                control.clone(),
                config.hash_limits,
                config.caches.keys,
            )),
            access: Arc::new(AccessStore::bounded(control.clone(), config.caches.users)),
            placements: Arc::new(PlacementStore::bounded(
                control.clone(),
                config.caches.placements,
            )),
            registry: Arc::new(Registry::new(&config.redis_url)),
            limiter: Limiter::new(redis),
            uploads: Arc::default(),
            forwarder: Forwarder::new(
                config.pool_max_idle_per_host,
                config.connections.shard_timeout,
            ),
            health: Arc::default(),
            signer: Arc::new(Signer::new(config.cluster_secret.0.as_bytes())),
            in_flight: Arc::new(Semaphore::new(config.max_in_flight)),
            connections: Arc::new(Semaphore::new(config.connections.max_connections)),
            body_budget: crate::forward::body_budget::BodyBudget::new(
                config.connections.body_budget_bytes,
            ),
            control,
            config: Arc::new(config),
        })
    }

    /// The state of another core: the same caches, its own connections.
    pub fn for_another_core(&self) -> anyhow::Result<Self> {
        let redis = Redis::new(
            &self.config.redis_url,
            REDIS_MAX_IDLE,
            REDIS_CONNECT_TIMEOUT,
        )?;
        Ok(Self {
            config: self.config.clone(),
            control: self.control.clone(),
            keys: self.keys.clone(),
            access: self.access.clone(),
            placements: self.placements.clone(),
            registry: self.registry.clone(),
            health: self.health.clone(),
            signer: self.signer.clone(),
            in_flight: self.in_flight.clone(),
            connections: self.connections.clone(),
            body_budget: self.body_budget.clone(),
            limiter: self.limiter.with_connections(redis),
            uploads: self.uploads.clone(),
            forwarder: Forwarder::new(
                self.config.pool_max_idle_per_host,
                self.config.connections.shard_timeout,
            ),
        })
    }

    pub fn cluster_secret(&self) -> &[u8] {
        self.config.cluster_secret.0.as_bytes()
    }
}
