//! One delivery attempt: a signed POST through the egress guard, under one
//! deadline from connect to the last byte read (`WEBHOOK_TIMEOUT`).
//!
//! Success is a 2xx whose reply was read to the end (or to the recorded
//! cap) in time. Redirects are never followed (the egress clients have
//! them off), so a 3xx is a failure. At most the first
//! [`MAX_RECORDED_CHARS`] characters of the reply are read: an endless or
//! huge body costs at most four bytes per character kept.
//!
//! A refused address, a failed connection or a timeout is an outcome with
//! status `None` and an error text for the delivery log, never an error of
//! the caller.

use std::time::{Duration, Instant};

use reqwest::Url;

use super::sign::Signed;
use crate::egress::{error_chain, failure_kind, Egress, Refusal};

/// Part C: the delivery log keeps the first 4000 characters of a reply.
pub const MAX_RECORDED_CHARS: usize = 4000;
/// The most bytes [`MAX_RECORDED_CHARS`] characters of UTF-8 can take.
const MAX_RECORDED_BYTES: usize = MAX_RECORDED_CHARS * 4;

/// What one attempt sends.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    pub url: &'a str,
    /// The webhook's current secret, as text.
    pub secret: &'a str,
    pub delivery_id: &'a str,
    /// Counted from 1.
    pub attempt: i32,
    /// Sent byte for byte; the signature covers it.
    pub body: &'a str,
}

/// What one attempt got.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// The reply's HTTP status; `None` when no reply came (refused
    /// address, connection failure, timeout before the status line).
    pub status: Option<u16>,
    /// From the start of the attempt to its end.
    pub duration_ms: i32,
    /// The first [`MAX_RECORDED_CHARS`] characters of the reply body
    /// (invalid UTF-8 replaced).
    pub response_body: String,
    /// Why the attempt failed; `None` exactly when it succeeded.
    pub error: Option<String>,
}

impl Outcome {
    pub fn succeeded(&self) -> bool {
        self.error.is_none()
    }

    /// The status as the catalog stores it: 0 for no reply.
    pub fn status_code(&self) -> i32 {
        self.status.map_or(0, i32::from)
    }
}

/// Sends `req` once, signed with a timestamp taken now.
pub async fn send(egress: &Egress, timeout: Duration, req: Request<'_>) -> Outcome {
    let start = Instant::now();
    let deadline = tokio::time::Instant::from_std(start) + timeout;
    let (status, response_body, error) = attempt(egress, timeout, deadline, req).await;
    let outcome = Outcome {
        status,
        duration_ms: i32::try_from(start.elapsed().as_millis()).unwrap_or(i32::MAX),
        response_body,
        error,
    };
    if let Some(error) = &outcome.error {
        tracing::info!(
            delivery_id = req.delivery_id,
            attempt = req.attempt,
            status = outcome.status_code(),
            error = error.as_str(),
            "webhook delivery attempt failed"
        );
    }
    outcome
}

async fn attempt(
    egress: &Egress,
    timeout: Duration,
    deadline: tokio::time::Instant,
    req: Request<'_>,
) -> (Option<u16>, String, Option<String>) {
    let url = match Url::parse(req.url) {
        Ok(url) => url,
        Err(e) => {
            return (
                None,
                String::new(),
                Some(format!("the URL is not valid ({e})")),
            )
        }
    };
    let client = match egress.client_for(&url) {
        Ok(client) => client,
        Err(refusal) => return (None, String::new(), Some(refused(&url, &refusal))),
    };
    let signed = Signed::new(
        req.secret,
        req.delivery_id,
        req.attempt,
        chrono::Utc::now().timestamp(),
        req.body,
    );
    let mut builder = client.post(url.clone()).body(req.body.to_owned());
    for (name, value) in signed.headers() {
        builder = builder.header(name, value);
    }
    let mut response = match tokio::time::timeout_at(deadline, builder.send()).await {
        Err(_) => return (None, String::new(), Some(timed_out(timeout, "a reply"))),
        Ok(Err(e)) => return (None, String::new(), Some(request_error(&url, &e))),
        Ok(Ok(r)) => r,
    };
    let status = response.status();
    let location = response
        .headers()
        .get(reqwest::header::LOCATION)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let mut kept = Capped::default();
    let read_error = loop {
        match tokio::time::timeout_at(deadline, response.chunk()).await {
            Err(_) => break Some(timed_out(timeout, "the whole reply")),
            Ok(Err(e)) => {
                tracing::info!(host = url.host_str().unwrap_or(""), error = %error_chain(&e), "reading a webhook reply failed");
                break Some("reading the reply failed".to_owned());
            }
            Ok(Ok(None)) => break None,
            Ok(Ok(Some(chunk))) => {
                if kept.push(&chunk) {
                    break None;
                }
            }
        }
    };
    let error = if status.is_success() {
        read_error
    } else if status.is_redirection() {
        Some(match location {
            Some(to) => format!(
                "the receiver answered {status} (a redirect to {to}); redirects are not followed"
            ),
            None => format!("the receiver answered {status}; redirects are not followed"),
        })
    } else {
        Some(format!("the receiver answered {status}"))
    };
    (Some(status.as_u16()), kept.into_text(), error)
}

/// The log line and recorded error of an address the guard refused: the
/// log has the detail (the address), the delivery log only what
/// [`Refusal`] shows.
fn refused(url: &Url, refusal: &Refusal) -> String {
    tracing::warn!(
        host = url.host_str().unwrap_or(""),
        reason = refusal.detail(),
        "webhook delivery refused by the egress guard"
    );
    refusal.to_string()
}

fn timed_out(timeout: Duration, what: &str) -> String {
    format!(
        "no complete reply within {} (WEBHOOK_TIMEOUT): timed out waiting for {what}",
        describe(timeout)
    )
}

fn describe(d: Duration) -> String {
    if d.subsec_millis() == 0 {
        format!("{}s", d.as_secs())
    } else {
        format!("{}ms", d.as_millis())
    }
}

/// The recorded error of a request that got no reply: its kind only (the
/// delivery log is client-visible); the error chain goes to the node's log.
fn request_error(url: &Url, e: &reqwest::Error) -> String {
    if let Some(refusal) = find_refusal(e) {
        return refused(url, refusal);
    }
    tracing::info!(
        host = url.host_str().unwrap_or(""),
        error = %error_chain(e),
        "webhook delivery request failed"
    );
    failure_kind(e).to_owned()
}

fn find_refusal<'a>(e: &'a (dyn std::error::Error + 'static)) -> Option<&'a Refusal> {
    let mut cur = Some(e);
    while let Some(err) = cur {
        if let Some(r) = err.downcast_ref::<Refusal>() {
            return Some(r);
        }
        cur = err.source();
    }
    None
}

/// The start of a reply body: stops before the character after the
/// [`MAX_RECORDED_CHARS`]th, or at [`MAX_RECORDED_BYTES`].
#[derive(Default)]
struct Capped {
    bytes: Vec<u8>,
    /// Bytes kept that start a character (or are not UTF-8 at all).
    starts: usize,
}

impl Capped {
    /// Keeps what is needed of `chunk`; true once nothing more is.
    fn push(&mut self, chunk: &[u8]) -> bool {
        for &b in chunk {
            let starts_char = b & 0xC0 != 0x80;
            if (starts_char && self.starts == MAX_RECORDED_CHARS)
                || self.bytes.len() == MAX_RECORDED_BYTES
            {
                return true;
            }
            self.starts += usize::from(starts_char);
            self.bytes.push(b);
        }
        false
    }

    fn into_text(self) -> String {
        String::from_utf8_lossy(&self.bytes)
            .chars()
            .take(MAX_RECORDED_CHARS)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn capped(parts: &[&[u8]]) -> (String, bool) {
        let mut c = Capped::default();
        let mut full = false;
        for p in parts {
            if c.push(p) {
                full = true;
                break;
            }
        }
        (c.into_text(), full)
    }

    #[test]
    fn keeps_the_first_4000_characters_and_stops() {
        let ascii = "a".repeat(5000);
        let (text, full) = capped(&[ascii.as_bytes()]);
        assert_eq!(text.len(), 4000);
        assert!(full);
        let (short, full) = capped(&[b"ok"]);
        assert_eq!(short, "ok");
        assert!(!full);
    }

    #[test]
    fn multibyte_characters_split_across_chunks_are_kept_whole() {
        let s = "é☕𝄞".repeat(2000); // 6000 characters of 2, 3 and 4 bytes
        let bytes = s.as_bytes();
        let (a, b) = bytes.split_at(5);
        let (text, full) = capped(&[a, b]);
        assert!(full);
        assert_eq!(text.chars().count(), 4000);
        assert_eq!(text, s.chars().take(4000).collect::<String>());
        assert!(!text.contains('\u{fffd}'));
    }

    #[test]
    fn exactly_4000_characters_is_not_cut() {
        let s = "☕".repeat(4000);
        let (text, _) = capped(&[s.as_bytes()]);
        assert_eq!(text, s);
    }

    #[test]
    fn invalid_utf8_is_replaced_and_still_capped() {
        let junk = vec![0xffu8; 20_000];
        let (text, full) = capped(&[&junk]);
        assert!(full);
        assert_eq!(text.chars().count(), 4000);
        assert!(text.chars().all(|c| c == '\u{fffd}'));
        let stray = vec![0x80u8; 20_000];
        let (text, full) = capped(&[&stray]);
        assert!(full);
        assert_eq!(text.chars().count(), 4000);
    }

    #[test]
    fn durations_read_as_written() {
        assert_eq!(describe(Duration::from_secs(10)), "10s");
        assert_eq!(describe(Duration::from_millis(300)), "300ms");
    }
}
