//! The day as a budget: when bulk work may make its next call under a daily quota
//! (docs/design.md, "Pacing"). A pure policy; the Redis gates run the same rule in
//! acquire.lua on the server's clock, the embedded gates call it directly.
//!
//! `spend` lets bulk work go as fast as the gate allows until it has used its part of the
//! quota (`quota x (1 - interactive share)`); the rest of the day is the interactive reserve.
//! `even` lets the calls of the day follow a line: by the time a fraction `f` of the day is
//! gone, `quota x f` calls (plus a small lead, the gate's burst); bulk work that is ahead of
//! the line waits for it (the burn ratio held at 1 as a controller), work that is behind goes
//! at the gate's full rate until it catches up. The line never eats into what interactive work
//! may still need for the rest of the day: at every instant at least
//! `quota x share x (1 - f)` calls are left, so the reserve is the share of what is left of
//! the day, and the part of it earlier hours did not use goes to bulk work instead of
//! expiring unused at midnight.

pub use crate::config::Pacing;

/// One daily budget as bulk work sees it at one instant.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct DayBudget {
    /// Calls per day.
    pub(crate) quota: u64,
    /// Calls counted (or booked) today, every lane.
    pub(crate) used: u64,
    /// Share kept for interactive work (0 to 0.9).
    pub(crate) share: f64,
    /// Milliseconds of the day gone, and the day's length.
    pub(crate) elapsed_ms: u64,
    pub(crate) day_ms: u64,
    /// Calls bulk work may be ahead of the `even` line (the gate's burst, at least 1).
    pub(crate) lead: f64,
}

/// What a budget lets bulk work do now.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum BulkTurn {
    /// Call now.
    Go,
    /// Ahead of the line: the next call is due this many ms from now.
    After(u64),
    /// Bulk work's part of today is used: nothing until the reset, this many ms away.
    Spent(u64),
}

impl DayBudget {
    /// When bulk work may make its next call under this budget with `pacing`.
    pub(crate) fn bulk_turn(&self, pacing: Pacing) -> BulkTurn {
        let q = self.quota as f64;
        let share = self.share.clamp(0.0, crate::config::MAX_INTERACTIVE_SHARE);
        let day = self.day_ms.max(1) as f64;
        let left_ms = self.day_ms.saturating_sub(self.elapsed_ms);
        let next = self.used as f64 + 1.0;
        match pacing {
            Pacing::Spend => {
                if self.used >= super::bulk_quota(self.quota, share).max(1) {
                    BulkTurn::Spent(left_ms)
                } else {
                    BulkTurn::Go
                }
            }
            Pacing::Even => {
                // The line at `t` ms: min(q t/day + lead, q - q share (1 - t/day)). The next
                // call is due when both reach `used + 1`.
                let on_line = (next - self.lead.max(1.0)) * day / q;
                let above_reserve = if share > 0.0 {
                    (next - q * (1.0 - share)) * day / (q * share)
                } else if next <= q {
                    0.0
                } else {
                    f64::INFINITY
                };
                let due = on_line.max(above_reserve);
                if due <= self.elapsed_ms as f64 {
                    BulkTurn::Go
                } else if due >= day {
                    BulkTurn::Spent(left_ms)
                } else {
                    BulkTurn::After((due - self.elapsed_ms as f64).ceil() as u64)
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budget(quota: u64, used: u64, share: f64, elapsed_ms: u64) -> DayBudget {
        DayBudget {
            quota,
            used,
            share,
            elapsed_ms,
            day_ms: 100_000,
            lead: 1.0,
        }
    }

    #[test]
    fn spend_goes_until_bulk_part_is_used() {
        assert_eq!(
            budget(1000, 899, 0.1, 1).bulk_turn(Pacing::Spend),
            BulkTurn::Go
        );
        assert_eq!(
            budget(1000, 900, 0.1, 1_000).bulk_turn(Pacing::Spend),
            BulkTurn::Spent(99_000)
        );
        assert_eq!(
            budget(1000, 999, 0.0, 1).bulk_turn(Pacing::Spend),
            BulkTurn::Go
        );
    }

    #[test]
    fn even_follows_the_line_of_the_day() {
        // Half the day gone: 500 of 1,000 calls may have been made (plus the lead of 1).
        assert_eq!(
            budget(1000, 499, 0.0, 50_000).bulk_turn(Pacing::Even),
            BulkTurn::Go
        );
        assert_eq!(
            budget(1000, 400, 0.0, 50_000).bulk_turn(Pacing::Even),
            BulkTurn::Go
        );
        // Ahead by 10 calls: due when the line reaches 511, 1 s (10 calls of 100 ms) later.
        assert_eq!(
            budget(1000, 510, 0.0, 50_000).bulk_turn(Pacing::Even),
            BulkTurn::After(1_000)
        );
        // The whole quota used: nothing until the reset.
        assert_eq!(
            budget(1000, 1000, 0.0, 99_000).bulk_turn(Pacing::Even),
            BulkTurn::Spent(1_000)
        );
    }

    #[test]
    fn even_keeps_the_reserve_of_the_rest_of_the_day() {
        // share 0.2 at 99.9% of the day: the line (999 + a lead of 1) would let call 1,000 go,
        // but 0.2 calls (0.2 x 1,000 x 0.001) stay for interactive work until the day ends.
        let end = |used| budget(1000, used, 0.2, 99_900).bulk_turn(Pacing::Even);
        assert_eq!(end(998), BulkTurn::Go);
        assert_eq!(end(999), BulkTurn::Spent(100));
        assert_eq!(
            budget(1000, 999, 0.0, 99_900).bulk_turn(Pacing::Even),
            BulkTurn::Go
        );
    }

    #[test]
    fn at_any_instant_even_never_passes_the_line_or_the_reserve() {
        let quota = 5_000u64;
        let share = 0.1;
        for step in 0..=100u64 {
            let elapsed_ms = step * 1_000;
            // The most calls the policy lets through by now: run it until it says wait.
            let mut used = 0u64;
            while let BulkTurn::Go = budget(quota, used, share, elapsed_ms).bulk_turn(Pacing::Even)
            {
                used += 1;
            }
            let f = elapsed_ms as f64 / 100_000.0;
            assert!(
                used as f64 <= quota as f64 * f + 1.0 + 1e-6,
                "{step}: {used}"
            );
            let left = quota - used;
            assert!(
                left as f64 + 1e-9 >= quota as f64 * share * (1.0 - f) - 1.0,
                "{step}: {left} left"
            );
        }
    }

    #[test]
    fn pacing_is_spelled_as_in_the_config() {
        assert_eq!("even".parse::<Pacing>(), Ok(Pacing::Even));
        assert!("slow".parse::<Pacing>().is_err());
    }
}
