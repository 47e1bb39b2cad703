//! The account pages (issue 32; docs/security.md, "Sessions"): sign-up,
//! sign-in, sign-out, the account screen (keys, databases, password) as
//! plain server-rendered HTML under `/account`, and export by session
//! cookie (`export`). The control plane holds password hashes and sessions
//! and answers on its session routes; the router keeps no session state.
//!
//! * [`html`]: the pages, every value escaped.
//! * [`pages`]: one handler per (method, path).
//! * [`forms`]: urlencoded bodies and the `Cookie` header.
//! * [`cookies`]: the session and double-submit cookies.
//! * [`csrf`]: the origin and form-token checks.
//! * [`throttle`]: the sign-in limits in Redis.
//! * [`export`]: `GET /api/databases/{id}/export` by cookie.

pub mod cookies;
pub mod csrf;
pub mod export;
pub mod forms;
pub mod html;
pub mod pages;
pub mod throttle;

use std::sync::LazyLock;

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use http::{header, HeaderValue, Method, Response, StatusCode};
use hyper::body::Incoming;
use sha2::{Digest, Sha256};

use crate::errors::{full, Body};
use crate::state::AppState;

/// The `route` label of every account page in the metrics.
pub const METRIC_LABEL: &str = "/account";

/// Whether the router's account pages answer `path`.
pub fn is_account_path(path: &str) -> bool {
    path == "/account" || path.starts_with("/account/")
}

/// Only the copy button's script and the inline stylesheet may run.
static CSP: LazyLock<HeaderValue> = LazyLock::new(|| {
    let hash = |s: &str| STANDARD.encode(Sha256::digest(s.as_bytes()));
    let value = format!(
        "default-src 'none'; script-src 'sha256-{}'; style-src 'sha256-{}'; \
         form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
        hash(html::COPY_SCRIPT),
        hash(html::STYLE),
    );
    HeaderValue::try_from(value).unwrap_or(HeaderValue::from_static("default-src 'none'"))
});

/// An HTML page with the pages' security headers (never cached).
pub fn page(status: StatusCode, text: String) -> Response<Body> {
    let mut resp = Response::new(full(text));
    *resp.status_mut() = status;
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(header::CONTENT_SECURITY_POLICY, CSP.clone());
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    // Not `no-referrer`: under it a browser sends `Origin: null` with
    // every form post, which the cross-site check must refuse.
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    resp
}

/// A 303 to `location` on this site.
pub fn see_other(location: &'static str) -> Response<Body> {
    let mut resp = Response::new(full(""));
    *resp.status_mut() = StatusCode::SEE_OTHER;
    let h = resp.headers_mut();
    h.insert(header::LOCATION, HeaderValue::from_static(location));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    resp
}

/// Answers one request under `/account`.
pub async fn serve(
    state: &AppState,
    req: http::Request<Incoming>,
    address: &str,
) -> Response<Body> {
    let path = req.uri().path().to_owned();
    let method = req.method().clone();
    let keys = path.strip_prefix("/account/keys/");
    match (method.as_str(), path.as_str()) {
        ("GET" | "HEAD", "/account") => pages::account(state, req).await,
        ("GET" | "HEAD", "/account/signin") => pages::signin_form(state, req).await,
        ("POST", "/account/signin") => pages::signin(state, req, address).await,
        ("GET" | "HEAD", "/account/signup") => pages::signup_form(state, req).await,
        ("POST", "/account/signup") => pages::signup(state, req, address).await,
        ("POST", "/account/signout") => pages::signout(state, req).await,
        ("POST", "/account/password") => pages::password(state, req).await,
        ("POST", "/account/keys") => pages::mint(state, req).await,
        ("POST", _) if keys.is_some() => {
            let rest = keys.unwrap_or_default();
            match rest.split_once('/') {
                None if !rest.is_empty() => {
                    let id = rest.to_owned();
                    pages::edit(state, req, &id).await
                }
                Some((id, "revoke")) if !id.is_empty() => {
                    let id = id.to_owned();
                    pages::revoke(state, req, &id).await
                }
                _ => not_found(),
            }
        }
        _ if method != Method::GET && method != Method::HEAD && method != Method::POST => page(
            StatusCode::METHOD_NOT_ALLOWED,
            html::message_page("Not allowed", "This page does not accept that method."),
        ),
        _ => not_found(),
    }
}

fn not_found() -> Response<Body> {
    page(
        StatusCode::NOT_FOUND,
        html::message_page("Not found", "There is no such page."),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn account_paths_are_told_apart() {
        assert!(is_account_path("/account"));
        assert!(is_account_path("/account/signin"));
        assert!(!is_account_path("/accounts"));
        assert!(!is_account_path("/api/account"));
    }

    #[test]
    fn pages_carry_their_security_headers() {
        let r = page(StatusCode::OK, "x".into());
        let h = r.headers();
        assert_eq!(h[header::CACHE_CONTROL], "no-store");
        assert_eq!(h[header::X_FRAME_OPTIONS], "DENY");
        let csp = h[header::CONTENT_SECURITY_POLICY].to_str().unwrap();
        assert!(csp.contains("script-src 'sha256-") && csp.contains("frame-ancestors 'none'"));
    }
}
