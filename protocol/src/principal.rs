//! The caller identity a router attaches to every forwarded request, signed
//! with HMAC-SHA256 using the cluster secret. Shard nodes refuse any request
//! whose principal does not verify.
//!
//! Version 2 (the one routers send and shards accept) binds the signature to
//! the request it travels with: the MAC covers
//! `v2 \n <timestamp> \n <METHOD> \n <path?query> \n <sha256(body) hex> \n <principal>`,
//! and the body digest travels in [`HEADER_BODY_SHA256`], so a captured
//! request cannot be replayed with another method, path, query or body.
//! Within [`MAX_SKEW_SECS`] the very same request can still be replayed
//! verbatim: the link between router and shard must be private (see the
//! README's "Security" section).
//!
//! Version 1 ([`Principal::sign`], [`Principal::verify`]) covers only
//! `<timestamp>.<principal>`; it is kept for compatibility of this crate's
//! interface, and shard nodes refuse it.

use base64::{engine::general_purpose::URL_SAFE_NO_PAD, Engine};
use hmac::{Hmac, Mac};
use http::Method;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::control::{Access, Role};
use crate::routes::{self, Body, Segments};

pub const HEADER_PRINCIPAL: &str = "x-cluster-principal";
pub const HEADER_TIMESTAMP: &str = "x-cluster-timestamp";
pub const HEADER_SIGNATURE: &str = "x-cluster-signature";
/// Which signature scheme [`HEADER_SIGNATURE`] uses; absent means version 1.
pub const HEADER_SIGNATURE_VERSION: &str = "x-cluster-signature-version";
/// Lowercase hex SHA-256 of the exact body bytes sent (version 2).
pub const HEADER_BODY_SHA256: &str = "x-cluster-body-sha256";
/// The value of [`HEADER_SIGNATURE_VERSION`] for request-bound signatures.
pub const SIGNATURE_VERSION: &str = "2";
/// SHA-256 of the empty body, lowercase hex (every GET without a body).
pub const EMPTY_BODY_SHA256: &str =
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
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
    /// An anonymous read behind a share link (`GET /api/share/{token}/records`):
    /// no user, no key, no role; `database_id` names the database the
    /// token's tag routes to. Shards accept it on that route only.
    #[serde(default, skip_serializing_if = "is_false")]
    pub share: bool,
}

fn is_false(b: &bool) -> bool {
    !*b
}

impl Principal {
    /// The principal of an anonymous share-link read of `database_id`
    /// (routed at `epoch`): empty user and key ids, read-only, no role.
    pub fn share_read(database_id: &str, epoch: Option<i64>) -> Principal {
        Principal {
            user_id: String::new(),
            key_id: String::new(),
            access: Access::ReadOnly,
            narrowed: true,
            database_id: Some(database_id.to_string()),
            role: None,
            support: false,
            epoch,
            new_database: None,
            share: true,
        }
    }
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
    #[error("signature version not accepted")]
    UnsupportedVersion,
    #[error("body does not match its signed digest")]
    BodyMismatch,
}

/// The five header values of a version 2 signature.
#[derive(Debug, Clone)]
pub struct SignedRequest {
    pub principal: String,
    pub timestamp: String,
    pub signature: String,
    pub body_sha256: String,
}

impl SignedRequest {
    /// `(header name, value)` pairs to set on the request.
    pub fn headers(&self) -> [(&'static str, &str); 5] {
        [
            (HEADER_PRINCIPAL, &self.principal),
            (HEADER_TIMESTAMP, &self.timestamp),
            (HEADER_SIGNATURE, &self.signature),
            (HEADER_SIGNATURE_VERSION, SIGNATURE_VERSION),
            (HEADER_BODY_SHA256, &self.body_sha256),
        ]
    }
}

/// The signature headers a shard received (each `None` when absent).
#[derive(Debug, Clone, Copy, Default)]
pub struct Presented<'a> {
    pub principal: Option<&'a str>,
    pub timestamp: Option<&'a str>,
    pub signature: Option<&'a str>,
    pub version: Option<&'a str>,
    pub body_sha256: Option<&'a str>,
}

/// What a version 2 signature binds besides principal and timestamp.
#[derive(Debug, Clone, Copy)]
pub struct Target<'a> {
    /// The method as sent, e.g. `GET`.
    pub method: &'a str,
    /// The request target as sent in origin form: path and query (`/` when empty).
    pub path_and_query: &'a str,
}

/// Lowercase hex SHA-256 of `body` (the constant [`EMPTY_BODY_SHA256`] when empty).
pub fn body_sha256(body: &[u8]) -> String {
    if body.is_empty() {
        return EMPTY_BODY_SHA256.to_string();
    }
    hex::encode(Sha256::digest(body))
}

/// The `body_sha256` a router signs for a body it streams through without
/// reading it (an attachment upload, an import file). A shard accepts it
/// only on the streamed routes of the route table ([`Body::Streamed`]), and caps what it reads
/// there itself; everywhere else it is a signature failure.
pub const STREAMED_BODY: &str = "streamed";

/// Whether the router streams this route's body to the shard unread
/// ([`Body::Streamed`] in the route table: uploads and imports).
fn is_streamed_route(method: &str, path: &str) -> bool {
    let (Ok(method), Some(path)) = (Method::from_bytes(method.as_bytes()), Segments::of(path))
    else {
        return false;
    };
    routes::find(&method, &path)
        .route
        .is_some_and(|r| matches!(r.body, Body::Streamed(_)))
}

fn is_sha256_hex(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// Whether `body` hashes to the signed `body_sha256` (constant time).
pub fn body_matches(body_sha256: &str, body: &[u8]) -> bool {
    let digest: [u8; 32] = Sha256::digest(body).into();
    let Ok(claimed) = hex::decode(body_sha256) else {
        return false;
    };
    claimed.len() == 32 && bool::from(claimed.ct_eq(&digest))
}

fn mac_v2(
    secret: &[u8],
    timestamp: &str,
    target: Target<'_>,
    body_sha256: &str,
    principal: &str,
) -> Hmac<Sha256> {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).expect("HMAC takes any key length");
    // No part can contain a newline: a timestamp, a method token, a request
    // target (HTTP forbids control characters in it), hex and base64url.
    for part in [
        "v2",
        timestamp,
        target.method,
        target.path_and_query,
        body_sha256,
    ] {
        mac.update(part.as_bytes());
        mac.update(b"\n");
    }
    mac.update(principal.as_bytes());
    mac
}

/// The version 2 signature (lowercase hex) of an already encoded principal
/// (see [`Principal::encode`]); routers cache the encoding.
pub fn sign_encoded(
    secret: &[u8],
    now_unix: i64,
    target: Target<'_>,
    body_sha256: &str,
    encoded_principal: &str,
) -> String {
    let timestamp = now_unix.to_string();
    hex::encode(
        mac_v2(secret, &timestamp, target, body_sha256, encoded_principal)
            .finalize()
            .into_bytes(),
    )
}

/// The principal of a request whose signature verified: refused when its
/// timestamp is further than [`MAX_SKEW_SECS`] from `now_unix`.
fn decode_fresh(timestamp: &str, principal: &str, now_unix: i64) -> Result<Principal, VerifyError> {
    let ts: i64 = timestamp.parse().map_err(|_| VerifyError::Malformed)?;
    if (now_unix - ts).abs() > MAX_SKEW_SECS {
        return Err(VerifyError::Expired);
    }
    let json = URL_SAFE_NO_PAD
        .decode(principal)
        .map_err(|_| VerifyError::Malformed)?;
    serde_json::from_slice(&json).map_err(|_| VerifyError::Malformed)
}

fn mac(secret: &[u8], timestamp: &str, principal: &str) -> Hmac<Sha256> {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).expect("HMAC takes any key length");
    mac.update(timestamp.as_bytes());
    mac.update(b".");
    mac.update(principal.as_bytes());
    mac
}

impl Principal {
    /// The value of [`HEADER_PRINCIPAL`]: base64url (no padding) of the JSON.
    pub fn encode(&self) -> String {
        URL_SAFE_NO_PAD.encode(serde_json::to_vec(self).expect("principal serialises"))
    }

    /// Signs this principal for one request (version 2).
    pub fn sign_request(
        &self,
        secret: &[u8],
        now_unix: i64,
        target: Target<'_>,
        body: &[u8],
    ) -> SignedRequest {
        let principal = self.encode();
        let body_sha256 = body_sha256(body);
        let signature = sign_encoded(secret, now_unix, target, &body_sha256, &principal);
        SignedRequest {
            principal,
            timestamp: now_unix.to_string(),
            signature,
            body_sha256,
        }
    }

    /// Signs a built `reqwest` request as a router would (tests, load
    /// tests): its method, its URL's path and query, and its body (which
    /// must not be a stream).
    pub fn sign_reqwest(&self, secret: &[u8], now_unix: i64, request: &mut reqwest::Request) {
        let url = request.url();
        let path_and_query = match url.query() {
            Some(q) => format!("{}?{q}", url.path()),
            None => url.path().to_string(),
        };
        let method = request.method().clone();
        let body = request
            .body()
            .map(|b| b.as_bytes().expect("a buffered body").to_vec())
            .unwrap_or_default();
        let target = Target {
            method: method.as_str(),
            path_and_query: &path_and_query,
        };
        let signed = self.sign_request(secret, now_unix, target, &body);
        for (name, value) in signed.headers() {
            let value = http::HeaderValue::try_from(value).expect("signature headers are ASCII");
            request.headers_mut().insert(name, value);
        }
    }

    /// Verifies a version 2 signature against the request's method and
    /// target. The body is checked separately, once read, with
    /// [`body_matches`] against the (now authenticated) `body_sha256`.
    pub fn verify_request(
        secret: &[u8],
        presented: Presented<'_>,
        target: Target<'_>,
        now_unix: i64,
    ) -> Result<Principal, VerifyError> {
        if presented.version != Some(SIGNATURE_VERSION) {
            let unsigned = presented.version.is_none() && presented.signature.is_none();
            return Err(if unsigned {
                VerifyError::Missing
            } else {
                VerifyError::UnsupportedVersion
            });
        }
        let Presented {
            principal: Some(principal),
            timestamp: Some(timestamp),
            signature: Some(signature),
            body_sha256: Some(body_sha256),
            ..
        } = presented
        else {
            return Err(VerifyError::Missing);
        };
        let streamed = body_sha256 == STREAMED_BODY
            && is_streamed_route(
                target.method,
                target.path_and_query.split('?').next().unwrap_or(""),
            );
        if !is_sha256_hex(body_sha256) && !streamed {
            return Err(VerifyError::BadSignature);
        }
        let sig = hex::decode(signature).map_err(|_| VerifyError::BadSignature)?;
        mac_v2(secret, timestamp, target, body_sha256, principal)
            .verify_slice(&sig)
            .map_err(|_| VerifyError::BadSignature)?;
        decode_fresh(timestamp, principal, now_unix)
    }

    /// Version 1: binds only the timestamp (see the module comment).
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

    /// Version 1 verification; shard nodes no longer accept it.
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
        decode_fresh(timestamp, principal, now_unix)
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn only_uploads_and_imports_stream_their_bodies() {
        assert!(is_streamed_route(
            "POST",
            "/api/tables/tbl_AAAAA1234567/attachments"
        ));
        assert!(is_streamed_route(
            "POST",
            "/api/databases/db_AAAAA1234567/import"
        ));
        assert!(!is_streamed_route(
            "PATCH",
            "/api/tables/tbl_AAAAA1234567/attachments"
        ));
        assert!(!is_streamed_route(
            "POST",
            "/api/tables/tbl_AAAAA1234567/records"
        ));
        assert!(!is_streamed_route("POST", "/api/tables//attachments"));
        assert!(!is_streamed_route("POST", "/api/tables/x/attachments/y"));
        assert!(!body_matches(STREAMED_BODY, b""));
    }
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
            share: false,
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

    const GET_TABLES: Target<'static> = Target {
        method: "GET",
        path_and_query: "/api/databases/db_Ab3dZ1234567/tables",
    };

    fn presented(h: &SignedRequest) -> Presented<'_> {
        Presented {
            principal: Some(&h.principal),
            timestamp: Some(&h.timestamp),
            signature: Some(&h.signature),
            version: Some(SIGNATURE_VERSION),
            body_sha256: Some(&h.body_sha256),
        }
    }

    fn verify_v2(h: &SignedRequest, target: Target<'_>) -> Result<Principal, VerifyError> {
        Principal::verify_request(b"s3cret", presented(h), target, 1010)
    }

    #[test]
    fn v2_round_trip_and_empty_body_digest() {
        let h = sample().sign_request(b"s3cret", 1000, GET_TABLES, b"");
        assert_eq!(h.body_sha256, EMPTY_BODY_SHA256);
        assert_eq!(EMPTY_BODY_SHA256, hex::encode(Sha256::digest(b"")));
        assert_eq!(verify_v2(&h, GET_TABLES).unwrap(), sample());
        assert!(body_matches(&h.body_sha256, b""));
        assert!(!body_matches(&h.body_sha256, b" "));
    }

    #[test]
    fn v2_replay_with_another_method_path_or_query_refused() {
        let h = sample().sign_request(b"s3cret", 1000, GET_TABLES, b"");
        for other in [
            Target {
                method: "DELETE",
                ..GET_TABLES
            },
            Target {
                method: "POST",
                ..GET_TABLES
            },
            Target {
                method: "GET",
                path_and_query: "/api/databases/db_Ab3dZ1234567",
            },
            Target {
                method: "GET",
                path_and_query: "/api/databases/db_Ab3dZ1234567/tables?x=1",
            },
            Target {
                method: "GET",
                path_and_query: "/api/tables/tbl_Ab3dZ1234567",
            },
        ] {
            assert_eq!(
                verify_v2(&h, other),
                Err(VerifyError::BadSignature),
                "{other:?}"
            );
        }
    }

    #[test]
    fn v2_replay_with_another_body_refused() {
        let target = Target {
            method: "PATCH",
            path_and_query: "/api/tables/tbl_Ab3dZ1234567/records",
        };
        let body = br#"{"records":[{"id":"rec_1","fields":{"Name":"a"}}]}"#;
        let h = sample().sign_request(b"s3cret", 1000, target, body);
        assert_eq!(verify_v2(&h, target).unwrap(), sample());
        assert!(body_matches(&h.body_sha256, body));
        // The body swapped under the same headers fails the digest check ...
        assert!(!body_matches(&h.body_sha256, br#"{"records":[]}"#));
        // ... and a digest changed to match the new body fails the signature.
        let mut forged = h.clone();
        forged.body_sha256 = body_sha256(br#"{"records":[]}"#);
        assert_eq!(verify_v2(&forged, target), Err(VerifyError::BadSignature));
        let mut garbage = h.clone();
        garbage.body_sha256 = "zz".into();
        assert_eq!(verify_v2(&garbage, target), Err(VerifyError::BadSignature));
        assert!(!body_matches("zz", body));
    }

    #[test]
    fn v2_refuses_version_1_and_missing_parts() {
        let v1 = sample().sign(b"s3cret", 1000);
        let as_v1 = Presented {
            principal: Some(&v1.principal),
            timestamp: Some(&v1.timestamp),
            signature: Some(&v1.signature),
            version: None,
            body_sha256: None,
        };
        assert_eq!(
            Principal::verify_request(b"s3cret", as_v1, GET_TABLES, 1000),
            Err(VerifyError::UnsupportedVersion)
        );
        // Claiming version 2 does not make a version 1 signature verify.
        let claimed = Presented {
            version: Some(SIGNATURE_VERSION),
            body_sha256: Some(EMPTY_BODY_SHA256),
            ..as_v1
        };
        assert_eq!(
            Principal::verify_request(b"s3cret", claimed, GET_TABLES, 1000),
            Err(VerifyError::BadSignature)
        );
        assert_eq!(
            Principal::verify_request(b"s3cret", Presented::default(), GET_TABLES, 1000),
            Err(VerifyError::Missing)
        );
        let h = sample().sign_request(b"s3cret", 1000, GET_TABLES, b"");
        let no_digest = Presented {
            body_sha256: None,
            ..presented(&h)
        };
        assert_eq!(
            Principal::verify_request(b"s3cret", no_digest, GET_TABLES, 1000),
            Err(VerifyError::Missing)
        );
        assert_eq!(
            Principal::verify_request(b"other", presented(&h), GET_TABLES, 1000),
            Err(VerifyError::BadSignature)
        );
        assert_eq!(
            Principal::verify_request(
                b"s3cret",
                presented(&h),
                GET_TABLES,
                1000 + MAX_SKEW_SECS + 1
            ),
            Err(VerifyError::Expired)
        );
    }

    /// A router streaming a body unread signs [`STREAMED_BODY`] as its
    /// digest: accepted on the upload and import routes (a query string
    /// too), a signature failure on every other route.
    #[test]
    fn streamed_body_verifies_on_the_two_streamed_routes_only() {
        let streamed = |method: &'static str, path_and_query: &'static str| {
            let target = Target {
                method,
                path_and_query,
            };
            let encoded = sample().encode();
            let signed = SignedRequest {
                signature: sign_encoded(b"s3cret", 1000, target, STREAMED_BODY, &encoded),
                principal: encoded,
                timestamp: "1000".into(),
                body_sha256: STREAMED_BODY.into(),
            };
            verify_v2(&signed, target)
        };
        for (method, target) in [
            ("POST", "/api/tables/tbl_Ab3dZ1234567/attachments"),
            ("POST", "/api/databases/db_Ab3dZ1234567/import"),
            ("POST", "/api/databases/db_Ab3dZ1234567/import?x=1"),
        ] {
            assert_eq!(streamed(method, target), Ok(sample()), "{method} {target}");
        }
        for (method, target) in [
            ("POST", "/api/tables/tbl_Ab3dZ1234567/records"),
            ("PATCH", "/api/tables/tbl_Ab3dZ1234567/records"),
            ("PUT", "/api/tables/tbl_Ab3dZ1234567/attachments"),
            ("GET", "/api/databases/db_Ab3dZ1234567/import"),
            ("POST", "/api/databases/db_Ab3dZ1234567/tables"),
            ("POST", "/api/databases"),
            ("POST", "/api/tables/tbl_Ab3dZ1234567/attachments/x"),
            ("GET", "/api/files/att_Ab3dZ1234567/original"),
        ] {
            assert_eq!(
                streamed(method, target),
                Err(VerifyError::BadSignature),
                "{method} {target}"
            );
        }
        // The marker names no digest: no body ever matches it.
        assert!(!body_matches(STREAMED_BODY, STREAMED_BODY.as_bytes()));
    }

    #[test]
    fn sign_encoded_matches_sign_request() {
        let h = sample().sign_request(b"s3cret", 1000, GET_TABLES, b"{}");
        let sig = sign_encoded(
            b"s3cret",
            1000,
            GET_TABLES,
            &body_sha256(b"{}"),
            &sample().encode(),
        );
        assert_eq!(sig, h.signature);
    }
}
