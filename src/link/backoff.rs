//! Exponential backoff with full jitter: the n-th retry (from 0) sleeps a uniform random time
//! in [0, min(cap, base x 2^n)).
//!
//! Hand-written rather than `backon::ExponentialBuilder::with_jitter`: backon's jitter *adds*
//! up to one more delay (the sleep lies in [d, 2d) and can exceed the cap), which is not full
//! jitter; full jitter is what spreads a fleet's retries so they do not arrive in waves.
//! The random draw is injected so the arithmetic is tested without randomness.

use crate::config::RetryConfig;
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    pub base: Duration,
    pub cap: Duration,
}

impl Backoff {
    pub fn from_config(cfg: &RetryConfig) -> Self {
        Backoff {
            base: Duration::from_millis(cfg.base_ms),
            cap: Duration::from_millis(cfg.cap_ms),
        }
    }

    /// Upper bound of the sleep before retry `n` (0-based): min(cap, base x 2^n).
    pub fn ceiling(&self, n: u32) -> Duration {
        let factor = 1u32.checked_shl(n.min(31)).unwrap_or(u32::MAX);
        self.base.saturating_mul(factor).min(self.cap)
    }

    /// The sleep before retry `n` for a uniform draw `u` in [0, 1).
    pub fn delay_with(&self, n: u32, u: f64) -> Duration {
        self.ceiling(n).mul_f64(u.clamp(0.0, 1.0))
    }

    /// The sleep before retry `n`, drawn at random.
    pub fn delay(&self, n: u32) -> Duration {
        self.delay_with(n, rand::random::<f64>())
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
    fn random_delays_stay_within_bounds() {
        for n in 0..8 {
            for _ in 0..100 {
                assert!(b().delay(n) <= b().ceiling(n));
            }
        }
    }
}
