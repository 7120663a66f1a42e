//! The counters as the simulator reports them (`GET /admin/stats`, `SimHandle::stats`): per
//! (app, api), their sums, and the errors by class.

use crate::config::LimitKind;
use crate::platform::{Api, Platform};
use serde::{Deserialize, Serialize};

/// Errors by the class a client would give them (Slow ones are the `rejected_*` counters).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorCounts {
    /// Retry-class errors (the `error_ratio` and `outage` drills).
    pub retry: u64,
    /// Fatal-class errors (bad signature, timestamp, session or parameters; TOP's not-found).
    pub fatal: u64,
    /// Unknown-class errors (business failures in a success body: JD's and 1688's not-found,
    /// the worded-limit drill).
    pub unknown: u64,
}

/// Counters of one (app_key, api), as seen from the platform side.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApiStats {
    /// The app's key.
    pub app_key: String,
    /// The app's platform.
    pub platform: Platform,
    /// The API called.
    pub api: Api,
    /// Calls that reached the platform (= ok + rejected_* + errors).
    pub calls: u64,
    /// Calls answered successfully.
    pub ok: u64,
    /// Refused by the per-second window (TOP 7, JD 2, 1688 gw.QosAppFrequencyLimit).
    pub rejected_limit: u64,
    /// Refused because the daily quota was spent.
    pub rejected_quota: u64,
    /// Calls answered with any other error, by class.
    pub errors_by_class: ErrorCounts,
    /// Calls counted against today's quota (GMT+8 day), failed ones included.
    pub quota_used_today: u64,
    /// Most calls seen in any one wall-clock second (refused ones included).
    pub peak_per_second: u64,
    /// Wall-clock seconds in which at least one call was refused by the per-second limit
    /// (or its ban): on TOP each is a ban of the app.
    #[serde(default)]
    pub limited_seconds: u64,
    /// Products item_add made whose seller's code another product of the same shop already
    /// carried: duplicates, counted by seller's code.
    pub duplicate_writes: u64,
    /// Writes done whose answer the lost-answer drill dropped.
    #[serde(default)]
    pub answers_lost: u64,
    /// Requests dropped by the idle-close drill (never answered, not counted as calls).
    pub idle_closed: u64,
    /// The limits in force (simulator side only; clients must not read them).
    pub limit_per_second: u64,
    /// Daily quota in force (calls per GMT+8 day).
    pub limit_daily: u64,
    /// How the per-second limit is counted.
    #[serde(default)]
    pub limit_kind: LimitKind,
    /// Bucket size (`bucket` only; `per_second` unless set).
    #[serde(default)]
    pub limit_burst: u64,
}

/// Sums over all (app, api), plus calls the simulator could not attribute to one.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Totals {
    /// Calls of every (app, api) (`unattributed` requests not included).
    pub calls: u64,
    /// Calls answered successfully.
    pub ok: u64,
    /// Calls refused by a per-second limit.
    pub rejected_limit: u64,
    /// Calls refused because a daily quota was spent.
    pub rejected_quota: u64,
    /// Calls answered with any other error, by class.
    pub errors_by_class: ErrorCounts,
    /// Calls counted against today's quotas, all apps.
    pub quota_used_today: u64,
    /// Products made with a seller's code another product of the shop already carried, all
    /// apps.
    pub duplicate_writes: u64,
    /// Writes done whose answer the lost-answer drill dropped, all apps.
    #[serde(default)]
    pub answers_lost: u64,
    /// Products item_add made, all apps.
    #[serde(default)]
    pub products: u64,
    /// Requests dropped by the idle-close drill, all apps.
    pub idle_closed: u64,
    /// Requests with an unknown app key or method, or unreadable (answered with an error).
    pub unattributed: u64,
}

/// Calls of one shop (a session of an app's `shops`) to one API, as the platform saw them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShopStats {
    /// The shop's platform.
    pub platform: Platform,
    /// The shop's name in the simulator's config.
    pub shop: String,
    /// The API called.
    pub api: Api,
    /// Calls answered successfully.
    pub ok: u64,
    /// Calls refused for the shop's session (the `refused_shops` drill).
    pub refused: u64,
    /// When the first successful call was answered (Unix ms).
    pub first_ok_ms: Option<i64>,
    /// When the latest successful call was answered (Unix ms).
    pub last_ok_ms: Option<i64>,
    /// When the latest refused call came (Unix ms).
    pub last_refused_ms: Option<i64>,
}

/// One app key's daily count over all its APIs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppStats {
    /// The app's platform.
    pub platform: Platform,
    /// The app's key.
    pub app_key: String,
    /// Its daily count, if it has one.
    pub daily: Option<u64>,
    /// Calls counted today (every API, refused ones too).
    pub used_today: u64,
    /// Calls refused because the count was spent.
    pub rejected_app_quota: u64,
}

/// A snapshot of the counters (`GET /admin/stats`, `SimHandle::stats`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SimStats {
    /// Per (app, api).
    pub apis: Vec<ApiStats>,
    /// Sums over all (app, api).
    pub totals: Totals,
    /// Per shop and API, for the calls signed with a shop's own session.
    #[serde(default)]
    pub shops: Vec<ShopStats>,
    /// Per app: its daily count over all APIs.
    #[serde(default)]
    pub apps: Vec<AppStats>,
    /// Per shop: its token renewals and the calls refused for an ended token.
    #[serde(default)]
    pub tokens: Vec<crate::tokens::TokenStats>,
}

impl SimStats {
    /// The counters of the first app of `platform` for `api`.
    pub fn for_platform(&self, platform: Platform, api: Api) -> Option<&ApiStats> {
        self.apis
            .iter()
            .find(|s| s.platform == platform && s.api == api)
    }

    /// The daily count of the first app of `platform`.
    pub fn app(&self, platform: Platform) -> Option<&AppStats> {
        self.apps.iter().find(|a| a.platform == platform)
    }

    /// The token counts of `shop` on `platform` (zero when it did nothing).
    pub fn tokens_of(&self, platform: Platform, shop: &str) -> crate::tokens::TokenStats {
        self.tokens
            .iter()
            .find(|t| t.platform == Some(platform) && t.shop == shop)
            .cloned()
            .unwrap_or_default()
    }

    /// The counters of `shop` on `platform` for `api`.
    pub fn for_shop(&self, platform: Platform, shop: &str, api: Api) -> Option<&ShopStats> {
        self.shops
            .iter()
            .find(|s| s.platform == platform && s.shop == shop && s.api == api)
    }
}
