//! The send-time guard of one embedded gate: at most `budget` calls leave in any clock-aligned
//! second. A pure type: the caller passes the wall-clock time in milliseconds.
//!
//! The GCRA bucket spaces *reservations*; a call leaves when its task wakes, and a task that
//! wakes late (a timer tick, a busy core) leaves together with the ones due after it. Late
//! calls that cross a second boundary land on top of the next second's own calls: against a
//! platform that counts per clock-aligned second, a gate set 0.2% under the grant has three
//! calls a second of margin, so a stall of two milliseconds was enough for a rejection (and,
//! on TOP, a one-second ban of the app). The guard lets at most a second's worth of calls
//! ([`budget_for`]) leave in one clock second, counted at the moment of sending: a call that
//! would exceed it waits for the next second (docs/design.md, "Gates").
//!
//! It also keeps the end of every second free (the gate's `boundary_band_ms`, 25 ms unless
//! configured): a call due there waits
//! for the boundary and counts in the next second. The guard counts a call when it leaves; the
//! platform counts it when it arrives, milliseconds later (the client's own sending, loopback
//! or network, the platform's queue), and a call that leaves just before a boundary can land
//! just after it, on top of the next second's full budget. Measured in the demo with the
//! ledger on PostgreSQL (BENCHMARKS.md, "The ledger on PostgreSQL"): up to 8 calls of one
//! second crossed into the next when a core was busy; with a 10 ms band one run in four still
//! had 5 cross (a thread waiting its turn on a loaded 2-core machine waits that long); with
//! 25 ms none in four. Holding them delays each such call by at most the band and costs no
//! throughput: the second's budget is unchanged. What the band releases at the boundary is a
//! burst of rate x band calls, which a platform counting per clock second does not mind.

/// Calls sent in the current clock-aligned second.
#[derive(Debug, Clone, Default)]
pub(crate) struct SecondGuard {
    second: u64,
    sent: u32,
    /// The earliest time (ms) the next held call may be given: held calls leave one
    /// `spacing_ms` apart from the boundary on, not all on it (a sliding window counts a pile
    /// at the start of a second as it would anywhere).
    next_held_ms: u64,
}

impl SecondGuard {
    /// May a call leave at `now_ms` (wall clock, ms since the epoch) with at most `budget` per
    /// second? `None`: yes, and it is counted. `Some(ms)`: wait this long (to the next second)
    /// and ask again. In the last `band_ms` of a second every call waits: what a call may take
    /// to reach the platform and still be counted in the second it left in. Held calls are
    /// given times `spacing_ms` apart from the next boundary on.
    pub(crate) fn admit(
        &mut self,
        now_ms: u64,
        budget: u32,
        band_ms: u64,
        spacing_ms: u64,
    ) -> Option<u64> {
        let into = now_ms % 1000;
        if into >= 1000 - band_ms.min(999) {
            return Some(self.hold(now_ms, spacing_ms));
        }
        let second = now_ms / 1000;
        if second != self.second {
            self.second = second;
            self.sent = 0;
        }
        if self.sent < budget.max(1) {
            self.sent += 1;
            None
        } else {
            Some(self.hold(now_ms, spacing_ms))
        }
    }

    /// How long a held call waits: to the next boundary, or one spacing after the call held
    /// before it.
    fn hold(&mut self, now_ms: u64, spacing_ms: u64) -> u64 {
        let boundary = (now_ms / 1000 + 1) * 1000;
        let at = boundary.max(self.next_held_ms);
        self.next_held_ms = at + spacing_ms;
        at - now_ms
    }
}

/// The guard's budget for a bucket running at `rate` with `burst`: a second's worth of calls
/// (the burst if it is larger), at least one, and never more than a measured limit
/// (`ceiling`) the rate runs under. GCRA alone lets `rate + burst` out in the second after a
/// lull; against a platform counting per clock second at the grant that burst is a rejection
/// (docs/design.md, "Gates").
pub(crate) fn budget_for(rate: f64, burst: f64, ceiling: Option<f64>) -> u32 {
    let mut b = rate.max(burst).floor();
    if let Some(c) = ceiling.filter(|c| *c >= rate) {
        b = b.min(c.floor());
    }
    if b >= f64::from(u32::MAX) {
        u32::MAX
    } else {
        (b as u32).max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BAND: u64 = 25;

    #[test]
    fn the_budget_holds_per_aligned_second() {
        let mut g = SecondGuard::default();
        for i in 0..3 {
            assert_eq!(g.admit(5_000 + i * 10, 3, BAND, 0), None);
        }
        // The fourth in the same second waits for the next one.
        assert_eq!(g.admit(5_700, 3, BAND, 0), Some(300));
        assert_eq!(g.admit(5_900, 3, BAND, 0), Some(100));
        // A new second, a new count.
        assert_eq!(g.admit(6_000, 3, BAND, 0), None);
    }

    #[test]
    fn nothing_leaves_in_the_band_before_a_boundary() {
        let mut g = SecondGuard::default();
        let edge = 7_000 - BAND;
        assert_eq!(g.admit(edge - 1, 100, BAND, 0), None);
        // Under budget, and still held to the boundary: it would land in the next second.
        assert_eq!(g.admit(edge, 100, BAND, 0), Some(BAND));
        assert_eq!(g.admit(6_999, 100, BAND, 0), Some(1));
        // At the boundary it leaves, counted in the new second.
        assert_eq!(g.admit(7_000, 1, BAND, 0), None);
        assert_eq!(g.admit(7_001, 1, BAND, 0), Some(999));
    }

    #[test]
    fn held_calls_leave_spaced_from_the_boundary() {
        let mut g = SecondGuard::default();
        assert_eq!(g.admit(5_100, 1, BAND, 40), None);
        // Both are held for the next second; the second one 40 ms after the first.
        assert_eq!(g.admit(5_200, 1, BAND, 40), Some(800));
        assert_eq!(g.admit(5_300, 1, BAND, 40), Some(740));
        // A call held from the band of a later second goes at that boundary again.
        assert_eq!(g.admit(8_990, 100, BAND, 40), Some(10));
    }

    #[test]
    fn a_band_of_zero_holds_nothing() {
        let mut g = SecondGuard::default();
        assert_eq!(g.admit(7_999, 10, 0, 0), None);
        assert_eq!(g.admit(7_999, 10, 3, 0), Some(1));
    }

    #[test]
    fn budget_is_what_the_bucket_admits_in_a_second() {
        // A gate set to a 400/s grant with burst 20 sends 400 in a second, not 420.
        assert_eq!(budget_for(400.0, 20.0, None), 400);
        assert_eq!(budget_for(1_663.7, 1.0, None), 1_663);
        assert_eq!(budget_for(0.5, 3.0, None), 3);
        assert_eq!(budget_for(0.2, 0.0, None), 1);
        assert_eq!(budget_for(f64::MAX, 1.0, None), u32::MAX);
        // Under a measured limit of 29.5, 29.2/s may not put 30 in a second.
        assert_eq!(budget_for(29.2, 6.6, Some(29.5)), 29);
        // Recovery climbing past an old ceiling (after the hold) is not held to it.
        assert_eq!(budget_for(40.0, 2.0, Some(30.0)), 40);
    }
}
