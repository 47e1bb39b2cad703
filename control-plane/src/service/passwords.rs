//! Passwords of the browser sign-in: the policy (length, a short list of
//! common passwords) and argon2id hashing and verification, the same
//! hashing as API keys' secrets (`keys`), off the async threads.

use anyhow::Context;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::Argon2;
use cluster_protocol::control::accounts::{MAX_PASSWORD_BYTES, MIN_PASSWORD_CHARS};
use rand::RngCore;

/// Common passwords of at least [`MIN_PASSWORD_CHARS`] characters (shorter
/// ones are refused by length), compared case-insensitively.
const COMMON: &[&str] = &[
    "password1234",
    "password12345",
    "password123456",
    "passwordpassword",
    "password123!",
    "123456789012",
    "1234567890123",
    "12345678901234",
    "123123123123",
    "111111111111",
    "000000000000",
    "qwertyuiop12",
    "qwertyuiopasdf",
    "qwerty123456",
    "1qaz2wsx3edc",
    "1q2w3e4r5t6y",
    "abcdefghijkl",
    "abcd1234abcd1234",
    "iloveyou1234",
    "letmein12345",
    "welcome12345",
    "administrator",
    "changeme1234",
    "trustno1trustno1",
    "monkey123456",
    "football1234",
    "baseball1234",
    "superman1234",
    "sunshine1234",
    "princess1234",
];

/// Why a password is refused, as the page shows it; `None`: acceptable.
pub fn refusal(password: &str) -> Option<String> {
    if password.chars().count() < MIN_PASSWORD_CHARS {
        return Some(format!(
            "Password must be at least {MIN_PASSWORD_CHARS} characters."
        ));
    }
    if password.len() > MAX_PASSWORD_BYTES {
        return Some(format!(
            "Password must be at most {MAX_PASSWORD_BYTES} bytes."
        ));
    }
    let lower = password.to_lowercase();
    let mut chars = lower.chars();
    let first = chars.next();
    let one_char = chars.all(|c| Some(c) == first);
    if one_char || COMMON.contains(&lower.as_str()) {
        return Some("That password is too common; choose another.".to_string());
    }
    None
}

/// argon2id (default parameters) PHC string of `password` (or an API
/// key's secret), off the async threads.
pub async fn hash(password: String) -> anyhow::Result<String> {
    tokio::task::spawn_blocking(move || {
        let mut salt = [0u8; 16];
        rand::thread_rng().fill_bytes(&mut salt);
        let salt =
            SaltString::encode_b64(&salt).map_err(|e| anyhow::anyhow!("encode salt: {e}"))?;
        Argon2::default()
            .hash_password(password.as_bytes(), &salt)
            .map(|h| h.to_string())
            .map_err(|e| anyhow::anyhow!("hash password: {e}"))
    })
    .await
    .context("join hashing task")?
}

/// A hash of no one's password (made once, of random bytes), verified
/// against when the email is unknown or has no password, so every failed
/// sign-in costs one verification.
fn decoy() -> anyhow::Result<&'static str> {
    static DECOY: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    if let Some(d) = DECOY.get() {
        return Ok(d);
    }
    let mut secret = [0u8; 32];
    rand::thread_rng().fill_bytes(&mut secret);
    let mut salt = [0u8; 16];
    rand::thread_rng().fill_bytes(&mut salt);
    let salt = SaltString::encode_b64(&salt).map_err(|e| anyhow::anyhow!("encode salt: {e}"))?;
    let made = Argon2::default()
        .hash_password(&secret, &salt)
        .map(|h| h.to_string())
        .map_err(|e| anyhow::anyhow!("hash decoy: {e}"))?;
    Ok(DECOY.get_or_init(|| made))
}

/// Whether `password` matches `stored` (a PHC string; `None`: verified
/// against the decoy and refused).
pub async fn verify(password: String, stored: Option<String>) -> anyhow::Result<bool> {
    tokio::task::spawn_blocking(move || {
        let real = stored.is_some();
        let phc = match stored {
            Some(s) => s,
            None => decoy()?.to_string(),
        };
        let Ok(parsed) = PasswordHash::new(&phc) else {
            anyhow::bail!("unreadable password hash in catalog");
        };
        let ok = Argon2::default()
            .verify_password(password.as_bytes(), &parsed)
            .is_ok();
        Ok(real && ok)
    })
    .await
    .context("join verification task")?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_common_and_repeated_passwords_are_refused() {
        assert!(refusal("short").unwrap().contains("at least 12"));
        assert!(refusal("elevenchars").is_some());
        assert!(refusal("Password1234").unwrap().contains("too common"));
        assert!(refusal("aaaaaaaaaaaaaaaa").unwrap().contains("too common"));
        assert!(refusal(&"x".repeat(2000)).is_some());
        assert_eq!(refusal("correct horse battery"), None);
        // Twelve characters, not twelve bytes.
        assert!(refusal("ééééééé").is_some());
    }

    #[tokio::test]
    async fn hashes_verify_and_the_decoy_never_does() {
        let h = hash("correct horse battery".into()).await.unwrap();
        assert!(h.starts_with("$argon2id$"));
        assert!(verify("correct horse battery".into(), Some(h.clone()))
            .await
            .unwrap());
        assert!(!verify("wrong horse battery".into(), Some(h)).await.unwrap());
        assert!(!verify("anything at all".into(), None).await.unwrap());
    }
}
