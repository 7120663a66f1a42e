//! The platform's own clock, as its answers' HTTP `Date` header shows it (docs/design.md,
//! "Continuous sync": the window's clock). An order window vouches for changes up to a time;
//! a time the platform has not reached yet would leave the changes it stamps later behind the
//! watermark for good. The ledger's and this host's clocks are checked against each other;
//! this is the check against the platform's.
//!
//! A `Date` is the second the platform made its answer, so when the answer arrives the
//! platform's clock reads at least `Date` (truncated to the second, sent before it arrived):
//! `Date - arrival` on this host is a lower bound of how far the platform's clock is ahead of
//! this host's. The largest bound of the recent answers is the best; older ones age out, so a
//! clock corrected since is followed. No I/O; times are unix ms passed in.

use std::sync::{Arc, Mutex, PoisonError};

/// How long an answer's bound counts: two halves of this, the best of each kept.
pub const CLOCK_SAMPLE_TTL_MS: i64 = 10 * 60 * 1000;

/// The platform's clock against this host's, from the `Date` of recent answers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PlatformClock {
    /// The best bound of the current half-period and of the one before: (half index, bound).
    current: Option<(i64, i64)>,
    previous: Option<(i64, i64)>,
}

impl PlatformClock {
    /// An answer stamped `date_ms` by the platform arrived at `arrived_ms` on this host.
    pub fn observe(&mut self, date_ms: i64, arrived_ms: i64) {
        let half = arrived_ms.div_euclid(CLOCK_SAMPLE_TTL_MS / 2);
        let bound = date_ms.saturating_sub(arrived_ms);
        match self.current {
            Some((h, best)) if h == half => self.current = Some((h, best.max(bound))),
            Some((h, _)) if h > half => {} // out of order across a half: too old to matter
            old => {
                self.previous = old.filter(|(h, _)| *h == half - 1);
                self.current = Some((half, bound));
            }
        }
    }

    /// How far the platform's clock is at least ahead of this host's at `now_ms` (negative:
    /// behind), from answers of the last 5-10 minutes; `None` when there were none.
    pub fn ahead_at_least_ms(&self, now_ms: i64) -> Option<i64> {
        let half = now_ms.div_euclid(CLOCK_SAMPLE_TTL_MS / 2);
        [self.current, self.previous]
            .into_iter()
            .flatten()
            .filter(|(h, _)| *h == half || *h == half - 1)
            .map(|(_, bound)| bound)
            .max()
    }
}

/// One platform's clock shared by the clones of its client and whoever decides windows.
#[derive(Debug, Clone, Default)]
pub struct SharedPlatformClock(Arc<Mutex<PlatformClock>>);

impl SharedPlatformClock {
    /// An answer stamped `date_ms` by the platform arrived at `arrived_ms` on this host
    /// ([`PlatformClock::observe`]).
    pub fn observe(&self, date_ms: i64, arrived_ms: i64) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .observe(date_ms, arrived_ms);
    }

    /// How far the platform's clock is at least ahead of this host's at `now_ms`
    /// ([`PlatformClock::ahead_at_least_ms`]).
    pub fn ahead_at_least_ms(&self, now_ms: i64) -> Option<i64> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .ahead_at_least_ms(now_ms)
    }
}

/// Every platform's clock of one process: what its clients observe, what its schedules read.
#[derive(Debug, Clone, Default)]
pub struct PlatformClocks(std::collections::HashMap<super::Platform, SharedPlatformClock>);

impl PlatformClocks {
    /// Register `platform`'s clock (replacing any before it).
    pub fn insert(&mut self, platform: super::Platform, clock: SharedPlatformClock) {
        self.0.insert(platform, clock);
    }

    /// How far `platform`'s clock is at least ahead of this host's at `now_ms` (negative:
    /// behind); `None` without a recent answer from it.
    pub fn ahead_at_least_ms(&self, platform: super::Platform, now_ms: i64) -> Option<i64> {
        self.0.get(&platform)?.ahead_at_least_ms(now_ms)
    }
}

/// An HTTP `Date` header (RFC 9110 section 5.6.7, the IMF-fixdate form every origin server
/// sends) as unix ms; `None` when it is not one.
pub fn http_date_ms(value: &str) -> Option<i64> {
    chrono::DateTime::parse_from_rfc2822(value.trim())
        .ok()
        .map(|t| t.timestamp_millis())
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: i64 = 60_000;

    #[test]
    fn the_best_bound_of_recent_answers_counts_and_old_ones_age_out() {
        let mut c = PlatformClock::default();
        let t0 = 1_000 * MIN;
        assert_eq!(c.ahead_at_least_ms(t0), None);
        // A platform 5 minutes behind: its Date, truncated to the second, answered in 40 ms.
        c.observe(t0 - 5 * MIN - 400, t0);
        c.observe(t0 + 1_000 - 5 * MIN - 900, t0 + 1_000);
        assert_eq!(c.ahead_at_least_ms(t0 + 1_000), Some(-5 * MIN - 400));
        // Still counted 9 minutes later (the half before), gone after 10.
        assert_eq!(c.ahead_at_least_ms(t0 + 9 * MIN), Some(-5 * MIN - 400));
        assert_eq!(c.ahead_at_least_ms(t0 + 11 * MIN), None);
        // The platform's clock corrected: the new answers count once the old half ages out.
        c.observe(t0 + 6 * MIN - 300, t0 + 6 * MIN);
        assert_eq!(c.ahead_at_least_ms(t0 + 6 * MIN), Some(-300));
        c.observe(t0 + 12 * MIN - 200, t0 + 12 * MIN);
        assert_eq!(c.ahead_at_least_ms(t0 + 12 * MIN), Some(-200));
    }

    #[test]
    fn an_imf_fixdate_is_read_and_anything_else_is_not() {
        assert_eq!(
            http_date_ms("Sat, 05 Dec 2026 02:50:08 GMT"),
            Some(1_796_439_008_000)
        );
        assert_eq!(http_date_ms("yesterday"), None);
        assert_eq!(http_date_ms(""), None);
    }
}
