//! The settings of one platform (`[platforms.<name>]`): endpoint, app key, connection limits,
//! and the environment variables that hold its secrets.

use super::Secret;
use crate::platform::sign::SignMethod;
use serde::Deserialize;

/// Per-platform connection and identity settings.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlatformConfig {
    /// Full URL of the gateway (TOP `/router/rest`, JOS `/routerjson`, 1688 `https://gw.open.1688.com/openapi`).
    pub endpoint: String,
    /// The app key the platform issued to this app (not secret; the app secret is read
    /// from `secret_env`).
    pub app_key: String,
    /// Name of the environment variable holding the app secret.
    pub(crate) secret_env: String,
    /// Name of the environment variable holding the session / access token.
    #[serde(default)]
    pub(crate) session_env: Option<String>,
    /// TOP only: md5, hmac or hmac-sha256.
    #[serde(default)]
    pub(crate) sign_method: SignMethod,
    /// The platform's hard per-second cap for this app (any one API), if known:
    /// `config check` rejects a gate whose burst + rate exceeds it.
    #[serde(default)]
    pub(crate) per_second_cap: Option<f64>,
    #[serde(default = "PlatformConfig::default_connect_ms")]
    pub(crate) connect_timeout_ms: u64,
    /// Idle keep-alive of pooled connections: must stay below the platform's idle close.
    #[serde(default = "PlatformConfig::default_idle_keepalive_s")]
    pub idle_keepalive_s: u64,
    /// After how long idle the platform closes a connection (observed; about 30 s).
    #[serde(default = "PlatformConfig::default_platform_idle_close_s")]
    pub(crate) platform_idle_close_s: u64,
    /// Bulkhead: at most this many calls in flight to this platform from one process.
    #[serde(default = "PlatformConfig::default_max_in_flight")]
    pub(crate) max_in_flight: usize,
    /// How long a call may wait for a bulkhead slot before failing fast as busy.
    #[serde(default = "PlatformConfig::default_pool_wait_ms")]
    pub(crate) pool_wait_ms: u64,
}

impl PlatformConfig {
    fn default_connect_ms() -> u64 {
        2000
    }
    fn default_idle_keepalive_s() -> u64 {
        25
    }
    fn default_platform_idle_close_s() -> u64 {
        30
    }
    fn default_max_in_flight() -> usize {
        64
    }
    fn default_pool_wait_ms() -> u64 {
        1000
    }

    /// Read the app secret from the environment variable the config names.
    pub(crate) fn secret(&self) -> Result<Secret, MissingSecret> {
        read_secret_env(&self.secret_env)
    }

    /// Read the session / access token, if the config names a variable for it.
    pub(crate) fn session(&self) -> Result<Option<Secret>, MissingSecret> {
        match &self.session_env {
            Some(var) => read_secret_env(var).map(Some),
            None => Ok(None),
        }
    }

    /// The first variable this platform's client needs (app secret, then session) that is
    /// unset or empty; None when every one is there. Reads the environment, shows no value.
    pub(crate) fn missing_secret(&self) -> Option<MissingSecret> {
        std::iter::once(&self.secret_env)
            .chain(self.session_env.as_ref())
            .find_map(|var| read_secret_env(var).err())
    }
}

/// A secret's environment variable is unset or empty. Names the variable, never a value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("environment variable {var} is not set (it must hold the secret)")]
pub struct MissingSecret {
    pub(crate) var: String,
}

fn read_secret_env(var: &str) -> Result<Secret, MissingSecret> {
    match std::env::var(var) {
        Ok(v) if !v.is_empty() => Ok(Secret::new(v)),
        _ => Err(MissingSecret {
            var: var.to_string(),
        }),
    }
}
