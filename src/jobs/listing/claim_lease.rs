//! How long a listing task may still send writes under its claims (docs/design.md, "Listed
//! once"). A run renews its claims every few seconds; another holder takes them over once
//! they have not been renewed for the take-over time. So that no write of this run can still
//! be on its way then, the run sends a write only while its last renewal that succeeded was
//! sent less than `fence` ago, and every write ends within its item's budget: the take-over
//! time is the fence plus that budget plus a margin. Pure: the caller supplies the instants.

use std::time::{Duration, Instant};

/// The write fence of one task's claims.
#[derive(Debug)]
pub(crate) struct ClaimLease {
    fence: Duration,
    last_ok_sent: std::sync::Mutex<Instant>,
}

impl ClaimLease {
    /// Claims taken by a statement sent at `sent_at` (the database stamped them after).
    pub(crate) fn new(fence: Duration, sent_at: Instant) -> ClaimLease {
        ClaimLease {
            fence,
            last_ok_sent: std::sync::Mutex::new(sent_at),
        }
    }

    /// A renewal sent at `sent_at` succeeded.
    pub(crate) fn renewed(&self, sent_at: Instant) {
        if let Ok(mut t) = self.last_ok_sent.lock() {
            *t = (*t).max(sent_at);
        }
    }

    /// Whether a write may start at `now`.
    pub(crate) fn holds(&self, now: Instant) -> bool {
        self.last_ok_sent
            .lock()
            .map(|t| now.saturating_duration_since(*t) < self.fence)
            .unwrap_or(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FENCE: Duration = Duration::from_secs(15);

    #[test]
    fn holds_while_renewals_succeed_and_not_past_the_fence() {
        let t0 = Instant::now();
        let lease = ClaimLease::new(FENCE, t0);
        assert!(lease.holds(t0 + Duration::from_secs(14)));
        assert!(!lease.holds(t0 + FENCE));
        lease.renewed(t0 + Duration::from_secs(10));
        assert!(lease.holds(t0 + Duration::from_secs(24)));
        assert!(!lease.holds(t0 + Duration::from_secs(25)));
    }

    #[test]
    fn a_late_answer_of_an_older_renewal_does_not_move_it_back() {
        let t0 = Instant::now();
        let lease = ClaimLease::new(FENCE, t0);
        lease.renewed(t0 + Duration::from_secs(10));
        lease.renewed(t0 + Duration::from_secs(5));
        assert!(lease.holds(t0 + Duration::from_secs(24)));
    }
}
