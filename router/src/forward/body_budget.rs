//! The router's budget of buffered request-body bytes
//! (`ROUTER_BODY_BUDGET_BYTES`, shared by every core).
//!
//! A request body the router reads whole before forwarding it (every route
//! but the streamed uploads and imports) may be up to
//! `cluster_protocol::MAX_BODY_BYTES`; the connection cap alone would let a
//! few hundred slow bodies hold gigabytes. Each such body reserves its bytes
//! here before they are held: its declared `Content-Length` at once (before
//! the buffer is allocated), or, without one, each piece as it arrives. A
//! body that does not fit is refused with 503 and `Retry-After`
//! ([`BODY_BUDGET_MESSAGE`]); its bytes are given back when the
//! [`Reservation`] is dropped, when the request is done.
//!
//! The streamed routes (`crate::forward::streamed`) never hold a body whole: their
//! pieces pass to the shard as they arrive, bounded per connection by
//! hyper's buffers and the shard's pace, so they take nothing from here.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::errors::ApiError;

/// The 503 of a body that does not fit in the budget.
pub const BODY_BUDGET_MESSAGE: &str = "The service is holding too many request bodies \
     right now. Retry in about 1s.";
/// `Retry-After` of that 503, in seconds.
pub const RETRY_AFTER_SECS: u64 = 1;

/// Bytes of request bodies the router may hold at once. See the module
/// documentation.
#[derive(Debug)]
pub struct BodyBudget {
    limit: u64,
    used: AtomicU64,
}

impl BodyBudget {
    pub fn new(limit: u64) -> Arc<Self> {
        Arc::new(Self {
            limit,
            used: AtomicU64::new(0),
        })
    }

    /// An empty reservation, grown by [`Reservation::cover`].
    pub fn reservation(self: &Arc<Self>) -> Reservation {
        Reservation {
            budget: Arc::clone(self),
            held: 0,
        }
    }

    /// Bytes reserved now.
    pub fn in_use(&self) -> u64 {
        self.used.load(Ordering::Acquire)
    }
}

/// Bytes of one body reserved in the budget, given back when dropped.
#[derive(Debug)]
pub struct Reservation {
    budget: Arc<BodyBudget>,
    held: u64,
}

impl Reservation {
    /// Grows the reservation to at least `total` bytes: the 503 of
    /// [`BODY_BUDGET_MESSAGE`] (and nothing more reserved) when the budget
    /// has no room for them.
    pub fn cover(&mut self, total: u64) -> Result<(), ApiError> {
        let Some(more) = total.checked_sub(self.held).filter(|&n| n > 0) else {
            return Ok(());
        };
        let limit = self.budget.limit;
        let grown = self
            .budget
            .used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                used.checked_add(more).filter(|&n| n <= limit)
            });
        match grown {
            Ok(_) => {
                self.held = total;
                Ok(())
            }
            Err(used) => {
                tracing::warn!(
                    used,
                    limit,
                    wanted = more,
                    "request body budget full: answering 503"
                );
                Err(ApiError::Unavailable {
                    message: BODY_BUDGET_MESSAGE,
                    retry_after_secs: RETRY_AFTER_SECS,
                })
            }
        }
    }

    /// Bytes this reservation holds.
    pub fn held(&self) -> u64 {
        self.held
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if self.held > 0 {
            self.budget.used.fetch_sub(self.held, Ordering::AcqRel);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reservations_fit_in_the_budget_and_are_given_back_when_dropped() {
        let budget = BodyBudget::new(100);
        let mut a = budget.reservation();
        a.cover(60).unwrap();
        a.cover(40).unwrap(); // already covered: nothing more taken
        assert_eq!(budget.in_use(), 60);
        let mut b = budget.reservation();
        let refused = b.cover(41);
        assert!(matches!(
            refused,
            Err(ApiError::Unavailable { message, retry_after_secs: 1 }) if message == BODY_BUDGET_MESSAGE
        ));
        assert_eq!(b.held(), 0);
        b.cover(40).unwrap();
        assert_eq!(budget.in_use(), 100);
        drop(a);
        assert_eq!(budget.in_use(), 40);
        // Growing piece by piece takes only the difference.
        b.cover(90).unwrap();
        assert_eq!(budget.in_use(), 90);
        drop(b);
        assert_eq!(budget.in_use(), 0);
    }

    #[test]
    fn an_empty_reservation_takes_nothing() {
        let budget = BodyBudget::new(0);
        let mut r = budget.reservation();
        r.cover(0).unwrap();
        assert!(r.cover(1).is_err());
        drop(r);
        assert_eq!(budget.in_use(), 0);
    }
}
