//! API key verification. argon2id runs once per key per router; afterwards a
//! request's secret is checked by comparing a keyed digest of it
//! (HMAC-SHA256 under a key drawn at start, never leaving the process) with
//! the stored one in constant time. A verified key keeps only that digest
//! and a fingerprint of its argon2id hash (to notice a new secret), not the
//! hash itself. At most `ROUTER_KEY_CACHE_ENTRIES` verified keys are kept
//! (least recently used first out, see `bounded`); an evicted key is
//! fetched and verified again on its next use, so eviction can only make a
//! request ask the control plane, never accept a key it would refuse.
//!
//! Cold verifications are counted before hashing (see `attempts`: one at a
//! time per key id, a failure budget per key id and address) and bounded by
//! a small semaphore; waiting longer than `hash_wait` for it is a 503, never
//! a 401. Unknown key ids are cached negatively for a moment (at most
//! 100,000 of them).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use argon2::{password_hash::PasswordHash, Argon2, PasswordVerifier};
use cluster_protocol::control::{client::ControlPlaneClient, redis_keys, KeyRecord};
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use tokio::sync::Semaphore;

use crate::bounded::BoundedMap;
use crate::gate::attempts::{Attempts, Refusal};

/// Unknown key ids remembered at most (for `NEGATIVE_TTL`).
const UNKNOWN_ENTRIES: usize = 100_000;

const NEGATIVE_TTL: Duration = Duration::from_secs(2);
/// Re-fetch a key older than this when Redis cannot tell us its version.
pub const FALLBACK_MAX_AGE: Duration = Duration::from_secs(3);

/// A key whose secret this router has verified. `record.secret_hash` is
/// empty: [`VerifiedKey::hash_fingerprint`] stands for it.
#[derive(Debug)]
pub struct VerifiedKey {
    pub record: KeyRecord,
    digest: [u8; 32],
    /// The first 16 bytes of sha256 of the argon2id PHC string verified.
    hash_fingerprint: [u8; 16],
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

/// What stands for an argon2id hash in a verified key.
fn hash_fingerprint(phc: &str) -> [u8; 16] {
    let full: [u8; 32] = Sha256::digest(phc.as_bytes()).into();
    let mut short = [0; 16];
    short.copy_from_slice(&full[..16]);
    short
}

impl VerifiedKey {
    /// From the record whose hash `digest`'s secret was verified against
    /// (the hash itself is dropped here).
    fn new(mut record: KeyRecord, digest: [u8; 32], fetched_at: Instant) -> Self {
        let hash_fingerprint = hash_fingerprint(&record.secret_hash);
        record.secret_hash = String::new();
        let redis = RedisNames {
            key_version: redis_keys::key_version(&record.user.id, &record.id),
            user_version: redis_keys::user_version(&record.user.id),
            last_used: redis_keys::key_last_used(&record.user.id, &record.id),
        };
        Self {
            record,
            digest,
            hash_fingerprint,
            fetched_at,
            redis,
        }
    }

    /// The same key, read again at `fetched_at`.
    fn aged(&self, fetched_at: Instant) -> Self {
        Self {
            record: self.record.clone(),
            digest: self.digest,
            hash_fingerprint: self.hash_fingerprint,
            fetched_at,
            redis: RedisNames {
                key_version: self.redis.key_version.clone(),
                user_version: self.redis.user_version.clone(),
                last_used: self.redis.last_used.clone(),
            },
        }
    }

    /// Whether `phc` is the hash this key's secret was verified against.
    pub fn verified_against(&self, phc: &str) -> bool {
        bool::from(hash_fingerprint(phc).ct_eq(&self.hash_fingerprint))
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
    verified: BoundedMap<Arc<VerifiedKey>>,
    unknown: BoundedMap<Instant>,
    /// The HMAC key of the secrets' digests, drawn at start.
    digest_key: [u8; 32],
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
        Self::bounded(control, limits, crate::bounded::DEFAULT_KEYS)
    }

    /// A store of at most `entries` verified keys.
    pub fn bounded(control: ControlPlaneClient, limits: HashLimits, entries: usize) -> Self {
        Self {
            control,
            verified: BoundedMap::new(entries),
            unknown: BoundedMap::new(UNKNOWN_ENTRIES),
            digest_key: rand::random(),
            attempts: Attempts::default(),
            hashing: Arc::new(Semaphore::new(limits.concurrency)),
            hash_wait: limits.wait,
            hashes: AtomicU64::new(0),
        }
    }

    /// The keyed digest of a secret.
    fn digest(&self, secret: &str) -> [u8; 32] {
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(&self.digest_key)
            .unwrap_or_else(|_| unreachable!("HMAC takes a key of any length"));
        mac.update(secret.as_bytes());
        mac.finalize().into_bytes().into()
    }

    /// Verified keys held now.
    pub fn len(&self) -> usize {
        self.verified.len()
    }

    pub fn is_empty(&self) -> bool {
        self.verified.is_empty()
    }

    /// How many argon2id verifications this store has run.
    pub fn hashes(&self) -> u64 {
        self.hashes.load(Ordering::Relaxed)
    }

    /// The cheap check: a digest comparison against a verified key.
    pub fn check_cached(&self, key_id: &str, secret: &str) -> Cached {
        match self.verified.get(key_id) {
            Some(k) if bool::from(k.digest.ct_eq(&self.digest(secret))) => Cached::Verified(k),
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
        if let Some(at) = self.unknown.peek(key_id) {
            if at.elapsed() < NEGATIVE_TTL {
                return Err(AuthError::Unauthorized);
            }
        }
        let candidate = self.digest(secret);
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
        if record.user.suspended || !key.verified_against(&record.secret_hash) {
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
        self.verified.remove(key_id);
    }

    /// Ages a key so the next request re-reads it, without losing the digest.
    pub fn mark_stale(&self, key_id: &str) {
        let long_ago = Instant::now() - Duration::from_secs(3600);
        self.verified
            .replace_with(key_id, |k| Arc::new(k.aged(long_ago)));
    }

    pub fn is_stale(key: &VerifiedKey) -> bool {
        key.fetched_at.elapsed() > Duration::from_secs(3000)
    }

    fn insert(&self, key: Arc<VerifiedKey>) {
        let id = key.record.id.clone();
        self.verified.insert(&id, key);
    }

    async fn fetch(&self, key_id: &str) -> Result<KeyRecord, AuthError> {
        match self.control.key(key_id).await {
            Ok(r) => Ok(r),
            Err(e) if e.is_not_found() => {
                self.unknown.insert(key_id, Instant::now());
                Err(AuthError::Unauthorized)
            }
            Err(e) => Err(AuthError::Unavailable(e.to_string())),
        }
    }
}
