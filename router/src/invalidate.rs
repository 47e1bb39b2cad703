//! Subscription to `cluster:invalidate`: drops cached keys, users and
//! placements as soon as the control plane says they changed. Reconnects
//! forever; after a gap it clears placements (messages may have been missed;
//! keys and users are also checked against Redis versions on every request).
//! On a Redis Cluster a message published on any node reaches every node,
//! so the router subscribes on one node and, when that one fails (a killed
//! master), on the next of `REDIS_URL`'s seeds.
//! A dropped placement is read again at once, off the subscription's task,
//! and its epoch acknowledged (`registry`).

use std::sync::Arc;
use std::time::Duration;

use cluster_protocol::control::redis_keys::{Invalidation, INVALIDATION_CHANNEL};
use futures::StreamExt;
use service_kit::redis_target::Target;

use crate::registry;
use crate::state::AppState;

pub fn apply(state: &AppState, msg: &Invalidation) {
    match msg {
        Invalidation::Key(id) => state.keys.mark_stale(id),
        Invalidation::User(id) => state.access.forget(id),
        Invalidation::Placement(id) => {
            state.placements.forget_database(id);
            tokio::spawn(registry::refresh_and_acknowledge(
                state.placements.clone(),
                state.registry.clone(),
                id.clone(),
            ));
        }
    }
}

pub async fn run(state: Arc<AppState>) {
    let urls = match Target::parse(&state.config.redis_url) {
        Ok(target) => target.urls(),
        Err(e) => {
            tracing::warn!(error = %e, "no invalidation subscription");
            return;
        }
    };
    let mut first = true;
    for attempt in 0usize.. {
        let url = &urls[attempt % urls.len()];
        match subscribe_once(&state, url, first).await {
            Ok(()) => tracing::warn!("invalidation subscription ended; reconnecting"),
            Err(e) => tracing::debug!(error = %e, "invalidation subscription failed; retrying"),
        }
        first = false;
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

async fn subscribe_once(state: &AppState, url: &str, first: bool) -> redis::RedisResult<()> {
    let client = redis::Client::open(url)?;
    let mut pubsub = client.get_async_pubsub().await?;
    pubsub.subscribe(INVALIDATION_CHANNEL).await?;
    if !first {
        state.placements.clear();
    }
    tracing::info!("subscribed to {INVALIDATION_CHANNEL}");
    let mut stream = pubsub.on_message();
    while let Some(msg) = stream.next().await {
        let payload: Vec<u8> = msg.get_payload_bytes().to_vec();
        match serde_json::from_slice::<Invalidation>(&payload) {
            Ok(inv) => apply(state, &inv),
            Err(e) => tracing::warn!(error = %e, "undecodable invalidation message"),
        }
    }
    Ok(())
}
