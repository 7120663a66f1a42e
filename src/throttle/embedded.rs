//! Embedded gates: an in-process GCRA reservation bucket ([`Gcra`]) plus the pure AIMD type,
//! for one process.
//!
//! When the adaptive rate drops the bucket is drained (its burst spent): a halving must not
//! hand out a fresh burst, and under load the bucket was near empty anyway.

use super::aimd::{AimdParams, AimdState};
use super::gcra::Gcra;
use super::pacing::{BulkTurn, DayBudget};
use super::second_guard::{self, SecondGuard};
use super::state::{Noted, Reservation};
use super::{bulk_rate, Lane};
use super::{GateLimits, GateSnapshot, RateChange};
use crate::clock::Clock;
use crate::config::{GateConfig, Pacing};
use crate::platform::{Api, Platform};
use crate::time::QuotaDay;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

struct Gate {
    params: AimdParams,
    state: AimdState,
    burst: f64,
    overridden: bool,
    bucket: Gcra,
    limiter_rate: f64,
    /// The quota day and today's calls: counted (reported outcomes) and booked.
    day: QuotaDay,
    day_index: i64,
    used: u64,
    booked: u64,
    pacing: Pacing,
    app_quota: Option<u64>,
    /// Resume from a pause with an empty bucket, not a burst into the platform that banned us.
    drain_after_pause: bool,
    /// Calls that left in the current clock second (the send-time check).
    sent: SecondGuard,
    /// The end of each second in which nothing leaves (ms).
    boundary_band_ms: u64,
    /// Interactive work's own bucket, at its share of the rate, when a share is kept for it
    /// (docs/design.md, "Lanes").
    interactive: Gcra,
    interactive_share: f64,
    daily_quota: Option<u64>,
}

impl Gate {
    fn new(cfg: &GateConfig, today: chrono::DateTime<chrono::Utc>) -> Gate {
        let params = AimdParams::new(cfg.rate, cfg.aimd_step, cfg.aimd_successes);
        let state = AimdState::new(&params);
        Gate {
            bucket: Gcra::new(),
            limiter_rate: cfg.rate,
            params,
            state,
            burst: cfg.burst,
            overridden: false,
            day: cfg.day,
            day_index: cfg.day.index(today),
            used: 0,
            booked: 0,
            pacing: cfg.pacing,
            app_quota: cfg.app_quota,
            drain_after_pause: false,
            sent: SecondGuard::default(),
            boundary_band_ms: cfg.boundary_band_ms,
            interactive: Gcra::new(),
            interactive_share: cfg.interactive_share,
            daily_quota: cfg.daily_quota,
        }
    }

    /// Today's counters, zeroed when the day turned.
    fn roll_day(&mut self, now: chrono::DateTime<chrono::Utc>) {
        let today = self.day.index(now);
        if today != self.day_index {
            self.day_index = today;
            self.used = 0;
            self.booked = 0;
        }
    }

    /// The part of the gate `lane` books in: all of it when no share is kept for
    /// interactive work; else the interactive share, or the rest for bulk.
    fn part(&self, lane: Lane) -> f64 {
        match (self.interactive_share > 0.0, lane) {
            (false, _) => 1.0,
            (true, Lane::Interactive) => self.interactive_share,
            (true, Lane::Bulk) => bulk_rate(1.0, self.interactive_share),
        }
    }

    /// The bucket `lane` books in: interactive work's own when a share is kept for it.
    fn lane_bucket(&mut self, lane: Lane) -> &mut Gcra {
        if lane == Lane::Interactive && self.interactive_share > 0.0 {
            &mut self.interactive
        } else {
            &mut self.bucket
        }
    }

    /// The burst follows the adaptive rate (as in acquire.lua), at least one call; one while
    /// probing above a measured ceiling.
    fn effective_burst(&self) -> f64 {
        if self.state.probing() {
            return 1.0;
        }
        let scaled = self.burst * self.limiter_rate / self.params.max_rate.max(1e-9);
        super::aimd::burst_under(scaled, self.limiter_rate, self.state.ceiling)
    }

    /// Follow the adaptive rate; a cut drains the bucket.
    fn sync_rate(&mut self, now_us: f64) {
        let rate = self.state.effective_rate(&self.params);
        let old = self.limiter_rate;
        if (rate - old).abs() > 1e-9 {
            self.limiter_rate = rate;
            if rate < old {
                let burst = self.effective_burst();
                self.bucket.drain(now_us, rate, burst);
            }
        }
    }
}

/// The calls every gate of one app booked today (its daily quota counts them all).
#[derive(Debug, Default)]
struct AppDay {
    index: i64,
    booked: u64,
}

pub(crate) struct EmbeddedGates {
    gates: HashMap<(Platform, Api), Mutex<Gate>>,
    apps: HashMap<Platform, Mutex<AppDay>>,
    epoch: Instant,
    clock: Clock,
}

impl EmbeddedGates {
    pub(crate) fn new(
        cfgs: impl Iterator<Item = ((Platform, Api), GateConfig)>,
        clock: Clock,
    ) -> EmbeddedGates {
        let today = clock.utc();
        let gates: HashMap<_, _> = cfgs
            .map(|(k, c)| (k, Mutex::new(Gate::new(&c, today))))
            .collect();
        let apps = gates
            .keys()
            .map(|(p, _)| (*p, Mutex::new(AppDay::default())))
            .collect();
        EmbeddedGates {
            gates,
            apps,
            epoch: clock.now(),
            clock,
        }
    }

    fn app(&self, platform: Platform) -> std::sync::MutexGuard<'_, AppDay> {
        // Every platform of a gate is built in `new`.
        self.apps[&platform]
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// Monotonic time since the gates were made (the buckets' time line).
    fn since_epoch(&self) -> Duration {
        self.clock.now().saturating_duration_since(self.epoch)
    }

    /// The wall clock in ms: the platform counts its seconds by it, and a measurement is
    /// of one of those seconds.
    fn now_ms(&self) -> u64 {
        crate::time::wall_ms(self.clock.wall())
    }

    fn gate(&self, platform: Platform, api: Api) -> std::sync::MutexGuard<'_, Gate> {
        // Every (platform, api) pair is built in `new`.
        self.gates[&(platform, api)]
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) async fn reserve(
        &self,
        platform: Platform,
        api: Api,
        lane: Lane,
        max_wait: Duration,
    ) -> Reservation {
        let mut g = self.gate(platform, api);
        let now_ms = self.now_ms();
        {
            let g = &mut *g;
            g.state.settle(&g.params, now_ms);
        }
        if let Some((ms, reason)) = g.state.paused(now_ms) {
            return Reservation::Paused(Duration::from_millis(ms), reason.to_string());
        }
        let now_us = self.since_epoch().as_secs_f64() * 1e6;
        if g.drain_after_pause {
            g.drain_after_pause = false;
            let (rate, burst) = (g.limiter_rate, g.effective_burst());
            g.bucket.drain(now_us, rate, burst);
        }
        g.sync_rate(now_us);
        let now = self.clock.utc();
        g.roll_day(now);
        // The app's day is read under the gate's lock, the app's lock after it (always in
        // this order), so a booking counts in both at once.
        let mut app = g.app_quota.map(|_| self.app(platform));
        if let Some(a) = app.as_deref_mut() {
            let today = g.day.index(now);
            if a.index != today {
                *a = AppDay {
                    index: today,
                    booked: 0,
                };
            }
        }
        let mut pace = None;
        if lane == Lane::Bulk {
            let budget = |quota, used| DayBudget {
                quota,
                used,
                share: g.interactive_share,
                elapsed_ms: g.day.elapsed_ms(now),
                day_ms: u64::from(g.day.seconds()) * 1000,
                lead: g.effective_burst(),
            };
            let budgets = [
                g.daily_quota
                    .map(|q| (q, g.used.max(g.booked), "the daily quota")),
                g.app_quota
                    .zip(app.as_deref())
                    .map(|(q, a)| (q, a.booked, "the app's daily quota")),
            ];
            for (quota, used, what) in budgets.into_iter().flatten() {
                match budget(quota, used).bulk_turn(g.pacing) {
                    BulkTurn::Go => {}
                    BulkTurn::Spent(ms) => {
                        return Reservation::Paused(
                            Duration::from_millis(ms),
                            format!("bulk work has used its share of {what}"),
                        );
                    }
                    BulkTurn::After(ms) if Duration::from_millis(ms) > max_wait => {
                        return Reservation::Refused(Duration::from_millis(ms));
                    }
                    BulkTurn::After(_) => {
                        let r = quota as f64 / f64::from(g.day.seconds());
                        pace = Some(pace.map_or(r, |p: f64| p.min(r)));
                    }
                }
            }
        }
        let part = g.part(lane);
        let (mut rate, mut burst) = (g.limiter_rate * part, (g.effective_burst() * part).max(1.0));
        if let Some(p) = pace.filter(|p| *p < rate) {
            // Ahead of the `even` line: the budget's pace, no burst (the lead is used up).
            (rate, burst) = (p, 1.0);
        }
        let bucket = g.lane_bucket(lane);
        let answer = match bucket.reserve(now_us, rate, burst, max_wait.as_secs_f64() * 1e6) {
            Ok(wait) if wait <= 0.0 => Reservation::Now,
            Ok(wait) => Reservation::After(Duration::from_secs_f64(wait / 1e6), None),
            Err(wait) => return Reservation::Refused(Duration::from_secs_f64(wait / 1e6)),
        };
        // Every booking counts against the day's budgets, interactive ones too.
        g.booked += 1;
        if let Some(a) = app.as_deref_mut() {
            a.booked += 1;
        }
        answer
    }

    /// At the moment a reserved call leaves: `None` if it may go now (it is counted), or how
    /// long to wait for the next clock second, because as many calls as the bucket admits in
    /// a second already left in this one (late wakers bunched; [`SecondGuard`]).
    pub(crate) fn send_wait(&self, platform: Platform, api: Api, lane: Lane) -> Option<Duration> {
        let mut g = self.gate(platform, api);
        let budget = second_guard::budget_for(g.limiter_rate, g.effective_burst(), g.state.ceiling);
        let now_ms = self.now_ms();
        let band = g.boundary_band_ms;
        let rate = g.limiter_rate;
        let spacing_ms = (1000.0 / rate.max(1e-3)).floor() as u64;
        let held_ms = g.sent.admit(now_ms, budget, band, spacing_ms)?;
        // The held call's lane runs on from where it leaves, at its part of the rate (as
        // acquire.lua moves a lane's bucket); the other lane's bookings are not its to move.
        let leaves_us = self.since_epoch().as_secs_f64() * 1e6 + held_ms as f64 * 1e3;
        let lane_rate = rate * g.part(lane);
        g.lane_bucket(lane).defer(leaves_us, lane_rate);
        Some(Duration::from_millis(held_ms))
    }

    /// Apply one outcome of a call that left at `sent` (wall clock); returns the calls
    /// counted today, for the burn ratio.
    pub(crate) fn note(
        &self,
        platform: Platform,
        api: Api,
        outcome: Noted,
        sent: std::time::SystemTime,
    ) -> u64 {
        let Noted {
            success,
            hit,
            pause,
        } = outcome;
        let now = self.now_ms();
        let sent_ms = crate::time::wall_ms(sent).min(now);
        let mut g = self.gate(platform, api);
        let g = &mut *g;
        g.roll_day(self.clock.utc());
        g.used += 1;
        if hit {
            g.state.on_rate_limited(&g.params, sent_ms, now);
        } else if success {
            g.state.on_successes(&g.params, 1, sent_ms, now);
        }
        if let Some((d, reason)) = pause {
            g.state.pause_until(now + d.as_millis() as u64, &reason);
            g.drain_after_pause = true;
        }
        g.used
    }

    /// Bring today's counters of a gate back to `calls` and the app's to `app_calls`
    /// ([`super::DayCalls`]: a restarted process starts its day at zero, which reads as lost;
    /// the ledger remembers). Returns how many counters were raised.
    pub(crate) fn floor_today(
        &self,
        platform: Platform,
        api: Api,
        calls: super::DayCalls,
        app_calls: super::DayCalls,
    ) -> u32 {
        let mut raised = 0;
        let mut g = self.gate(platform, api);
        let now = self.clock.utc();
        g.roll_day(now);
        raised += u32::from(floor_one(&mut g.used, calls));
        raised += u32::from(floor_one(&mut g.booked, calls));
        let today = g.day.index(now);
        drop(g);
        if let Some(app) = self.apps.get(&platform) {
            let mut a = app.lock().unwrap_or_else(|e| e.into_inner());
            if a.index != today {
                *a = AppDay {
                    index: today,
                    booked: 0,
                };
            }
            raised += u32::from(floor_one(&mut a.booked, app_calls));
        }
        raised
    }

    /// The calls the app's gates booked today.
    pub(crate) fn app_booked(&self, platform: Platform, day: QuotaDay) -> u64 {
        let Some(app) = self.apps.get(&platform) else {
            return 0;
        };
        let a = app.lock().unwrap_or_else(|e| e.into_inner());
        if a.index == day.index(self.clock.utc()) {
            a.booked
        } else {
            0
        }
    }

    /// Pause a gate for `span` with no call to count.
    pub(crate) fn pause(&self, platform: Platform, api: Api, span: Duration, reason: String) {
        let mut g = self.gate(platform, api);
        let until = self.now_ms() + span.as_millis() as u64;
        g.state.pause_until(until, &reason);
        g.drain_after_pause = true;
    }

    pub(crate) fn snapshot(&self, platform: Platform, api: Api, cfg: &GateConfig) -> GateSnapshot {
        let now = self.now_ms();
        let g = self.gate(platform, api);
        let at = self.clock.utc();
        let used_today = if g.day_index == g.day.index(at) {
            g.used
        } else {
            0
        };
        GateSnapshot {
            platform,
            api,
            limits: GateLimits {
                rate: g.params.max_rate,
                burst: g.burst,
            },
            overridden: g.overridden,
            concurrency: cfg.concurrency,
            adaptive_rate: g.state.effective_rate(&g.params),
            ceiling: g.state.ceiling,
            upper: g.state.upper,
            pause: g
                .state
                .paused(now)
                .map(|(ms, r)| (Duration::from_millis(ms), r.to_string())),
            used_today,
            daily_quota: cfg.daily_quota,
            burn: cfg.daily_quota.map(|q| g.day.burn_ratio(used_today, q, at)),
            p95_ms_measured: None,
        }
    }

    pub(crate) fn set_rate(
        &self,
        platform: Platform,
        api: Api,
        rate: f64,
        burst: Option<f64>,
    ) -> RateChange {
        let mut g = self.gate(platform, api);
        let old = GateLimits {
            rate: g.params.max_rate,
            burst: g.burst,
        };
        let new = GateLimits {
            rate,
            burst: burst.unwrap_or(g.burst),
        };
        g.params = AimdParams::new(rate, g.params.step, g.params.successes);
        // Keep a running pause; restart the adaptive rate from the new setting.
        let pause = (g.state.pause_until_ms, g.state.pause_reason.clone());
        g.state = AimdState::new(&g.params);
        g.state.pause_until(pause.0, &pause.1);
        g.burst = new.burst;
        g.overridden = true;
        let now_us = self.since_epoch().as_secs_f64() * 1e6;
        g.bucket.drain(now_us, rate, new.burst);
        g.limiter_rate = rate;
        RateChange { old, new }
    }
}

/// One counter brought back to the ledger's count (as floor.lua): a zero (lost, or a process
/// that started today) to every call, one below the settled calls to those. Whether it moved.
fn floor_one(counter: &mut u64, calls: super::DayCalls) -> bool {
    let want = if *counter == 0 {
        calls.all
    } else {
        calls.settled
    };
    if want > *counter {
        *counter = want;
        true
    } else {
        false
    }
}
