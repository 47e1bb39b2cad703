//! The gate every keyed request passes: address shield, bearer, key
//! verification, key budget and key liveness, in that order.
//!
//! Hot path (key already verified here): one Redis round trip charging the
//! shield and the key budget and reading the versions. Cold path (first use
//! of a key on this router, or a bad credential): the shield alone is charged
//! first, then the key is fetched and verified, then the key budget is
//! charged in a second round trip.

use std::sync::Arc;

use cluster_protocol::control::Role;
use cluster_protocol::principal::Principal;
use http::{header, HeaderMap, HeaderName, HeaderValue, Response};

use crate::edge::metrics::{self, Cache};
use crate::edge::trace::RequestSpan;
use crate::errors::{ApiError, Body};
use crate::gate::bearer;
use crate::gate::keys::{AuthError, Cached, KeyStore, VerifiedKey, FALLBACK_MAX_AGE};
use crate::gate::limiter::Decision;
use crate::gate::limiter_lua::{Charge, Outcome, Versions};
use crate::state::AppState;

const RATELIMIT_LIMIT: HeaderName = HeaderName::from_static("x-ratelimit-limit");
const RATELIMIT_REMAINING: HeaderName = HeaderName::from_static("x-ratelimit-remaining");

/// A verified caller.
pub struct Caller {
    pub key: Arc<VerifiedKey>,
    pub versions: Versions,
    pub last_used_ms: Option<i64>,
    pub address: String,
    /// The key budget's decision for this request.
    pub budget: Decision,
}

impl Caller {
    pub fn user_id(&self) -> &str {
        &self.key.record.user.id
    }

    /// What to compare the cached `UserAccess` with.
    pub fn user_version(&self) -> Option<Option<i64>> {
        match self.versions {
            Versions::Redis { user, .. } => Some(user),
            Versions::Unknown => None,
        }
    }

    pub fn principal(
        &self,
        database_id: Option<&str>,
        role: Option<Role>,
        support: bool,
        epoch: Option<i64>,
    ) -> Principal {
        let r = &self.key.record;
        Principal {
            user_id: r.user.id.clone(),
            key_id: r.id.clone(),
            access: r.access,
            narrowed: r.databases.is_narrowed(),
            database_id: database_id.map(String::from),
            role,
            support,
            epoch,
            new_database: None,
            share: false,
        }
    }

    /// Whether `p` is what [`Caller::principal`] would build from these
    /// arguments (every field compared: a field added to `Principal` fails
    /// to compile here until it is).
    pub fn is_principal(
        &self,
        p: &Principal,
        database: Option<&str>,
        role_in: Option<Role>,
        support_grant: bool,
        epoch_now: Option<i64>,
    ) -> bool {
        let r = &self.key.record;
        let Principal {
            user_id,
            key_id,
            access,
            narrowed,
            database_id,
            role,
            support,
            epoch,
            new_database,
            share,
        } = p;
        *user_id == r.user.id
            && *key_id == r.id
            && *access == r.access
            && *narrowed == r.databases.is_narrowed()
            && database_id.as_deref() == database
            && *role == role_in
            && *support == support_grant
            && *epoch == epoch_now
            && new_database.is_none()
            && !*share
    }

    /// Sets `X-RateLimit-Limit` / `X-RateLimit-Remaining` from the key budget.
    pub fn stamp(&self, resp: &mut Response<Body>) {
        let h = resp.headers_mut();
        h.insert(RATELIMIT_LIMIT, HeaderValue::from(self.budget.limit));
        h.insert(
            RATELIMIT_REMAINING,
            HeaderValue::from(self.budget.remaining),
        );
    }
}

fn shield_denied(out: &Outcome) -> Option<ApiError> {
    (!out.shield.allowed).then_some(ApiError::RateLimited {
        retry_after_ms: out.shield.retry_after_ms,
    })
}

/// Charges only the address shield (for `GET /api/health`, which needs no
/// credential but, like every request, counts against its address).
pub async fn shield(state: &AppState, headers: &HeaderMap, address: &str) -> Result<(), ApiError> {
    let cfg = &state.config;
    let shield_limit = if headers.contains_key(header::AUTHORIZATION) {
        cfg.address_limit_per_min
    } else {
        cfg.anon_limit_per_min
    };
    let out = state
        .limiter
        .charge(Charge {
            address,
            shield_limit,
            key: None,
        })
        .await;
    shield_denied(&out).map_or(Ok(()), Err)
}

/// Runs the gate; `Err` is the response to send (401, 429 or 500, without
/// rate-limit headers since no key was verified).
pub async fn gate(
    state: &AppState,
    headers: &HeaderMap,
    address: String,
    span: &RequestSpan,
) -> Result<Caller, ApiError> {
    let cfg = &state.config;
    let auth = headers.get(header::AUTHORIZATION);
    let shield_limit = if auth.is_some() {
        cfg.address_limit_per_min
    } else {
        cfg.anon_limit_per_min
    };
    let shield_only = Charge {
        address: &address,
        shield_limit,
        key: None,
    };
    let Some(bearer) = auth.and_then(|v| bearer::parse(v.as_bytes())) else {
        let out = state.limiter.charge(shield_only).await;
        return Err(shield_denied(&out).unwrap_or(ApiError::Unauthorized));
    };
    let cached = state.keys.check_cached(bearer.key_id, bearer.secret);
    match cached {
        Cached::Verified(_) | Cached::WrongSecret => metrics::cache_hit(Cache::Key),
        Cached::Cold => metrics::cache_miss(Cache::Key),
    }
    let (key, out) = match cached {
        Cached::Verified(key) => {
            let charge = Charge {
                address: &address,
                shield_limit,
                key: Some((&key, key_limit(&key, cfg))),
            };
            let out = state.limiter.charge(charge).await;
            if let Some(e) = shield_denied(&out) {
                return Err(e);
            }
            (key, out)
        }
        Cached::WrongSecret => {
            let out = state.limiter.charge(shield_only).await;
            return Err(shield_denied(&out).unwrap_or(ApiError::Unauthorized));
        }
        Cached::Cold => {
            let out = state.limiter.charge(shield_only).await;
            if let Some(e) = shield_denied(&out) {
                return Err(e);
            }
            let key = state
                .keys
                .verify_cold(bearer.key_id, bearer.secret, &address)
                .await
                .map_err(|e| auth_error(span, e))?;
            metrics::cache_entries(Cache::Key, state.keys.len());
            let charge = Charge {
                address: &address,
                shield_limit: 0,
                key: Some((&key, key_limit(&key, cfg))),
            };
            let out = state.limiter.charge(charge).await;
            (key, out)
        }
    };
    let key = check_liveness(&state.keys, key, out.versions, span).await?;
    let limit = key_limit(&key, cfg);
    let budget = out.key.unwrap_or(Decision {
        allowed: true,
        limit,
        remaining: limit,
        retry_after_ms: 0,
    });
    Ok(Caller {
        key,
        versions: out.versions,
        last_used_ms: out.last_used_ms,
        address,
        budget,
    })
}

/// The key's budget per minute: its owner's quota when the account has an
/// override (`control-plane quotas set --requests-per-minute`), else
/// `ROUTER_KEY_LIMIT_PER_MIN`.
fn key_limit(key: &VerifiedKey, cfg: &crate::config::Config) -> u64 {
    key.record
        .requests_per_minute
        .unwrap_or(cfg.key_limit_per_min)
}

/// Message of the 503 when no argon2 slot freed up in time.
pub const HASH_BUSY_MESSAGE: &str =
    "Too many API keys are being verified at once. Retry in about 1s.";

fn auth_error(span: &RequestSpan, e: AuthError) -> ApiError {
    match e {
        AuthError::Unauthorized => ApiError::Unauthorized,
        AuthError::Busy => {
            span.log(|| tracing::warn!("no argon2 slot in time: answering 503"));
            ApiError::Unavailable {
                message: HASH_BUSY_MESSAGE,
                retry_after_secs: 1,
            }
        }
        AuthError::Unavailable(why) => {
            span.log(
                || tracing::error!(error = %why, "control plane unavailable while verifying a key"),
            );
            ApiError::dependency_down()
        }
    }
}

/// Re-reads the key when Redis says it changed or is gone (revoked, user
/// suspended), when an invalidation marked it, or, without Redis, when the
/// cached copy is a few seconds old.
async fn check_liveness(
    keys: &KeyStore,
    key: Arc<VerifiedKey>,
    versions: Versions,
    span: &RequestSpan,
) -> Result<Arc<VerifiedKey>, ApiError> {
    let refresh = KeyStore::is_stale(&key)
        || match versions {
            Versions::Redis { key: Some(v), .. } => v != key.record.version,
            Versions::Redis { key: None, .. } => true,
            Versions::Unknown => key.fetched_at.elapsed() > FALLBACK_MAX_AGE,
        };
    if !refresh {
        return Ok(key);
    }
    match keys.refresh(&key).await {
        Ok(k) => Ok(k),
        Err(AuthError::Unavailable(why)) if versions == Versions::Unknown => {
            span.log(|| {
                let what = "control plane and redis unreachable: serving a cached key";
                tracing::warn!(error = %why, "{what}")
            });
            Ok(key)
        }
        Err(e) => Err(auth_error(span, e)),
    }
}
