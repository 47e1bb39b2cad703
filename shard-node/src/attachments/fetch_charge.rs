//! URL fetches count against the account's upload limit (part C: "60
//! uploads per account per 60 s, answered 400"), as uploads do. The count
//! lives in the router's Redis log; the shard node only knows how many
//! URLs a write names once it has read the table's schema. So:
//!
//! * the router sends, with a record write that may name URLs, what is
//!   left of the account's window: [`ALLOWANCE_HEADER`] =
//!   `<remaining> <ms until one more is allowed>` (the router drops any
//!   `x-cluster-*` header a client sends, so only it can set this);
//! * [`charge`] refuses a write naming more URLs than remain (the same
//!   400 as a refused upload, nothing fetched) and counts each URL about
//!   to be fetched;
//! * [`scope`] answers the count in [`FETCHED_HEADER`], which the router
//!   adds to the account's log and removes from the reply.
//!
//! A request without the allowance header (a direct call of a test or an
//! operator, never one through the router) is not limited here.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use axum::extract::Request;
use axum::http::HeaderValue;
use axum::middleware::Next;
use axum::response::Response;

use super::limits::{UPLOADS_PER_WINDOW, UPLOAD_WINDOW};
use crate::error::{ApiError, ApiResult};

/// Router to shard: `<remaining> <retry after ms>` of the account's
/// upload window, read just before the request was forwarded.
pub const ALLOWANCE_HEADER: &str = "x-cluster-upload-allowance";
/// Shard to router: how many URLs the request fetched (to add to the log).
pub const FETCHED_HEADER: &str = "x-cluster-attachment-fetches";

/// What the router said is left of the account's window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Allowance {
    pub remaining: u64,
    pub retry_after_ms: u64,
}

impl Allowance {
    /// The header's value; `None` when absent or malformed.
    pub fn parse(text: &str) -> Option<Allowance> {
        let (remaining, retry) = text.trim().split_once(' ')?;
        Some(Allowance {
            remaining: remaining.parse().ok()?,
            retry_after_ms: retry.trim().parse().ok()?,
        })
    }
}

/// One request's allowance and what it fetched.
#[derive(Debug, Default)]
struct Charge {
    allowance: Option<Allowance>,
    fetched: AtomicU64,
}

tokio::task_local! {
    static CHARGE: Arc<Charge>;
}

/// Middleware: reads the allowance, runs the request with it, and answers
/// the URLs fetched in [`FETCHED_HEADER`].
pub async fn scope(req: Request, next: Next) -> Response {
    let allowance = req
        .headers()
        .get(ALLOWANCE_HEADER)
        .and_then(|v| v.to_str().ok())
        .and_then(Allowance::parse);
    let charge = Arc::new(Charge {
        allowance,
        fetched: AtomicU64::new(0),
    });
    let mut response = CHARGE.scope(charge.clone(), next.run(req)).await;
    let fetched = charge.fetched.load(Ordering::Relaxed);
    if fetched > 0 {
        response
            .headers_mut()
            .insert(FETCHED_HEADER, HeaderValue::from(fetched));
    }
    response
}

/// Before fetching `urls` URLs: refused (400, nothing fetched) when the
/// account has fewer uploads left in its window; else counted.
pub fn charge(urls: usize) -> ApiResult<()> {
    let urls = urls as u64;
    if urls == 0 {
        return Ok(());
    }
    let Ok(charge) = CHARGE.try_with(Arc::clone) else {
        return Ok(());
    };
    if let Some(a) = charge.allowance {
        let so_far = charge.fetched.load(Ordering::Relaxed);
        let left = a.remaining.saturating_sub(so_far);
        if urls > left {
            return Err(ApiError::bad_request(refusal_message(
                urls,
                left,
                a.retry_after_ms,
            )));
        }
    }
    charge.fetched.fetch_add(urls, Ordering::Relaxed);
    Ok(())
}

/// The router's upload refusal, then what the write asked for.
pub fn refusal_message(urls: u64, left: u64, retry_after_ms: u64) -> String {
    let secs = retry_after_ms.div_ceil(1000).max(1);
    format!(
        "Upload limit reached: at most {UPLOADS_PER_WINDOW} uploads per account per {} seconds; \
         try again in {secs} s. Each attachment URL a write fetches counts as one upload: \
         this write names {urls} and {left} remain. Nothing was fetched or written.",
        UPLOAD_WINDOW.as_secs()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_header_reads_remaining_and_wait() {
        assert_eq!(
            Allowance::parse("3 41200"),
            Some(Allowance {
                remaining: 3,
                retry_after_ms: 41200
            })
        );
        assert_eq!(Allowance::parse("3"), None);
        assert_eq!(Allowance::parse("x 1"), None);
    }

    #[test]
    fn the_message_starts_like_the_routers() {
        let m = refusal_message(2, 1, 41_200);
        assert!(
            m.starts_with(
                "Upload limit reached: at most 60 uploads per account per 60 seconds; try again in 42 s."
            ),
            "{m}"
        );
    }

    #[tokio::test]
    async fn urls_past_the_allowance_are_refused_and_the_rest_counted() {
        let c = Arc::new(Charge {
            allowance: Some(Allowance {
                remaining: 3,
                retry_after_ms: 1000,
            }),
            fetched: AtomicU64::new(0),
        });
        CHARGE
            .scope(c.clone(), async {
                charge(2).unwrap();
                assert!(charge(2).is_err(), "2 + 2 > 3");
                charge(1).unwrap();
                assert!(charge(1).is_err());
            })
            .await;
        assert_eq!(c.fetched.load(Ordering::Relaxed), 3);
        // Outside a request (no scope): not limited.
        charge(100).unwrap();
    }
}
