//! What bounds a node's exports: each holds a pooled session and a
//! blocking thread for its whole stream, so at most `SHARD_MAX_EXPORTS`
//! run at once ([`Exports::slot`]; one more is answered 503 with
//! `Retry-After`), and each waits at most `SHARD_EXPORT_SEND_TIMEOUT_MS`
//! for its client to take the next chunk (`writer::ChannelSink`), so a
//! client that stops reading cannot hold them for ever.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::error::{ApiError, ApiResult, EXPORTS_BUSY_MESSAGE};

/// The node's export slots and the send timeout of each export.
#[derive(Clone)]
pub struct Exports {
    slots: Arc<Semaphore>,
    max: usize,
    /// How long an export waits for its client to take the next chunk.
    pub send_timeout: Duration,
}

/// One running export's place, given back when dropped (when its writing
/// thread ends).
pub type Slot = OwnedSemaphorePermit;

impl Exports {
    /// At most `max` exports at once (at least one).
    pub fn new(max: usize, send_timeout: Duration) -> Self {
        let max = max.max(1);
        Self {
            slots: Arc::new(Semaphore::new(max)),
            max,
            send_timeout,
        }
    }

    /// A free slot at once, or 503 ([`EXPORTS_BUSY_MESSAGE`]): an export
    /// never queues behind another one, which may last minutes.
    pub fn slot(&self) -> ApiResult<Slot> {
        Arc::clone(&self.slots).try_acquire_owned().map_err(|_| {
            tracing::warn!(cap = self.max, "every export slot is taken: answering 503");
            ApiError::Unavailable(EXPORTS_BUSY_MESSAGE)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn past_the_cap_an_export_is_refused_until_a_slot_is_given_back() {
        let exports = Exports::new(1, Duration::from_secs(30));
        let first = exports.slot().unwrap();
        assert!(matches!(
            exports.slot(),
            Err(ApiError::Unavailable(m)) if m == EXPORTS_BUSY_MESSAGE
        ));
        drop(first);
        assert!(exports.slot().is_ok());
    }
}
