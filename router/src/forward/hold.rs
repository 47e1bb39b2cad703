//! A move's hold on a database's requests (docs/moves.md, "Router").
//!
//! During a cutover the control plane sets `hold_until` on the database's
//! placement and publishes an invalidation. A request whose placement is
//! held sends nothing to a shard: it waits until that placement is dropped
//! from the cache (the flip or abort is announced as another invalidation)
//! or `hold_until` passes, then reads the placement again and goes where it
//! says. A placement that is not held costs one field read.

use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use tokio::time::Instant;

use crate::edge::trace::RequestSpan;
use crate::errors::ApiError;
use crate::forward::placement::{Placement, PlacementStore};
use crate::state::AppState;

/// Longest a request waits for holds in all, whatever `hold_until` says (a
/// router clock behind the control plane's must not stretch the pause).
pub const MAX_HOLD: Duration = Duration::from_secs(5);

/// Placements read while waiting, at most: each round ends on an event (a
/// drop, the hold's end), so this only bounds a pathological sequence.
const MAX_ROUNDS: usize = 8;

/// The placement to forward to: `p` itself unless it is held; otherwise
/// the placement read after the hold ended (see the module doc). After
/// [`MAX_HOLD`] the last placement read is used, held or not: the shard's
/// own placement check keeps that correct (421, retried by the caller).
pub async fn released(
    state: &AppState,
    tag: &str,
    p: Arc<Placement>,
    span: &RequestSpan,
) -> Result<Arc<Placement>, ApiError> {
    if p.hold_until.is_none() {
        return Ok(p);
    }
    let give_up = Instant::now() + MAX_HOLD;
    let mut p = p;
    for round in 0..MAX_ROUNDS {
        let Some(until) = p.hold_until else {
            return Ok(p);
        };
        let left = (until - Utc::now()).to_std().unwrap_or(Duration::ZERO);
        let left = left.min(give_up.saturating_duration_since(Instant::now()));
        if left.is_zero() && round > 0 {
            // Over by this router's clock although just read (or given up).
            return Ok(p);
        }
        if !left.is_zero() {
            span.log(|| tracing::debug!(tag, ?left, "placement held: waiting"));
            wait_for_drop(&state.placements, &p, left).await;
        }
        // Invalidated (gone or replaced) or run out: read it again.
        state.placements.forget_if_cached(&p);
        p = placement(state, tag, span).await?;
    }
    Ok(p)
}

/// Waits until `p` is no longer the cached placement of its tag, or `time`
/// passes. Returns at once when `p` is not cached (read while something was
/// dropped: what it replaced may be the very change to wait for).
async fn wait_for_drop(store: &PlacementStore, p: &Arc<Placement>, time: Duration) {
    let mut drops = store.drops();
    let deadline = tokio::time::sleep(time);
    tokio::pin!(deadline);
    while store.still_cached(p) {
        tokio::select! {
            _ = &mut deadline => return,
            changed = drops.changed() => {
                if changed.is_err() {
                    return;
                }
            }
        }
    }
}

/// The active placement of `tag` (cache, else the control plane): 404 for
/// an unknown tag, 503 when the control plane cannot be asked (logged).
pub async fn placement(
    state: &AppState,
    tag: &str,
    span: &RequestSpan,
) -> Result<Arc<Placement>, ApiError> {
    let found = state.placements.get(tag).await.map_err(|e| {
        span.log(|| tracing::error!(error = %e, tag, "placement lookup failed"));
        ApiError::dependency_down()
    })?;
    found.ok_or(ApiError::NotFound)
}
