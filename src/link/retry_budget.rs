//! Retry budget: retries may be at most `ratio` x calls over a window, plus a small floor so a
//! quiet (platform, api) can still retry. When the upstream is sick most calls fail, the
//! budget runs out, and retries stop instead of multiplying the load.
//!
//! [`RetryBudgetPolicy::allows`] is the pure rule; [`LocalRetryBudget`] applies it to in-process
//! counters (embedded mode); the fleet applies it to Redis counters (`shared.rs`).

use crate::config::RetryConfig;
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct RetryBudgetPolicy {
    pub(crate) ratio: f64,
    pub(crate) floor: u64,
    pub(crate) window: Duration,
}

impl RetryBudgetPolicy {
    pub(crate) fn from_config(cfg: &RetryConfig) -> Self {
        RetryBudgetPolicy {
            ratio: cfg.budget_ratio,
            floor: cfg.budget_min_retries,
            window: Duration::from_secs(cfg.budget_window_s.max(1)),
        }
    }

    /// May one more retry go, given `calls` logical calls and `retries` retries already
    /// spent over the window?
    pub(crate) fn allows(&self, calls: u64, retries: u64) -> bool {
        (retries + 1) as f64 <= self.floor as f64 + self.ratio * calls as f64
    }
}

/// Counters of the current and the previous window; together they cover between one and two
/// windows, which smooths the boundary without keeping per-call timestamps.
#[derive(Debug, Clone)]
pub(crate) struct LocalRetryBudget {
    policy: RetryBudgetPolicy,
    origin: Instant,
    window_index: u64,
    current: (u64, u64),
    previous: (u64, u64),
}

impl LocalRetryBudget {
    pub(crate) fn new(policy: RetryBudgetPolicy, now: Instant) -> Self {
        LocalRetryBudget {
            policy,
            origin: now,
            window_index: 0,
            current: (0, 0),
            previous: (0, 0),
        }
    }

    fn roll(&mut self, now: Instant) {
        let idx = (now.saturating_duration_since(self.origin).as_nanos()
            / self.policy.window.as_nanos().max(1)) as u64;
        if idx == self.window_index {
            return;
        }
        self.previous = if idx == self.window_index + 1 {
            self.current
        } else {
            (0, 0)
        };
        self.current = (0, 0);
        self.window_index = idx;
    }

    /// Count one logical call.
    pub(crate) fn record_call(&mut self, now: Instant) {
        self.roll(now);
        self.current.0 += 1;
    }

    /// Ask for one retry; counts it when granted.
    pub(crate) fn try_retry(&mut self, now: Instant) -> bool {
        self.roll(now);
        let calls = self.current.0 + self.previous.0;
        let retries = self.current.1 + self.previous.1;
        if self.policy.allows(calls, retries) {
            self.current.1 += 1;
            true
        } else {
            false
        }
    }

    /// (calls, retries) over the window.
    #[cfg(test)]
    pub(crate) fn counts(&mut self, now: Instant) -> (u64, u64) {
        self.roll(now);
        (
            self.current.0 + self.previous.0,
            self.current.1 + self.previous.1,
        )
    }
}
#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> RetryBudgetPolicy {
        RetryBudgetPolicy {
            ratio: 0.1,
            floor: 2,
            window: Duration::from_secs(10),
        }
    }

    #[test]
    fn rule_is_floor_plus_ratio() {
        let p = policy();
        assert!(p.allows(0, 0));
        assert!(p.allows(0, 1));
        assert!(!p.allows(0, 2));
        assert!(p.allows(100, 11));
        assert!(!p.allows(100, 12));
    }

    #[test]
    fn budget_stops_retries_when_most_calls_fail() {
        let t0 = Instant::now();
        let mut b = LocalRetryBudget::new(policy(), t0);
        let mut granted = 0;
        for _ in 0..200 {
            b.record_call(t0);
            if b.try_retry(t0) {
                granted += 1;
            }
        }
        // 2 + 10% of calls seen so far, never one retry per call.
        assert!(granted <= 22, "granted {granted}");
        assert!(granted >= 20, "granted {granted}");
    }

    #[test]
    fn budget_refills_after_two_windows() {
        let t0 = Instant::now();
        let mut b = LocalRetryBudget::new(policy(), t0);
        assert!(b.try_retry(t0));
        assert!(b.try_retry(t0));
        assert!(!b.try_retry(t0));
        // Next window: the previous one still counts.
        assert!(!b.try_retry(t0 + Duration::from_secs(10)));
        // Two windows on, it is forgotten.
        assert!(b.try_retry(t0 + Duration::from_secs(20)));
        assert_eq!(b.counts(t0 + Duration::from_secs(20)), (0, 1));
    }
}
