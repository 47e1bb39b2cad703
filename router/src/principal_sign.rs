//! Attaching a signed principal to a forwarded request.
//!
//! A signature covers the principal and the current unix second, so every
//! request of one caller to one database within the same second carries the
//! same three header values. [`Signer`] keeps them and signs again only when
//! the second or the principal changes (the JSON, base64 and HMAC are then
//! computed once a second per key and database instead of once a request).

use std::collections::HashMap;
use std::sync::Mutex;

use cluster_protocol::principal::{
    Principal, HEADER_PRINCIPAL, HEADER_SIGNATURE, HEADER_TIMESTAMP,
};
use http::{HeaderMap, HeaderName, HeaderValue};

/// Cached signatures kept at most; beyond it the cache starts over.
const MAX_CACHED: usize = 10_000;

struct Signed {
    principal: Principal,
    second: i64,
    values: Option<[HeaderValue; 3]>,
}

pub struct Signer {
    secret: Vec<u8>,
    /// By key id: the principals signed for it in the current second.
    recent: Mutex<HashMap<String, Vec<Signed>>>,
}

impl Signer {
    pub fn new(secret: &[u8]) -> Self {
        Self {
            secret: secret.to_vec(),
            recent: Mutex::default(),
        }
    }

    /// Signs `principal` now and sets its three headers (replacing any present).
    pub fn attach(&self, headers: &mut HeaderMap, principal: &Principal) {
        if principal.new_database.is_some() {
            let second = chrono::Utc::now().timestamp();
            set(headers, sign(principal, &self.secret, second));
        } else {
            self.attach_with(
                headers,
                &principal.key_id,
                |p| p == principal,
                || principal.clone(),
            );
        }
    }

    /// Like [`Signer::attach`] for the principal of key `key_id` that
    /// `matches` recognises: `make` builds it only when no signature of it
    /// is kept for this second. It must not carry `new_database`.
    pub fn attach_with(
        &self,
        headers: &mut HeaderMap,
        key_id: &str,
        matches: impl Fn(&Principal) -> bool,
        make: impl FnOnce() -> Principal,
    ) {
        let second = chrono::Utc::now().timestamp();
        let cached = {
            let recent = self.recent.lock().unwrap_or_else(|p| p.into_inner());
            recent.get(key_id).and_then(|list| {
                list.iter()
                    .find(|s| s.second == second && matches(&s.principal))
                    .map(|s| s.values.clone())
            })
        };
        let values = match cached {
            Some(values) => values,
            None => self.sign_and_keep(make(), second),
        };
        set(headers, values);
    }

    fn sign_and_keep(&self, principal: Principal, second: i64) -> Option<[HeaderValue; 3]> {
        debug_assert!(principal.new_database.is_none());
        let values = sign(&principal, &self.secret, second);
        let mut recent = self.recent.lock().unwrap_or_else(|p| p.into_inner());
        if recent.len() >= MAX_CACHED {
            recent.clear();
        }
        let list = recent.entry(principal.key_id.clone()).or_default();
        list.retain(|s| s.second == second);
        list.push(Signed {
            principal,
            second,
            values: values.clone(),
        });
        values
    }
}

const NAMES: [HeaderName; 3] = [
    HeaderName::from_static(HEADER_PRINCIPAL),
    HeaderName::from_static(HEADER_TIMESTAMP),
    HeaderName::from_static(HEADER_SIGNATURE),
];

fn set(headers: &mut HeaderMap, values: Option<[HeaderValue; 3]>) {
    let Some(values) = values else { return };
    for (name, value) in NAMES.into_iter().zip(values) {
        headers.insert(name, value);
    }
}

fn sign(principal: &Principal, secret: &[u8], second: i64) -> Option<[HeaderValue; 3]> {
    let signed = principal.sign(secret, second);
    Some([
        HeaderValue::try_from(signed.principal).ok()?,
        HeaderValue::try_from(signed.timestamp).ok()?,
        HeaderValue::try_from(signed.signature).ok()?,
    ])
}

#[cfg(test)]
mod tests {
    use super::*;
    use cluster_protocol::control::Access;

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
        }
    }

    fn header(h: &HeaderMap, name: &str) -> Option<String> {
        h.get(name).and_then(|v| v.to_str().ok()).map(String::from)
    }

    #[test]
    fn cached_headers_verify_and_follow_the_principal() {
        let signer = Signer::new(b"secret");
        for database in ["db_aaaaa1234567", "db_bbbbb1234567", "db_aaaaa1234567"] {
            let p = principal(database);
            let mut h = HeaderMap::new();
            signer.attach(&mut h, &p);
            let verified = Principal::verify(
                b"secret",
                header(&h, HEADER_PRINCIPAL).as_deref(),
                header(&h, HEADER_TIMESTAMP).as_deref(),
                header(&h, HEADER_SIGNATURE).as_deref(),
                chrono::Utc::now().timestamp(),
            )
            .expect("verifies");
            assert_eq!(verified, p);
        }
    }
}
