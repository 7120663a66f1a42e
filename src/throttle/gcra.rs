//! An in-process GCRA *reservation* bucket: a pure type, no I/O, time passed in.
//!
//! Hand-written on purpose: governor's limiters only *check* ("go now or not before T") and
//! never reserve a future cell, so N waiters that sleep until T all wake on the same timer
//! tick and race for one cell; with tokio's 1 ms timer an embedded gate then tops out near
//! 1,000 admissions/s whatever its rate (measured with the demo: 950/s against a 2,000/s
//! gate). A reservation hands each caller its own slot, so each sleeps exactly once — the
//! same contract as the Redis script.

/// Theoretical-arrival-time state of one bucket. Times are microseconds on any monotonic
/// clock the caller chooses.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Gcra {
    tat_us: f64,
}

impl Gcra {
    pub(crate) fn new() -> Gcra {
        Gcra::default()
    }

    fn interval_us(rate: f64) -> f64 {
        1e6 / rate.max(1e-6)
    }

    fn tolerance_us(rate: f64, burst: f64) -> f64 {
        (burst.max(1.0) - 1.0) * Self::interval_us(rate)
    }

    /// Reserve one cell at `now_us` for a bucket of `rate`/s and `burst` cells. `Ok(wait)`:
    /// the cell is the caller's after `wait` µs (0 = now). `Err(wait)`: the first free cell is
    /// further than `max_wait_us` away; nothing was taken.
    pub(crate) fn reserve(
        &mut self,
        now_us: f64,
        rate: f64,
        burst: f64,
        max_wait_us: f64,
    ) -> Result<f64, f64> {
        let tat = self.tat_us.max(now_us);
        let wait = (tat - Self::tolerance_us(rate, burst) - now_us).max(0.0);
        if wait > max_wait_us {
            return Err(wait);
        }
        self.tat_us = tat + Self::interval_us(rate);
        Ok(wait)
    }

    /// A reserved call leaves later than its cell, at `at_us` (the send-time check held it
    /// for the next clock second): the bucket runs on from there, so the calls reserved after
    /// it do not pile onto the same boundary (docs/design.md, "Gates").
    pub(crate) fn defer(&mut self, at_us: f64, rate: f64) {
        self.tat_us = self.tat_us.max(at_us + Self::interval_us(rate));
    }

    /// Empty the bucket: the next cell is one interval from `now_us`, with no burst (resume
    /// after a pause or a rate cut without bursting into the platform that pushed back).
    pub(crate) fn drain(&mut self, now_us: f64, rate: f64, burst: f64) {
        let drained = now_us + Self::interval_us(rate) + Self::tolerance_us(rate, burst);
        self.tat_us = self.tat_us.max(drained);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn simultaneous_callers_get_consecutive_slots() {
        let mut g = Gcra::new();
        let waits: Vec<f64> = (0..4)
            .map(|_| g.reserve(0.0, 1000.0, 1.0, 1e6).unwrap())
            .collect();
        assert_eq!(waits, vec![0.0, 1000.0, 2000.0, 3000.0]);
    }

    #[test]
    fn burst_cells_go_at_once_then_the_rate_applies() {
        let mut g = Gcra::new();
        for _ in 0..5 {
            assert_eq!(g.reserve(0.0, 10.0, 5.0, 0.0), Ok(0.0));
        }
        assert_eq!(g.reserve(0.0, 10.0, 5.0, 1e6), Ok(100_000.0));
    }

    #[test]
    fn a_reservation_beyond_max_wait_is_refused_and_takes_nothing() {
        let mut g = Gcra::new();
        assert_eq!(g.reserve(0.0, 1.0, 1.0, 0.0), Ok(0.0));
        assert_eq!(g.reserve(0.0, 1.0, 1.0, 500_000.0), Err(1e6));
        // Nothing was taken: the same wait is offered again.
        assert_eq!(g.reserve(0.0, 1.0, 1.0, 2e6), Ok(1e6));
    }

    #[test]
    fn admissions_over_a_run_never_exceed_rate_times_time_plus_burst() {
        let (rate, burst) = (200.0, 10.0);
        let mut g = Gcra::new();
        let mut admitted = 0u32;
        // Callers arrive every 1 ms for 2 s and take only cells due within the run.
        for t in 0..2000 {
            let now = t as f64 * 1000.0;
            if let Ok(wait) = g.reserve(now, rate, burst, 0.0) {
                assert_eq!(wait, 0.0);
                admitted += 1;
            }
        }
        assert!(admitted as f64 <= rate * 2.0 + burst, "{admitted}");
        assert!(admitted as f64 >= rate * 2.0, "{admitted}");
    }

    #[test]
    fn a_deferred_call_moves_the_next_cells_behind_it() {
        let mut g = Gcra::new();
        assert_eq!(g.reserve(0.0, 10.0, 1.0, 1e9), Ok(0.0));
        // The call left at 950 ms instead: the next cell is one interval after that.
        g.defer(950_000.0, 10.0);
        assert_eq!(g.reserve(100_000.0, 10.0, 1.0, 1e9), Ok(950_000.0));
        // A deferral to before the next cell changes nothing.
        g.defer(0.0, 10.0);
        assert_eq!(g.reserve(100_000.0, 10.0, 1.0, 1e9), Ok(1_050_000.0));
    }

    #[test]
    fn drain_removes_the_burst() {
        let mut g = Gcra::new();
        g.drain(0.0, 10.0, 5.0);
        assert_eq!(g.reserve(0.0, 10.0, 5.0, 1e6), Ok(100_000.0));
    }
}
