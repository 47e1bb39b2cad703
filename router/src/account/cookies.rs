//! The pages' two cookies: the session (`__Host-session`) and the
//! signed-out forms' double-submit token (`__Host-csrf`). With
//! `COOKIE_SECURE=1` (the default) they are `Secure` and `__Host-`
//! prefixed (browsers then tie them to this exact host, over HTTPS or on
//! localhost); with `COOKIE_SECURE=0` neither (`session`, `csrf`).

use http::HeaderValue;

/// Lifetime of the signed-out forms' token cookie.
const CSRF_MAX_AGE_SECS: u64 = 3600;

#[derive(Debug, Clone, Copy)]
pub struct Cookies {
    pub secure: bool,
}

impl Cookies {
    pub fn session_name(self) -> &'static str {
        if self.secure {
            "__Host-session"
        } else {
            "session"
        }
    }

    pub fn csrf_name(self) -> &'static str {
        if self.secure {
            "__Host-csrf"
        } else {
            "csrf"
        }
    }

    fn attributes(self) -> &'static str {
        if self.secure {
            "; Path=/; HttpOnly; SameSite=Lax; Secure"
        } else {
            "; Path=/; HttpOnly; SameSite=Lax"
        }
    }

    /// `Set-Cookie` of a new session (a browser-session cookie: the
    /// control plane's expiry and idle timeout end it server-side).
    pub fn set_session(self, token: &str) -> Option<HeaderValue> {
        let v = format!("{}={token}{}", self.session_name(), self.attributes());
        HeaderValue::try_from(v).ok()
    }

    pub fn clear_session(self) -> HeaderValue {
        let v = format!("{}=; Max-Age=0{}", self.session_name(), self.attributes());
        HeaderValue::try_from(v).unwrap_or(HeaderValue::from_static("session=; Max-Age=0"))
    }

    pub fn set_csrf(self, token: &str) -> Option<HeaderValue> {
        let v = format!(
            "{}={token}; Max-Age={CSRF_MAX_AGE_SECS}{}",
            self.csrf_name(),
            self.attributes()
        );
        HeaderValue::try_from(v).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secure_cookies_are_host_prefixed() {
        let c = Cookies { secure: true };
        assert_eq!(
            c.set_session("t").unwrap(),
            "__Host-session=t; Path=/; HttpOnly; SameSite=Lax; Secure"
        );
        assert_eq!(
            c.clear_session(),
            "__Host-session=; Max-Age=0; Path=/; HttpOnly; SameSite=Lax; Secure"
        );
        let plain = Cookies { secure: false };
        assert_eq!(
            plain.set_csrf("c").unwrap(),
            "csrf=c; Max-Age=3600; Path=/; HttpOnly; SameSite=Lax"
        );
        // No Domain attribute, ever.
        assert!(!c
            .set_csrf("c")
            .unwrap()
            .to_str()
            .unwrap()
            .contains("Domain"));
    }
}
