//! Secrets (app secrets, session tokens) and URLs that may carry one: what may never appear
//! in logs, errors, panics, Redis or the ledger. Its own module so the configuration and the
//! platform adapters both use it without depending on each other for it.

use std::fmt;

/// A secret value (app secret, session token). Its `Debug` and `Display` never show it.
#[derive(Clone, Default)]
pub struct Secret(String);

impl Secret {
    /// Wrap a secret value.
    pub fn new(value: impl Into<String>) -> Self {
        Secret(value.into())
    }
    /// The raw value, for signing and for the request only.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// A fingerprint that tells two values apart without showing either: the first 8 bytes
    /// of HMAC-SHA256 keyed with `key` (the app secret), in hex. Without the key it cannot
    /// be checked against a guess, so it may go where the secret may not (the ledger).
    pub fn mark(&self, key: &Secret) -> String {
        hex::encode(&key.hmac_sha256(self.0.as_bytes())[..8])
    }

    /// Whether `tag` is the first bytes of HMAC-SHA256 of `data` keyed with this secret,
    /// compared in constant time.
    pub fn verify_hmac_sha256_prefix(&self, data: &[u8], tag: &[u8]) -> bool {
        use hmac::{Hmac, Mac};
        let Ok(mut mac) = Hmac::<sha2::Sha256>::new_from_slice(self.0.as_bytes()) else {
            return false;
        };
        mac.update(data);
        mac.verify_truncated_left(tag).is_ok()
    }

    /// HMAC-SHA256 of `data` keyed with this secret (a completion hook's signature, a
    /// [`Secret::mark`]).
    pub fn hmac_sha256(&self, data: &[u8]) -> [u8; 32] {
        use hmac::{Hmac, Mac};
        // HMAC accepts keys of any length; new_from_slice cannot fail for HMAC.
        let mut mac = Hmac::<sha2::Sha256>::new_from_slice(self.0.as_bytes())
            .expect("HMAC accepts any key length");
        mac.update(data);
        mac.finalize().into_bytes().into()
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(***)")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

/// The URL with the password (if any) replaced, for messages: `scheme://user:***@host/path`.
pub fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    // The user info runs to the last `@`: a password written without percent-encoding may
    // hold `/`, `?`, `#` or `@` itself, and must not leak through a split at one of them.
    let (userinfo, rest) = match rest.rfind('@') {
        Some(i) => (Some(&rest[..i]), &rest[i + 1..]),
        None => (None, rest),
    };
    let (host, path) = match rest.find(['/', '?']) {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    let authority = match userinfo {
        // Only a password is hidden: a user name alone stays readable.
        Some(userinfo) if userinfo.contains(':') => {
            let user = userinfo.split(':').next().unwrap_or("");
            format!("{user}:***@{host}")
        }
        Some(user) => format!("{user}@{host}"),
        None => host.to_string(),
    };
    hide_password_params(&format!("{scheme}://{authority}{path}"))
}

/// Every `password=...` (to the next `&`) replaced: a password may also travel as a query
/// parameter (PostgreSQL), and an `@` inside a query can make the split above take part of
/// the query for the host.
fn hide_password_params(s: &str) -> String {
    let lower = s.to_ascii_lowercase();
    let mut out = String::with_capacity(s.len());
    let mut at = 0;
    while let Some(i) = lower[at..].find("password=") {
        let value = at + i + "password=".len();
        out.push_str(&s[at..value]);
        out.push_str("***");
        at = s[value..].find('&').map_or(s.len(), |j| value + j);
    }
    out.push_str(&s[at..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mark_tells_values_apart_and_shows_neither() {
        let key = Secret::new("app-secret");
        let a = Secret::new("session-a").mark(&key);
        assert_eq!(a.len(), 16);
        assert_eq!(a, Secret::new("session-a").mark(&key));
        assert_ne!(a, Secret::new("session-b").mark(&key));
        assert_ne!(a, Secret::new("session-a").mark(&Secret::new("other")));
        assert!(!a.contains("session"));
    }

    #[test]
    fn secrets_never_print() {
        let s = Secret::new("hunter2");
        assert_eq!(format!("{s} {s:?}"), "*** Secret(***)");
        assert_eq!(s.expose(), "hunter2");
    }

    #[test]
    fn urls_lose_their_password_only() {
        assert_eq!(
            redact_url("redis://u:secret@127.0.0.1:1/0"),
            "redis://u:***@127.0.0.1:1/0"
        );
        assert_eq!(
            redact_url("redis://127.0.0.1:6380"),
            "redis://127.0.0.1:6380"
        );
        assert_eq!(
            redact_url("redis://:secret@127.0.0.1:6380"),
            "redis://:***@127.0.0.1:6380"
        );
        // A user without a password is shown as is; a password in the query is not.
        assert_eq!(
            redact_url("postgres://sf@127.0.0.1/ledger"),
            "postgres://sf@127.0.0.1/ledger"
        );
        assert_eq!(
            redact_url("postgres://127.0.0.1/ledger?user=sf&password=secret&sslmode=require"),
            "postgres://127.0.0.1/ledger?user=sf&password=***&sslmode=require"
        );
        // Unencoded `/?#@` in a password.
        assert_eq!(
            redact_url("postgres://sf:pa/ss?w#o@rd@db.internal:5432/ledger"),
            "postgres://sf:***@db.internal:5432/ledger"
        );
        assert_eq!(
            redact_url("redis://:a/b@127.0.0.1:6379/0"),
            "redis://:***@127.0.0.1:6379/0"
        );
        // An `@` in the query does not expose a password parameter.
        let shown = redact_url("postgres://db:5432/ledger?user=a@b&password=hunter2&x=1");
        assert!(!shown.contains("hunter2"), "{shown}");
    }
}
