//! Whose task gives its worker slot back when its turn is over: a shop running more tasks in
//! this worker than its weighted share of the slots, while a task of another shop waits in
//! the queue (docs/design.md, "Fair shares at the gate").
//!
//! At a low grant a task takes minutes at its gate, so the tasks in flight when a small
//! shop's job arrives would hold every slot for that long. A task past its turn that is
//! within its shop's share keeps its slot (giving it back would only cost the small shop its
//! place), and one over it leaves: its items started finish, the rest goes back to the queue,
//! behind the waiting shops in the fair order.

use std::collections::{BTreeSet, HashMap};

/// Tasks running in this worker, per shop.
#[derive(Debug, Default)]
pub(crate) struct TaskTurns {
    running: HashMap<String, usize>,
}

impl TaskTurns {
    /// A task of `shop` started.
    pub(crate) fn start(&mut self, shop: &str) {
        *self.running.entry(shop.to_string()).or_default() += 1;
    }

    /// A task of `shop` ended (or gave its slot back).
    pub(crate) fn end(&mut self, shop: &str) {
        if let Some(n) = self.running.get_mut(shop) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.running.remove(shop);
            }
        }
    }

    /// Whether a task of `shop` whose turn is over gives its slot back, with `slots` task
    /// slots in this worker, `waiting` the shops of the tasks waiting in the queue, and
    /// `weight` each shop's weight. When it does, it no longer counts as running.
    pub(crate) fn over_its_turn(
        &mut self,
        shop: &str,
        slots: usize,
        waiting: &[String],
        weight: impl Fn(&str) -> u32,
    ) -> bool {
        if !waiting.iter().any(|w| w != shop) {
            return false;
        }
        let shops: BTreeSet<&str> = self
            .running
            .keys()
            .map(String::as_str)
            .chain(waiting.iter().map(String::as_str))
            .chain(std::iter::once(shop))
            .collect();
        let total: u64 = shops.iter().map(|s| u64::from(weight(s).max(1))).sum();
        let mine = u64::from(weight(shop).max(1));
        let share = (slots as u64 * mine).div_ceil(total.max(1)).max(1);
        let running = self.running.get(shop).copied().unwrap_or(0) as u64;
        if running > share {
            self.end(shop);
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn waiting(shops: &[&str]) -> Vec<String> {
        shops.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_shop_over_its_share_gives_slots_back_one_at_a_time_down_to_its_share() {
        let mut turns = TaskTurns::default();
        for _ in 0..6 {
            turns.start("big");
        }
        turns.start("s1");
        turns.start("s2");
        let queued = waiting(&["s1", "s3", "big"]);
        // Four shops, eight slots: two each. The big shop has six.
        let mut given_back = 0;
        while turns.over_its_turn("big", 8, &queued, |_| 1) {
            given_back += 1;
        }
        assert_eq!(given_back, 4);
        // The small shops are within their share: they keep their slots.
        assert!(!turns.over_its_turn("s1", 8, &queued, |_| 1));
        assert!(!turns.over_its_turn("s2", 8, &queued, |_| 1));
    }

    #[test]
    fn nothing_is_given_back_while_only_the_same_shop_waits() {
        let mut turns = TaskTurns::default();
        for _ in 0..8 {
            turns.start("big");
        }
        assert!(!turns.over_its_turn("big", 8, &waiting(&["big", "big"]), |_| 1));
        assert!(!turns.over_its_turn("big", 8, &[], |_| 1));
    }

    #[test]
    fn weights_set_the_shares_and_ended_tasks_leave_the_count() {
        let mut turns = TaskTurns::default();
        for _ in 0..4 {
            turns.start("heavy");
            turns.start("light");
        }
        let weight = |s: &str| if s == "heavy" { 3 } else { 1 };
        // Weight 3 of 4 of eight slots: six for the heavy shop, two for the light one.
        assert!(!turns.over_its_turn("heavy", 8, &waiting(&["light"]), weight));
        assert!(turns.over_its_turn("light", 8, &waiting(&["heavy"]), weight));
        assert!(turns.over_its_turn("light", 8, &waiting(&["heavy"]), weight));
        assert!(!turns.over_its_turn("light", 8, &waiting(&["heavy"]), weight));
        for _ in 0..4 {
            turns.end("heavy");
        }
        assert!(!turns.running.contains_key("heavy"));
    }
}
