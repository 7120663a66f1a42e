//! The simulator's run-time state: per (app, api) limit windows and counters, drills, data.
//!
//! Lock-light: each (app, api) slot has its own small mutex for the per-second window and
//! the quota day; counters are atomics; drills sit behind one RwLock read briefly per call.

use super::config::{Limit, SimApp, SimConfig};
use super::data::{Shop, Written};
use super::drill::{Drill, DrillPatch};
use crate::platform::{Api, Platform};
use crate::time::{next_quota_reset, platform_day};
use chrono::{DateTime, NaiveDate, Utc};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Mutex, MutexGuard, RwLock};

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic elsewhere must not stop the simulator: the data stays usable.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// What the admission check decided for one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admit {
    Ok,
    /// Over the per-second limit: banned until the window frees.
    Limited {
        ban_s: u64,
    },
    /// Daily quota spent: banned until 00:00 GMT+8.
    QuotaSpent {
        ban_s: u64,
    },
}

/// How a call was answered, for the counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Ok,
    RejectedLimit,
    RejectedQuota,
    Retry,
    Fatal,
    Unknown,
}

#[derive(Debug, Default)]
struct Window {
    second: i64,
    seen: u64,
    admitted: u64,
    day: Option<NaiveDate>,
    quota_used: u64,
    peak: u64,
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
    idle_closed: AtomicU64,
}

/// One (app, api).
#[derive(Debug)]
pub struct Slot {
    pub platform: Platform,
    pub api: Api,
    pub app_key: String,
    per_second: AtomicU64,
    daily: AtomicU64,
    pub latency: (u64, u64),
    window: Mutex<Window>,
    counters: Counters,
}

impl Slot {
    fn new(app: &SimApp, api: Api, limit: Limit) -> Slot {
        Slot {
            platform: app.platform,
            api,
            app_key: app.app_key.clone(),
            per_second: AtomicU64::new(limit.per_second),
            daily: AtomicU64::new(limit.daily),
            latency: (limit.latency_median_ms, limit.latency_p95_ms),
            window: Mutex::new(Window::default()),
            counters: Counters::default(),
        }
    }

    /// Count one call in the window and the quota; every call counts against the daily
    /// quota, the ones refused by the per-second limit too.
    pub fn admit(&self, now: DateTime<Utc>) -> Admit {
        let per_second = self.per_second.load(Relaxed);
        let daily = self.daily.load(Relaxed);
        let sec = now.timestamp();
        let day = platform_day(now);
        self.counters.calls.fetch_add(1, Relaxed);
        let mut w = lock(&self.window);
        if w.day != Some(day) {
            w.day = Some(day);
            w.quota_used = 0;
        }
        if w.second != sec {
            w.second = sec;
            w.seen = 0;
            w.admitted = 0;
        }
        w.seen += 1;
        w.peak = w.peak.max(w.seen);
        if w.quota_used >= daily {
            drop(w);
            let left = (next_quota_reset(now) - now).num_milliseconds().max(0) as u64;
            return Admit::QuotaSpent {
                ban_s: left.div_ceil(1000).max(1),
            };
        }
        w.quota_used += 1;
        if w.admitted >= per_second {
            // The window is the wall-clock second: it frees at the next second boundary.
            let left = 1000 - now.timestamp_subsec_millis().min(999) as u64;
            return Admit::Limited {
                ban_s: left.div_ceil(1000).max(1),
            };
        }
        w.admitted += 1;
        Admit::Ok
    }

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

    pub fn duplicate_write(&self) {
        self.counters.duplicate_writes.fetch_add(1, Relaxed);
    }

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
            &c.retry,
            &c.fatal,
            &c.unknown,
            &c.duplicate_writes,
            &c.idle_closed,
        ] {
            a.store(0, Relaxed);
        }
    }

    fn snapshot(&self, now: DateTime<Utc>) -> ApiStats {
        let (quota_used_today, peak_per_second) = {
            let w = lock(&self.window);
            let used = if w.day == Some(platform_day(now)) {
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
            duplicate_writes: c.duplicate_writes.load(Relaxed),
            idle_closed: c.idle_closed.load(Relaxed),
            limit_per_second: self.per_second.load(Relaxed),
            limit_daily: self.daily.load(Relaxed),
        }
    }
}

/// Errors by the class a client would give them (Slow ones are the `rejected_*` counters).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorCounts {
    pub retry: u64,
    pub fatal: u64,
    pub unknown: u64,
}

/// Counters of one (app_key, api), as seen from the platform side.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApiStats {
    pub app_key: String,
    pub platform: Platform,
    pub api: Api,
    /// Calls that reached the platform (= ok + rejected_* + errors).
    pub calls: u64,
    pub ok: u64,
    /// Refused by the per-second window (TOP 7, JD 2, 1688 gw.QosAppFrequencyLimit).
    pub rejected_limit: u64,
    /// Refused because the daily quota was spent.
    pub rejected_quota: u64,
    pub errors_by_class: ErrorCounts,
    /// Calls counted against today's quota (GMT+8 day), failed ones included.
    pub quota_used_today: u64,
    /// Most calls seen in any one wall-clock second (refused ones included).
    pub peak_per_second: u64,
    /// item_add repeats of an `out_request_id` already written.
    pub duplicate_writes: u64,
    /// Requests dropped by the idle-close drill (never answered, not counted as calls).
    pub idle_closed: u64,
    /// The limits in force (simulator side only; clients must not read them).
    pub limit_per_second: u64,
    pub limit_daily: u64,
}

/// Sums over all (app, api), plus calls the simulator could not attribute to one.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Totals {
    pub calls: u64,
    pub ok: u64,
    pub rejected_limit: u64,
    pub rejected_quota: u64,
    pub errors_by_class: ErrorCounts,
    pub quota_used_today: u64,
    pub duplicate_writes: u64,
    pub idle_closed: u64,
    /// Requests with an unknown app key or method, or unreadable (answered with an error).
    pub unattributed: u64,
}

/// A snapshot of the counters (`GET /admin/stats`, `SimHandle::stats`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SimStats {
    pub apis: Vec<ApiStats>,
    pub totals: Totals,
}

impl SimStats {
    /// The counters of one (app_key, api).
    pub fn get(&self, app_key: &str, api: Api) -> Option<&ApiStats> {
        self.apis
            .iter()
            .find(|s| s.app_key == app_key && s.api == api)
    }

    /// The counters of the first app of `platform` for `api`.
    pub fn for_platform(&self, platform: Platform, api: Api) -> Option<&ApiStats> {
        self.apis
            .iter()
            .find(|s| s.platform == platform && s.api == api)
    }
}

/// One configured app at run time.
#[derive(Debug)]
pub struct AppRt {
    pub cfg: SimApp,
    pub shop: Shop,
    pub written: Mutex<Written>,
    /// Index of its first slot; the api's index in `Api::ALL` is added.
    slot_base: usize,
}

/// Everything the handlers share.
#[derive(Debug)]
pub struct Sim {
    pub cfg: SimConfig,
    pub apps: Vec<AppRt>,
    by_key: HashMap<(Platform, String), usize>,
    slots: Vec<Slot>,
    drill: RwLock<Drill>,
    unattributed: AtomicU64,
    /// Unix seconds the simulator started (trace events are gained from here).
    pub started: i64,
    request_seq: AtomicU64,
}

fn api_index(api: Api) -> usize {
    Api::ALL.iter().position(|a| *a == api).unwrap_or(0)
}

impl Sim {
    pub fn new(cfg: SimConfig) -> Result<Sim, String> {
        cfg.drill.validate()?;
        let mut apps = Vec::new();
        let mut slots = Vec::new();
        let mut by_key = HashMap::new();
        for (i, app) in cfg.apps.iter().enumerate() {
            if by_key
                .insert((app.platform, app.app_key.clone()), i)
                .is_some()
            {
                return Err(format!("app key {} is configured twice", app.app_key));
            }
            let slot_base = slots.len();
            for api in Api::ALL {
                slots.push(Slot::new(app, api, cfg.limit(app.platform, api)));
            }
            apps.push(AppRt {
                cfg: app.clone(),
                shop: Shop::generate(cfg.seed, i as u64, &cfg.orders),
                written: Mutex::new(Written::default()),
                slot_base,
            });
        }
        let sim = Sim {
            drill: RwLock::new(Drill::default()),
            cfg,
            apps,
            by_key,
            slots,
            unattributed: AtomicU64::new(0),
            started: Utc::now().timestamp(),
            request_seq: AtomicU64::new(0),
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

    pub fn slot(&self, app: usize, api: Api) -> &Slot {
        &self.slots[self.apps[app].slot_base + api_index(api)]
    }

    pub fn unattributed(&self) {
        self.unattributed.fetch_add(1, Relaxed);
    }

    pub fn request_id(&self) -> String {
        format!("sim{:x}", self.request_seq.fetch_add(1, Relaxed) + 1)
    }

    pub fn drill(&self) -> Drill {
        self.drill.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Read the drills without cloning.
    pub fn with_drill<R>(&self, f: impl FnOnce(&Drill) -> R) -> R {
        f(&self.drill.read().unwrap_or_else(|e| e.into_inner()))
    }

    /// Apply a drill change; returns the drills now in force.
    pub fn set_drill(&self, patch: &DrillPatch) -> Result<Drill, String> {
        let mut guard = self.drill.write().unwrap_or_else(|e| e.into_inner());
        let next = patch.apply(&guard)?;
        *guard = next.clone();
        drop(guard);
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
            s.per_second.store(ps, Relaxed);
            s.daily.store(daily, Relaxed);
        }
    }

    /// Zero the stats, the windows, the quota counters and the written items.
    pub fn reset(&self) {
        for s in &self.slots {
            s.reset();
        }
        for a in &self.apps {
            *lock(&a.written) = Written::default();
        }
        self.unattributed.store(0, Relaxed);
    }

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
            t.idle_closed += a.idle_closed;
        }
        SimStats { apis, totals: t }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn sim(per_second: u64, daily: u64) -> Sim {
        Sim::new(SimConfig::demo().with_limit(Platform::Taobao, Api::ItemGet, per_second, daily))
            .unwrap()
    }

    #[test]
    fn per_second_window_and_peak() {
        let s = sim(2, 100);
        let app = s.app(Platform::Taobao, "10000001").unwrap();
        let slot = s.slot(app, Api::ItemGet);
        let t = Utc.with_ymd_and_hms(2026, 3, 1, 4, 0, 0).unwrap();
        assert_eq!(slot.admit(t), Admit::Ok);
        assert_eq!(slot.admit(t), Admit::Ok);
        assert_eq!(slot.admit(t), Admit::Limited { ban_s: 1 });
        // Next second: the window is free again.
        assert_eq!(slot.admit(t + chrono::Duration::seconds(1)), Admit::Ok);
        let st = slot.snapshot(t);
        assert_eq!(
            (st.calls, st.peak_per_second, st.quota_used_today),
            (4, 3, 4)
        );
    }

    #[test]
    fn quota_counts_refused_calls_and_bans_until_reset() {
        let s = sim(1, 3);
        let app = s.app(Platform::Taobao, "10000001").unwrap();
        let slot = s.slot(app, Api::ItemGet);
        // 23:59:00 GMT+8: the quota resets in 60 s.
        let t = Utc.with_ymd_and_hms(2026, 3, 1, 15, 59, 0).unwrap();
        assert_eq!(slot.admit(t), Admit::Ok);
        assert_eq!(slot.admit(t), Admit::Limited { ban_s: 1 });
        assert_eq!(slot.admit(t), Admit::Limited { ban_s: 1 });
        assert_eq!(slot.admit(t), Admit::QuotaSpent { ban_s: 60 });
        // After the reset the day starts over.
        assert_eq!(slot.admit(t + chrono::Duration::seconds(61)), Admit::Ok);
    }

    #[test]
    fn drill_limits_override_and_clear_restores() {
        let s = sim(5, 100);
        let patch = DrillPatch {
            limit: Some(super::super::drill::LimitOverride {
                api: Api::ItemGet,
                platform: Some(Platform::Taobao),
                per_second: Some(1),
                daily: None,
            }),
            ..Default::default()
        };
        s.set_drill(&patch).unwrap();
        let app = s.app(Platform::Taobao, "10000001").unwrap();
        assert_eq!(
            s.slot(app, Api::ItemGet)
                .snapshot(Utc::now())
                .limit_per_second,
            1
        );
        s.set_drill(&DrillPatch {
            clear: true,
            ..Default::default()
        })
        .unwrap();
        assert_eq!(
            s.slot(app, Api::ItemGet)
                .snapshot(Utc::now())
                .limit_per_second,
            5
        );
    }
}
