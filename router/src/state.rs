//! Everything a request handler needs, built once at start-up.

use cluster_protocol::control::client::ControlPlaneClient;

use crate::{
    access::AccessStore, config::Config, forward::Forwarder, health::HealthCache, keys::KeyStore,
    limiter_lua::Limiter, placement::PlacementStore,
};

pub struct AppState {
    pub config: Config,
    pub control: ControlPlaneClient,
    pub keys: KeyStore,
    pub access: AccessStore,
    pub placements: PlacementStore,
    pub limiter: Limiter,
    pub forwarder: Forwarder,
    pub health: HealthCache,
}

impl AppState {
    /// Builds the state; Redis is connected lazily so the router starts (and
    /// serves with the fallback limiter) even when Redis is down.
    pub fn new(config: Config) -> anyhow::Result<Self> {
        let control =
            ControlPlaneClient::new(&config.control_plane_url, &config.control_plane_token.0);
        let redis_client = redis::Client::open(config.redis_url.as_str())?;
        let redis_config = redis::aio::ConnectionManagerConfig::new()
            .set_connection_timeout(Some(std::time::Duration::from_millis(500)))
            .set_response_timeout(Some(std::time::Duration::from_millis(500)))
            .set_number_of_retries(1)
            .set_max_delay(std::time::Duration::from_millis(1000));
        let redis =
            redis::aio::ConnectionManager::new_lazy_with_config(redis_client, redis_config)?;
        Ok(Self {
            keys: KeyStore::new(control.clone()),
            access: AccessStore::new(control.clone()),
            placements: PlacementStore::new(control.clone()),
            limiter: Limiter::new(redis),
            forwarder: Forwarder::new(config.pool_max_idle_per_host),
            health: HealthCache::default(),
            control,
            config,
        })
    }

    pub fn cluster_secret(&self) -> &[u8] {
        self.config.cluster_secret.0.as_bytes()
    }
}
