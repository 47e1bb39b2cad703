//! Sending a replayable request to the shard that holds its database, with
//! the move protocol's retries: a held placement is waited out (`hold`); a
//! 421 (misplaced) answer drops the placement and reads it again, and the
//! request goes again, to the new place at once, or after a short pause
//! when the control plane still names the shard that refused it. At most
//! [`MAX_ATTEMPTS`] sends in all, then 503 `unavailable` (`Retry-After: 1`).
//! During a move a client sees only latency.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use cluster_protocol::MISPLACED_STATUS;
use http::Response;
use http_body_util::BodyExt;
use hyper::body::Incoming;

use crate::edge::trace::RequestSpan;
use crate::errors::ApiError;
use crate::forward::hold;
use crate::forward::placement::Placement;
use crate::state::AppState;

/// Sends to shards per request, at most.
pub const MAX_ATTEMPTS: u32 = 5;

/// Pause before the attempt after `attempt` when the placement did not
/// change: 10 ms, 20 ms, 40 ms, 80 ms.
fn pause(attempt: u32) -> Duration {
    Duration::from_millis(10 << (attempt - 1).min(4))
}

/// Most bytes of a 421 answer read (so its connection can be reused).
const DRAIN_LIMIT: usize = 64 * 1024;

/// Sends with `send` (one attempt to the given placement's shard; it may be
/// called up to [`MAX_ATTEMPTS`] times) starting from `placement`. Returns
/// the first answer that is not a 421.
pub async fn send<F, Fut>(
    state: &AppState,
    tag: &str,
    placement: Arc<Placement>,
    span: &RequestSpan,
    mut send: F,
) -> Result<Response<Incoming>, ApiError>
where
    F: FnMut(Arc<Placement>) -> Fut,
    Fut: Future<Output = Result<Response<Incoming>, ApiError>>,
{
    let mut p = hold::released(state, tag, placement, span).await?;
    for attempt in 1..=MAX_ATTEMPTS {
        let resp = send(p.clone()).await?;
        if resp.status().as_u16() != MISPLACED_STATUS {
            return Ok(resp);
        }
        drain(resp).await;
        state.placements.forget_tag(tag);
        if attempt == MAX_ATTEMPTS {
            break;
        }
        span.log(|| {
            let (shard, epoch) = (&p.shard.url, p.epoch);
            tracing::info!(%shard, epoch, attempt, tag, "misplaced: reading the placement again")
        });
        let mut fresh = hold::placement(state, tag, span).await?;
        if same_place(&fresh, &p) && fresh.hold_until.is_none() {
            // The control plane has not caught up (or the shard has not):
            // a short pause, then its word again.
            tokio::time::sleep(pause(attempt)).await;
            state.placements.forget_if_cached(&fresh);
            fresh = hold::placement(state, tag, span).await?;
        }
        p = hold::released(state, tag, fresh, span).await?;
    }
    span.log(|| {
        tracing::error!(
            tag,
            "shard still says misplaced after {MAX_ATTEMPTS} attempts"
        )
    });
    Err(ApiError::dependency_down())
}

fn same_place(a: &Placement, b: &Placement) -> bool {
    a.epoch == b.epoch && a.shard.url == b.shard.url
}

async fn drain(resp: Response<Incoming>) {
    let _ = http_body_util::Limited::new(resp.into_body(), DRAIN_LIMIT)
        .collect()
        .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pauses_double_from_10_ms() {
        let pauses: Vec<u64> = (1..MAX_ATTEMPTS)
            .map(|a| pause(a).as_millis() as u64)
            .collect();
        assert_eq!(pauses, [10, 20, 40, 80]);
    }
}
