//! The simulator's run-time state: per (app, api) limit windows and counters, drills, data.
//!
//! Lock-light: each (app, api) slot has its own small mutex for the per-second limit
//! (fixed window, sliding window or token bucket) and the quota day; counters are atomics;
//! drills sit behind one RwLock read briefly per call.
//!
//! By concern: this module holds the slots and the shared `Sim`; `window` the per-second
//! limit kinds (fixed, sliding, bucket); `stats` the counters' snapshot types.

mod stats;
#[cfg(test)]
mod tests;
mod window;

pub use stats::{ApiStats, AppStats, ErrorCounts, ShopStats, SimStats, Totals};

use super::config::{Limit, LimitKind, SimApp, SimConfig};
use super::data::{Shop, Written};
use super::drill::{Drill, DrillPatch};
use super::live::{LiveShop, MessageQueue};
use crate::platform::{Api, Platform};
use crate::time::QuotaDay;
use chrono::{DateTime, Utc};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering::Relaxed};
use std::sync::{Mutex, MutexGuard, RwLock};
use window::Window;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic elsewhere must not stop the simulator: the data stays usable.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// What the admission check decided for one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admit {
    /// Admitted.
    Ok,
    /// Over the per-second limit: banned until the window frees.
    Limited {
        /// Seconds the ban lasts.
        ban_s: u64,
    },
    /// Daily quota spent: banned until the day's end.
    QuotaSpent {
        /// Seconds to the day's reset.
        ban_s: u64,
    },
    /// The app's daily count over all its APIs is spent: banned until the day's end.
    AppQuotaSpent {
        /// Seconds to the day's reset.
        ban_s: u64,
    },
}

/// How a call was answered, for the counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Answered successfully.
    Ok,
    /// Refused by the per-second limit.
    RejectedLimit,
    /// Refused because a daily quota (the API's or the app's) was spent.
    RejectedQuota,
    /// A Retry-class error.
    Retry,
    /// A Fatal-class error.
    Fatal,
    /// An error a client classes Unknown (a business failure in a success body).
    Unknown,
}

#[derive(Debug, Default)]
struct Counters {
    calls: AtomicU64,
    ok: AtomicU64,
    rejected_limit: AtomicU64,
    rejected_quota: AtomicU64,
    retry: AtomicU64,
    fatal: AtomicU64,
    unknown: AtomicU64,
    duplicate_writes: AtomicU64,
    answers_lost: AtomicU64,
    idle_closed: AtomicU64,
    limited_seconds: AtomicU64,
}

/// One (app, api).
#[derive(Debug)]
pub struct Slot {
    /// The app's platform.
    pub platform: Platform,
    /// The API.
    pub api: Api,
    /// The app's key.
    pub app_key: String,
    per_second: AtomicU64,
    /// `LimitKind` as its index in `LimitKind::ALL`.
    kind: AtomicU8,
    /// Bucket size; 0 = `per_second`.
    burst: AtomicU64,
    daily: AtomicU64,
    /// Seconds every call is refused after a rejection (TOP's ban; 0 = none).
    ban_s: u64,
    /// Latency added to each admitted call: (median, p95) in ms.
    pub latency: (u64, u64),
    window: Mutex<Window>,
    counters: Counters,
    day: QuotaDay,
}

/// Seconds of a ban that lasts until the day's end.
fn until_reset_s(day: QuotaDay, now: DateTime<Utc>) -> u64 {
    let left = (day.next_reset(now) - now).num_milliseconds().max(0) as u64;
    left.div_ceil(1000).max(1)
}

impl Slot {
    fn new(app: &SimApp, api: Api, limit: Limit, day: QuotaDay) -> Slot {
        Slot {
            platform: app.platform,
            api,
            app_key: app.app_key.clone(),
            per_second: AtomicU64::new(limit.per_second),
            kind: AtomicU8::new(kind_index(limit.kind)),
            burst: AtomicU64::new(limit.burst.unwrap_or(0)),
            daily: AtomicU64::new(limit.daily),
            ban_s: limit.ban_s,
            latency: (limit.latency_median_ms, limit.latency_p95_ms),
            window: Mutex::new(Window::default()),
            counters: Counters::default(),
            day,
        }
    }

    /// Count a call the app's daily count refused before the API looked at it.
    pub fn count_refused(&self) {
        self.counters.calls.fetch_add(1, Relaxed);
    }

    /// The kind of per-second limit in force.
    pub fn limit_kind(&self) -> LimitKind {
        LimitKind::ALL
            .get(usize::from(self.kind.load(Relaxed)))
            .copied()
            .unwrap_or_default()
    }

    /// The bucket size in force (`per_second` unless set).
    fn burst(&self) -> u64 {
        match self.burst.load(Relaxed) {
            0 => self.per_second.load(Relaxed),
            b => b,
        }
    }

    /// Count one call in the per-second limit and the quota; every call counts against the
    /// daily quota, the ones refused by the per-second limit too.
    pub fn admit(&self, now: DateTime<Utc>) -> Admit {
        let per_second = self.per_second.load(Relaxed);
        let kind = self.limit_kind();
        let burst = self.burst();
        let daily = self.daily.load(Relaxed);
        let sec = now.timestamp();
        let day = self.day.index(now);
        self.counters.calls.fetch_add(1, Relaxed);
        let mut w = lock(&self.window);
        if w.day != Some(day) {
            w.day = Some(day);
            w.quota_used = 0;
        }
        // Requests are stamped when their head is read and counted when the handler gets
        // here, so one stamped just before a boundary can come after one stamped just past it:
        // it counts in the open second (as if it had arrived late) instead of reopening the
        // previous one and zeroing this one's count. (More than a second back is the clock
        // stepped back: start over.)
        if sec > w.second || sec + 1 < w.second {
            w.second = sec;
            w.seen = 0;
            w.admitted = 0;
        }
        w.seen += 1;
        w.peak = w.peak.max(w.seen);
        if w.quota_used >= daily {
            drop(w);
            return Admit::QuotaSpent {
                ban_s: until_reset_s(self.day, now),
            };
        }
        w.quota_used += 1;
        // State of a kind no longer in force (a drill changed it) is dropped.
        if kind != LimitKind::Sliding && !w.admitted_at.is_empty() {
            w.admitted_at.clear();
        }
        if kind != LimitKind::Bucket {
            w.bucket = None;
        }
        let limited = |w: &mut Window| {
            if w.last_limited_second != Some(sec) {
                w.last_limited_second = Some(sec);
                self.counters.limited_seconds.fetch_add(1, Relaxed);
            }
        };
        if let Some(left) = w
            .banned_until
            .and_then(|until| (until - now).to_std().ok())
            .filter(|left| !left.is_zero())
        {
            limited(&mut w);
            return Admit::Limited {
                ban_s: window::ban_seconds(left),
            };
        }
        let admit = match kind {
            LimitKind::Fixed => w.admit_fixed(per_second, now),
            LimitKind::Sliding => w.admit_sliding(per_second, now),
            LimitKind::Bucket => w.admit_bucket(per_second, burst, now),
        };
        if matches!(admit, Admit::Limited { .. }) {
            limited(&mut w);
        }
        match admit {
            Admit::Limited { ban_s } if self.ban_s > 0 => {
                let ban = chrono::TimeDelta::seconds(i64::try_from(self.ban_s).unwrap_or(i64::MAX));
                w.banned_until = Some(now + ban);
                Admit::Limited {
                    ban_s: ban_s.max(self.ban_s),
                }
            }
            other => other,
        }
    }

    /// Count how a call was answered.
    pub fn record(&self, outcome: Outcome) {
        let c = &self.counters;
        match outcome {
            Outcome::Ok => &c.ok,
            Outcome::RejectedLimit => &c.rejected_limit,
            Outcome::RejectedQuota => &c.rejected_quota,
            Outcome::Retry => &c.retry,
            Outcome::Fatal => &c.fatal,
            Outcome::Unknown => &c.unknown,
        }
        .fetch_add(1, Relaxed);
    }

    /// Count a product made with a seller's code another product of the shop already carried.
    pub fn duplicate_write(&self) {
        self.counters.duplicate_writes.fetch_add(1, Relaxed);
    }

    /// A write done whose answer the lost-answer drill dropped.
    pub fn answer_lost(&self) {
        self.counters.answers_lost.fetch_add(1, Relaxed);
    }

    /// Count a request the idle-close drill dropped.
    pub fn idle_closed(&self) {
        self.counters.idle_closed.fetch_add(1, Relaxed);
    }

    fn reset(&self) {
        *lock(&self.window) = Window::default();
        let c = &self.counters;
        for a in [
            &c.calls,
            &c.ok,
            &c.rejected_limit,
            &c.rejected_quota,
            &c.limited_seconds,
            &c.retry,
            &c.fatal,
            &c.unknown,
            &c.duplicate_writes,
            &c.answers_lost,
            &c.idle_closed,
        ] {
            a.store(0, Relaxed);
        }
    }

    fn snapshot(&self, now: DateTime<Utc>) -> ApiStats {
        let (quota_used_today, peak_per_second) = {
            let w = lock(&self.window);
            let used = if w.day == Some(self.day.index(now)) {
                w.quota_used
            } else {
                0
            };
            (used, w.peak)
        };
        let c = &self.counters;
        ApiStats {
            app_key: self.app_key.clone(),
            platform: self.platform,
            api: self.api,
            calls: c.calls.load(Relaxed),
            ok: c.ok.load(Relaxed),
            rejected_limit: c.rejected_limit.load(Relaxed),
            rejected_quota: c.rejected_quota.load(Relaxed),
            errors_by_class: ErrorCounts {
                retry: c.retry.load(Relaxed),
                fatal: c.fatal.load(Relaxed),
                unknown: c.unknown.load(Relaxed),
            },
            quota_used_today,
            peak_per_second,
            limited_seconds: c.limited_seconds.load(Relaxed),
            duplicate_writes: c.duplicate_writes.load(Relaxed),
            answers_lost: c.answers_lost.load(Relaxed),
            idle_closed: c.idle_closed.load(Relaxed),
            limit_per_second: self.per_second.load(Relaxed),
            limit_daily: self.daily.load(Relaxed),
            limit_kind: self.limit_kind(),
            limit_burst: self.burst(),
        }
    }
}

/// One configured app at run time.
#[derive(Debug)]
pub struct AppRt {
    /// The app as configured.
    pub cfg: SimApp,
    /// Its generated orders.
    pub shop: Shop,
    /// The products item_add made for it.
    pub written: Mutex<Written>,
    /// Its change messages: who got and confirmed what.
    pub messages: Mutex<MessageQueue>,
    /// Index of its first slot; the api's index in `Api::ALL` is added.
    slot_base: usize,
    /// The app key's daily count over all its APIs: (day index, calls counted).
    quota: Mutex<(i64, u64)>,
    /// Calls the app's daily count refused.
    rejected_app_quota: AtomicU64,
}

impl AppRt {
    /// Count one call against the app's daily count (every call counts, refused ones too);
    /// `Some(ban_s)` when the count was already spent.
    pub fn admit(&self, day: QuotaDay, now: DateTime<Utc>) -> Option<u64> {
        let daily = self.cfg.daily?;
        let today = day.index(now);
        let mut q = lock(&self.quota);
        if q.0 != today {
            *q = (today, 0);
        }
        let spent = q.1 >= daily;
        q.1 += 1;
        drop(q);
        if spent {
            self.rejected_app_quota.fetch_add(1, Relaxed);
            return Some(until_reset_s(day, now));
        }
        None
    }

    fn snapshot(&self, day: QuotaDay, now: DateTime<Utc>) -> AppStats {
        let q = *lock(&self.quota);
        AppStats {
            platform: self.cfg.platform,
            app_key: self.cfg.app_key.clone(),
            daily: self.cfg.daily,
            used_today: if q.0 == day.index(now) { q.1 } else { 0 },
            rejected_app_quota: self.rejected_app_quota.load(Relaxed),
        }
    }
}

/// Everything the handlers share.
#[derive(Debug)]
pub struct Sim {
    /// The configuration it runs with.
    pub cfg: SimConfig,
    /// The configured apps, in config order (a call's `app` is an index here).
    pub apps: Vec<AppRt>,
    by_key: HashMap<(Platform, String), usize>,
    slots: Vec<Slot>,
    drill: RwLock<Drill>,
    unattributed: AtomicU64,
    /// Unix seconds the simulator started (trace events are gained from here).
    pub started: i64,
    request_seq: AtomicU64,
    /// Per (platform, shop, api): what the shops' own sessions did.
    shop_calls: Mutex<BTreeMap<(Platform, String, Api), ShopStats>>,
    /// The shops' tokens: issued, renewed, ended.
    pub tokens: crate::tokens::TokenBook,
    /// What the walk-shift drill changed.
    pub walk_shift: crate::walk_shift::WalkShift,
}

fn kind_index(kind: LimitKind) -> u8 {
    LimitKind::ALL.iter().position(|k| *k == kind).unwrap_or(0) as u8
}

fn api_index(api: Api) -> usize {
    Api::ALL.iter().position(|a| *a == api).unwrap_or(0)
}

impl Sim {
    /// The platform's clock: this host's moved by `clock_offset_s`.
    pub fn now(&self) -> chrono::DateTime<Utc> {
        Utc::now() + chrono::Duration::seconds(self.cfg.clock_offset_s)
    }

    /// The simulator for `cfg`, with `cfg.drill` in force; refuses an invalid drill or an app
    /// key given twice on one platform.
    pub fn new(cfg: SimConfig) -> Result<Sim, super::SimError> {
        cfg.drill.validate()?;
        let mut apps = Vec::new();
        let mut slots = Vec::new();
        let mut by_key = HashMap::new();
        for (i, app) in cfg.apps.iter().enumerate() {
            if by_key
                .insert((app.platform, app.app_key.clone()), i)
                .is_some()
            {
                return Err(super::SimError::DuplicateAppKey(app.app_key.clone()));
            }
            let slot_base = slots.len();
            for api in Api::ALL {
                slots.push(Slot::new(app, api, cfg.limit(app.platform, api), cfg.day));
            }
            apps.push(AppRt {
                cfg: app.clone(),
                shop: Shop::generate(cfg.seed, i as u64, &cfg.orders),
                written: Mutex::new(Written::default()),
                messages: Mutex::new(MessageQueue::default()),
                slot_base,
                quota: Mutex::new((0, 0)),
                rejected_app_quota: AtomicU64::new(0),
            });
        }
        let cfg_offset = cfg.clock_offset_s;
        let sim = Sim {
            drill: RwLock::new(Drill::default()),
            cfg,
            apps,
            by_key,
            slots,
            unattributed: AtomicU64::new(0),
            started: (Utc::now() + chrono::Duration::seconds(cfg_offset)).timestamp(),
            request_seq: AtomicU64::new(0),
            shop_calls: Mutex::new(BTreeMap::new()),
            tokens: Default::default(),
            walk_shift: Default::default(),
        };
        let initial = sim.cfg.drill.clone();
        sim.install_drill(initial);
        Ok(sim)
    }

    /// The app with this key on this platform.
    pub fn app(&self, platform: Platform, app_key: &str) -> Option<usize> {
        // Avoids allocating in the common case of a handful of apps.
        if self.apps.len() <= 8 {
            return self
                .apps
                .iter()
                .position(|a| a.cfg.platform == platform && a.cfg.app_key == app_key);
        }
        self.by_key.get(&(platform, app_key.to_string())).copied()
    }

    /// The live orders of `shop` of app `app` (`""`: the app's own session).
    pub fn live_shop(&self, app: usize, shop: &str) -> LiveShop<'_> {
        let number = if shop.is_empty() {
            0
        } else {
            self.apps[app]
                .cfg
                .shops
                .keys()
                .position(|n| n == shop)
                .map_or(0, |i| i + 1)
        };
        LiveShop {
            cfg: &self.cfg.orders.live,
            seed: self.cfg.seed,
            started: self.started,
            app,
            shop: number,
        }
    }

    /// Every live shop of app `app`, named (`""`: the app's own session).
    pub fn live_shops(&self, app: usize) -> Vec<(String, LiveShop<'_>)> {
        std::iter::once(String::new())
            .chain(self.apps[app].cfg.shops.keys().cloned())
            .map(|name| {
                let shop = self.live_shop(app, &name);
                (name, shop)
            })
            .collect()
    }

    /// The slot of (app `app`, `api`).
    pub fn slot(&self, app: usize, api: Api) -> &Slot {
        &self.slots[self.apps[app].slot_base + api_index(api)]
    }

    /// Count a request that could not be pinned to an (app, api).
    pub fn unattributed(&self) {
        self.unattributed.fetch_add(1, Relaxed);
    }

    /// A fresh request id (`sim` and a hex sequence number).
    pub fn request_id(&self) -> String {
        format!("sim{:x}", self.request_seq.fetch_add(1, Relaxed) + 1)
    }

    /// The drills in force (a copy).
    pub fn drill(&self) -> Drill {
        self.drill.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Read the drills without cloning.
    pub fn with_drill<R>(&self, f: impl FnOnce(&Drill) -> R) -> R {
        f(&self.drill.read().unwrap_or_else(|e| e.into_inner()))
    }

    /// Apply a drill change; returns the drills now in force.
    pub fn set_drill(&self, patch: &DrillPatch) -> Result<Drill, super::DrillError> {
        let mut guard = self.drill.write().unwrap_or_else(|e| e.into_inner());
        let next = patch.apply(&guard)?;
        *guard = next.clone();
        drop(guard);
        if patch.walk_shift == Some(true) {
            self.walk_shift.rearm();
        }
        self.apply_limits(&next);
        Ok(next)
    }

    fn install_drill(&self, d: Drill) {
        *self.drill.write().unwrap_or_else(|e| e.into_inner()) = d.clone();
        self.apply_limits(&d);
    }

    /// Effective limits = config, then the drill overrides in order.
    fn apply_limits(&self, d: &Drill) {
        for s in &self.slots {
            let base = self.cfg.limit(s.platform, s.api);
            let (mut ps, mut daily) = (base.per_second, base.daily);
            for o in d.limits.iter().filter(|o| o.matches(s.platform, s.api)) {
                ps = o.per_second.unwrap_or(ps);
                daily = o.daily.unwrap_or(daily);
            }
            let (mut kind, mut burst) = (base.kind, base.burst);
            for o in d
                .limit_kinds
                .iter()
                .filter(|o| o.matches(s.platform, s.api))
            {
                kind = o.kind.unwrap_or(kind);
                burst = o.burst.or(burst);
            }
            s.per_second.store(ps, Relaxed);
            s.kind.store(kind_index(kind), Relaxed);
            s.burst.store(burst.unwrap_or(0), Relaxed);
            s.daily.store(daily, Relaxed);
        }
    }

    /// Zero the stats, the windows, the quota counters and the written items.
    fn shop_entry<R>(
        &self,
        platform: Platform,
        shop: &str,
        api: Api,
        f: impl FnOnce(&mut ShopStats) -> R,
    ) -> R {
        let mut m = lock(&self.shop_calls);
        let e = m
            .entry((platform, shop.to_string(), api))
            .or_insert_with(|| ShopStats {
                platform,
                shop: shop.to_string(),
                api,
                ok: 0,
                refused: 0,
                first_ok_ms: None,
                last_ok_ms: None,
                last_refused_ms: None,
            });
        f(e)
    }

    /// A call signed with `shop`'s session was answered successfully at `now`.
    pub fn shop_ok(&self, platform: Platform, shop: &str, api: Api, now: DateTime<Utc>) {
        let ms = now.timestamp_millis();
        self.shop_entry(platform, shop, api, |e| {
            e.ok += 1;
            e.first_ok_ms.get_or_insert(ms);
            e.last_ok_ms = Some(e.last_ok_ms.map_or(ms, |l| l.max(ms)));
        });
    }

    /// A call signed with `shop`'s session was refused for that session.
    pub fn shop_refused(&self, platform: Platform, shop: &str, api: Api) {
        let ms = Utc::now().timestamp_millis();
        self.shop_entry(platform, shop, api, |e| {
            e.refused += 1;
            e.last_refused_ms = Some(ms);
        });
    }

    /// Start the counters afresh (`POST /admin/reset`): limit windows, counters, quotas,
    /// written products, shop and token counts and the walk-shift drill's changes. Drills stay.
    pub fn reset(&self) {
        lock(&self.shop_calls).clear();
        self.tokens.reset();
        self.walk_shift.reset();
        for s in &self.slots {
            s.reset();
        }
        for a in &self.apps {
            *lock(&a.written) = Written::default();
            *lock(&a.quota) = (0, 0);
            a.rejected_app_quota.store(0, Relaxed);
        }
        self.unattributed.store(0, Relaxed);
    }

    /// A snapshot of the counters (`GET /admin/stats`).
    pub fn stats(&self) -> SimStats {
        let now = Utc::now();
        let apis: Vec<ApiStats> = self.slots.iter().map(|s| s.snapshot(now)).collect();
        let mut t = Totals {
            unattributed: self.unattributed.load(Relaxed),
            ..Totals::default()
        };
        for a in &apis {
            t.calls += a.calls;
            t.ok += a.ok;
            t.rejected_limit += a.rejected_limit;
            t.rejected_quota += a.rejected_quota;
            t.errors_by_class.retry += a.errors_by_class.retry;
            t.errors_by_class.fatal += a.errors_by_class.fatal;
            t.errors_by_class.unknown += a.errors_by_class.unknown;
            t.quota_used_today += a.quota_used_today;
            t.duplicate_writes += a.duplicate_writes;
            t.answers_lost += a.answers_lost;
            t.idle_closed += a.idle_closed;
        }
        for a in &self.apps {
            t.products += lock(&a.written).counts().0;
        }
        SimStats {
            apis,
            totals: t,
            shops: lock(&self.shop_calls).values().cloned().collect(),
            apps: self
                .apps
                .iter()
                .map(|a| a.snapshot(self.cfg.day, now))
                .collect(),
            tokens: self.tokens.stats(),
        }
    }
}
