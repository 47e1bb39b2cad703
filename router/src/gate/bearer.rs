//! `Authorization: Bearer key_XXXXXXXXXXXX.<secret>` parsing, and the client
//! address the rate shield charges.

use std::net::IpAddr;

use cluster_protocol::ids::{is_valid, Kind};

/// A syntactically valid bearer credential.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bearer<'a> {
    pub key_id: &'a str,
    pub secret: &'a str,
}

/// Parses an Authorization header value; `None` for anything malformed.
pub fn parse(header: &[u8]) -> Option<Bearer<'_>> {
    let value = std::str::from_utf8(header).ok()?;
    let (scheme, token) = value.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    let (key_id, secret) = token.trim().split_once('.')?;
    if !is_valid(Kind::Key, key_id) || secret.is_empty() || secret.len() > 256 {
        return None;
    }
    if !secret.bytes().all(|b| b.is_ascii_graphic()) {
        return None;
    }
    Some(Bearer { key_id, secret })
}

/// The address the shield charges: the LAST entry of `x-forwarded-for` when
/// present and non-empty, else the peer IP.
pub fn client_address(forwarded_for: Option<&[u8]>, peer: IpAddr) -> String {
    forwarded_for
        .and_then(|v| std::str::from_utf8(v).ok())
        .and_then(|v| v.rsplit(',').next())
        .map(str::trim)
        .filter(|last| !last.is_empty() && last.len() <= 64)
        .map(String::from)
        .unwrap_or_else(|| ip_string(peer))
}

/// `ip.to_string()`, without the formatting machinery for IPv4 (every
/// request without `x-forwarded-for` needs it).
fn ip_string(ip: IpAddr) -> String {
    let IpAddr::V4(v4) = ip else {
        return ip.to_string();
    };
    let mut out = String::with_capacity(15);
    for (i, octet) in v4.octets().into_iter().enumerate() {
        if i > 0 {
            out.push('.');
        }
        if octet >= 100 {
            out.push(char::from(b'0' + octet / 100));
        }
        if octet >= 10 {
            out.push(char::from(b'0' + octet / 10 % 10));
        }
        out.push(char::from(b'0' + octet % 10));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_well_formed_bearer() {
        let b = parse(b"Bearer key_abcdefghijkl.s3cr3tvalue").unwrap();
        assert_eq!(
            b,
            Bearer {
                key_id: "key_abcdefghijkl",
                secret: "s3cr3tvalue"
            }
        );
        assert!(parse(b"bearer key_abcdefghijkl.x").is_some());
    }

    #[test]
    fn refuses_malformed_bearers() {
        for bad in [
            &b""[..],
            b"Bearer",
            b"Bearer ",
            b"Basic key_abcdefghijkl.secret",
            b"Bearer key_abcdefghijkl",
            b"Bearer key_abcdefghijkl.",
            b"Bearer key_short.secret",
            b"Bearer usr_abcdefghijkl.secret",
            b"Bearer key_abcdefghijk!.secret",
            b"Bearer key_abcdefghijkl.sec ret",
            b"Bearer \xff\xfe",
        ] {
            assert_eq!(parse(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn address_is_the_last_forwarded_entry() {
        let peer: IpAddr = "10.0.0.1".parse().unwrap();
        assert_eq!(client_address(None, peer), "10.0.0.1");
        assert_eq!(client_address(Some(b"1.2.3.4"), peer), "1.2.3.4");
        assert_eq!(client_address(Some(b"1.2.3.4, 5.6.7.8"), peer), "5.6.7.8");
        assert_eq!(client_address(Some(b"1.2.3.4,5.6.7.8 "), peer), "5.6.7.8");
        assert_eq!(client_address(Some(b"1.2.3.4, "), peer), "10.0.0.1");
        assert_eq!(client_address(Some(b""), peer), "10.0.0.1");
        for ip in [
            "0.0.0.0",
            "127.0.0.1",
            "255.255.255.255",
            "10.100.9.99",
            "::1",
        ] {
            assert_eq!(client_address(None, ip.parse().unwrap()), ip);
        }
    }
}
