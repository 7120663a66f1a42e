//! What the platform admitted, by the time each call *left*: successes counted in 100 ms
//! slots of their send time, so a measurement taken after the answers are in sees every call of
//! a second, however long each took to answer (docs/design.md, "Limit discovery").
//!
//! A pure type: times are milliseconds on the clock the platform counts seconds by (the wall
//! clock in one process, the Redis server's clock in a fleet). `report.lua` keeps the same slots
//! in the gate's `aimd` hash (fields `w0..w31`, "slot:count").

/// Slots kept: 3.2 s, enough for the second before a rejected one, the rejected one and the
/// settling time after it ([`super::aimd::AimdParams::settle_ms`] is at most 1,000 ms).
pub(crate) const SLOTS: usize = 32;
/// Length of one slot.
pub(crate) const SLOT_MS: u64 = 100;

/// Successes per send-time slot over the last [`SLOTS`] slots.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Admitted {
    /// `(slot, count)`, slot = send ms / [`SLOT_MS`], at index `slot % SLOTS`.
    slots: [(u64, u32); SLOTS],
}

impl Default for Admitted {
    fn default() -> Self {
        Admitted {
            slots: [(u64::MAX, 0); SLOTS],
        }
    }
}

impl Admitted {
    /// `n` successes of calls that left at `sent_ms`. A slot older than the ring holds is
    /// dropped (its count would land on a newer slot's cell).
    pub(crate) fn record(&mut self, sent_ms: u64, n: u32) {
        let slot = sent_ms / SLOT_MS;
        let cell = &mut self.slots[(slot % SLOTS as u64) as usize];
        if cell.0 == slot {
            cell.1 = cell.1.saturating_add(n);
        } else if cell.0 == u64::MAX || cell.0 < slot {
            *cell = (slot, n);
        }
    }

    /// Successes of calls sent in `[from_ms, to_ms)`. A slot cut by either end counts for its
    /// share inside the range, as if its calls were spread evenly over it.
    pub(crate) fn between(&self, from_ms: u64, to_ms: u64) -> f64 {
        if to_ms <= from_ms {
            return 0.0;
        }
        self.slots
            .iter()
            .filter(|(slot, _)| *slot != u64::MAX)
            .map(|&(slot, n)| {
                let start = slot * SLOT_MS;
                let end = start + SLOT_MS;
                let inside = end.min(to_ms).saturating_sub(start.max(from_ms));
                f64::from(n) * inside as f64 / SLOT_MS as f64
            })
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_by_send_time_with_partial_slots() {
        let mut a = Admitted::default();
        a.record(10_050, 4); // slot 100
        a.record(10_099, 2); // slot 100
        a.record(10_950, 10); // slot 109
        assert_eq!(a.between(10_000, 11_000), 16.0);
        // Half of slot 100 and none of 109.
        assert_eq!(a.between(10_050, 10_900), 3.0);
        assert_eq!(a.between(11_000, 12_000), 0.0);
        assert_eq!(a.between(12_000, 11_000), 0.0);
    }

    #[test]
    fn a_late_report_of_an_old_slot_does_not_overwrite_a_newer_one() {
        let mut a = Admitted::default();
        a.record(40_000, 7); // slot 400, index 400 % 32 = 16
        a.record(40_000 - SLOTS as u64 * SLOT_MS, 3); // slot 368, same index, older
        assert_eq!(a.between(40_000, 40_100), 7.0);
        assert_eq!(a.between(0, 40_000), 0.0);
    }
}
