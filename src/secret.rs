//! Secrets (app secrets, session tokens) and URLs that may carry one: what may never appear
//! in logs, errors, panics, Redis or the ledger. Its own module so the configuration and the
//! platform adapters both use it without depending on each other for it.

use std::fmt;

/// A secret value (app secret, session token). Its `Debug` and `Display` never show it.
#[derive(Clone, Default)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Secret(value.into())
    }
    /// The raw value, for signing and for the request only.
    pub fn expose(&self) -> &str {
        &self.0
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
    let (authority, path) = match rest.find('/') {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    match authority.rsplit_once('@') {
        Some((userinfo, host)) => {
            let user = userinfo.split(':').next().unwrap_or("");
            format!("{scheme}://{user}:***@{host}{path}")
        }
        None => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    }
}
