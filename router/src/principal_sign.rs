//! Attaching a signed principal to a forwarded request.

use cluster_protocol::principal::{
    Principal, HEADER_PRINCIPAL, HEADER_SIGNATURE, HEADER_TIMESTAMP,
};
use http::{HeaderMap, HeaderName, HeaderValue};

/// Signs `principal` now and sets its three headers (replacing any present).
pub fn attach(headers: &mut HeaderMap, principal: &Principal, secret: &[u8]) {
    let now = chrono::Utc::now().timestamp();
    let signed = principal.sign(secret, now);
    for (name, value) in [
        (HEADER_PRINCIPAL, signed.principal),
        (HEADER_TIMESTAMP, signed.timestamp),
        (HEADER_SIGNATURE, signed.signature),
    ] {
        if let Ok(v) = HeaderValue::try_from(value) {
            headers.insert(HeaderName::from_static(name), v);
        }
    }
}
