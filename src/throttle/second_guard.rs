//! The send-time guard of one embedded gate: at most `budget` calls leave in any clock-aligned
//! second. A pure type: the caller passes the wall-clock time in milliseconds.
//!
//! The GCRA bucket spaces *reservations*; a call leaves when its task wakes, and a task that
//! wakes late (a timer tick, a busy core) leaves together with the ones due after it. Late
//! calls that cross a second boundary land on top of the next second's own calls: against a
//! platform that counts per clock-aligned second, a gate set 0.2% under the grant has three
//! calls a second of margin, so a stall of two milliseconds was enough for a rejection (and,
//! on TOP, a one-second ban of the app). The guard keeps the bucket's own promise (at most
//! rate + burst calls in a second) at the moment of sending: a call that would exceed it waits
//! for the next second (docs/design.md, "Gates").

/// Calls sent in the current clock-aligned second.
#[derive(Debug, Clone, Default)]
pub(crate) struct SecondGuard {
    second: u64,
    sent: u32,
}

impl SecondGuard {
    /// May a call leave at `now_ms` (wall clock, ms since the epoch) with at most `budget` per
    /// second? `None`: yes, and it is counted. `Some(ms)`: wait this long (to the next second)
    /// and ask again.
    pub(crate) fn admit(&mut self, now_ms: u64, budget: u32) -> Option<u64> {
        let second = now_ms / 1000;
        if second != self.second {
            self.second = second;
            self.sent = 0;
        }
        if self.sent < budget.max(1) {
            self.sent += 1;
            None
        } else {
            Some(1000 - now_ms % 1000)
        }
    }
}

/// The guard's budget for a bucket running at `rate` with `burst`: what GCRA admits in one
/// second, at least one call.
pub(crate) fn budget_for(rate: f64, burst: f64) -> u32 {
    let b = (rate + burst).floor();
    if b >= f64::from(u32::MAX) {
        u32::MAX
    } else {
        (b as u32).max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_holds_per_aligned_second() {
        let mut g = SecondGuard::default();
        for i in 0..3 {
            assert_eq!(g.admit(5_000 + i * 10, 3), None);
        }
        // The fourth in the same second waits for the next one.
        assert_eq!(g.admit(5_700, 3), Some(300));
        assert_eq!(g.admit(5_999, 3), Some(1));
        // A new second, a new count.
        assert_eq!(g.admit(6_000, 3), None);
    }

    #[test]
    fn budget_is_what_the_bucket_admits_in_a_second() {
        assert_eq!(budget_for(1_663.7, 1.0), 1_664);
        assert_eq!(budget_for(0.2, 0.0), 1);
        assert_eq!(budget_for(f64::MAX, 1.0), u32::MAX);
    }
}
