//! API key verification. argon2id runs once per key per router; afterwards a
//! request's secret is checked by comparing sha256(secret) with the stored
//! digest in constant time. Cold verifications are counted before hashing
//! (see `attempts`: one at a time per key id, a failure budget per key id and
//! address) and bounded by a small semaphore; waiting longer than
//! `hash_wait` for it is a 503, never a 401. Unknown key ids are cached
//! negatively for a moment.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use argon2::{password_hash::PasswordHash, Argon2, PasswordVerifier};
use cluster_protocol::control::{client::ControlPlaneClient, redis_keys, KeyRecord};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use tokio::sync::Semaphore;

use crate::gate::attempts::{Attempts, Refusal};

const NEGATIVE_TTL: Duration = Duration::from_secs(2);
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
            key_version: redis_keys::key_version(&record.user.id, &record.id),
            user_version: redis_keys::user_version(&record.user.id),
            last_used: redis_keys::key_last_used(&record.user.id, &record.id),
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
    /// No argon2 slot (or turn for this key) within the wait: retry later.
    #[error("key verification busy")]
    Busy,
}

/// Bounds of the argon2id work of one router.
#[derive(Debug, Clone, Copy)]
pub struct HashLimits {
    /// Verifications hashing at once (`ROUTER_HASH_CONCURRENCY`).
    pub concurrency: usize,
    /// Longest wait for a turn and a slot before answering 503
    /// (`ROUTER_HASH_WAIT_MS`).
    pub wait: Duration,
}

impl Default for HashLimits {
    fn default() -> Self {
        Self {
            concurrency: 2,
            wait: Duration::from_secs(5),
        }
    }
}

pub struct KeyStore {
    control: ControlPlaneClient,
    verified: RwLock<HashMap<String, Arc<VerifiedKey>>>,
    unknown: Mutex<HashMap<String, Instant>>,
    attempts: Attempts,
    hashing: Arc<Semaphore>,
    hash_wait: Duration,
    /// argon2id verifications run so far (tests read it).
    hashes: AtomicU64,
}

fn refusal(r: Refusal) -> AuthError {
    match r {
        Refusal::TooManyFailures | Refusal::KnownWrong => AuthError::Unauthorized,
        Refusal::Busy => AuthError::Busy,
    }
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
    pub fn new(control: ControlPlaneClient, limits: HashLimits) -> Self {
        Self {
            control,
            verified: RwLock::default(),
            unknown: Mutex::default(),
            attempts: Attempts::default(),
            hashing: Arc::new(Semaphore::new(limits.concurrency)),
            hash_wait: limits.wait,
            hashes: AtomicU64::new(0),
        }
    }

    /// How many argon2id verifications this store has run.
    pub fn hashes(&self) -> u64 {
        self.hashes.load(Ordering::Relaxed)
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

    /// The cold path: count the attempt of `address`, wait for this key's
    /// turn, then (unless the attempt ahead already settled it) fetch the
    /// key and verify the secret with argon2id in a bounded slot.
    pub async fn verify_cold(
        &self,
        key_id: &str,
        secret: &str,
        address: &str,
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
        let candidate = digest(secret);
        let admission = self
            .attempts
            .admit(key_id, address, candidate)
            .map_err(refusal)?;
        let deadline = tokio::time::Instant::now() + self.hash_wait;
        let turn = admission.turn.clone();
        let _turn = tokio::time::timeout_at(deadline, turn.lock())
            .await
            .map_err(|_| AuthError::Busy)?;
        // The attempt ahead may have settled this secret.
        match self.check_cached(key_id, secret) {
            Cached::Verified(k) => {
                admission.succeeded();
                return Ok(k);
            }
            Cached::WrongSecret => {
                admission.failed();
                return Err(AuthError::Unauthorized);
            }
            Cached::Cold => {
                if let Some(r) = admission.settled() {
                    return Err(refusal(r));
                }
            }
        }
        let record = self.fetch(key_id).await?;
        if record.user.suspended {
            return Err(AuthError::Unauthorized);
        }
        let ok = self.hash_verify(&record, secret, deadline).await?;
        if !ok {
            admission.failed();
            return Err(AuthError::Unauthorized);
        }
        admission.succeeded();
        let key = Arc::new(VerifiedKey::new(record, candidate, Instant::now()));
        self.insert(key.clone());
        Ok(key)
    }

    /// argon2id on the blocking pool, once a slot is free (503 past
    /// `deadline`). The slot goes with the hashing task, so a cancelled
    /// request does not free it before the hash ends.
    async fn hash_verify(
        &self,
        record: &KeyRecord,
        secret: &str,
        deadline: tokio::time::Instant,
    ) -> Result<bool, AuthError> {
        let permit = tokio::time::timeout_at(deadline, self.hashing.clone().acquire_owned())
            .await
            .map_err(|_| AuthError::Busy)?
            .map_err(|_| AuthError::Busy)?;
        self.hashes.fetch_add(1, Ordering::Relaxed);
        let hash = record.secret_hash.clone();
        let candidate = secret.to_string();
        Ok(tokio::task::spawn_blocking(move || {
            let _permit = permit;
            PasswordHash::new(&hash)
                .map(|h| {
                    Argon2::default()
                        .verify_password(candidate.as_bytes(), &h)
                        .is_ok()
                })
                .unwrap_or(false)
        })
        .await
        .unwrap_or(false))
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
}
