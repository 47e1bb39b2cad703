//! The signature and the four headers of a delivery (part C, "Request
//! headers and signature").
//!
//! `X-Service-Signature: sha256=<hex>` is the lowercase hex HMAC-SHA256,
//! keyed with the webhook's secret as text (its 48 hex characters,
//! ARCHITECTURE.md), of `<X-Service-Timestamp>.<raw body>`. The timestamp
//! is regenerated on every attempt, so every attempt carries a new
//! signature over the same body.

use hmac::{Hmac, Mac};
use sha2::Sha256;

pub const CONTENT_TYPE: &str = "application/json";
pub const DELIVERY_HEADER: &str = "x-service-delivery";
pub const TIMESTAMP_HEADER: &str = "x-service-timestamp";
pub const SIGNATURE_HEADER: &str = "x-service-signature";

/// `sha256=<lowercase hex HMAC-SHA256(secret, "<timestamp>.<body>")>`.
pub fn signature(secret: &str, timestamp: i64, body: &str) -> String {
    // HMAC takes a key of any length.
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes())
        .unwrap_or_else(|_| unreachable!("HMAC accepts every key length"));
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body.as_bytes());
    format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
}

/// The headers of one attempt, besides `Content-Type`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signed {
    /// `<delivery_id>.<attempt>`, attempts counted from 1.
    pub delivery: String,
    /// Unix seconds.
    pub timestamp: String,
    pub signature: String,
}

impl Signed {
    pub fn new(secret: &str, delivery_id: &str, attempt: i32, timestamp: i64, body: &str) -> Self {
        Signed {
            delivery: format!("{delivery_id}.{attempt}"),
            timestamp: timestamp.to_string(),
            signature: signature(secret, timestamp, body),
        }
    }

    /// Name and value of each header, `Content-Type` first.
    pub fn headers(&self) -> [(&'static str, &str); 4] {
        [
            ("content-type", CONTENT_TYPE),
            (DELIVERY_HEADER, &self.delivery),
            (TIMESTAMP_HEADER, &self.timestamp),
            (SIGNATURE_HEADER, &self.signature),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &str = "0123456789abcdef0123456789abcdef0123456789abcdef";
    const BODY: &str =
        "{\"delivery_id\":\"dlv_Ab3dZ1234567\",\"event\":\"webhook.test\",\"name\":\"Café ☕\"}";

    /// Computed independently:
    /// ```text
    /// python3 -c 'import hmac,hashlib
    /// s="0123456789abcdef0123456789abcdef0123456789abcdef"
    /// b="{\"delivery_id\":\"dlv_Ab3dZ1234567\",\"event\":\"webhook.test\",\"name\":\"Café ☕\"}"
    /// print(hmac.new(s.encode(),("1767225600."+b).encode(),hashlib.sha256).hexdigest())'
    /// ```
    #[test]
    fn signature_matches_an_independent_hmac() {
        assert_eq!(
            signature(SECRET, 1_767_225_600, BODY),
            "sha256=0c3931122f0035a1b8ff3b3e008ca40d16e51fd3a618a7be44d9f61391fa4a4e"
        );
    }

    #[test]
    fn timestamp_body_and_secret_all_change_the_signature() {
        let base = signature(SECRET, 1_767_225_600, BODY);
        assert_ne!(signature(SECRET, 1_767_225_601, BODY), base);
        assert_ne!(
            signature(SECRET, 1_767_225_600, &BODY.replace('☕', "x")),
            base
        );
        assert_ne!(
            signature(&SECRET.replace('0', "1"), 1_767_225_600, BODY),
            base
        );
    }

    #[test]
    fn headers_carry_delivery_attempt_and_timestamp() {
        let signed = Signed::new(SECRET, "dlv_Ab3dZ1234567", 3, 1_767_225_600, BODY);
        let headers = signed.headers();
        assert_eq!(headers[0], ("content-type", "application/json"));
        assert_eq!(headers[1], ("x-service-delivery", "dlv_Ab3dZ1234567.3"));
        assert_eq!(headers[2], ("x-service-timestamp", "1767225600"));
        assert_eq!(
            headers[3].1,
            "sha256=0c3931122f0035a1b8ff3b3e008ca40d16e51fd3a618a7be44d9f61391fa4a4e"
        );
    }
}
