//! The bearer check of every protected route: which tier the presented
//! token belongs to (compared in constant time with each configured token),
//! then whether [`super::routes`] lets that tier call the matched route.
//! An unknown or missing token is a 401; a known token on a route outside
//! its tier's scope is a 403 naming the tier.

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::{MatchedPath, Request, State};
use axum::http::header::AUTHORIZATION;
use axum::http::{HeaderMap, Method};
use axum::middleware::Next;
use axum::response::Response;
use subtle::{Choice, ConstantTimeEq};

use super::routes::Tier;
use crate::config::Tokens;
use crate::error::ApiError;

/// The tokens and, per (method, template), the tiers allowed.
#[derive(Clone)]
pub struct Guard {
    tokens: Arc<Tokens>,
    scopes: Arc<HashMap<(Method, &'static str), Vec<Tier>>>,
}

impl Guard {
    pub fn new(tokens: Arc<Tokens>) -> Self {
        let scopes = super::routes::scopes()
            .into_iter()
            .map(|(method, path, tiers)| ((method, path), tiers))
            .collect();
        Self {
            tokens,
            scopes: Arc::new(scopes),
        }
    }

    /// `Ok` when `presented` is a token whose tier may call `method path`.
    pub fn check(&self, presented: &str, method: &Method, path: &str) -> Result<Tier, ApiError> {
        let tier = identify(&self.tokens, presented.as_bytes()).ok_or(ApiError::Unauthorized)?;
        // HEAD is answered by the GET route.
        let method = if method == Method::HEAD {
            &Method::GET
        } else {
            method
        };
        let allowed = self
            .scopes
            .get(&(method.clone(), path))
            .is_some_and(|tiers| tiers.contains(&tier));
        if tier == Tier::Admin || allowed {
            Ok(tier)
        } else {
            Err(ApiError::Forbidden(format!(
                "The {} token may not call {method} {path}.",
                tier.name()
            )))
        }
    }
}

/// The tier whose token equals `presented`. Every configured token is
/// compared, in constant time, whatever matched; an empty token matches
/// nothing.
pub fn identify(tokens: &Tokens, presented: &[u8]) -> Option<Tier> {
    let candidates = [
        (Tier::Admin, Some(&tokens.admin)),
        (Tier::Router, Some(&tokens.router)),
        (Tier::Shard, tokens.shard.as_ref()),
        (Tier::Metrics, tokens.metrics.as_ref()),
    ];
    let mut found = None;
    for (tier, token) in candidates {
        let expected = token.map(|t| t.expose().as_bytes()).unwrap_or_default();
        let equal: Choice =
            presented.ct_eq(expected) & Choice::from(u8::from(!expected.is_empty()));
        if bool::from(equal) {
            found = Some(tier);
        }
    }
    found
}

fn bearer(headers: &HeaderMap) -> &str {
    headers
        .get(AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or("")
}

/// The middleware of every protected route.
pub async fn require_scope(
    State(guard): State<Guard>,
    req: Request,
    next: Next,
) -> Result<Response, ApiError> {
    let path = req
        .extensions()
        .get::<MatchedPath>()
        .map(|p| p.as_str().to_owned())
        .unwrap_or_default();
    guard.check(bearer(req.headers()), req.method(), &path)?;
    Ok(next.run(req).await)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Secret;

    fn guard(shard: Option<&str>) -> Guard {
        Guard::new(Arc::new(Tokens {
            admin: Secret::new("admin-tok"),
            router: Secret::new("router-tok"),
            shard: shard.map(Secret::new),
            metrics: Some(Secret::new("metrics-tok")),
        }))
    }

    fn status(r: Result<Tier, ApiError>) -> u16 {
        match r {
            Ok(_) => 200,
            Err(e) => e.body().status(),
        }
    }

    #[test]
    fn tokens_are_told_apart_and_unknown_ones_are_401() {
        let g = guard(Some("shard-tok"));
        let t = &g.tokens;
        assert_eq!(identify(t, b"admin-tok"), Some(Tier::Admin));
        assert_eq!(identify(t, b"router-tok"), Some(Tier::Router));
        assert_eq!(identify(t, b"shard-tok"), Some(Tier::Shard));
        assert_eq!(identify(t, b"metrics-tok"), Some(Tier::Metrics));
        assert_eq!(identify(t, b"admin-to"), None);
        assert_eq!(identify(t, b""), None);
        let unset = guard(None);
        assert_eq!(identify(&unset.tokens, b""), None);
        assert_eq!(status(g.check("nope", &Method::GET, "/metrics")), 401);
        assert_eq!(status(g.check("", &Method::GET, "/metrics")), 401);
    }

    #[test]
    fn every_tier_is_held_to_the_table() {
        let g = guard(Some("shard-tok"));
        for (method, path, tiers) in super::super::routes::scopes() {
            for (tier, token) in [
                (Tier::Admin, "admin-tok"),
                (Tier::Router, "router-tok"),
                (Tier::Shard, "shard-tok"),
                (Tier::Metrics, "metrics-tok"),
            ] {
                let want = if tiers.contains(&tier) { 200 } else { 403 };
                assert_eq!(
                    status(g.check(token, &method, path)),
                    want,
                    "{tier:?} {method} {path}"
                );
            }
        }
        // A matched route missing from the table is the admin's only.
        assert_eq!(
            status(g.check("router-tok", &Method::GET, "/elsewhere")),
            403
        );
        assert_eq!(
            status(g.check("admin-tok", &Method::GET, "/elsewhere")),
            200
        );
        assert_eq!(
            status(g.check("metrics-tok", &Method::HEAD, "/metrics")),
            200
        );
    }

    #[test]
    fn the_refusal_names_the_tier_and_the_route() {
        let g = guard(None);
        let e = g
            .check("router-tok", &Method::GET, "/internal/shards")
            .unwrap_err();
        assert_eq!(
            e.body().message,
            "The router token may not call GET /internal/shards."
        );
    }
}
