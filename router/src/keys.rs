//! API key verification. argon2id runs once per key per router; afterwards a
//! request's secret is checked by comparing sha256(secret) with the stored
//! digest in constant time. Wrong secrets against unverified keys are bounded
//! by a small semaphore and a per-key cap of failed verifications; unknown key
//! ids are cached negatively for a moment.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use argon2::{password_hash::PasswordHash, Argon2, PasswordVerifier};
use cluster_protocol::control::{client::ControlPlaneClient, redis_keys, KeyRecord};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use tokio::sync::Semaphore;

const NEGATIVE_TTL: Duration = Duration::from_secs(2);
const FAILURE_WINDOW: Duration = Duration::from_secs(60);
const MAX_FAILURES: u32 = 5;
/// Re-fetch a key older than this when Redis cannot tell us its version.
pub const FALLBACK_MAX_AGE: Duration = Duration::from_secs(3);

/// A key whose secret this router has verified.
#[derive(Debug)]
pub struct VerifiedKey {
    pub record: KeyRecord,
    digest: [u8; 32],
    pub fetched_at: Instant,
    /// The Redis keys the limiter reads for it, named once.
    pub redis: RedisNames,
}

/// `redis_keys` names of a key's liveness version, its user's access
/// version and its last-used stamp.
#[derive(Debug)]
pub struct RedisNames {
    pub key_version: String,
    pub user_version: String,
    pub last_used: String,
}

impl VerifiedKey {
    fn new(record: KeyRecord, digest: [u8; 32], fetched_at: Instant) -> Self {
        let redis = RedisNames {
            key_version: redis_keys::key_version(&record.id),
            user_version: redis_keys::user_version(&record.user.id),
            last_used: redis_keys::key_last_used(&record.id),
        };
        Self {
            record,
            digest,
            fetched_at,
            redis,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    #[error("invalid credential")]
    Unauthorized,
    #[error("control plane: {0}")]
    Unavailable(String),
}

#[derive(Default)]
struct FailureCount {
    since: Option<Instant>,
    count: u32,
}

pub struct KeyStore {
    control: ControlPlaneClient,
    verified: RwLock<HashMap<String, Arc<VerifiedKey>>>,
    unknown: Mutex<HashMap<String, Instant>>,
    failures: Mutex<HashMap<String, FailureCount>>,
    hashing: Semaphore,
}

fn digest(secret: &str) -> [u8; 32] {
    Sha256::digest(secret.as_bytes()).into()
}

/// Result of the in-memory check.
pub enum Cached {
    Verified(Arc<VerifiedKey>),
    /// Known and verified before, but this secret does not match.
    WrongSecret,
    /// Not verified on this router yet.
    Cold,
}

impl KeyStore {
    pub fn new(control: ControlPlaneClient) -> Self {
        Self {
            control,
            verified: RwLock::default(),
            unknown: Mutex::default(),
            failures: Mutex::default(),
            hashing: Semaphore::new(2),
        }
    }

    /// The cheap check: a digest comparison against a verified key.
    pub fn check_cached(&self, key_id: &str, secret: &str) -> Cached {
        let map = self.verified.read().unwrap_or_else(|p| p.into_inner());
        match map.get(key_id) {
            Some(k) if bool::from(k.digest.ct_eq(&digest(secret))) => Cached::Verified(k.clone()),
            Some(_) => Cached::WrongSecret,
            None => Cached::Cold,
        }
    }

    /// The cold path: fetch the key, verify the secret with argon2id (bounded).
    pub async fn verify_cold(
        &self,
        key_id: &str,
        secret: &str,
    ) -> Result<Arc<VerifiedKey>, AuthError> {
        if let Some(at) = self
            .unknown
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(key_id)
        {
            if at.elapsed() < NEGATIVE_TTL {
                return Err(AuthError::Unauthorized);
            }
        }
        if self.too_many_failures(key_id) {
            return Err(AuthError::Unauthorized);
        }
        let record = self.fetch(key_id).await?;
        if record.user.suspended {
            return Err(AuthError::Unauthorized);
        }
        let permit = tokio::time::timeout(Duration::from_secs(5), self.hashing.acquire())
            .await
            .map_err(|_| AuthError::Unauthorized)?
            .map_err(|_| AuthError::Unauthorized)?;
        // Another request may have verified it while we waited.
        if let Cached::Verified(k) = self.check_cached(key_id, secret) {
            return Ok(k);
        }
        let hash = record.secret_hash.clone();
        let candidate = secret.to_string();
        let ok = tokio::task::spawn_blocking(move || {
            PasswordHash::new(&hash)
                .map(|h| {
                    Argon2::default()
                        .verify_password(candidate.as_bytes(), &h)
                        .is_ok()
                })
                .unwrap_or(false)
        })
        .await
        .unwrap_or(false);
        drop(permit);
        if !ok {
            self.record_failure(key_id);
            return Err(AuthError::Unauthorized);
        }
        let key = Arc::new(VerifiedKey::new(record, digest(secret), Instant::now()));
        self.insert(key.clone());
        Ok(key)
    }

    /// Re-reads a verified key from the control plane (version changed, liveness
    /// gone, or an invalidation arrived). 404 or a suspended user is 401.
    pub async fn refresh(&self, key: &VerifiedKey) -> Result<Arc<VerifiedKey>, AuthError> {
        let record = match self.fetch(&key.record.id).await {
            Ok(r) => r,
            Err(e) => {
                if matches!(e, AuthError::Unauthorized) {
                    self.forget(&key.record.id);
                }
                return Err(e);
            }
        };
        if record.user.suspended || record.secret_hash != key.record.secret_hash {
            // A changed hash means the secret must be verified again.
            self.forget(&key.record.id);
            return Err(AuthError::Unauthorized);
        }
        let fresh = Arc::new(VerifiedKey::new(record, key.digest, Instant::now()));
        self.insert(fresh.clone());
        Ok(fresh)
    }

    /// Marks a key for re-fetching on its next use (keeps nothing about it).
    pub fn forget(&self, key_id: &str) {
        self.verified
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .remove(key_id);
    }

    /// Ages a key so the next request re-reads it, without losing the digest.
    pub fn mark_stale(&self, key_id: &str) {
        let mut map = self.verified.write().unwrap_or_else(|p| p.into_inner());
        if let Some(k) = map.get(key_id) {
            let stale = Arc::new(VerifiedKey::new(
                k.record.clone(),
                k.digest,
                Instant::now() - Duration::from_secs(3600),
            ));
            map.insert(key_id.to_string(), stale);
        }
    }

    pub fn is_stale(key: &VerifiedKey) -> bool {
        key.fetched_at.elapsed() > Duration::from_secs(3000)
    }

    fn insert(&self, key: Arc<VerifiedKey>) {
        self.verified
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key.record.id.clone(), key);
    }

    async fn fetch(&self, key_id: &str) -> Result<KeyRecord, AuthError> {
        match self.control.key(key_id).await {
            Ok(r) => Ok(r),
            Err(e) if e.is_not_found() => {
                let mut unknown = self.unknown.lock().unwrap_or_else(|p| p.into_inner());
                if unknown.len() > 100_000 {
                    unknown.retain(|_, at| at.elapsed() < NEGATIVE_TTL);
                }
                unknown.insert(key_id.to_string(), Instant::now());
                Err(AuthError::Unauthorized)
            }
            Err(e) => Err(AuthError::Unavailable(e.to_string())),
        }
    }

    fn too_many_failures(&self, key_id: &str) -> bool {
        let map = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        map.get(key_id).is_some_and(|f| {
            f.since.is_some_and(|s| s.elapsed() < FAILURE_WINDOW) && f.count >= MAX_FAILURES
        })
    }

    fn record_failure(&self, key_id: &str) {
        let mut map = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        if map.len() > 100_000 {
            map.retain(|_, f| f.since.is_some_and(|s| s.elapsed() < FAILURE_WINDOW));
        }
        let f = map.entry(key_id.to_string()).or_default();
        if f.since.is_none_or(|s| s.elapsed() >= FAILURE_WINDOW) {
            *f = FailureCount {
                since: Some(Instant::now()),
                count: 0,
            };
        }
        f.count += 1;
    }
}
