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
        use hmac::{Hmac, Mac};
        let Ok(mut mac) = Hmac::<sha2::Sha256>::new_from_slice(key.0.as_bytes()) else {
            return String::new();
        };
        mac.update(self.0.as_bytes());
        mac.finalize().into_bytes()[..8]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
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
    let (rest, query) = match rest.split_once('?') {
        Some((r, q)) => (r, Some(q)),
        None => (rest, None),
    };
    let (authority, path) = match rest.find('/') {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    let authority = match authority.rsplit_once('@') {
        // Only a password is hidden: a user name alone stays readable.
        Some((userinfo, host)) if userinfo.contains(':') => {
            let user = userinfo.split(':').next().unwrap_or("");
            format!("{user}:***@{host}")
        }
        _ => authority.to_string(),
    };
    // A password may also travel as a query parameter (`?password=...` for PostgreSQL).
    let query = query.map(|q| {
        q.split('&')
            .map(|kv| match kv.split_once('=') {
                Some((k, _)) if k.eq_ignore_ascii_case("password") => format!("{k}=***"),
                _ => kv.to_string(),
            })
            .collect::<Vec<_>>()
            .join("&")
    });
    match query {
        Some(q) => format!("{scheme}://{authority}{path}?{q}"),
        None => format!("{scheme}://{authority}{path}"),
    }
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
    }
}
