//! Attaching a signed principal to a forwarded request.
//!
//! The signature (version 2 of `cluster_protocol::principal`) binds the
//! principal and the current unix second to the request's method, path and
//! query and the SHA-256 of its body, so it is computed per request: one
//! HMAC over a few hundred bytes, plus the body's digest (a constant for an
//! empty body). What is kept is the principal's encoding (JSON and base64),
//! by key id, so that is done once per key and database, not per request.

use std::collections::HashMap;
use std::sync::Mutex;

use cluster_protocol::principal::{
    body_sha256, sign_encoded, Principal, Target, HEADER_BODY_SHA256, HEADER_PRINCIPAL,
    HEADER_SIGNATURE, HEADER_SIGNATURE_VERSION, HEADER_TIMESTAMP, SIGNATURE_VERSION, STREAMED_BODY,
};
use http::{HeaderMap, HeaderName, HeaderValue, Method, Uri};

/// Encoded principals kept at most; beyond it the cache starts over.
const MAX_CACHED: usize = 10_000;

struct Encoded {
    principal: Principal,
    value: HeaderValue,
}

pub struct Signer {
    secret: Vec<u8>,
    /// By key id: the principals of that key encoded so far.
    encoded: Mutex<HashMap<String, Vec<Encoded>>>,
}

/// The request a signature is bound to, as it is sent to the shard.
#[derive(Clone, Copy)]
pub struct Request<'a> {
    pub method: &'a Method,
    /// Only its path and query count (the shard receives origin form).
    pub uri: &'a Uri,
    pub body: &'a [u8],
}

/// The request target the shard receives for `uri` (see `Forwarder::send`).
pub fn origin_form(uri: &Uri) -> &str {
    uri.path_and_query().map_or("/", |p| p.as_str())
}

impl Signer {
    pub fn new(secret: &[u8]) -> Self {
        Self {
            secret: secret.to_vec(),
            encoded: Mutex::default(),
        }
    }

    /// Signs `principal` for `request` now and sets the signature headers
    /// (replacing any present).
    pub fn attach(&self, headers: &mut HeaderMap, principal: &Principal, request: Request<'_>) {
        if principal.new_database.is_some() {
            if let Ok(value) = HeaderValue::try_from(principal.encode()) {
                self.set(headers, value, request);
            }
        } else {
            self.attach_with(
                headers,
                &principal.key_id,
                |p| p == principal,
                || principal.clone(),
                request,
            );
        }
    }

    /// Like [`Signer::attach`] for the principal of key `key_id` that
    /// `matches` recognises: `make` builds it only when its encoding is not
    /// kept yet. It must not carry `new_database`.
    pub fn attach_with(
        &self,
        headers: &mut HeaderMap,
        key_id: &str,
        matches: impl Fn(&Principal) -> bool,
        make: impl FnOnce() -> Principal,
        request: Request<'_>,
    ) {
        if let Some(value) = self.encoded(key_id, matches, make) {
            self.set(headers, value, request);
        }
    }

    /// Like [`Signer::attach_with`] for a body the router streams to the
    /// shard unread (`Body::Streamed` in `cluster_protocol::routes`): the
    /// signed digest is [`STREAMED_BODY`], which a shard accepts on those
    /// routes only.
    pub fn attach_streamed(
        &self,
        headers: &mut HeaderMap,
        key_id: &str,
        matches: impl Fn(&Principal) -> bool,
        make: impl FnOnce() -> Principal,
        method: &Method,
        uri: &Uri,
    ) {
        if let Some(value) = self.encoded(key_id, matches, make) {
            self.set_digest(headers, value, method, uri, STREAMED_BODY);
        }
    }

    /// The kept encoding of the principal `matches` recognises, else
    /// `make`'s, encoded and kept.
    fn encoded(
        &self,
        key_id: &str,
        matches: impl Fn(&Principal) -> bool,
        make: impl FnOnce() -> Principal,
    ) -> Option<HeaderValue> {
        let cached = {
            let encoded = self.encoded.lock().unwrap_or_else(|p| p.into_inner());
            encoded.get(key_id).and_then(|list| {
                list.iter()
                    .find(|e| matches(&e.principal))
                    .map(|e| e.value.clone())
            })
        };
        cached.or_else(|| self.encode_and_keep(make()))
    }

    fn encode_and_keep(&self, principal: Principal) -> Option<HeaderValue> {
        debug_assert!(principal.new_database.is_none());
        let value = HeaderValue::try_from(principal.encode()).ok()?;
        let mut encoded = self.encoded.lock().unwrap_or_else(|p| p.into_inner());
        if encoded.len() >= MAX_CACHED {
            encoded.clear();
        }
        let list = encoded.entry(principal.key_id.clone()).or_default();
        // A key's principals differ by database, role and epoch; keep the
        // most recent few (an epoch or role change leaves an old one behind).
        if list.len() >= 64 {
            list.remove(0);
        }
        list.push(Encoded {
            principal,
            value: value.clone(),
        });
        Some(value)
    }

    fn set(&self, headers: &mut HeaderMap, principal: HeaderValue, request: Request<'_>) {
        let digest = body_sha256(request.body);
        self.set_digest(headers, principal, request.method, request.uri, &digest);
    }

    fn set_digest(
        &self,
        headers: &mut HeaderMap,
        principal: HeaderValue,
        method: &Method,
        uri: &Uri,
        digest: &str,
    ) {
        let Ok(encoded) = principal.to_str() else {
            return;
        };
        let now = chrono::Utc::now().timestamp();
        let target = Target {
            method: method.as_str(),
            path_and_query: origin_form(uri),
        };
        let signature = sign_encoded(&self.secret, now, target, digest, encoded);
        // Hex, digits and the streamed marker: always valid header values.
        let (Ok(signature), Ok(digest)) = (
            HeaderValue::try_from(signature),
            HeaderValue::try_from(digest),
        ) else {
            return;
        };
        headers.insert(PRINCIPAL, principal);
        headers.insert(TIMESTAMP, HeaderValue::from(now));
        headers.insert(SIGNATURE, signature);
        headers.insert(VERSION, HeaderValue::from_static(SIGNATURE_VERSION));
        headers.insert(BODY_SHA256, digest);
    }
}

const PRINCIPAL: HeaderName = HeaderName::from_static(HEADER_PRINCIPAL);
const TIMESTAMP: HeaderName = HeaderName::from_static(HEADER_TIMESTAMP);
const SIGNATURE: HeaderName = HeaderName::from_static(HEADER_SIGNATURE);
const VERSION: HeaderName = HeaderName::from_static(HEADER_SIGNATURE_VERSION);
const BODY_SHA256: HeaderName = HeaderName::from_static(HEADER_BODY_SHA256);

#[cfg(test)]
mod tests {
    use super::*;
    use cluster_protocol::control::Access;
    use cluster_protocol::principal::{body_matches, Presented, VerifyError, EMPTY_BODY_SHA256};

    fn principal(database: &str) -> Principal {
        Principal {
            user_id: "usr_aaaaaaaaaaaa".into(),
            key_id: "key_aaaaaaaaaaaa".into(),
            access: Access::ReadWrite,
            narrowed: false,
            database_id: Some(database.into()),
            role: None,
            support: false,
            epoch: Some(1),
            new_database: None,
            share: false,
        }
    }

    fn header<'a>(h: &'a HeaderMap, name: &str) -> Option<&'a str> {
        h.get(name).and_then(|v| v.to_str().ok())
    }

    fn verify(h: &HeaderMap, method: &str, target: &str) -> Result<Principal, VerifyError> {
        let presented = Presented {
            principal: header(h, HEADER_PRINCIPAL),
            timestamp: header(h, HEADER_TIMESTAMP),
            signature: header(h, HEADER_SIGNATURE),
            version: header(h, HEADER_SIGNATURE_VERSION),
            body_sha256: header(h, HEADER_BODY_SHA256),
        };
        let target = Target {
            method,
            path_and_query: target,
        };
        Principal::verify_request(b"secret", presented, target, chrono::Utc::now().timestamp())
    }

    #[test]
    fn cached_encodings_verify_and_follow_the_principal() {
        let signer = Signer::new(b"secret");
        let uri: Uri = "/api/tables/tbl_aaaaa1234567/records?page_size=5"
            .parse()
            .unwrap();
        for database in ["db_aaaaa1234567", "db_bbbbb1234567", "db_aaaaa1234567"] {
            let p = principal(database);
            let mut h = HeaderMap::new();
            let request = Request {
                method: &Method::GET,
                uri: &uri,
                body: b"",
            };
            signer.attach(&mut h, &p, request);
            let target = "/api/tables/tbl_aaaaa1234567/records?page_size=5";
            assert_eq!(verify(&h, "GET", target).expect("verifies"), p);
            assert_eq!(header(&h, HEADER_BODY_SHA256), Some(EMPTY_BODY_SHA256));
            assert_eq!(verify(&h, "DELETE", target), Err(VerifyError::BadSignature));
            let other = "/api/tables/tbl_aaaaa1234567/records?page_size=6";
            assert_eq!(verify(&h, "GET", other), Err(VerifyError::BadSignature));
        }
    }

    #[test]
    fn body_digest_is_signed() {
        let signer = Signer::new(b"secret");
        let uri: Uri = "http://router.example/api/tables/tbl_aaaaa1234567/records"
            .parse()
            .unwrap();
        let body = br#"{"records":[]}"#;
        let mut h = HeaderMap::new();
        let request = Request {
            method: &Method::POST,
            uri: &uri,
            body,
        };
        signer.attach(&mut h, &principal("db_aaaaa1234567"), request);
        // Absolute form from a client: the shard receives (and checks) origin form.
        let target = "/api/tables/tbl_aaaaa1234567/records";
        assert!(verify(&h, "POST", target).is_ok());
        let digest = header(&h, HEADER_BODY_SHA256).unwrap();
        assert!(body_matches(digest, body));
        assert!(!body_matches(digest, b"{}"));
    }

    #[test]
    fn a_streamed_body_is_signed_with_the_marker_on_its_routes_only() {
        let signer = Signer::new(b"secret");
        let p = principal("db_aaaaa1234567");
        let sign = |target: &str| {
            let uri: Uri = target.parse().unwrap();
            let mut h = HeaderMap::new();
            signer.attach_streamed(
                &mut h,
                &p.key_id,
                |q| q == &p,
                || p.clone(),
                &Method::POST,
                &uri,
            );
            h
        };
        let upload = "/api/tables/tbl_aaaaa1234567/attachments";
        let h = sign(upload);
        assert_eq!(header(&h, HEADER_BODY_SHA256), Some(STREAMED_BODY));
        assert_eq!(verify(&h, "POST", upload).expect("verifies"), p);
        let records = "/api/tables/tbl_aaaaa1234567/records";
        assert_eq!(
            verify(&sign(records), "POST", records),
            Err(VerifyError::BadSignature)
        );
    }
}
