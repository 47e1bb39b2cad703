//! Everything a request handler needs, built once at start-up.

use cluster_protocol::control::client::ControlPlaneClient;

use crate::{
    access::AccessStore, config::Config, forward::Forwarder, health::HealthCache, keys::KeyStore,
    limiter_lua::Limiter, placement::PlacementStore, principal_sign::Signer, redis_conn::RedisPool,
};

/// Idle Redis connections kept for the limiter (one per request in flight).
const REDIS_MAX_IDLE: usize = 64;

pub struct AppState {
    pub config: Config,
    pub control: ControlPlaneClient,
    pub keys: KeyStore,
    pub access: AccessStore,
    pub placements: PlacementStore,
    pub limiter: Limiter,
    pub forwarder: Forwarder,
    pub health: HealthCache,
    pub signer: Signer,
}

impl AppState {
    /// Builds the state; Redis is connected lazily so the router starts (and
    /// serves with the fallback limiter) even when Redis is down.
    pub fn new(config: Config) -> anyhow::Result<Self> {
        let control =
            ControlPlaneClient::new(&config.control_plane_url, &config.control_plane_token.0);
        let redis = RedisPool::new(
            &config.redis_url,
            REDIS_MAX_IDLE,
            std::time::Duration::from_millis(500),
        )?;
        Ok(Self {
            keys: KeyStore::new(control.clone()),
            access: AccessStore::new(control.clone()),
            placements: PlacementStore::new(control.clone()),
            limiter: Limiter::new(redis),
            forwarder: Forwarder::new(config.pool_max_idle_per_host),
            health: HealthCache::default(),
            signer: Signer::new(config.cluster_secret.0.as_bytes()),
            control,
            config,
        })
    }

    pub fn cluster_secret(&self) -> &[u8] {
        self.config.cluster_secret.0.as_bytes()
    }
}
