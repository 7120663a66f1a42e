//! Adaptive rate (AIMD with ceiling memory) and pauses of one gate: a pure type, no I/O.
//!
//! Time is passed in (`now_ms`, milliseconds on any monotonic-enough clock), so the rules are
//! unit-tested with an injected clock. This type is the reference: the embedded gates use it
//! directly and `report.lua` implements the same rules on the Redis server's clock (a
//! conformance test drives both with one event sequence).
//!
//! Rules (docs/design.md, "Limit discovery"):
//! - a rate-limit answer sets the rate from what the platform *admitted*: the successes of the
//!   last second are a measurement of its limit (a gate configured 10x too high learns the
//!   real limit from one rejection instead of halving seven times); the measurement becomes
//!   the ceiling and the rate drops to `decrease_margin` x it. Without enough successes to
//!   measure (a trickle), it halves, and the ceiling is set only on a *second* hit within
//!   `ceiling_window_ms`, so one spike does not lower it forever;
//! - `successes` consecutive successes add `step`;
//! - recovery never goes above `ceiling_factor` x ceiling, nor above the configured rate; an
//!   isolated rejection re-measures the ceiling instead of ratcheting it down;
//! - a ban or a spent quota pauses the gate until a given time.
//!
//! Hits that arrive within `hit_cooldown_ms` of the last counted hit are the same episode (the
//! answers to calls that were already in flight or reserved at the old rate): they neither halve
//! again nor count as the "second hit". Successes in that window are not counted either.

/// Tuning of the AIMD rules of one gate.
#[derive(Debug, Clone, PartialEq)]
pub struct AimdParams {
    /// The configured (or operator-set) rate: the adaptive rate never exceeds it.
    pub max_rate: f64,
    /// Floor of the adaptive rate, so a gate always trickles.
    pub(crate) min_rate: f64,
    /// Rate added after `successes` consecutive successes.
    pub step: f64,
    /// Consecutive successes per step (at least 1).
    pub successes: u32,
    /// A second hit within this many ms of the previous one updates the ceiling.
    pub ceiling_window_ms: u64,
    /// Recovery stops at this share of the ceiling.
    pub ceiling_factor: f64,
    /// Hits within this many ms of the last counted hit are the same episode.
    pub hit_cooldown_ms: u64,
    /// After a measured hit the rate drops to this share of the measured limit.
    pub decrease_margin: f64,
    /// How long after a hit the ceiling caps recovery.
    pub ceiling_hold_ms: u64,
}

impl AimdParams {
    /// The rules of docs/design.md, "Gates" for a gate with this rate, step and success count.
    pub fn new(max_rate: f64, step: f64, successes: u32) -> AimdParams {
        AimdParams {
            max_rate,
            min_rate: min_rate_for(max_rate),
            step,
            successes: successes.max(1),
            ceiling_window_ms: 5_000,
            ceiling_factor: 0.99,
            hit_cooldown_ms: 1_000,
            decrease_margin: 0.97,
            ceiling_hold_ms: 600_000,
        }
    }

    /// The highest rate recovery may reach with this ceiling, when the last hit was at
    /// `last_hit_ms` and it is `now_ms`: the ceiling binds for `ceiling_hold_ms` after a hit;
    /// past that, recovery may probe up to the configured rate (the limit may have been
    /// raised, or measured low), and the next hit measures it again.
    pub(crate) fn recovery_cap(
        &self,
        ceiling: Option<f64>,
        last_hit_ms: Option<u64>,
        now_ms: u64,
    ) -> f64 {
        let holds = last_hit_ms.is_some_and(|t| now_ms.saturating_sub(t) < self.ceiling_hold_ms);
        match ceiling {
            Some(c) if holds => self.max_rate.min(c * self.ceiling_factor),
            _ => self.max_rate,
        }
    }
}

/// Slots of 100 ms kept for the success window: the ten up to now and the one before them,
/// whose share still inside the last 1,000 ms is counted (the ten alone cover only 900 ms
/// plus the current slot's part, which read a correctly set gate's limit ~5% low).
pub(crate) const OK_SLOTS: usize = 11;
/// Fewest successes in the last second that count as a measurement of the platform's limit.
pub const MIN_MEASURED: u32 = 5;

/// Floor of the adaptive rate: 2% of the configured rate, at least 0.1/s (never above it).
pub(crate) fn min_rate_for(max_rate: f64) -> f64 {
    (max_rate * 0.02).max(0.1).min(max_rate)
}

/// The adaptive state of one gate.
#[derive(Debug, Clone, PartialEq)]
pub struct AimdState {
    /// Current adaptive rate (calls per second).
    pub rate: f64,
    /// Rate at which the limit was hit twice within the window, if ever.
    pub ceiling: Option<f64>,
    /// When the last counted hit happened.
    pub(crate) last_hit_ms: Option<u64>,
    /// Consecutive successes not yet turned into a step.
    pub(crate) successes: u32,
    /// Paused until this time (0 = not paused).
    pub(crate) pause_until_ms: u64,
    /// Successes per 100 ms slot over the last second: `(slot, count)`, slot = ms / 100.
    pub(crate) ok_slots: [(u64, u32); OK_SLOTS],
    /// Why the gate is paused.
    pub(crate) pause_reason: String,
}

/// What a rate-limit answer did to the state.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum HitEffect {
    /// Same episode as the last counted hit: nothing changed.
    Absorbed,
    /// Rate halved; the ceiling was left alone (first hit, or the last one is too old).
    Halved,
    /// Rate halved and the ceiling set to the rate of this (second) hit.
    HalvedAndCeiling,
    /// The platform's limit was measured from the last second's successes: it is the
    /// ceiling, and the rate sits just under it.
    Measured,
}

impl AimdState {
    /// A fresh gate runs at its configured rate with no ceiling.
    pub fn new(params: &AimdParams) -> AimdState {
        AimdState {
            rate: params.max_rate,
            ceiling: None,
            last_hit_ms: None,
            successes: 0,
            pause_until_ms: 0,
            pause_reason: String::new(),
            ok_slots: [(0, 0); OK_SLOTS],
        }
    }

    /// Count `n` successes in the window slot of `now_ms`.
    pub(crate) fn record_ok(&mut self, n: u32, now_ms: u64) {
        let slot = now_ms / 100;
        let cell = &mut self.ok_slots[(slot % OK_SLOTS as u64) as usize];
        if cell.0 == slot {
            cell.1 = cell.1.saturating_add(n);
        } else {
            *cell = (slot, n);
        }
    }

    /// Successes in the last 1,000 ms up to `now_ms`: the ten slots up to `now_ms`'s, and the
    /// part of the slot before them that is still inside the second (assuming its successes
    /// were spread evenly over it).
    pub(crate) fn ok_last_second(&self, now_ms: u64) -> f64 {
        let slot = now_ms / 100;
        let oldest_share = 1.0 - (now_ms % 100) as f64 / 100.0;
        self.ok_slots
            .iter()
            .map(|&(s, n)| {
                if s <= slot && s + 10 > slot {
                    f64::from(n)
                } else if s + 10 == slot {
                    f64::from(n) * oldest_share
                } else {
                    0.0
                }
            })
            .sum()
    }

    /// The rate the bucket should run at now: the adaptive rate, never above the configured one.
    pub(crate) fn effective_rate(&self, params: &AimdParams) -> f64 {
        self.rate
            .min(params.max_rate)
            .max(params.min_rate.min(params.max_rate))
    }

    fn in_cooldown(&self, params: &AimdParams, now_ms: u64) -> bool {
        self.last_hit_ms
            .is_some_and(|t| now_ms.saturating_sub(t) < params.hit_cooldown_ms)
    }

    /// A rate-limit answer at `now_ms`.
    pub fn on_rate_limited(&mut self, params: &AimdParams, now_ms: u64) -> HitEffect {
        if self.in_cooldown(params, now_ms) {
            return HitEffect::Absorbed;
        }
        let at = self.effective_rate(params);
        let second = self
            .last_hit_ms
            .is_some_and(|t| now_ms.saturating_sub(t) <= params.ceiling_window_ms);
        let measured = self.ok_last_second(now_ms);
        if measured >= f64::from(MIN_MEASURED) {
            // What the platform admitted in the last second is its limit, as seen from here.
            // A lower measurement replaces a known ceiling only when the hits repeat: an
            // isolated rejection under the ceiling (a burst, a phase) must not ratchet it down.
            let m = measured;
            self.ceiling = Some(match self.ceiling {
                Some(c) if m <= c && !second => c,
                _ => m,
            });
            self.rate = (m.min(at) * params.decrease_margin).max(params.min_rate);
            self.successes = 0;
            self.last_hit_ms = Some(now_ms);
            return HitEffect::Measured;
        }
        if second {
            self.ceiling = Some(at);
        }
        self.rate = (at / 2.0).max(params.min_rate);
        self.successes = 0;
        self.last_hit_ms = Some(now_ms);
        if second {
            HitEffect::HalvedAndCeiling
        } else {
            HitEffect::Halved
        }
    }

    /// `n` successful calls reported at `now_ms` (reports are batched).
    pub fn on_successes(&mut self, params: &AimdParams, n: u32, now_ms: u64) {
        if n == 0 {
            return;
        }
        // Counted for the measurement even in a hit's cooldown: they were admitted.
        self.record_ok(n, now_ms);
        if self.in_cooldown(params, now_ms) {
            return;
        }
        let total = self.successes.saturating_add(n);
        let steps = total / params.successes;
        self.successes = total % params.successes;
        let cap = params.recovery_cap(self.ceiling, self.last_hit_ms, now_ms);
        if steps > 0 && self.rate < cap {
            self.rate = (self.rate + params.step * steps as f64).min(cap);
        }
    }

    /// Pause the gate until `until_ms` (a later pause wins; an earlier one changes nothing).
    pub(crate) fn pause_until(&mut self, until_ms: u64, reason: &str) {
        if until_ms > self.pause_until_ms {
            self.pause_until_ms = until_ms;
            self.pause_reason = reason.to_string();
        }
    }

    /// Remaining pause and its reason, if the gate is paused at `now_ms`.
    pub(crate) fn paused(&self, now_ms: u64) -> Option<(u64, &str)> {
        (self.pause_until_ms > now_ms)
            .then(|| (self.pause_until_ms - now_ms, self.pause_reason.as_str()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An injected clock: tests move time by hand.
    struct Clock(u64);
    impl Clock {
        fn advance(&mut self, ms: u64) -> u64 {
            self.0 += ms;
            self.0
        }
    }

    fn params() -> AimdParams {
        // rate 100/s, +5 after 10 successes.
        AimdParams::new(100.0, 5.0, 10)
    }

    #[test]
    fn rate_limit_halves_and_in_flight_echoes_are_absorbed() {
        let p = params();
        let mut clock = Clock(1_000);
        let mut s = AimdState::new(&p);
        assert_eq!(s.on_rate_limited(&p, clock.0), HitEffect::Halved);
        assert_eq!(s.rate, 50.0);
        // Answers to calls already in flight at the old rate: same episode.
        assert_eq!(
            s.on_rate_limited(&p, clock.advance(300)),
            HitEffect::Absorbed
        );
        assert_eq!(s.rate, 50.0);
        assert_eq!(s.ceiling, None);
    }

    #[test]
    fn halving_stops_at_the_floor() {
        let p = params();
        let mut clock = Clock(0);
        let mut s = AimdState::new(&p);
        for _ in 0..20 {
            s.on_rate_limited(&p, clock.advance(10_000));
        }
        assert_eq!(s.rate, p.min_rate);
        assert!(p.min_rate > 0.0);
    }

    #[test]
    fn single_spike_does_not_set_a_ceiling() {
        let p = params();
        let mut clock = Clock(0);
        let mut s = AimdState::new(&p);
        s.on_rate_limited(&p, clock.advance(1_000));
        // Next hit comes 6 s later: outside the 5 s window, so still no ceiling.
        assert_eq!(
            s.on_rate_limited(&p, clock.advance(6_000)),
            HitEffect::Halved
        );
        assert_eq!(s.ceiling, None);
        // Recovery is bounded only by the configured rate.
        s.on_successes(&p, 10_000, clock.advance(2_000));
        assert_eq!(s.rate, 100.0);
    }

    #[test]
    fn second_hit_within_window_sets_ceiling_to_the_rate_hit() {
        let p = params();
        let mut clock = Clock(0);
        let mut s = AimdState::new(&p);
        s.on_rate_limited(&p, clock.advance(1_000)); // 100 -> 50
        s.on_successes(&p, 20, clock.advance(1_500)); // 50 -> 60
        assert_eq!(s.rate, 60.0);
        // Hit again 3 s after the first: the limit is real, and it was hit at 60.
        assert_eq!(
            s.on_rate_limited(&p, clock.advance(1_500)),
            HitEffect::HalvedAndCeiling
        );
        assert_eq!(s.ceiling, Some(60.0));
        assert_eq!(s.rate, 30.0);
    }

    #[test]
    fn recovery_is_capped_at_ninety_percent_of_ceiling() {
        let p = params();
        let mut clock = Clock(0);
        let mut s = AimdState::new(&p);
        s.on_rate_limited(&p, clock.advance(1_000));
        s.on_rate_limited(&p, clock.advance(2_000)); // ceiling 50, rate 25
        assert_eq!(s.ceiling, Some(50.0));
        for _ in 0..100 {
            s.on_successes(&p, 1, clock.advance(200));
        }
        assert!((s.rate - 49.5).abs() < 1e-9, "{}", s.rate);
        // The ceiling is remembered across later single spikes far apart.
        s.on_rate_limited(&p, clock.advance(60_000));
        assert_eq!(s.ceiling, Some(50.0));
    }

    #[test]
    fn step_needs_consecutive_successes_and_a_hit_resets_the_count() {
        let p = params();
        let mut clock = Clock(0);
        let mut s = AimdState::new(&p);
        s.on_rate_limited(&p, clock.advance(10_000)); // 50
        s.on_successes(&p, 9, clock.advance(2_000));
        assert_eq!(s.rate, 50.0);
        s.on_rate_limited(&p, clock.advance(10_000)); // 25, count reset
        s.on_successes(&p, 9, clock.advance(2_000));
        assert_eq!(s.rate, 25.0);
        s.on_successes(&p, 1, clock.advance(10));
        assert_eq!(s.rate, 30.0);
        // Successes inside the cooldown of a hit are echoes of the old rate: not counted.
        s.on_rate_limited(&p, clock.advance(10_000)); // 15
        s.on_successes(&p, 100, clock.advance(200));
        assert_eq!(s.rate, 15.0);
    }

    /// Successes at `per_s` for `secs` seconds, reported every 100 ms (as the gates batch).
    /// Successes at `per_s` for `secs` seconds, reported in the middle of each 100 ms slot
    /// (as if spread evenly over it, which the measurement assumes).
    fn admitted(s: &mut AimdState, p: &AimdParams, clock: &mut Clock, per_s: u32, secs: u32) {
        for _ in 0..secs * 10 {
            s.on_successes(p, per_s / 10, clock.advance(50));
            clock.advance(50);
        }
    }

    /// `actual` within 2% of `expected`.
    fn near(actual: Option<f64>, expected: f64) -> bool {
        actual.is_some_and(|a| (a - expected).abs() <= expected * 0.02)
    }

    #[test]
    fn one_rejection_measures_a_limit_ten_times_lower() {
        // Configured 1,000/s; the platform admits 100/s.
        let p = AimdParams::new(1_000.0, 50.0, 20);
        let mut clock = Clock(0);
        let mut s = AimdState::new(&p);
        admitted(&mut s, &p, &mut clock, 100, 1);
        assert_eq!(
            s.on_rate_limited(&p, clock.advance(10)),
            HitEffect::Measured
        );
        assert!(near(Some(s.rate), 97.0), "{}", s.rate);
        assert!(near(s.ceiling, 100.0), "{:?}", s.ceiling);
        let ceiling = s.ceiling.unwrap_or_default();
        // Recovery stops just under the measured limit while the ceiling holds.
        admitted(&mut s, &p, &mut clock, 95, 20);
        assert!((s.rate - ceiling * 0.99).abs() < 1e-9, "{}", s.rate);
    }

    #[test]
    fn isolated_rejections_do_not_ratchet_the_ceiling_down() {
        let p = AimdParams::new(1_000.0, 50.0, 20);
        let mut clock = Clock(0);
        let mut s = AimdState::new(&p);
        admitted(&mut s, &p, &mut clock, 100, 1);
        s.on_rate_limited(&p, clock.advance(10));
        admitted(&mut s, &p, &mut clock, 100, 2);
        s.on_rate_limited(&p, clock.advance(10));
        assert!(near(s.ceiling, 100.0), "{:?}", s.ceiling);
        let ceiling = s.ceiling;
        // Far apart, each rejection sees only what was sent (97/s), under the ceiling.
        for _ in 0..5 {
            admitted(&mut s, &p, &mut clock, 97, 10);
            assert_eq!(
                s.on_rate_limited(&p, clock.advance(10)),
                HitEffect::Measured
            );
            assert_eq!(s.ceiling, ceiling, "isolated hit lowered the ceiling");
            // Just under what was sent (9 per 100 ms here): a dip, recovered by the steps.
            assert!(s.rate >= 80.0, "{}", s.rate);
        }
        // Hits that repeat within the window mean the limit really is lower now.
        admitted(&mut s, &p, &mut clock, 60, 2);
        s.on_rate_limited(&p, clock.advance(10));
        admitted(&mut s, &p, &mut clock, 60, 2);
        s.on_rate_limited(&p, clock.advance(10));
        assert!(near(s.ceiling, 60.0), "{:?}", s.ceiling);
    }

    #[test]
    fn the_ceiling_stops_binding_after_a_quiet_spell() {
        let p = AimdParams::new(200.0, 10.0, 20);
        let mut clock = Clock(0);
        let mut s = AimdState::new(&p);
        admitted(&mut s, &p, &mut clock, 80, 1);
        s.on_rate_limited(&p, clock.advance(10));
        admitted(&mut s, &p, &mut clock, 80, 2);
        s.on_rate_limited(&p, clock.advance(10));
        assert!(near(s.ceiling, 80.0), "{:?}", s.ceiling);
        // Ten minutes without a hit: recovery may probe above the old measurement.
        admitted(&mut s, &p, &mut clock, 80, 610);
        assert!(s.rate > 80.0, "{}", s.rate);
    }

    #[test]
    fn pauses_expire_and_the_later_one_wins() {
        let mut clock = Clock(10_000);
        let mut s = AimdState::new(&params());
        assert_eq!(s.paused(clock.0), None);
        s.pause_until(clock.0 + 2_000, "ban 2 s");
        s.pause_until(clock.0 + 1_000, "shorter ban");
        assert_eq!(s.paused(clock.advance(500)), Some((1_500, "ban 2 s")));
        s.pause_until(clock.0 + 60_000, "daily quota spent");
        assert_eq!(
            s.paused(clock.advance(2_000)).map(|p| p.1),
            Some("daily quota spent")
        );
        assert_eq!(s.paused(clock.advance(60_000)), None);
    }

    #[test]
    fn operator_rate_below_adaptive_rate_binds_immediately() {
        let mut p = params();
        let s = AimdState::new(&p);
        p.max_rate = 10.0;
        assert_eq!(s.effective_rate(&p), 10.0);
    }
}
