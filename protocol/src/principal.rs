//! The caller identity a router attaches to every forwarded request, signed
//! with HMAC-SHA256 over `<timestamp>.<principal>` using the cluster secret.
//! Shard nodes refuse any request whose principal does not verify.

use base64::{engine::general_purpose::URL_SAFE_NO_PAD, Engine};
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;

use crate::control::{Access, Role};

pub const HEADER_PRINCIPAL: &str = "x-cluster-principal";
pub const HEADER_TIMESTAMP: &str = "x-cluster-timestamp";
pub const HEADER_SIGNATURE: &str = "x-cluster-signature";
/// How far a signed timestamp may be from the verifier's clock.
pub const MAX_SKEW_SECS: i64 = 300;

/// Who is calling, and with what rights in the database the request targets.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Principal {
    pub user_id: String,
    pub key_id: String,
    pub access: Access,
    /// The key is narrowed to an explicit list of databases.
    pub narrowed: bool,
    /// The database the request targets, when it names one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub database_id: Option<String>,
    /// The caller's membership role in `database_id`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<Role>,
    /// The caller holds a read-only support grant on `database_id`.
    #[serde(default)]
    pub support: bool,
    /// Placement epoch the router routed by.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub epoch: Option<i64>,
    /// Set only on `POST /api/databases`: what the control plane allocated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub new_database: Option<crate::control::Allocation>,
}

/// The three header values that carry a signed principal.
#[derive(Debug, Clone)]
pub struct SignedHeaders {
    pub principal: String,
    pub timestamp: String,
    pub signature: String,
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum VerifyError {
    #[error("missing principal headers")]
    Missing,
    #[error("bad signature")]
    BadSignature,
    #[error("timestamp outside the allowed skew")]
    Expired,
    #[error("undecodable principal")]
    Malformed,
}

fn mac(secret: &[u8], timestamp: &str, principal: &str) -> Hmac<Sha256> {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).expect("HMAC takes any key length");
    mac.update(timestamp.as_bytes());
    mac.update(b".");
    mac.update(principal.as_bytes());
    mac
}

impl Principal {
    pub fn sign(&self, secret: &[u8], now_unix: i64) -> SignedHeaders {
        let json = serde_json::to_vec(self).expect("principal serialises");
        let principal = URL_SAFE_NO_PAD.encode(json);
        let timestamp = now_unix.to_string();
        let signature = hex::encode(mac(secret, &timestamp, &principal).finalize().into_bytes());
        SignedHeaders {
            principal,
            timestamp,
            signature,
        }
    }

    pub fn verify(
        secret: &[u8],
        principal: Option<&str>,
        timestamp: Option<&str>,
        signature: Option<&str>,
        now_unix: i64,
    ) -> Result<Principal, VerifyError> {
        let (Some(principal), Some(timestamp), Some(signature)) = (principal, timestamp, signature)
        else {
            return Err(VerifyError::Missing);
        };
        let sig = hex::decode(signature).map_err(|_| VerifyError::BadSignature)?;
        mac(secret, timestamp, principal)
            .verify_slice(&sig)
            .map_err(|_| VerifyError::BadSignature)?;
        let ts: i64 = timestamp.parse().map_err(|_| VerifyError::Malformed)?;
        if (now_unix - ts).abs() > MAX_SKEW_SECS {
            return Err(VerifyError::Expired);
        }
        let json = URL_SAFE_NO_PAD
            .decode(principal)
            .map_err(|_| VerifyError::Malformed)?;
        serde_json::from_slice(&json).map_err(|_| VerifyError::Malformed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Principal {
        Principal {
            user_id: "usr_abcdefghijkl".into(),
            key_id: "key_abcdefghijkl".into(),
            access: Access::ReadWrite,
            narrowed: false,
            database_id: Some("db_Ab3dZ1234567".into()),
            role: Some(Role::Editor),
            support: false,
            epoch: Some(1),
            new_database: None,
        }
    }

    #[test]
    fn round_trip() {
        let h = sample().sign(b"s3cret", 1000);
        let p = Principal::verify(
            b"s3cret",
            Some(&h.principal),
            Some(&h.timestamp),
            Some(&h.signature),
            1010,
        )
        .unwrap();
        assert_eq!(p, sample());
    }

    #[test]
    fn wrong_secret_or_tamper_refused() {
        let h = sample().sign(b"s3cret", 1000);
        assert_eq!(
            Principal::verify(
                b"other",
                Some(&h.principal),
                Some(&h.timestamp),
                Some(&h.signature),
                1000
            ),
            Err(VerifyError::BadSignature)
        );
        assert_eq!(
            Principal::verify(
                b"s3cret",
                Some(&h.principal),
                Some("1001"),
                Some(&h.signature),
                1000
            ),
            Err(VerifyError::BadSignature)
        );
        assert_eq!(
            Principal::verify(
                b"s3cret",
                None,
                Some(&h.timestamp),
                Some(&h.signature),
                1000
            ),
            Err(VerifyError::Missing)
        );
    }

    #[test]
    fn stale_timestamp_refused() {
        let h = sample().sign(b"s3cret", 1000);
        assert_eq!(
            Principal::verify(
                b"s3cret",
                Some(&h.principal),
                Some(&h.timestamp),
                Some(&h.signature),
                1000 + MAX_SKEW_SECS + 1
            ),
            Err(VerifyError::Expired)
        );
    }
}
