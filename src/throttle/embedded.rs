//! Embedded gates: an in-process GCRA reservation bucket ([`Gcra`]) plus the pure AIMD type,
//! for one process.
//!
//! When the adaptive rate drops the bucket is drained (its burst spent): a halving must not
//! hand out a fresh burst, and under load the bucket was near empty anyway.

use super::aimd::{AimdParams, AimdState};
use super::gcra::Gcra;
use super::second_guard::{self, SecondGuard};
use super::{bulk_quota, bulk_rate, Lane};
use super::{GateLimits, GateSnapshot, Noted, RateChange, Reservation};
use crate::config::GateConfig;
use crate::platform::{Api, Platform};
use chrono::NaiveDate;
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
    quota_day: NaiveDate,
    used: u64,
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
    fn new(cfg: &GateConfig) -> Gate {
        let params = AimdParams::new(cfg.rate, cfg.aimd_step, cfg.aimd_successes);
        let state = AimdState::new(&params);
        Gate {
            bucket: Gcra::new(),
            limiter_rate: cfg.rate,
            params,
            state,
            burst: cfg.burst,
            overridden: false,
            quota_day: crate::time::platform_day(chrono::Utc::now()),
            used: 0,
            drain_after_pause: false,
            sent: SecondGuard::default(),
            boundary_band_ms: cfg.boundary_band_ms,
            interactive: Gcra::new(),
            interactive_share: cfg.interactive_share,
            daily_quota: cfg.daily_quota,
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

pub(crate) struct EmbeddedGates {
    gates: HashMap<(Platform, Api), Mutex<Gate>>,
    epoch: Instant,
}

impl EmbeddedGates {
    pub(crate) fn new(cfgs: impl Iterator<Item = ((Platform, Api), GateConfig)>) -> EmbeddedGates {
        EmbeddedGates {
            gates: cfgs.map(|(k, c)| (k, Mutex::new(Gate::new(&c)))).collect(),
            epoch: Instant::now(),
        }
    }

    /// The wall clock in ms: the platform counts its seconds by it, and a measurement is
    /// of one of those seconds.
    fn now_ms(&self) -> u64 {
        crate::time::wall_ms(std::time::SystemTime::now())
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
        let now_us = self.epoch.elapsed().as_secs_f64() * 1e6;
        if g.drain_after_pause {
            g.drain_after_pause = false;
            let (rate, burst) = (g.limiter_rate, g.effective_burst());
            g.bucket.drain(now_us, rate, burst);
        }
        g.sync_rate(now_us);
        if lane == Lane::Bulk && g.interactive_share > 0.0 {
            let today = crate::time::platform_day(chrono::Utc::now());
            if let Some(q) = g.daily_quota.filter(|_| g.quota_day == today) {
                if g.used >= bulk_quota(q, g.interactive_share) {
                    let now = chrono::Utc::now();
                    let left = (crate::time::next_quota_reset(now) - now)
                        .to_std()
                        .unwrap_or_default();
                    return Reservation::Paused(
                        left,
                        "bulk work has used its share of the daily quota".into(),
                    );
                }
            }
        }
        let part = g.part(lane);
        let (rate, burst) = (g.limiter_rate * part, (g.effective_burst() * part).max(1.0));
        let bucket = if part < 1.0 && lane == Lane::Interactive {
            &mut g.interactive
        } else {
            &mut g.bucket
        };
        match bucket.reserve(now_us, rate, burst, max_wait.as_secs_f64() * 1e6) {
            Ok(wait) if wait <= 0.0 => Reservation::Now,
            Ok(wait) => Reservation::After(Duration::from_secs_f64(wait / 1e6), None),
            Err(wait) => Reservation::Refused(Duration::from_secs_f64(wait / 1e6)),
        }
    }

    /// At the moment a reserved call leaves: `None` if it may go now (it is counted), or how
    /// long to wait for the next clock second, because as many calls as the bucket admits in
    /// a second already left in this one (late wakers bunched; [`SecondGuard`]).
    pub(crate) fn send_wait(&self, platform: Platform, api: Api) -> Option<Duration> {
        let mut g = self.gate(platform, api);
        let budget = second_guard::budget_for(g.limiter_rate, g.effective_burst(), g.state.ceiling);
        let now_ms = self.now_ms();
        let band = g.boundary_band_ms;
        let rate = g.limiter_rate;
        let spacing_ms = (1000.0 / rate.max(1e-3)).floor() as u64;
        let held_ms = g.sent.admit(now_ms, budget, band, spacing_ms)?;
        // The bucket runs on from where the held call leaves (as acquire.lua does).
        let leaves_us = self.epoch.elapsed().as_secs_f64() * 1e6 + held_ms as f64 * 1e3;
        g.bucket.defer(leaves_us, rate);
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
        let today = crate::time::platform_day(chrono::Utc::now());
        if today != g.quota_day {
            g.quota_day = today;
            g.used = 0;
        }
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

    pub(crate) fn snapshot(&self, platform: Platform, api: Api, cfg: &GateConfig) -> GateSnapshot {
        let now = self.now_ms();
        let g = self.gate(platform, api);
        let today = crate::time::platform_day(chrono::Utc::now());
        let used_today = if g.quota_day == today { g.used } else { 0 };
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
            burn: cfg
                .daily_quota
                .map(|q| crate::time::burn_ratio(used_today, q, chrono::Utc::now())),
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
        let now_us = self.epoch.elapsed().as_secs_f64() * 1e6;
        g.bucket.drain(now_us, rate, new.burst);
        g.limiter_rate = rate;
        RateChange { old, new }
    }
}
