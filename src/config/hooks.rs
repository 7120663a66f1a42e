//! `[hooks]`: the webhook a finished job (one-off or scheduled run) is posted to, or the
//! command it is handed to (docs/design.md, "Completion hooks").

use super::platforms::{read_secret_env, MissingSecret};
use crate::secret::Secret;
use serde::Deserialize;

/// Completion hooks (off unless `url` or `command` is set).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HooksConfig {
    /// Where each finish is POSTed (`http://` or `https://`).
    pub url: Option<String>,
    /// The environment variable holding the HMAC-SHA256 key the body is signed with
    /// (`X-Syncfleet-Signature: sha256=HEX`). Required with `url`.
    pub secret_env: Option<String>,
    /// Instead of `url`: a program and its arguments (no shell) run once per finish, the same
    /// JSON body on its standard input and the delivery id in `SYNCFLEET_DELIVERY`; exit
    /// status 0 means delivered, anything else (or the time limit) is retried.
    pub command: Option<Vec<String>>,
    /// Attempts before a delivery is given up (`failed`, listed by `syncfleet hooks`, sent
    /// again by `syncfleet hooks resend`). The defaults (60 attempts, backoff up to 30
    /// minutes with equal jitter) keep trying for at least 12 hours: a receiver down for
    /// hours loses nothing.
    pub(crate) attempts: u32,
    /// Backoff after the first failed attempt; it doubles per attempt, with jitter.
    pub(crate) backoff_base_ms: u64,
    /// Longest backoff.
    pub(crate) backoff_cap_s: u64,
    /// One attempt's time limit.
    pub(crate) timeout_ms: u64,
}

impl Default for HooksConfig {
    fn default() -> Self {
        HooksConfig {
            url: None,
            secret_env: None,
            command: None,
            attempts: 60,
            backoff_base_ms: 1000,
            backoff_cap_s: 1800,
            timeout_ms: 5000,
        }
    }
}

impl HooksConfig {
    /// The signing key from `secret_env`; `Ok(None)` when hooks are off.
    pub(crate) fn secret(&self) -> Result<Option<Secret>, MissingSecret> {
        match (&self.url, &self.secret_env) {
            (Some(_), Some(var)) => read_secret_env(var).map(Some),
            (Some(_), None) => Err(MissingSecret {
                var: "hooks.secret_env".into(),
            }),
            (None, _) => Ok(None),
        }
    }

    /// Problems with the section: (key, message).
    pub(crate) fn problems(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        if let Some(url) = &self.url {
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                out.push((
                    "hooks.url".into(),
                    "must start with http:// or https://".into(),
                ));
            }
            if self.secret_env.as_deref().is_none_or(str::is_empty) {
                out.push((
                    "hooks.secret_env".into(),
                    "is required with hooks.url: the variable holding the key the body is signed with".into(),
                ));
            }
        }
        if let Some(argv) = &self.command {
            if argv.first().is_none_or(|p| p.trim().is_empty()) {
                out.push((
                    "hooks.command".into(),
                    "must name a program: [\"/path/to/program\", \"arg\", ...]".into(),
                ));
            }
            if self.url.is_some() {
                out.push((
                    "hooks.command".into(),
                    "set either hooks.url or hooks.command, not both".into(),
                ));
            }
        }
        if self.attempts == 0 {
            out.push(("hooks.attempts".into(), "must be at least 1".into()));
        }
        if self.timeout_ms == 0 {
            out.push(("hooks.timeout_ms".into(), "must be at least 1".into()));
        }
        out
    }
}
