//! When to say something about a gate's daily-quota burn ratio: a pure, rate-limited policy.
//!
//! burn = (used / daily quota) / (share of the GMT+8 day elapsed), see `time::QuotaDay::burn_ratio`.
//! Above 1.3 the quota will not last the day (warn); below 0.5 there is headroom (info).
//! Each level is said at most once per `interval_ms`, so a busy gate does not flood the log.

/// Burn above this: the quota will run out before the reset.
pub(crate) const BURN_HIGH: f64 = 1.3;
/// Burn below this: headroom exists.
pub(crate) const BURN_LOW: f64 = 0.5;

#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum BurnAlert {
    /// burn > 1.3: warn.
    High(f64),
    /// burn < 0.5: info.
    Low(f64),
}

/// Rate limit of the burn lines of one gate.
#[derive(Debug, Clone)]
pub(crate) struct BurnWatch {
    interval_ms: u64,
    last_high_ms: Option<u64>,
    last_low_ms: Option<u64>,
}

impl BurnWatch {
    pub(crate) fn new(interval_ms: u64) -> BurnWatch {
        BurnWatch {
            interval_ms,
            last_high_ms: None,
            last_low_ms: None,
        }
    }

    /// The line to log for this observation, if any.
    pub(crate) fn observe(&mut self, burn: f64, now_ms: u64) -> Option<BurnAlert> {
        let due =
            |last: Option<u64>| last.is_none_or(|t| now_ms.saturating_sub(t) >= self.interval_ms);
        if burn > BURN_HIGH && due(self.last_high_ms) {
            self.last_high_ms = Some(now_ms);
            return Some(BurnAlert::High(burn));
        }
        if burn < BURN_LOW && due(self.last_low_ms) {
            self.last_low_ms = Some(now_ms);
            return Some(BurnAlert::Low(burn));
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn high_and_low_are_said_once_per_interval() {
        let mut w = BurnWatch::new(60_000);
        assert_eq!(w.observe(1.5, 0), Some(BurnAlert::High(1.5)));
        assert_eq!(w.observe(1.6, 10_000), None);
        assert_eq!(w.observe(1.0, 20_000), None);
        assert_eq!(w.observe(0.2, 30_000), Some(BurnAlert::Low(0.2)));
        assert_eq!(w.observe(0.2, 40_000), None);
        assert_eq!(w.observe(1.4, 61_000), Some(BurnAlert::High(1.4)));
    }

    #[test]
    fn on_pace_says_nothing() {
        let mut w = BurnWatch::new(1);
        for t in 0..10 {
            assert_eq!(w.observe(1.0, t * 10), None);
        }
    }
}
