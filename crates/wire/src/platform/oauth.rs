//! A shop's tokens at each platform's OAuth service (docs/wire-formats.md, "Token lifetime"
//! and "Authorisation" of each platform): the page a seller authorises the app on, the
//! exchange of the code it sends back for the shop's tokens, and the renewal of an access
//! token with the refresh token: the request each platform takes and the answer it gives. The
//! worker decides when to renew and keeps the result (jobs/tokens.rs); onboarding keeps a new
//! shop's (jobs/onboard.rs).

use super::json::{text, uint};
use super::Platform;
use crate::secret::Secret;
use serde_json::Value;
use std::time::Duration;

/// A renewed token.
#[derive(Debug, Clone)]
pub struct Renewed {
    /// The new access token (TOP `session`, JD and 1688 `access_token`).
    pub access: Secret,
    /// A new refresh token, when the platform gives one (1688's refresh grant does not: the
    /// old one stays valid for its half year).
    pub refresh: Option<Secret>,
    /// How long the new access token lives (`expires_in`).
    pub lifetime: Duration,
}

/// Why a renewal failed. Never carries a token.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RenewError {
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
pub fn default_endpoint(platform: Platform, app_key: &str) -> String {
    match platform {
        Platform::Taobao => "https://oauth.taobao.com/token".to_string(),
        Platform::Jd => "https://open-oauth.jd.com/oauth2/refresh_token".to_string(),
        Platform::Alibaba => {
            format!("https://gw.open.1688.com/openapi/param2/1/system.oauth2/getToken/{app_key}")
        }
    }
}

/// The page a seller authorises the app on (its production address).
pub fn default_authorize_url(platform: Platform) -> &'static str {
    match platform {
        Platform::Taobao => "https://oauth.taobao.com/authorize",
        Platform::Jd => "https://open-oauth.jd.com/oauth2/to_login",
        Platform::Alibaba => "https://auth.1688.com/oauth/authorize",
    }
}

/// The address a seller is sent to: `base` (the authorisation page) with the app, the
/// callback and `state` (echoed back unchanged) in each platform's names: TOP
/// `response_type=code&client_id&view=web`, JD `app_key&response_type=code&scope=snsapi_base`,
/// 1688 `client_id&site=1688`.
pub fn authorize_url(
    platform: Platform,
    base: &str,
    app_key: &str,
    redirect_uri: &str,
    state: &str,
) -> Result<String, url::ParseError> {
    let mut params: Vec<(&str, &str)> = match platform {
        Platform::Taobao => vec![
            ("response_type", "code"),
            ("client_id", app_key),
            ("view", "web"),
        ],
        Platform::Jd => vec![
            ("app_key", app_key),
            ("response_type", "code"),
            ("scope", "snsapi_base"),
        ],
        Platform::Alibaba => vec![("client_id", app_key), ("site", "1688")],
    };
    params.push(("redirect_uri", redirect_uri));
    params.push(("state", state));
    Ok(url::Url::parse_with_params(base, &params)?.to_string())
}

/// Where a code is exchanged, given where tokens are renewed: TOP's and 1688's one token
/// service takes both grants; JD's is `oauth2/access_token` beside `oauth2/refresh_token`.
pub fn code_endpoint(platform: Platform, token_endpoint: &str) -> String {
    match platform {
        Platform::Jd => match token_endpoint.strip_suffix("refresh_token") {
            Some(base) => format!("{base}access_token"),
            None => token_endpoint.to_string(),
        },
        Platform::Taobao | Platform::Alibaba => token_endpoint.to_string(),
    }
}

/// Whether `platform`'s code exchange names the callback the code was issued for (TOP and
/// 1688 do; JD does not).
pub fn exchange_names_callback(platform: Platform) -> bool {
    !matches!(platform, Platform::Jd)
}

/// The form a code exchange posts: TOP `grant_type=authorization_code, code, client_id,
/// client_secret, redirect_uri`; JD `app_key, app_secret, grant_type, code` (no callback);
/// 1688 the same as TOP with `need_refresh_token=true` (else no refresh token is given).
pub fn code_form(
    platform: Platform,
    app_key: &str,
    app_secret: &Secret,
    code: &Secret,
    redirect_uri: &str,
) -> Vec<(&'static str, String)> {
    let mut form = vec![("grant_type", "authorization_code".to_string())];
    match platform {
        Platform::Jd => {
            form.push(("app_key", app_key.to_string()));
            form.push(("app_secret", app_secret.expose().to_string()));
        }
        Platform::Taobao | Platform::Alibaba => {
            form.push(("client_id", app_key.to_string()));
            form.push(("client_secret", app_secret.expose().to_string()));
        }
    }
    if exchange_names_callback(platform) {
        form.push(("redirect_uri", redirect_uri.to_string()));
    }
    if platform == Platform::Alibaba {
        form.push(("need_refresh_token", "true".to_string()));
    }
    form.push(("code", code.expose().to_string()));
    form
}

/// A shop's first tokens, from a code, and who the seller is.
#[derive(Debug, Clone)]
pub struct Granted {
    /// The tokens (a refresh token when the platform gave one).
    pub tokens: Renewed,
    /// The seller as the platform's change messages name it: TOP `taobao_user_nick`
    /// (URL-decoded), 1688 `memberId`, JD `uid`. `None`: the answer did not say.
    pub seller: Option<String>,
}

/// The shop's tokens in a code exchange's answer, or why there are none. The answer has the
/// refresh answer's shape (TOP and 1688 OAuth fields, JD `code` 0) plus the seller.
pub fn parse_grant(
    platform: Platform,
    http_status: u16,
    body: &Value,
) -> Result<Granted, RenewError> {
    let tokens = parse_refresh(platform, http_status, body)?;
    let seller = match platform {
        Platform::Taobao => text(body, "taobao_user_nick").map(|nick| {
            // URL-encoded UTF-8 in the platform's answers.
            serde_urlencoded::from_str::<Vec<(String, String)>>(&format!("n={nick}"))
                .ok()
                .and_then(|v| v.into_iter().next().map(|(_, n)| n))
                .unwrap_or(nick)
        }),
        Platform::Alibaba => text(body, "memberId"),
        Platform::Jd => text(body, "uid"),
    };
    Ok(Granted {
        tokens,
        seller: seller.filter(|s| !s.is_empty()),
    })
}

/// The form a refresh posts: TOP and 1688 name the app `client_id` / `client_secret`, JD
/// `app_key` / `app_secret`.
pub fn refresh_form(
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
pub fn parse_refresh(
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
pub struct TokenClient {
    http: reqwest::Client,
}

/// The token endpoints' client could not be built (no TLS roots, say).
#[derive(Debug, thiserror::Error)]
#[error("the token endpoints' HTTP client: {0}")]
pub struct TokenClientError(#[source] reqwest::Error);

impl TokenClient {
    /// A client whose every renewal gives up after `timeout`.
    pub fn new(timeout: Duration) -> Result<TokenClient, TokenClientError> {
        reqwest::Client::builder()
            .timeout(timeout)
            .build()
            .map(|http| TokenClient { http })
            .map_err(TokenClientError)
    }

    /// Exchange a seller's `code` at `endpoint`: one POST of [`code_form`].
    pub async fn exchange_code(
        &self,
        platform: Platform,
        endpoint: &str,
        app_key: &str,
        app_secret: &Secret,
        code: &Secret,
        redirect_uri: &str,
    ) -> Result<Granted, RenewError> {
        let form = code_form(platform, app_key, app_secret, code, redirect_uri);
        let (status, body) = post_form(&self.http, endpoint, &form).await?;
        parse_grant(platform, status, &body)
    }

    /// Renew at `endpoint`: one POST of [`refresh_form`].
    pub async fn renew(
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
    let (status, body) = post_form(http, endpoint, &form).await?;
    parse_refresh(platform, status, &body)
}

/// One POST of `form` to a token endpoint: its status and JSON body (`null` when not JSON).
async fn post_form(
    http: &reqwest::Client,
    endpoint: &str,
    form: &[(&'static str, String)],
) -> Result<(u16, Value), RenewError> {
    // The error of a failed send names the endpoint, never the form.
    let resp = http
        .post(endpoint)
        .form(form)
        .send()
        .await
        .map_err(|e| RenewError::Transient(super::classify::describe_reqwest(e)))?;
    let status = resp.status().as_u16();
    let bytes = resp
        .bytes()
        .await
        .map_err(|e| RenewError::Transient(super::classify::describe_reqwest(e)))?;
    Ok((
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn fixture(name: &str) -> Value {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/fixtures/wire/tokens")
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

    #[test]
    fn a_seller_is_sent_to_each_platforms_page_in_its_names() {
        let u = authorize_url(
            Platform::Taobao,
            default_authorize_url(Platform::Taobao),
            "12345",
            "https://isv.example/cb",
            "s1",
        )
        .unwrap();
        assert!(u.starts_with("https://oauth.taobao.com/authorize?response_type=code&client_id=12345&view=web&redirect_uri=https%3A%2F%2Fisv.example%2Fcb&state=s1"), "{u}");
        let u = authorize_url(
            Platform::Jd,
            default_authorize_url(Platform::Jd),
            "k",
            "https://x/cb",
            "s",
        )
        .unwrap();
        assert!(
            u.contains("app_key=k&response_type=code&scope=snsapi_base"),
            "{u}"
        );
        let u = authorize_url(
            Platform::Alibaba,
            default_authorize_url(Platform::Alibaba),
            "k",
            "https://x/cb",
            "s",
        )
        .unwrap();
        assert!(
            u.starts_with("https://auth.1688.com/oauth/authorize?client_id=k&site=1688"),
            "{u}"
        );
        assert_eq!(
            code_endpoint(Platform::Jd, &default_endpoint(Platform::Jd, "k")),
            "https://open-oauth.jd.com/oauth2/access_token"
        );
        let form = code_form(
            Platform::Jd,
            "k",
            &Secret::new("s"),
            &Secret::new("c"),
            "https://x",
        );
        assert!(
            !form.iter().any(|(k, _)| *k == "redirect_uri"),
            "JD's exchange takes no callback"
        );
        let form = code_form(
            Platform::Alibaba,
            "k",
            &Secret::new("s"),
            &Secret::new("c"),
            "https://x",
        );
        assert!(form
            .iter()
            .any(|(k, v)| *k == "need_refresh_token" && v == "true"));
    }

    #[test]
    fn the_platforms_code_answers_name_the_seller() {
        let g = parse_grant(Platform::Taobao, 200, &fixture("taobao_code_ok.json")).unwrap();
        assert_eq!(g.seller.as_deref(), Some("葫芦街返利"));
        assert_eq!(g.tokens.lifetime, Duration::from_secs(86_400));
        assert!(g.tokens.refresh.is_some());
        let g = parse_grant(Platform::Jd, 200, &fixture("jd_code_ok.json")).unwrap();
        assert_eq!(g.seller.as_deref(), Some("1898013009"));
        let g = parse_grant(Platform::Alibaba, 200, &fixture("alibaba_code_ok.json")).unwrap();
        assert_eq!(g.seller.as_deref(), Some("b2b-2379510033"));
        assert_eq!(g.tokens.lifetime, Duration::from_secs(36_000));
        assert!(g.tokens.refresh.is_some());
        // A code used twice: TOP says `invalid_client`.
        let e = parse_grant(Platform::Taobao, 400, &fixture("taobao_code_used.json")).unwrap_err();
        assert!(matches!(e, RenewError::Refused { ref code, .. } if code == "invalid_client"));
    }
}
