//! The simulator's own configuration (`config/sim.toml`).
//!
//! The simulator is a test double of the platforms, so its app secrets and sessions live in
//! its own file (they are never the real ones). Unknown keys are rejected; every problem
//! names the file and the key (or the line, for syntax errors).

use super::drill::Drill;
use super::live::LiveOrders;
use crate::platform::{Api, Platform};
use crate::secret::Secret;
use crate::time::QuotaDay;
use chrono::NaiveDateTime;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One app the simulator accepts: its key, secret and session (TOP) / access token (JD, 1688).
#[derive(Debug, Clone)]
pub struct SimApp {
    /// The platform the app belongs to.
    pub platform: Platform,
    /// The app key requests name (unique per platform).
    pub app_key: String,
    /// The app secret requests are signed with.
    pub secret: Secret,
    /// TOP `session`, JD / 1688 `access_token`.
    pub session: Secret,
    /// The shops that authorised the app, each with a session of its own (shop name ->
    /// session). A call signed with one of them is counted for that shop.
    pub shops: BTreeMap<String, Secret>,
    /// The app key's daily call count over all its APIs (TOP's
    /// `accesscontrol.limited-by-app-access-count`, 1688's `gw.NoUsageLeftError`); every
    /// call counts, refused ones too. `None`: only the per-API daily limits apply.
    pub daily: Option<u64>,
}

impl SimApp {
    /// The refresh token the simulator gives shop `name` of this app: it renews the shop's
    /// access token at the platform's token endpoint.
    pub fn shop_refresh(&self, name: &str) -> Option<Secret> {
        self.shops
            .contains_key(name)
            .then(|| Secret::new(format!("sim-{}-refresh-{name}", self.platform)))
    }

    /// The session the simulator gives shop `name` of this app (tests and benchmarks sign
    /// with it).
    pub fn shop_session(&self, name: &str) -> Option<&Secret> {
        self.shops.get(name)
    }
}

/// How the per-second limit of one (platform, api) admits calls. Client-side limit
/// discovery is tested against all three: platforms differ in this.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LimitKind {
    /// At most `per_second` calls per wall-clock second (window aligned to the second);
    /// the ban lasts until the next second boundary.
    #[default]
    Fixed,
    /// At most `per_second` calls in any 1,000 ms ending now; the ban lasts until the
    /// oldest admitted call leaves the window.
    Sliding,
    /// A token bucket refilled at `per_second` tokens per second holding at most `burst`;
    /// the ban lasts until the next token.
    Bucket,
}

impl LimitKind {
    /// Every kind, in declaration order.
    pub const ALL: [LimitKind; 3] = [LimitKind::Fixed, LimitKind::Sliding, LimitKind::Bucket];

    /// The lowercase name, as the config and the drills spell it (`fixed`, `sliding`, `bucket`).
    pub fn as_str(self) -> &'static str {
        match self {
            LimitKind::Fixed => "fixed",
            LimitKind::Sliding => "sliding",
            LimitKind::Bucket => "bucket",
        }
    }
}

impl std::fmt::Display for LimitKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Limits and latency of one (platform, api), applied to every app of that platform.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Limit {
    /// Calls admitted per second, counted as `kind` says.
    pub per_second: u64,
    /// How `per_second` is counted (default: a window aligned to the wall-clock second).
    #[serde(default)]
    pub kind: LimitKind,
    /// `bucket` only: the bucket's size (calls admitted at once after a quiet spell);
    /// `None` = `per_second`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burst: Option<u64>,
    /// A ban per rejection, as TOP answers: for this many seconds after a call is refused by
    /// the per-second limit, every call of the app to this API is refused too (0 = none: a
    /// refused call costs only itself).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub ban_s: u64,
    /// Calls per platform day (resets 00:00 GMT+8); every call counts, failed ones too.
    pub daily: u64,
    /// Sampled latency (log-normal) median in ms; 0 = none.
    pub latency_median_ms: u64,
    /// Sampled latency p95 in ms (>= median).
    pub latency_p95_ms: u64,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

impl Default for Limit {
    fn default() -> Self {
        Limit {
            per_second: 100,
            kind: LimitKind::Fixed,
            burst: None,
            ban_s: 0,
            daily: 1_000_000,
            latency_median_ms: 0,
            latency_p95_ms: 0,
        }
    }
}

/// Deterministic orders: per app (one shop per app), spread over a time window.
#[derive(Debug, Clone, PartialEq)]
pub struct OrdersConfig {
    /// Start of the window, GMT+8.
    pub start: NaiveDateTime,
    /// Length of the window in days.
    pub days: u32,
    /// Orders per shop (= per app).
    pub per_shop: u32,
    /// Share of orders that are shipped (have a logistics trace).
    pub shipped_share: f64,
    /// Share of shipped orders already signed.
    pub signed_share: f64,
    /// Unsigned shipped orders gain one trace event every this many seconds of wall time.
    pub event_every_s: u64,
    /// After this many gained events an order signs; 0 = never.
    pub sign_after_events: u32,
    /// Orders that arrive and change while the simulator runs, per shop (off by default).
    pub live: LiveOrders,
}

impl Default for OrdersConfig {
    fn default() -> Self {
        OrdersConfig {
            start: chrono::NaiveDate::from_ymd_opt(2026, 1, 1)
                .and_then(|d| d.and_hms_opt(0, 0, 0))
                .unwrap_or_default(),
            days: 7,
            per_shop: 3000,
            shipped_share: 0.8,
            signed_share: 0.7,
            event_every_s: 30,
            sign_after_events: 0,
            live: LiveOrders::default(),
        }
    }
}

/// The whole simulator configuration. Build it with [`SimConfig::load`] or
/// [`SimConfig::demo`] (also `Default`), then adjust fields directly in tests.
#[derive(Debug, Clone)]
pub struct SimConfig {
    /// Seed of all generated data (items, orders, traces).
    pub seed: u64,
    /// Allowed clock skew of request timestamps (TOP: ±10 min).
    pub timestamp_skew_s: u64,
    /// The platform's clock against this host's (s, negative: behind). Its order and message
    /// times, its timestamp check and its answers' `Date` run on it.
    pub clock_offset_s: i64,
    /// Largest request body accepted; larger ones get the platform's error body.
    pub max_body_bytes: usize,
    /// Idle-close drill: how long a request on a dropped connection is held before the close.
    pub idle_hold_s: u64,
    /// How long a shop's access token lives: its configured session from the simulator's
    /// start, a renewed one from its renewal (0: they never end). The app's own session never
    /// ends.
    pub token_lifetime_s: u64,
    /// The apps accepted; each gets its own shop of generated orders.
    pub apps: Vec<SimApp>,
    /// Catalog item ids are 1..=catalog_items.
    pub catalog_items: u64,
    /// How the deterministic orders are generated.
    pub orders: OrdersConfig,
    /// Per (platform, api); pairs not named use `default_limit`.
    pub limits: BTreeMap<(Platform, Api), Limit>,
    /// The limit of every (platform, api) not named in `limits`.
    pub default_limit: Limit,
    /// Drills in force at start.
    pub drill: Drill,
    /// The quota day (`day_seconds`; 86,400 s from 00:00 GMT+8). Tests and benchmarks
    /// shorten it to watch a whole day's pacing; the client's `[day] seconds` must match.
    pub day: QuotaDay,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig::demo()
    }
}

impl SimConfig {
    /// The demo apps of `config/sim.toml`, default limits, no drills.
    pub fn demo() -> SimConfig {
        let app = |platform, key: &str, secret: &str, session: &str| SimApp {
            platform,
            app_key: key.to_string(),
            secret: Secret::new(secret),
            session: Secret::new(session),
            shops: BTreeMap::new(),
            daily: None,
        };
        SimConfig {
            seed: 42,
            timestamp_skew_s: 600,
            clock_offset_s: 0,
            max_body_bytes: 1 << 20,
            idle_hold_s: 60,
            token_lifetime_s: 0,
            apps: vec![
                app(
                    Platform::Taobao,
                    "10000001",
                    "sim-taobao-secret",
                    "sim-taobao-session",
                ),
                app(Platform::Jd, "simjdapp", "sim-jd-secret", "sim-jd-token"),
                app(
                    Platform::Alibaba,
                    "1000001",
                    "sim-alibaba-secret",
                    "sim-alibaba-token",
                ),
            ],
            catalog_items: 100_000,
            orders: OrdersConfig::default(),
            limits: BTreeMap::new(),
            default_limit: Limit::default(),
            drill: Drill::default(),
            day: QuotaDay::PLATFORM,
        }
    }

    /// The limit in force from config for (platform, api).
    pub fn limit(&self, platform: Platform, api: Api) -> Limit {
        self.limits
            .get(&(platform, api))
            .copied()
            .unwrap_or(self.default_limit)
    }

    /// Set the limit of every app of `platform` for `api` (builder style, for tests).
    pub fn with_limit(mut self, platform: Platform, api: Api, per_second: u64, daily: u64) -> Self {
        let mut l = self.limit(platform, api);
        l.per_second = per_second;
        l.daily = daily;
        self.limits.insert((platform, api), l);
        self
    }

    /// Set how the per-second limit of every app of `platform` for `api` is counted, and
    /// the bucket size (`None` = `per_second`; used by `bucket` only). Builder style, for
    /// tests and benchmarks; `per_second` and `daily` stay as they are.
    pub fn with_limit_kind(
        mut self,
        platform: Platform,
        api: Api,
        kind: LimitKind,
        burst: Option<u64>,
    ) -> Self {
        let mut l = self.limit(platform, api);
        l.kind = kind;
        l.burst = burst;
        self.limits.insert((platform, api), l);
        self
    }

    /// Ban the app for `ban_s` seconds after each rejection of `api` on `platform` (TOP's
    /// behaviour; builder style, for tests and benchmarks).
    pub fn with_limit_ban(mut self, platform: Platform, api: Api, ban_s: u64) -> Self {
        let mut l = self.limit(platform, api);
        l.ban_s = ban_s;
        self.limits.insert((platform, api), l);
        self
    }

    /// The platform's clock `seconds` ahead of this host's (negative: behind).
    pub fn with_clock_offset(mut self, seconds: i64) -> Self {
        self.clock_offset_s = seconds;
        self
    }

    /// A quota day of `seconds` (tests and benchmarks: a whole day in minutes).
    pub fn with_day_seconds(mut self, seconds: u32) -> Self {
        self.day = QuotaDay::of_seconds(seconds).unwrap_or(self.day);
        self
    }

    /// Every app of `platform` counts `daily` calls a day over all its APIs.
    pub fn with_app_daily(mut self, platform: Platform, daily: u64) -> Self {
        for a in self.apps.iter_mut().filter(|a| a.platform == platform) {
            a.daily = Some(daily);
        }
        self
    }

    /// Set every (platform, api) limit at once (benchmarks: huge limits).
    pub fn with_all_limits(mut self, per_second: u64, daily: u64) -> Self {
        self.default_limit.per_second = per_second;
        self.default_limit.daily = daily;
        for l in self.limits.values_mut() {
            l.per_second = per_second;
            l.daily = daily;
        }
        self
    }

    /// Shops' access tokens live `seconds` (builder style, for tests and benchmarks).
    pub fn with_token_lifetime(mut self, seconds: u64) -> Self {
        self.token_lifetime_s = seconds;
        self
    }

    /// Give the first app of `platform` these shops, each with its own session
    /// (`sim-<platform>-session-<shop>`); builder style, for tests and benchmarks.
    pub fn with_shops(mut self, platform: Platform, names: &[&str]) -> Self {
        if let Some(app) = self.apps.iter_mut().find(|a| a.platform == platform) {
            for name in names {
                app.shops.insert(
                    name.to_string(),
                    Secret::new(format!("sim-{platform}-session-{name}")),
                );
            }
        }
        self
    }

    /// The first app of a platform, if configured.
    pub fn app(&self, platform: Platform) -> Option<&SimApp> {
        self.apps.iter().find(|a| a.platform == platform)
    }

    /// A platform client signing as this simulator's app of `platform` (demo, tests,
    /// benchmarks: whoever runs the simulator holds its credentials; no environment needed).
    pub fn client(
        &self,
        platform: Platform,
        opts: &crate::platform::client::ClientOptions,
    ) -> Result<crate::platform::PlatformClient, super::SimError> {
        let app = self.app(platform).ok_or(super::SimError::NoApp(platform))?;
        Ok(crate::platform::PlatformClient::new(
            platform,
            opts,
            app.secret.clone(),
            Some(app.session.clone()),
        )?)
    }
}

mod file;

#[cfg(test)]
mod tests;
