//! The settings of one platform (`[platforms.<name>]`): endpoint, app key, connection limits,
//! and the environment variables that hold its secrets.

use super::Secret;
use crate::platform::client::{ClientError, ClientOptions, PlatformClient};
use crate::platform::sign::SignMethod;
use crate::platform::Platform;
use serde::Deserialize;
use std::time::Duration;

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
    /// The app's daily call quota over all its APIs (TOP's `limited-by-app-access-count`,
    /// 1688's `gw.NoUsageLeftError`), if the platform granted one: every gate of the
    /// platform books against it and paces by it (docs/design.md, "Pacing").
    #[serde(default)]
    pub(crate) daily_quota: Option<u64>,
    /// The platform's OAuth endpoint that renews a shop's access token with its refresh
    /// token; default: the platform's own (docs/wire-formats.md).
    #[serde(default)]
    pub(crate) token_endpoint: Option<String>,
    /// The page a seller authorises the app on; default: the platform's own
    /// (docs/wire-formats.md, "Authorisation").
    #[serde(default)]
    pub(crate) authorize_url: Option<String>,
    /// The callback registered for the app in the platform's console: where the
    /// authorisation page sends the seller back with a code (the dashboard's
    /// `/oauth/callback`). Needed to onboard sellers through OAuth.
    #[serde(default)]
    pub(crate) redirect_uri: Option<String>,
    /// Orders asked per order-list page on this platform (at most its largest page: TOP
    /// 100, JD 50, 1688 20); unset: `jobs.order_page_size`, else the largest page.
    #[serde(default)]
    pub(crate) order_page_size: Option<u32>,
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

    /// What the platform client needs from this section besides the credentials.
    pub fn client_options(&self) -> ClientOptions {
        ClientOptions {
            endpoint: self.endpoint.clone(),
            app_key: self.app_key.clone(),
            sign_method: self.sign_method,
            connect_timeout: Duration::from_millis(self.connect_timeout_ms),
            idle_keepalive: Duration::from_secs(self.idle_keepalive_s),
            max_idle_per_host: self.max_in_flight,
            max_body_bytes: MAX_BODY_BYTES,
        }
    }

    /// The platform client of this section, with the secret and session read from the
    /// environment variables it names. The error names a missing variable, never a value.
    pub(crate) fn client(&self, platform: Platform) -> Result<PlatformClient, ClientSetupError> {
        let secret = self.secret()?;
        let session = self.session()?;
        Ok(PlatformClient::new(
            platform,
            &self.client_options(),
            secret,
            session,
        )?)
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

/// The largest answer body a platform client reads: the platforms' pages (100 orders, one
/// item's details) are tens of kilobytes; 8 MiB leaves room and bounds what a misbehaving
/// upstream or proxy can make a worker hold (its memory limit is 512 MiB in deploy/).
pub(crate) const MAX_BODY_BYTES: usize = 8 << 20;

/// Why a platform client could not be built from its section.
#[derive(Debug, thiserror::Error)]
pub enum ClientSetupError {
    /// The secret's (or session's) environment variable is unset: names it, never a value.
    #[error(transparent)]
    MissingSecret(#[from] MissingSecret),
    /// The client could not be built (a bad endpoint, the TLS backend).
    #[error(transparent)]
    Client(#[from] ClientError),
}

pub(crate) fn read_secret_env(var: &str) -> Result<Secret, MissingSecret> {
    match std::env::var(var) {
        Ok(v) if !v.is_empty() => Ok(Secret::new(v)),
        _ => Err(MissingSecret {
            var: var.to_string(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_secret_names_the_variable_when_the_client_is_built() {
        let text = "[platforms.taobao]\nendpoint = \"http://127.0.0.1:9/router/rest\"\napp_key = \"k\"\nsecret_env = \"SYNCFLEET_TEST_UNSET_SECRET_VAR\"\n";
        let c = crate::config::Config::parse(std::path::Path::new("t.toml"), text).unwrap();
        let err = c.platforms[&Platform::Taobao]
            .client(Platform::Taobao)
            .unwrap_err();
        assert!(matches!(err, ClientSetupError::MissingSecret(_)), "{err}");
        assert!(
            err.to_string().contains("SYNCFLEET_TEST_UNSET_SECRET_VAR"),
            "{err}"
        );
    }
}
