//! What to do with a schedule's due ticks: a pure policy, no I/O (docs/design.md, "Continuous
//! sync"). The caller reads the schedule, the ledger's clock and whether a run is open, and
//! records the plan in one compare-and-set transaction.

use crate::store::{OnOverlap, RunOutcome};

/// Ticks decided at most per plan: a schedule that was down for longer records the older
/// ones as one `missed` row.
const MAX_ROWS: usize = 64;

/// A schedule's tick rules.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct TickPolicy {
    /// Time between ticks (ms, at least 1).
    pub(crate) every_ms: i64,
    /// After downtime, at most this many of the ticks due at once run (at least 1).
    pub(crate) catch_up: u32,
    /// A tick while a run is open.
    pub(crate) on_overlap: OnOverlap,
}

/// What becomes of one tick.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Decision {
    /// Start a run.
    Start,
    /// Record it; `note` says why it did not run.
    Record(RunOutcome, String),
}

/// The decisions for the ticks due, and the next tick.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Plan {
    /// Oldest first.
    pub(crate) ticks: Vec<(i64, Decision)>,
    /// The first tick after `now`.
    pub(crate) next_tick_ms: i64,
}

impl TickPolicy {
    /// The plan for the ticks due from `next_tick_ms` to `now_ms` (none when none is due),
    /// with a run `running` and a run `queued` already.
    pub(crate) fn plan(
        &self,
        next_tick_ms: i64,
        now_ms: i64,
        mut running: bool,
        mut queued: bool,
    ) -> Option<Plan> {
        if now_ms < next_tick_ms {
            return None;
        }
        let every = self.every_ms.max(1);
        let due = (now_ms - next_tick_ms) / every + 1;
        let last = next_tick_ms + (due - 1) * every;
        let runnable = due.min(i64::from(self.catch_up.max(1)));
        let mut ticks = Vec::new();
        let missed = due - runnable;
        if missed > 0 {
            let note = if missed == 1 {
                "1 tick was due with the ones after it (the fleet was down); catch-up ran the newer ones".to_string()
            } else {
                format!("{missed} ticks from this one were due at once (the fleet was down); catch-up ran the {runnable} newest")
            };
            ticks.push((next_tick_ms, Decision::Record(RunOutcome::Missed, note)));
        }
        let first_runnable = last - (runnable - 1) * every;
        for i in 0..runnable.min(MAX_ROWS as i64) {
            let tick = first_runnable + i * every;
            let decision = if !running {
                running = true;
                Decision::Start
            } else if self.on_overlap == OnOverlap::Queue && !queued {
                queued = true;
                Decision::Record(
                    RunOutcome::Queued,
                    "the run before it is still running".into(),
                )
            } else {
                Decision::Record(
                    RunOutcome::Skipped,
                    "the run before it is still running".into(),
                )
            };
            ticks.push((tick, decision));
        }
        Some(Plan {
            ticks,
            next_tick_ms: last + every,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(catch_up: u32, on_overlap: OnOverlap) -> TickPolicy {
        TickPolicy {
            every_ms: 30_000,
            catch_up,
            on_overlap,
        }
    }

    #[test]
    fn nothing_before_the_tick_and_one_start_on_it() {
        let p = policy(1, OnOverlap::Skip);
        assert_eq!(p.plan(60_000, 59_999, false, false), None);
        let plan = p.plan(60_000, 60_000, false, false).unwrap();
        assert_eq!(plan.ticks, vec![(60_000, Decision::Start)]);
        assert_eq!(plan.next_tick_ms, 90_000);
        // Late within the period: still the one tick, and the next stays on the grid.
        let plan = p.plan(60_000, 89_999, false, false).unwrap();
        assert_eq!(plan.ticks.len(), 1);
        assert_eq!(plan.next_tick_ms, 90_000);
    }

    #[test]
    fn a_tick_while_a_run_runs_is_skipped_or_queued_once() {
        let skip = policy(1, OnOverlap::Skip);
        let plan = skip.plan(0, 0, true, false).unwrap();
        assert!(matches!(
            plan.ticks[0].1,
            Decision::Record(RunOutcome::Skipped, _)
        ));
        let queue = policy(1, OnOverlap::Queue);
        let plan = queue.plan(0, 0, true, false).unwrap();
        assert!(matches!(
            plan.ticks[0].1,
            Decision::Record(RunOutcome::Queued, _)
        ));
        // One queued at most.
        let plan = queue.plan(0, 0, true, true).unwrap();
        assert!(matches!(
            plan.ticks[0].1,
            Decision::Record(RunOutcome::Skipped, _)
        ));
    }

    #[test]
    fn after_downtime_catch_up_is_bounded_and_the_rest_is_one_missed_row() {
        let p = policy(2, OnOverlap::Queue);
        // Ticks 0, 30, 60, 90, 120 s due at 130 s: 120 and 90 runnable, 0..=60 missed.
        let plan = p.plan(0, 130_000, false, false).unwrap();
        assert_eq!(plan.next_tick_ms, 150_000);
        assert_eq!(plan.ticks.len(), 3);
        assert!(matches!(
            &plan.ticks[0],
            (0, Decision::Record(RunOutcome::Missed, note)) if note.starts_with("3 ticks")
        ));
        assert_eq!(plan.ticks[1], (90_000, Decision::Start));
        assert!(matches!(
            plan.ticks[2],
            (120_000, Decision::Record(RunOutcome::Queued, _))
        ));
        // A week down is still a handful of rows.
        let plan = p.plan(0, 7 * 86_400_000, false, false).unwrap();
        assert!(plan.ticks.len() <= 3);
    }
}
