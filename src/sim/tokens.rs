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
}

struct Issued {
    app: usize,
    shop: String,
    ends_ms: i64,
}

/// The tokens a simulator issued, and what each shop's did.
#[derive(Default)]
pub(crate) struct TokenBook {
    issued: Mutex<HashMap<String, Issued>>,
    stats: Mutex<BTreeMap<(Platform, String), TokenStats>>,
    seq: AtomicU64,
}

/// Whose a session is, as the platform sees it.
pub(crate) enum Holder {
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
    pub(crate) fn stats(&self) -> Vec<TokenStats> {
        self.stats
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .cloned()
            .collect()
    }

    pub(crate) fn reset(&self) {
        self.stats.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }

    /// A call refused for an ended token of `shop`.
    pub(crate) fn count_ended(&self, platform: Platform, shop: &str) {
        self.entry(platform, shop, |e| e.expired_refused += 1);
    }
}

/// Whose `given` session of app `app` is at `now_ms`.
pub(crate) fn holder(sim: &Sim, app: usize, given: Option<&str>, now_ms: i64) -> Holder {
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

/// A platform's token endpoint: renew a shop's token with its refresh token. `params` are the
/// form and query pairs; the answer is the platform's own (status and body).
pub(crate) fn refresh(
    sim: &Sim,
    platform: Platform,
    params: &[(String, String)],
    now_ms: i64,
) -> (StatusCode, Value) {
    let (id_key, secret_key) = match platform {
        Platform::Jd => ("app_key", "app_secret"),
        _ => ("client_id", "client_secret"),
    };
    let refuse = |status: StatusCode, code: &str, why: &str| match platform {
        Platform::Jd => (
            StatusCode::OK,
            json!({"code": 304, "msg": why, "requestId": sim.request_id()}),
        ),
        _ => (status, json!({"error": code, "error_description": why})),
    };
    let app = get(params, id_key).and_then(|k| sim.app(platform, k));
    let Some(app) =
        app.filter(|&a| get(params, secret_key) == Some(sim.apps[a].cfg.secret.expose()))
    else {
        return refuse(
            StatusCode::UNAUTHORIZED,
            "invalid_client",
            "client_id or client_secret is wrong",
        );
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
    let Some(shop) = cfg
        .shops
        .keys()
        .find(|name| {
            cfg.shop_refresh(name)
                .is_some_and(|r| Some(r.expose()) == given)
        })
        .cloned()
    else {
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
    let refresh = cfg.shop_refresh(&shop).map(|r| r.expose().to_string());
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
