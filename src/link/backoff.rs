//! Exponential backoff with full jitter: the n-th retry (from 0) sleeps a uniform random time
//! in [0, min(cap, base x 2^n)).
//!
//! Hand-written rather than `backon::ExponentialBuilder::with_jitter`: backon's jitter *adds*
//! up to one more delay (the sleep lies in [d, 2d) and can exceed the cap), which is not full
//! jitter; full jitter is what spreads a fleet's retries so they do not arrive in waves.
//! The random draw is injected so the arithmetic is tested without randomness.
//!
//! Every retry loop of the crate takes its delays from here: the platform attempt loop (full
//! jitter), an item's transient-retry rounds and the ledger's busy retries (equal jitter: at
//! least half the ceiling, so a retry never comes back at once), the queue's task retries and
//! Redis reconnects ([`Doubling`], no jitter: one process's own pacing).

use crate::config::RetryConfig;
use std::time::Duration;

/// Exponential backoff: the sleep before retry `n` (from 0) is at most min(cap, base x 2^n).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    pub(crate) base: Duration,
    pub(crate) cap: Duration,
}

impl Backoff {
    /// Doubling from `base`, capped at `cap`.
    pub(crate) const fn new(base: Duration, cap: Duration) -> Self {
        Backoff { base, cap }
    }

    /// The platform attempt loop's backoff, from `base_ms` and `cap_ms` of `[link.retry]`.
    pub fn from_config(cfg: &RetryConfig) -> Self {
        Backoff {
            base: Duration::from_millis(cfg.base_ms),
            cap: Duration::from_millis(cfg.cap_ms),
        }
    }

    /// Upper bound of the sleep before retry `n` (0-based): min(cap, base x 2^n).
    pub(crate) fn ceiling(&self, n: u32) -> Duration {
        let factor = 1u32.checked_shl(n.min(31)).unwrap_or(u32::MAX);
        self.base.saturating_mul(factor).min(self.cap)
    }

    /// The sleep before retry `n` for a uniform draw `u` in [0, 1).
    pub(crate) fn delay_with(&self, n: u32, u: f64) -> Duration {
        self.ceiling(n).mul_f64(u.clamp(0.0, 1.0))
    }

    /// The sleep before retry `n`, drawn at random.
    pub fn delay(&self, n: u32) -> Duration {
        self.delay_with(n, rand::random::<f64>())
    }

    /// Equal jitter: the sleep before retry `n` lies in [ceiling / 2, ceiling] for a uniform
    /// draw `u` in [0, 1].
    pub(crate) fn equal_jitter_with(&self, n: u32, u: f64) -> Duration {
        let ceiling = self.ceiling(n);
        ceiling / 2 + (ceiling / 2).mul_f64(u.clamp(0.0, 1.0))
    }

    /// Equal jitter, drawn at random.
    pub(crate) fn equal_jitter(&self, n: u32) -> Duration {
        self.equal_jitter_with(n, rand::random::<f64>())
    }

    /// The ceilings in sequence, for a loop that sleeps until an operation succeeds.
    pub(crate) fn doubling(self) -> Doubling {
        Doubling {
            backoff: self,
            failures: 0,
        }
    }
}

/// The delays of a retry loop without jitter: `base`, `2 x base`, ... up to `cap`; back to
/// `base` after a success ([`Doubling::reset`]).
#[derive(Debug, Clone)]
pub(crate) struct Doubling {
    backoff: Backoff,
    failures: u32,
}

impl Doubling {
    /// The delay after one more failure.
    pub(crate) fn next_delay(&mut self) -> Duration {
        let d = self.backoff.ceiling(self.failures);
        self.failures = self.failures.saturating_add(1);
        d
    }

    /// The operation succeeded: the next failure waits `base` again.
    pub(crate) fn reset(&mut self) {
        self.failures = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b() -> Backoff {
        Backoff::from_config(&RetryConfig::default())
    }

    #[test]
    fn ceiling_doubles_up_to_the_cap() {
        let ms = |n| b().ceiling(n).as_millis();
        assert_eq!(
            [ms(0), ms(1), ms(2), ms(3), ms(4), ms(5), ms(40)],
            [200, 400, 800, 1600, 3200, 4000, 4000]
        );
    }

    #[test]
    fn full_jitter_spans_zero_to_ceiling() {
        assert_eq!(b().delay_with(2, 0.0), Duration::ZERO);
        assert_eq!(b().delay_with(2, 0.5), Duration::from_millis(400));
        assert!(b().delay_with(2, 0.999_999) < Duration::from_millis(800));
    }

    #[test]
    fn equal_jitter_keeps_at_least_half() {
        assert_eq!(b().equal_jitter_with(2, 0.0), Duration::from_millis(400));
        assert_eq!(b().equal_jitter_with(2, 1.0), Duration::from_millis(800));
        for _ in 0..100 {
            let d = b().equal_jitter(1);
            assert!(d >= Duration::from_millis(200) && d <= Duration::from_millis(400));
        }
    }

    #[test]
    fn doubling_sequence_caps_and_resets() {
        let mut d = Backoff::new(Duration::from_millis(100), Duration::from_millis(500)).doubling();
        let ms: Vec<u128> = (0..5).map(|_| d.next_delay().as_millis()).collect();
        assert_eq!(ms, [100, 200, 400, 500, 500]);
        d.reset();
        assert_eq!(d.next_delay(), Duration::from_millis(100));
    }

    #[test]
    fn random_delays_stay_within_bounds() {
        for n in 0..8 {
            for _ in 0..100 {
                assert!(b().delay(n) <= b().ceiling(n));
            }
        }
    }
}
