//! Renewing a shop's access token with its refresh token, at each platform's OAuth endpoint
//! (docs/wire-formats.md, "Token lifetime" of each platform): the request each one takes and
//! the answer it gives. The worker decides when and keeps the result (jobs/tokens.rs).

use super::json::{text, uint};
use super::Platform;
use crate::secret::Secret;
use serde_json::Value;
use std::time::Duration;

/// A renewed token.
#[derive(Debug, Clone)]
pub(crate) struct Renewed {
    /// The new access token (TOP `session`, JD and 1688 `access_token`).
    pub(crate) access: Secret,
    /// A new refresh token, when the platform gives one (1688's refresh grant does not: the
    /// old one stays valid for its half year).
    pub(crate) refresh: Option<Secret>,
    /// How long the new access token lives (`expires_in`).
    pub(crate) lifetime: Duration,
}

/// Why a renewal failed. Never carries a token.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum RenewError {
    /// No answer, or a server-side failure: try again at the next check.
    #[error("token endpoint unreachable or failing: {0}")]
    Transient(String),
    /// The platform refused the refresh token (expired, revoked, or not this app's): the shop
    /// is paused until an operator gives it a new one.
    #[error("the platform refused the refresh token: {code}: {message}")]
    Refused {
        /// The platform's error code (`invalid_grant`, JD's numeric code, ...).
        code: String,
        /// Its message, shortened.
        message: String,
    },
}

/// The platform's own token endpoint (its OAuth service) for `app_key`.
pub(crate) fn default_endpoint(platform: Platform, app_key: &str) -> String {
    match platform {
        Platform::Taobao => "https://oauth.taobao.com/token".to_string(),
        Platform::Jd => "https://open-oauth.jd.com/oauth2/refresh_token".to_string(),
        Platform::Alibaba => {
            format!("https://gw.open.1688.com/openapi/param2/1/system.oauth2/getToken/{app_key}")
        }
    }
}

/// The form a refresh posts: TOP and 1688 name the app `client_id` / `client_secret`, JD
/// `app_key` / `app_secret`.
pub(crate) fn refresh_form(
    platform: Platform,
    app_key: &str,
    app_secret: &Secret,
    refresh: &Secret,
) -> Vec<(&'static str, String)> {
    let (id, secret) = match platform {
        Platform::Jd => ("app_key", "app_secret"),
        Platform::Taobao | Platform::Alibaba => ("client_id", "client_secret"),
    };
    vec![
        ("grant_type", "refresh_token".to_string()),
        (id, app_key.to_string()),
        (secret, app_secret.expose().to_string()),
        ("refresh_token", refresh.expose().to_string()),
    ]
}

fn short(s: &str) -> String {
    s.chars().take(200).collect()
}

/// The renewed token in an answer of `http_status`, or why there is none.
pub(crate) fn parse_refresh(
    platform: Platform,
    http_status: u16,
    body: &Value,
) -> Result<Renewed, RenewError> {
    if http_status >= 500 {
        return Err(RenewError::Transient(format!("HTTP {http_status}")));
    }
    // TOP and 1688: OAuth's `{error, error_description}`; 1688's gateway
    // `{error_code, error_message}`; JD: `{code != 0, msg}`.
    let refused = |code: Option<String>, message: Option<String>| RenewError::Refused {
        code: short(&code.unwrap_or_else(|| format!("http_{http_status}"))),
        message: short(&message.unwrap_or_default()),
    };
    if let Some(code) = text(body, "error").or_else(|| text(body, "error_code")) {
        let message = text(body, "error_description").or_else(|| text(body, "error_message"));
        return Err(refused(Some(code), message));
    }
    if platform == Platform::Jd {
        if let Some(code) = text(body, "code").filter(|c| c != "0") {
            return Err(refused(Some(code), text(body, "msg")));
        }
    }
    let access = text(body, "access_token").filter(|t| !t.is_empty());
    // Seconds, a number on TOP and JD and a string on 1688 ("36000").
    let lifetime = uint(body, "expires_in");
    match (access, lifetime) {
        (Some(access), Some(secs)) if (200..300).contains(&http_status) => Ok(Renewed {
            access: Secret::new(access),
            refresh: text(body, "refresh_token")
                .filter(|t| !t.is_empty())
                .map(Secret::new),
            lifetime: Duration::from_secs(secs),
        }),
        _ if (200..300).contains(&http_status) => Err(RenewError::Transient(
            "the answer has no access_token or expires_in".into(),
        )),
        _ => Err(refused(None, Some(format!("HTTP {http_status}")))),
    }
}

/// The HTTP client of the platforms' token endpoints.
#[derive(Debug, Clone)]
pub(crate) struct TokenClient {
    http: reqwest::Client,
}

/// The token endpoints' client could not be built (no TLS roots, say).
#[derive(Debug, thiserror::Error)]
#[error("the token endpoints' HTTP client: {0}")]
pub(crate) struct TokenClientError(#[source] reqwest::Error);

impl TokenClient {
    /// A client whose every renewal gives up after `timeout`.
    pub(crate) fn new(timeout: Duration) -> Result<TokenClient, TokenClientError> {
        reqwest::Client::builder()
            .timeout(timeout)
            .build()
            .map(|http| TokenClient { http })
            .map_err(TokenClientError)
    }

    /// Renew at `endpoint`: one POST of [`refresh_form`].
    pub(crate) async fn renew(
        &self,
        platform: Platform,
        endpoint: &str,
        app_key: &str,
        app_secret: &Secret,
        refresh: &Secret,
    ) -> Result<Renewed, RenewError> {
        renew(&self.http, platform, endpoint, app_key, app_secret, refresh).await
    }
}

async fn renew(
    http: &reqwest::Client,
    platform: Platform,
    endpoint: &str,
    app_key: &str,
    app_secret: &Secret,
    refresh: &Secret,
) -> Result<Renewed, RenewError> {
    let form = refresh_form(platform, app_key, app_secret, refresh);
    // The error of a failed send names the endpoint, never the form.
    let resp = http
        .post(endpoint)
        .form(&form)
        .send()
        .await
        .map_err(|e| RenewError::Transient(super::classify::describe_reqwest(e)))?;
    let status = resp.status().as_u16();
    let bytes = resp
        .bytes()
        .await
        .map_err(|e| RenewError::Transient(super::classify::describe_reqwest(e)))?;
    let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    parse_refresh(platform, status, &body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn fixture(name: &str) -> Value {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/wire/tokens")
            .join(name);
        let v: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        v["body"].clone()
    }

    #[test]
    fn the_platforms_refresh_answers_read() {
        let r = parse_refresh(Platform::Taobao, 200, &fixture("taobao_refresh_ok.json")).unwrap();
        assert_eq!(r.lifetime, Duration::from_secs(7_776_000));
        assert!(r.refresh.is_some());
        let r = parse_refresh(Platform::Jd, 200, &fixture("jd_refresh_ok.json")).unwrap();
        assert_eq!(r.lifetime, Duration::from_secs(31_535_999));
        assert!(r.refresh.is_some());
        // 1688: `expires_in` a string, and no new refresh token.
        let r = parse_refresh(Platform::Alibaba, 200, &fixture("alibaba_refresh_ok.json")).unwrap();
        assert_eq!(r.lifetime, Duration::from_secs(36_000));
        assert!(r.refresh.is_none());
    }

    #[test]
    fn refusals_and_failures_are_told_apart() {
        let e = parse_refresh(
            Platform::Taobao,
            400,
            &json!({"error": "invalid_grant", "error_description": "refresh token expired"}),
        )
        .unwrap_err();
        assert!(matches!(e, RenewError::Refused { ref code, .. } if code == "invalid_grant"));
        let e =
            parse_refresh(Platform::Jd, 200, &json!({"code": 304, "msg": "未授权"})).unwrap_err();
        assert!(matches!(e, RenewError::Refused { ref code, .. } if code == "304"));
        let e = parse_refresh(Platform::Alibaba, 503, &Value::Null).unwrap_err();
        assert!(matches!(e, RenewError::Transient(_)));
        let form = refresh_form(Platform::Jd, "k", &Secret::new("s"), &Secret::new("r"));
        assert!(form.iter().any(|(k, _)| *k == "app_secret"));
        let form = refresh_form(Platform::Alibaba, "k", &Secret::new("s"), &Secret::new("r"));
        assert!(form
            .iter()
            .any(|(k, v)| *k == "grant_type" && v == "refresh_token"));
    }
}
