//! The time budget of one task: every attempt (and every wait) takes its slice from it, and no
//! attempt starts when what is left cannot cover a useful one.

use std::time::{Duration, Instant};

/// Below this an attempt is not started: connect + a typical answer (p95 ~300 ms) do not fit,
/// so the call would only burn quota and time out.
pub(crate) const MIN_SLICE: Duration = Duration::from_millis(500);

/// A deadline shared by all calls of one task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    deadline: Instant,
    min_slice: Duration,
}

/// The budget cannot cover another attempt (or wait).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("task time budget exhausted ({remaining:?} left, an attempt needs at least {needed:?})")]
pub(crate) struct BudgetExhausted {
    pub(crate) remaining: Duration,
    pub(crate) needed: Duration,
}

impl Budget {
    /// A budget of `total` starting at `now`.
    pub(crate) fn new(now: Instant, total: Duration) -> Self {
        Budget {
            deadline: now + total,
            min_slice: MIN_SLICE,
        }
    }

    /// A budget of `total` from the current instant.
    pub fn starting_now(total: Duration) -> Self {
        Budget::new(crate::clock::monotonic_now(), total)
    }

    #[cfg(test)]
    /// Override the smallest useful attempt (tests, short benchmark budgets).
    pub(crate) fn with_min_slice(self, min_slice: Duration) -> Self {
        Budget { min_slice, ..self }
    }

    pub(crate) fn remaining(&self, now: Instant) -> Duration {
        self.deadline.saturating_duration_since(now)
    }

    /// The time one attempt may take: min(class timeout, remaining). Refused when the
    /// remainder cannot cover a useful attempt (the smaller of the class timeout and MIN_SLICE).
    pub(crate) fn slice(
        &self,
        now: Instant,
        class_timeout: Duration,
    ) -> Result<Duration, BudgetExhausted> {
        let remaining = self.remaining(now);
        let needed = self.min_slice.min(class_timeout);
        if remaining < needed || remaining.is_zero() {
            return Err(BudgetExhausted { remaining, needed });
        }
        Ok(class_timeout.min(remaining))
    }

    /// How long we may wait (for a gate, a backoff) and still have a useful attempt left.
    pub(crate) fn wait_allowance(&self, now: Instant, class_timeout: Duration) -> Duration {
        self.remaining(now)
            .saturating_sub(self.min_slice.min(class_timeout))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: fn(u64) -> Duration = Duration::from_secs;

    #[test]
    fn slice_is_class_timeout_when_budget_is_large() {
        let t0 = Instant::now();
        let b = Budget::new(t0, S(60));
        assert_eq!(b.slice(t0, S(6)), Ok(S(6)));
    }

    #[test]
    fn slice_is_what_is_left_near_the_deadline() {
        let t0 = Instant::now();
        let b = Budget::new(t0, S(60));
        assert_eq!(b.slice(t0 + S(58), S(6)), Ok(S(2)));
    }

    #[test]
    fn attempt_refused_when_remainder_cannot_cover_it() {
        let t0 = Instant::now();
        let b = Budget::new(t0, S(10));
        let err = b
            .slice(t0 + Duration::from_millis(9_600), S(6))
            .unwrap_err();
        assert_eq!(err.remaining, Duration::from_millis(400));
        assert!(b.slice(t0 + S(11), S(6)).is_err());
    }

    #[test]
    fn wait_allowance_keeps_room_for_an_attempt() {
        let t0 = Instant::now();
        let b = Budget::new(t0, S(3));
        assert_eq!(b.wait_allowance(t0, S(6)), Duration::from_millis(2_500));
        assert_eq!(b.wait_allowance(t0 + S(4), S(6)), Duration::ZERO);
    }

    #[test]
    fn min_slice_override() {
        let t0 = Instant::now();
        let b =
            Budget::new(t0, Duration::from_millis(100)).with_min_slice(Duration::from_millis(50));
        assert_eq!(b.slice(t0, S(3)), Ok(Duration::from_millis(100)));
    }
}
