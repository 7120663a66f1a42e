//! The platforms' token lifetimes (docs/wire-formats.md, "Token lifetime" of each platform):
//! a shop's access token ends `token_lifetime_s` after it was issued (its configured session
//! after the simulator's start), and the platform's token endpoint renews it with the shop's
//! refresh token, in each platform's own request and answer. The simulator counts every
//! renewal and every call refused for an ended token, per shop: what a fleet's renewal is
//! judged by.

use super::proto::form_get as get;
use super::state::Sim;
use crate::platform::Platform;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;

/// What one shop's tokens did, as the platform saw it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenStats {
    /// The shop's platform.
    pub platform: Option<Platform>,
    /// The shop.
    pub shop: String,
    /// Renewals answered with a new token.
    pub refreshes: u64,
    /// Calls refused because their token had ended.
    pub expired_refused: u64,
    /// Codes exchanged for the shop's first tokens (its seller's authorisations).
    #[serde(default)]
    pub authorized: u64,
}

struct Issued {
    app: usize,
    shop: String,
    ends_ms: i64,
}

/// A code the authorisation page gave: single use, and short-lived.
struct Code {
    app: usize,
    seller: String,
    redirect_uri: String,
    ends_ms: i64,
}

/// The tokens a simulator issued, and what each shop's did.
#[derive(Default)]
pub struct TokenBook {
    issued: Mutex<HashMap<String, Issued>>,
    /// Codes given and not yet used.
    codes: Mutex<HashMap<String, Code>>,
    /// Refresh tokens given through the code grant: token -> (app, shop).
    refreshes: Mutex<HashMap<String, (usize, String)>>,
    stats: Mutex<BTreeMap<(Platform, String), TokenStats>>,
    seq: AtomicU64,
}

/// Whose a session is, as the platform sees it.
pub enum Holder {
    /// The app's own session (never ends).
    App,
    /// A shop's token, valid now.
    Shop(String),
    /// A shop's token that has ended.
    Ended(String),
    /// No token of this app.
    Unknown,
}

impl std::fmt::Debug for TokenBook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenBook").finish_non_exhaustive()
    }
}

impl TokenBook {
    fn entry<R>(&self, platform: Platform, shop: &str, f: impl FnOnce(&mut TokenStats) -> R) -> R {
        let mut m = self.stats.lock().unwrap_or_else(|e| e.into_inner());
        let e = m
            .entry((platform, shop.to_string()))
            .or_insert_with(|| TokenStats {
                platform: Some(platform),
                shop: shop.to_string(),
                ..TokenStats::default()
            });
        f(e)
    }

    /// Every shop's counts.
    pub fn stats(&self) -> Vec<TokenStats> {
        self.stats
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .cloned()
            .collect()
    }

    /// Zero every shop's counts; the tokens themselves stay.
    pub fn reset(&self) {
        self.stats.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }

    /// A call refused for an ended token of `shop`.
    pub fn count_ended(&self, platform: Platform, shop: &str) {
        self.entry(platform, shop, |e| e.expired_refused += 1);
    }
}

/// Whose `given` session of app `app` is at `now_ms`.
pub fn holder(sim: &Sim, app: usize, given: Option<&str>, now_ms: i64) -> Holder {
    let cfg = &sim.apps[app].cfg;
    let Some(given) = given else {
        return Holder::Unknown;
    };
    if given == cfg.session.expose() {
        return Holder::App;
    }
    let lifetime_ms = sim.cfg.token_lifetime_s as i64 * 1000;
    if let Some((name, _)) = cfg.shops.iter().find(|(_, s)| s.expose() == given) {
        let ends = sim.started * 1000 + lifetime_ms;
        return if lifetime_ms > 0 && now_ms >= ends {
            Holder::Ended(name.clone())
        } else {
            Holder::Shop(name.clone())
        };
    }
    let issued = sim.tokens.issued.lock().unwrap_or_else(|e| e.into_inner());
    match issued.get(given) {
        Some(i) if i.app == app && now_ms < i.ends_ms => Holder::Shop(i.shop.clone()),
        Some(i) if i.app == app => Holder::Ended(i.shop.clone()),
        _ => Holder::Unknown,
    }
}

/// A token service's refusal in the platform's shape: JD `{code, msg}` in HTTP 200, TOP and
/// 1688 OAuth's `{error, error_description}` with `status`.
fn refusal(
    sim: &Sim,
    platform: Platform,
    status: StatusCode,
    code: &str,
    why: &str,
) -> (StatusCode, Value) {
    match platform {
        Platform::Jd => (
            StatusCode::OK,
            json!({"code": 304, "msg": why, "requestId": sim.request_id()}),
        ),
        _ => (status, json!({"error": code, "error_description": why})),
    }
}

/// The app a token service's request names, with its secret (TOP and 1688 `client_id` /
/// `client_secret`, JD `app_key` / `app_secret`), or the platform's refusal.
fn token_app(
    sim: &Sim,
    platform: Platform,
    params: &[(String, String)],
) -> Result<usize, (StatusCode, Value)> {
    let (id_key, secret_key) = match platform {
        Platform::Jd => ("app_key", "app_secret"),
        _ => ("client_id", "client_secret"),
    };
    get(params, id_key)
        .and_then(|k| sim.app(platform, k))
        .filter(|&a| get(params, secret_key) == Some(sim.apps[a].cfg.secret.expose()))
        .ok_or_else(|| {
            refusal(
                sim,
                platform,
                StatusCode::UNAUTHORIZED,
                "invalid_client",
                "client_id or client_secret is wrong",
            )
        })
}

/// A platform's token endpoint: renew a shop's token with its refresh token. `params` are the
/// form and query pairs; the answer is the platform's own (status and body).
pub fn refresh(
    sim: &Sim,
    platform: Platform,
    params: &[(String, String)],
    now_ms: i64,
) -> (StatusCode, Value) {
    let refuse =
        |status: StatusCode, code: &str, why: &str| refusal(sim, platform, status, code, why);
    let app = match token_app(sim, platform, params) {
        Ok(app) => app,
        Err(refused) => return refused,
    };
    if get(params, "grant_type") != Some("refresh_token") {
        return refuse(
            StatusCode::BAD_REQUEST,
            "unsupported_grant_type",
            "grant_type must be refresh_token",
        );
    }
    let cfg = &sim.apps[app].cfg;
    let given = get(params, "refresh_token");
    let onboarded = given.and_then(|g| {
        lock(&sim.tokens.refreshes)
            .get(g)
            .filter(|(a, _)| *a == app)
            .map(|(_, shop)| shop.clone())
    });
    let configured = || {
        cfg.shops
            .keys()
            .find(|name| {
                cfg.shop_refresh(name)
                    .is_some_and(|r| Some(r.expose()) == given)
            })
            .cloned()
    };
    let Some(shop) = onboarded.or_else(configured) else {
        return refuse(
            StatusCode::BAD_REQUEST,
            "invalid_grant",
            "refresh_token is invalid or expired",
        );
    };
    let n = sim.tokens.seq.fetch_add(1, Relaxed) + 1;
    let token = format!("sim-{platform}-token-{shop}-{n}");
    let lifetime_s = match sim.cfg.token_lifetime_s {
        0 => 86_400 * 365,
        s => s,
    };
    sim.tokens
        .issued
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(
            token.clone(),
            Issued {
                app,
                shop: shop.clone(),
                ends_ms: now_ms + lifetime_s as i64 * 1000,
            },
        );
    sim.tokens.entry(platform, &shop, |e| e.refreshes += 1);
    let refresh = cfg
        .shop_refresh(&shop)
        .map(|r| r.expose().to_string())
        .or_else(|| given.map(str::to_string));
    let body = match platform {
        Platform::Taobao => json!({"access_token": token, "token_type": "Bearer",
            "expires_in": lifetime_s, "refresh_token": refresh, "re_expires_in": 2_592_000,
            "expire_time": now_ms + lifetime_s as i64 * 1000, "taobao_user_nick": shop,
            "taobao_user_id": "706388888"}),
        Platform::Jd => json!({"access_token": token, "expires_in": lifetime_s,
            "refresh_token": refresh, "scope": "snsapi_base", "token_type": "bearer",
            "time": now_ms, "code": 0, "uid": "8474668550"}),
        // 1688's refresh grant: a string `expires_in`, and no new refresh token.
        Platform::Alibaba => json!({"aliId": "1711749575", "resource_owner": shop,
            "memberId": format!("b2b-{shop}"), "expires_in": lifetime_s.to_string(),
            "access_token": token}),
    };
    (StatusCode::OK, body)
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// How long a code may be exchanged: 1688's documented 2 minutes; TOP's and JD's are not
/// published (one client cites 10 minutes for TOP), so the simulator keeps 2 for all.
const CODE_LIFETIME_MS: i64 = 120_000;

/// A platform's authorisation page, for a seller who logged in and agreed: where the
/// browser is sent (`redirect_uri?code=..&state=..`), or the platform's refusal. The seller is
/// the simulator's own `seller` parameter (the test stands in for the login page); each
/// platform names the app its own way (TOP and 1688 `client_id`, JD `app_key`).
pub fn authorize(
    sim: &Sim,
    platform: Platform,
    params: &[(String, String)],
    now_ms: i64,
) -> Result<String, (StatusCode, String)> {
    let id_key = match platform {
        Platform::Jd => "app_key",
        _ => "client_id",
    };
    let bad = |why: &str| Err((StatusCode::BAD_REQUEST, why.to_string()));
    let Some(app) = get(params, id_key).and_then(|k| sim.app(platform, k)) else {
        return bad("unknown app");
    };
    let required: &[(&str, &str)] = match platform {
        Platform::Taobao => &[("response_type", "code")],
        Platform::Jd => &[("response_type", "code")],
        Platform::Alibaba => &[("site", "1688")],
    };
    for (k, v) in required {
        if get(params, k) != Some(v) {
            return bad(&format!("{k} must be {v}"));
        }
    }
    let Some(redirect) = get(params, "redirect_uri").filter(|r| r.starts_with("http")) else {
        return bad("redirect_uri is required");
    };
    let Some(seller) = get(params, "seller").filter(|s| !s.is_empty()) else {
        return bad("no seller logged in (the simulator's `seller` parameter)");
    };
    let n = sim.tokens.seq.fetch_add(1, Relaxed) + 1;
    let code = format!("simcode{n}x{}", now_ms % 1_000_000);
    lock(&sim.tokens.codes).insert(
        code.clone(),
        Code {
            app,
            seller: seller.to_string(),
            redirect_uri: redirect.to_string(),
            ends_ms: now_ms + CODE_LIFETIME_MS,
        },
    );
    let mut back = vec![("code", code.as_str())];
    if let Some(state) = get(params, "state") {
        back.push(("state", state));
    }
    let sep = if redirect.contains('?') { '&' } else { '?' };
    let query = serde_urlencoded::to_string(&back).unwrap_or_default();
    Ok(format!("{redirect}{sep}{query}"))
}

/// A platform's token service given a code (`grant_type=authorization_code`): the shop's
/// first tokens in the platform's answer, or its refusal (a code used, ended or unknown).
pub fn exchange(
    sim: &Sim,
    platform: Platform,
    params: &[(String, String)],
    now_ms: i64,
) -> (StatusCode, Value) {
    let refuse =
        |status: StatusCode, code: &str, why: String| refusal(sim, platform, status, code, &why);
    let app = match token_app(sim, platform, params) {
        Ok(app) => app,
        Err(refused) => return refused,
    };
    let given = get(params, "code").unwrap_or("");
    // Single use: taken out whether or not it is still valid.
    let code = lock(&sim.tokens.codes).remove(given);
    let Some(code) = code.filter(|c| c.app == app && now_ms < c.ends_ms) else {
        // TOP answers a used or ended code with `invalid_client` (its FAQ).
        return refuse(
            StatusCode::BAD_REQUEST,
            if platform == Platform::Taobao {
                "invalid_client"
            } else {
                "invalid_grant"
            },
            format!("authorize code {given} invalidate,please authorize again."),
        );
    };
    // TOP and 1688 check the callback against the one the code was given for; JD's exchange
    // takes none.
    if platform != Platform::Jd && get(params, "redirect_uri") != Some(code.redirect_uri.as_str()) {
        return refuse(
            StatusCode::BAD_REQUEST,
            "invalid_client",
            "application callback can not match the redirect_uri".into(),
        );
    }
    let shop = code.seller;
    let n = sim.tokens.seq.fetch_add(1, Relaxed) + 1;
    let token = format!("sim-{platform}-token-{shop}-{n}");
    let refresh_token = format!("sim-{platform}-refresh-{shop}-{n}");
    let lifetime_s = match sim.cfg.token_lifetime_s {
        0 => 86_400 * 365,
        s => s,
    };
    lock(&sim.tokens.issued).insert(
        token.clone(),
        Issued {
            app,
            shop: shop.clone(),
            ends_ms: now_ms + lifetime_s as i64 * 1000,
        },
    );
    // 1688 gives a refresh token only when asked (`need_refresh_token=true`).
    let gives_refresh =
        platform != Platform::Alibaba || get(params, "need_refresh_token") == Some("true");
    if gives_refresh {
        lock(&sim.tokens.refreshes).insert(refresh_token.clone(), (app, shop.clone()));
    }
    sim.tokens.entry(platform, &shop, |e| e.authorized += 1);
    let nick: String = serde_urlencoded::to_string([("n", shop.as_str())])
        .unwrap_or_default()
        .trim_start_matches("n=")
        .to_string();
    let body = match platform {
        Platform::Taobao => json!({"access_token": token, "token_type": "Bearer",
            "expires_in": lifetime_s, "refresh_token": refresh_token, "re_expires_in": 2_592_000,
            "expire_time": now_ms + lifetime_s as i64 * 1000, "taobao_user_nick": nick,
            "taobao_user_id": format!("{}", 3_000_000_000u64 + n)}),
        Platform::Jd => json!({"access_token": token, "expires_in": lifetime_s,
            "refresh_token": refresh_token, "scope": "snsapi_base", "open_id": format!("sim-open-{n}"),
            "uid": shop, "time": now_ms, "token_type": "bearer", "code": 0}),
        Platform::Alibaba => {
            let mut b = json!({"aliId": format!("{}", 2_000_000_000u64 + n), "resource_owner": shop,
                "memberId": shop, "expires_in": lifetime_s.to_string(), "access_token": token});
            if gives_refresh {
                b["refresh_token"] = json!(refresh_token);
                b["refresh_token_timeout"] = json!("20271231235959000+0800");
            }
            b
        }
    };
    (StatusCode::OK, body)
}
