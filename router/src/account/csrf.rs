//! Cross-site request refusal for the pages' forms: every state-changing
//! POST must come from this site (an `Origin`, when sent, equal to the
//! router's own origin; a `Sec-Fetch-Site`, when sent, `same-origin` or
//! `none`) and carry the right form token (the session's, or for the
//! signed-out forms the double-submit token of the `__Host-csrf` cookie).
//! The session cookie's `SameSite=Lax` is the third layer.

use http::{header, HeaderMap};
use subtle::ConstantTimeEq;

/// The 403 page's message for every refused form.
pub const REFUSED: &str =
    "This form has expired or did not come from this site; reload the page and try again.";

/// Whether the request's `Origin` and `Sec-Fetch-Site` allow a form post:
/// each absent, or naming this origin (`http://` or `https://` plus the
/// `Host` header: the router does not know whether TLS ends before it).
pub fn same_origin(headers: &HeaderMap) -> bool {
    let site_ok = match headers.get("sec-fetch-site").map(|v| v.as_bytes()) {
        None | Some(b"same-origin" | b"none") => true,
        Some(_) => false,
    };
    let origin_ok = match headers.get(header::ORIGIN) {
        None => true,
        Some(origin) => {
            let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
            match (origin.to_str().ok(), host) {
                (Some(origin), Some(host)) if !host.is_empty() => {
                    let rest = origin
                        .strip_prefix("https://")
                        .or_else(|| origin.strip_prefix("http://"));
                    rest.is_some_and(|r| r.eq_ignore_ascii_case(host))
                }
                _ => false,
            }
        }
    };
    site_ok && origin_ok
}

/// Whether a posted form token equals the expected one (constant time;
/// an empty token never matches).
pub fn tokens_match(posted: &str, expected: &str) -> bool {
    !expected.is_empty() && bool::from(posted.as_bytes().ct_eq(expected.as_bytes()))
}

#[cfg(test)]
mod tests {
    use http::HeaderValue;

    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (n, v) in pairs {
            h.insert(*n, HeaderValue::from_static(v));
        }
        h
    }

    #[test]
    fn only_this_origin_may_post() {
        let host = ("host", "127.0.0.1:8080");
        assert!(same_origin(&headers(&[host])));
        assert!(same_origin(&headers(&[
            host,
            ("origin", "http://127.0.0.1:8080")
        ])));
        assert!(same_origin(&headers(&[
            host,
            ("origin", "https://127.0.0.1:8080"),
            ("sec-fetch-site", "same-origin")
        ])));
        assert!(same_origin(&headers(&[host, ("sec-fetch-site", "none")])));
        for refused in [
            headers(&[host, ("origin", "http://evil.example")]),
            headers(&[host, ("origin", "http://127.0.0.1:8081")]),
            headers(&[host, ("origin", "http://127.0.0.1:8080.evil.example")]),
            headers(&[host, ("origin", "null")]),
            headers(&[host, ("sec-fetch-site", "cross-site")]),
            headers(&[host, ("sec-fetch-site", "same-site")]),
            headers(&[("origin", "http://127.0.0.1:8080")]),
        ] {
            assert!(!same_origin(&refused), "{refused:?}");
        }
    }

    #[test]
    fn tokens_must_be_equal_and_non_empty() {
        assert!(tokens_match("abc", "abc"));
        assert!(!tokens_match("abd", "abc"));
        assert!(!tokens_match("", ""));
        assert!(!tokens_match("abc", ""));
    }
}
