//! The simulator's run-time state: per (app, api) limit windows and counters, drills, data.
//!
//! Lock-light: each (app, api) slot has its own small mutex for the per-second limit
//! (fixed window, sliding window or token bucket) and the quota day; counters are atomics;
//! drills sit behind one RwLock read briefly per call.

use super::config::{Limit, LimitKind, SimApp, SimConfig};
use super::data::{Shop, Written};
use super::drill::{Drill, DrillPatch};
use crate::platform::{Api, Platform};
use crate::time::{next_quota_reset, platform_day};
use chrono::{DateTime, NaiveDate, Utc};
use governor::clock::{Clock, FakeRelativeClock};
use governor::middleware::NoOpMiddleware;
use governor::nanos::Nanos;
use governor::state::{InMemoryState, NotKeyed};
use governor::{Quota, RateLimiter};
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, VecDeque};
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering::Relaxed};
use std::sync::{Mutex, MutexGuard, RwLock};
use std::time::Duration;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic elsewhere must not stop the simulator: the data stays usable.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// What the admission check decided for one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Admit {
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
pub(crate) enum Outcome {
    Ok,
    RejectedLimit,
    RejectedQuota,
    Retry,
    Fatal,
    Unknown,
}

/// A ban as the platforms answer it: whole seconds, rounded up, at least 1.
fn ban_seconds(left: Duration) -> u64 {
    u64::try_from(left.as_nanos().div_ceil(1_000_000_000))
        .unwrap_or(u64::MAX)
        .max(1)
}

/// The `sliding` window's length.
const SLIDE: chrono::TimeDelta = chrono::TimeDelta::milliseconds(1000);

type Governor = RateLimiter<NotKeyed, InMemoryState, FakeRelativeClock, NoOpMiddleware<Nanos>>;

/// The `bucket` kind: a token bucket of rate `per_second` and size `burst`.
///
/// Why governor here while the client's gates (src/throttle) do not use it: a client must
/// reserve its slot and then sleep exactly once until it, which governor cannot express; a
/// platform only admits or rejects, which is exactly what governor's `check` does.
///
/// Its clock is advanced to the `now` handed to [`Slot::admit`], so all three kinds read the
/// same time and tests drive them with explicit instants.
struct Bucket {
    /// (per_second, burst) it was built for; a drill changing either builds a new (full) one.
    shape: (u64, u64),
    limiter: Governor,
    clock: FakeRelativeClock,
    /// The `now` the clock stands at; earlier instants (racing handlers) do not move it back.
    at: DateTime<Utc>,
}

impl std::fmt::Debug for Bucket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bucket")
            .field("shape", &self.shape)
            .field("at", &self.at)
            .finish_non_exhaustive()
    }
}

impl Bucket {
    fn new(per_second: u64, burst: u64, now: DateTime<Utc>) -> Bucket {
        let n =
            |v: u64| NonZeroU32::new(v.min(u64::from(u32::MAX)) as u32).unwrap_or(NonZeroU32::MIN);
        let clock = FakeRelativeClock::default();
        let quota = Quota::per_second(n(per_second)).allow_burst(n(burst));
        Bucket {
            shape: (per_second, burst),
            limiter: RateLimiter::direct_with_clock(quota, clock.clone()),
            clock,
            at: now,
        }
    }

    /// Take a token at `now`, or the time until the next one.
    fn take(&mut self, now: DateTime<Utc>) -> Result<(), Duration> {
        if let Ok(step) = (now - self.at).to_std() {
            self.clock.advance(step);
            self.at = now;
        }
        self.limiter
            .check()
            .map_err(|not_until| not_until.wait_time_from(self.clock.now()))
    }
}

#[derive(Debug, Default)]
struct Window {
    second: i64,
    seen: u64,
    admitted: u64,
    day: Option<NaiveDate>,
    quota_used: u64,
    peak: u64,
    /// `sliding`: instants of the calls admitted in the last 1,000 ms, oldest first.
    admitted_at: VecDeque<DateTime<Utc>>,
    /// `bucket`: built on first use.
    bucket: Option<Bucket>,
}

impl Window {
    /// `fixed`: at most `per_second` per wall-clock second.
    fn admit_fixed(&mut self, per_second: u64, now: DateTime<Utc>) -> Admit {
        if self.admitted >= per_second {
            // The window is the wall-clock second: it frees at the next second boundary.
            let left = 1000 - now.timestamp_subsec_millis().min(999) as u64;
            return Admit::Limited {
                ban_s: left.div_ceil(1000).max(1),
            };
        }
        self.admitted += 1;
        Admit::Ok
    }

    /// `sliding`: at most `per_second` in any 1,000 ms ending now.
    fn admit_sliding(&mut self, per_second: u64, now: DateTime<Utc>) -> Admit {
        let q = &mut self.admitted_at;
        while q.front().is_some_and(|t| *t <= now - SLIDE) {
            q.pop_front();
        }
        let n = q.len() as u64;
        if n >= per_second {
            // Room opens when the call at this index leaves (the oldest, unless a drill
            // lowered the limit below what the window holds).
            let freeing = q[usize::try_from(n - per_second).unwrap_or(0)];
            let left = (freeing + SLIDE - now).to_std().unwrap_or_default();
            return Admit::Limited {
                ban_s: ban_seconds(left),
            };
        }
        // Handlers take `now` before the lock, so one may arrive slightly out of order.
        let at = q.partition_point(|t| *t <= now);
        q.insert(at, now);
        Admit::Ok
    }

    /// `bucket`: a token bucket of rate `per_second` and size `burst`.
    fn admit_bucket(&mut self, per_second: u64, burst: u64, now: DateTime<Utc>) -> Admit {
        let shape = (per_second, burst);
        let bucket = match &mut self.bucket {
            Some(b) if b.shape == shape => b,
            slot => slot.insert(Bucket::new(per_second, burst, now)),
        };
        match bucket.take(now) {
            Ok(()) => Admit::Ok,
            Err(wait) => Admit::Limited {
                ban_s: ban_seconds(wait),
            },
        }
    }
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
pub(crate) struct Slot {
    pub(crate) platform: Platform,
    pub(crate) api: Api,
    pub(crate) app_key: String,
    per_second: AtomicU64,
    /// `LimitKind` as its index in `LimitKind::ALL`.
    kind: AtomicU8,
    /// Bucket size; 0 = `per_second`.
    burst: AtomicU64,
    daily: AtomicU64,
    pub(crate) latency: (u64, u64),
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
            kind: AtomicU8::new(kind_index(limit.kind)),
            burst: AtomicU64::new(limit.burst.unwrap_or(0)),
            daily: AtomicU64::new(limit.daily),
            latency: (limit.latency_median_ms, limit.latency_p95_ms),
            window: Mutex::new(Window::default()),
            counters: Counters::default(),
        }
    }

    /// The kind of per-second limit in force.
    pub(crate) fn limit_kind(&self) -> LimitKind {
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
    pub(crate) fn admit(&self, now: DateTime<Utc>) -> Admit {
        let per_second = self.per_second.load(Relaxed);
        let kind = self.limit_kind();
        let burst = self.burst();
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
        // State of a kind no longer in force (a drill changed it) is dropped.
        if kind != LimitKind::Sliding && !w.admitted_at.is_empty() {
            w.admitted_at.clear();
        }
        if kind != LimitKind::Bucket {
            w.bucket = None;
        }
        match kind {
            LimitKind::Fixed => w.admit_fixed(per_second, now),
            LimitKind::Sliding => w.admit_sliding(per_second, now),
            LimitKind::Bucket => w.admit_bucket(per_second, burst, now),
        }
    }

    pub(crate) fn record(&self, outcome: Outcome) {
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

    pub(crate) fn duplicate_write(&self) {
        self.counters.duplicate_writes.fetch_add(1, Relaxed);
    }

    pub(crate) fn idle_closed(&self) {
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
            limit_kind: self.limit_kind(),
            limit_burst: self.burst(),
        }
    }
}

/// Errors by the class a client would give them (Slow ones are the `rejected_*` counters).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorCounts {
    pub retry: u64,
    pub fatal: u64,
    pub(crate) unknown: u64,
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
    #[serde(default)]
    pub limit_kind: LimitKind,
    /// Bucket size (`bucket` only; `per_second` unless set).
    #[serde(default)]
    pub limit_burst: u64,
}

/// Sums over all (app, api), plus calls the simulator could not attribute to one.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Totals {
    pub calls: u64,
    pub(crate) ok: u64,
    pub(crate) rejected_limit: u64,
    pub(crate) rejected_quota: u64,
    pub(crate) errors_by_class: ErrorCounts,
    pub quota_used_today: u64,
    pub duplicate_writes: u64,
    pub idle_closed: u64,
    /// Requests with an unknown app key or method, or unreadable (answered with an error).
    pub unattributed: u64,
}

/// A snapshot of the counters (`GET /admin/stats`, `SimHandle::stats`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SimStats {
    pub(crate) apis: Vec<ApiStats>,
    pub totals: Totals,
}

impl SimStats {
    /// The counters of the first app of `platform` for `api`.
    pub fn for_platform(&self, platform: Platform, api: Api) -> Option<&ApiStats> {
        self.apis
            .iter()
            .find(|s| s.platform == platform && s.api == api)
    }
}

/// One configured app at run time.
#[derive(Debug)]
pub(crate) struct AppRt {
    pub(crate) cfg: SimApp,
    pub(crate) shop: Shop,
    pub(crate) written: Mutex<Written>,
    /// Index of its first slot; the api's index in `Api::ALL` is added.
    slot_base: usize,
}

/// Everything the handlers share.
#[derive(Debug)]
pub(crate) struct Sim {
    pub(crate) cfg: SimConfig,
    pub(crate) apps: Vec<AppRt>,
    by_key: HashMap<(Platform, String), usize>,
    slots: Vec<Slot>,
    drill: RwLock<Drill>,
    unattributed: AtomicU64,
    /// Unix seconds the simulator started (trace events are gained from here).
    pub(crate) started: i64,
    request_seq: AtomicU64,
}

fn kind_index(kind: LimitKind) -> u8 {
    LimitKind::ALL.iter().position(|k| *k == kind).unwrap_or(0) as u8
}

fn api_index(api: Api) -> usize {
    Api::ALL.iter().position(|a| *a == api).unwrap_or(0)
}

impl Sim {
    pub(crate) fn new(cfg: SimConfig) -> Result<Sim, super::SimError> {
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
    pub(crate) fn app(&self, platform: Platform, app_key: &str) -> Option<usize> {
        // Avoids allocating in the common case of a handful of apps.
        if self.apps.len() <= 8 {
            return self
                .apps
                .iter()
                .position(|a| a.cfg.platform == platform && a.cfg.app_key == app_key);
        }
        self.by_key.get(&(platform, app_key.to_string())).copied()
    }

    pub(crate) fn slot(&self, app: usize, api: Api) -> &Slot {
        &self.slots[self.apps[app].slot_base + api_index(api)]
    }

    pub(crate) fn unattributed(&self) {
        self.unattributed.fetch_add(1, Relaxed);
    }

    pub(crate) fn request_id(&self) -> String {
        format!("sim{:x}", self.request_seq.fetch_add(1, Relaxed) + 1)
    }

    pub(crate) fn drill(&self) -> Drill {
        self.drill.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Read the drills without cloning.
    pub(crate) fn with_drill<R>(&self, f: impl FnOnce(&Drill) -> R) -> R {
        f(&self.drill.read().unwrap_or_else(|e| e.into_inner()))
    }

    /// Apply a drill change; returns the drills now in force.
    pub(crate) fn set_drill(&self, patch: &DrillPatch) -> Result<Drill, super::DrillError> {
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
    pub(crate) fn reset(&self) {
        for s in &self.slots {
            s.reset();
        }
        for a in &self.apps {
            *lock(&a.written) = Written::default();
        }
        self.unattributed.store(0, Relaxed);
    }

    pub(crate) fn stats(&self) -> SimStats {
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

    fn kind_sim(kind: LimitKind, per_second: u64, burst: Option<u64>) -> Sim {
        Sim::new(
            SimConfig::demo()
                .with_limit(Platform::Taobao, Api::ItemGet, per_second, 1_000_000)
                .with_limit_kind(Platform::Taobao, Api::ItemGet, kind, burst),
        )
        .unwrap()
    }

    fn ms(t: DateTime<Utc>, ms: i64) -> DateTime<Utc> {
        t + chrono::Duration::milliseconds(ms)
    }

    #[test]
    fn each_kind_admits_exactly_its_burst_at_one_instant() {
        let t = Utc.with_ymd_and_hms(2026, 3, 1, 4, 0, 0).unwrap()
            + chrono::Duration::milliseconds(250);
        for (kind, per_second, burst, admitted) in [
            (LimitKind::Fixed, 3, None, 3),
            (LimitKind::Sliding, 3, None, 3),
            (LimitKind::Bucket, 3, None, 3),
            (LimitKind::Bucket, 3, Some(7), 7),
        ] {
            let s = kind_sim(kind, per_second, burst);
            let slot = s.slot(s.app(Platform::Taobao, "10000001").unwrap(), Api::ItemGet);
            let answers: Vec<Admit> = (0..10).map(|_| slot.admit(t)).collect();
            let ok = answers.iter().filter(|a| **a == Admit::Ok).count();
            assert_eq!(ok, admitted, "{kind}: {answers:?}");
            // Admitted first, then refused with the platforms' whole-second ban.
            assert!(
                answers[..admitted].iter().all(|a| *a == Admit::Ok),
                "{kind}"
            );
            assert!(
                answers[admitted..]
                    .iter()
                    .all(|a| *a == Admit::Limited { ban_s: 1 }),
                "{kind}: {answers:?}"
            );
            // Quota and peak count every call whatever the kind.
            let st = slot.snapshot(t);
            assert_eq!(
                (st.calls, st.quota_used_today, st.peak_per_second),
                (10, 10, 10),
                "{kind}"
            );
            assert_eq!(st.limit_kind, kind);
            assert_eq!(st.limit_burst, burst.unwrap_or(per_second));
        }
    }

    #[test]
    fn sliding_refuses_what_a_fixed_window_admits_after_a_second_boundary() {
        let t = Utc.with_ymd_and_hms(2026, 3, 1, 4, 0, 0).unwrap();
        let fixed = kind_sim(LimitKind::Fixed, 2, None);
        let sliding = kind_sim(LimitKind::Sliding, 2, None);
        let app = fixed.app(Platform::Taobao, "10000001").unwrap();
        let (f, s) = (
            fixed.slot(app, Api::ItemGet),
            sliding.slot(app, Api::ItemGet),
        );
        // Two calls late in second 0 (at .800 and .900).
        for at in [800, 900] {
            assert_eq!(f.admit(ms(t, at)), Admit::Ok);
            assert_eq!(s.admit(ms(t, at)), Admit::Ok);
        }
        // Just after the boundary: a new fixed window, but the last 1,000 ms hold two calls.
        // The .800 call leaves at 1.800: 700 ms, answered as 1 s.
        assert_eq!(f.admit(ms(t, 1100)), Admit::Ok);
        assert_eq!(s.admit(ms(t, 1100)), Admit::Limited { ban_s: 1 });
        assert_eq!(s.admit(ms(t, 1799)), Admit::Limited { ban_s: 1 });
        // A call exactly 1,000 ms old has left the window.
        assert_eq!(s.admit(ms(t, 1800)), Admit::Ok);
        assert_eq!(s.admit(ms(t, 1850)), Admit::Limited { ban_s: 1 });
        assert_eq!(s.admit(ms(t, 1900)), Admit::Ok);
        // Never more than 2 in any 1,000 ms of this run: .800 .900 1.800 1.900; every
        // call counts against the quota.
        let st = s.snapshot(t);
        assert_eq!((st.calls, st.quota_used_today), (7, 7));
    }

    #[test]
    fn sliding_ban_waits_for_the_call_that_frees_room() {
        // A drill lowering the limit below what the window holds: room opens only when
        // enough calls have left, not the oldest alone.
        let s = kind_sim(LimitKind::Sliding, 3, None);
        let slot = s.slot(s.app(Platform::Taobao, "10000001").unwrap(), Api::ItemGet);
        let t = Utc.with_ymd_and_hms(2026, 3, 1, 4, 0, 0).unwrap();
        for at in [0, 100, 200] {
            assert_eq!(slot.admit(ms(t, at)), Admit::Ok);
        }
        slot.per_second.store(1, Relaxed);
        assert_eq!(slot.admit(ms(t, 1050)), Admit::Limited { ban_s: 1 });
        assert_eq!(slot.admit(ms(t, 1150)), Admit::Limited { ban_s: 1 });
        assert_eq!(slot.admit(ms(t, 1200)), Admit::Ok);
    }

    #[test]
    fn bucket_admits_burst_at_once_then_per_second() {
        let s = kind_sim(LimitKind::Bucket, 2, Some(4));
        let slot = s.slot(s.app(Platform::Taobao, "10000001").unwrap(), Api::ItemGet);
        let t = Utc.with_ymd_and_hms(2026, 3, 1, 4, 0, 0).unwrap();
        let ok_at = |at: i64| slot.admit(ms(t, at)) == Admit::Ok;
        assert_eq!((0..10).filter(|_| ok_at(0)).count(), 4);
        // Then one token every 500 ms: calls every 50 ms get exactly 2 per second.
        for sec in 0..3 {
            let admitted = (1..=20).filter(|i| ok_at(sec * 1000 + i * 50)).count();
            assert_eq!(admitted, 2, "second {sec}");
        }
        // A quiet spell refills the bucket up to `burst`, not beyond.
        assert_eq!((0..10).filter(|_| ok_at(60_000)).count(), 4);
        // An instant earlier than one already seen (racing handlers) does not rewind it.
        assert_eq!(slot.admit(ms(t, 59_000)), Admit::Limited { ban_s: 1 });
    }

    #[test]
    fn ban_seconds_round_up_to_whole_seconds() {
        assert_eq!(ban_seconds(Duration::ZERO), 1);
        assert_eq!(ban_seconds(Duration::from_millis(1)), 1);
        assert_eq!(ban_seconds(Duration::from_millis(1000)), 1);
        assert_eq!(ban_seconds(Duration::from_millis(1001)), 2);
        assert_eq!(ban_seconds(Duration::from_secs(59)), 59);
    }

    #[test]
    fn drill_switches_limit_kind_and_burst_at_run_time() {
        let s = kind_sim(LimitKind::Fixed, 2, None);
        let app = s.app(Platform::Taobao, "10000001").unwrap();
        let slot = s.slot(app, Api::ItemGet);
        let t = Utc.with_ymd_and_hms(2026, 3, 1, 4, 0, 0).unwrap();
        let burst = |at: DateTime<Utc>| (0..10).filter(|_| slot.admit(at) == Admit::Ok).count();
        assert_eq!(burst(t), 2);
        let patch: DrillPatch = serde_json::from_str(
            r#"{"limit":{"api":"item_get","platform":"taobao","kind":"bucket","burst":6}}"#,
        )
        .unwrap();
        s.set_drill(&patch).unwrap();
        let st = slot.snapshot(t);
        assert_eq!(
            (st.limit_kind, st.limit_burst, st.limit_per_second),
            (LimitKind::Bucket, 6, 2)
        );
        assert_eq!(burst(ms(t, 10)), 6);
        // A changed rate builds a new (full) bucket.
        s.set_drill(&DrillPatch {
            limit: Some(super::super::drill::LimitOverride {
                api: Api::ItemGet,
                platform: None,
                per_second: Some(3),
                daily: None,
            }),
            ..Default::default()
        })
        .unwrap();
        assert_eq!(burst(ms(t, 20)), 6);
        // Other platforms and apis keep their kind.
        let jd = s.app(Platform::Jd, "simjdapp").unwrap();
        assert_eq!(s.slot(jd, Api::ItemGet).limit_kind(), LimitKind::Fixed);
        assert_eq!(s.slot(app, Api::ItemAdd).limit_kind(), LimitKind::Fixed);
        s.set_drill(&DrillPatch {
            limit_kind: Some(super::super::drill::LimitKindOverride {
                api: Api::ItemGet,
                platform: Some(Platform::Taobao),
                kind: Some(LimitKind::Sliding),
                burst: None,
            }),
            ..Default::default()
        })
        .unwrap();
        assert_eq!(burst(ms(t, 30)), 3);
        s.set_drill(&DrillPatch {
            clear: true,
            ..Default::default()
        })
        .unwrap();
        let st = slot.snapshot(t);
        assert_eq!(
            (st.limit_kind, st.limit_burst, st.limit_per_second),
            (LimitKind::Fixed, 2, 2)
        );
        assert_eq!(burst(ms(t, 2000)), 2);
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
