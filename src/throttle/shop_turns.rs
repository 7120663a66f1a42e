//! Whose caller a gate's next free slot in this process goes to: weighted round robin over
//! the shops with callers waiting (docs/design.md, "Fair shares at the gate").
//!
//! A first-come line hands the slots out in proportion to the callers each shop has
//! waiting, which is its number of tasks in flight: a big job's tasks, already running,
//! would keep a small shop's calls at a slow gate behind them. Here each shop with callers
//! waiting gets `weight` slots per round, in the order the shops arrived; callers of one
//! shop keep their order. A caller that gave up stays in its shop's line and is skipped when
//! its turn comes (the async side drops it), so nothing is counted for it: a round robin
//! keeps no tags a departed caller could push ahead.

use std::collections::{HashMap, VecDeque};

/// Callers (`T`) waiting for a slot, per shop.
#[derive(Debug)]
pub(crate) struct ShopTurns<T> {
    lines: HashMap<String, Line<T>>,
    /// Shops with callers waiting, the one whose turn it is first.
    ring: VecDeque<String>,
    /// Slots the shop at the front of the ring took in its current turn.
    taken: u32,
}

#[derive(Debug)]
struct Line<T> {
    weight: u32,
    callers: VecDeque<T>,
}

impl<T> Default for ShopTurns<T> {
    fn default() -> Self {
        ShopTurns {
            lines: HashMap::new(),
            ring: VecDeque::new(),
            taken: 0,
        }
    }
}

impl<T> ShopTurns<T> {
    /// Whether no caller waits.
    pub(crate) fn is_empty(&self) -> bool {
        self.ring.is_empty()
    }

    /// `caller` of `shop` (weight 1 to 1000; its latest weight counts) waits for a slot.
    pub(crate) fn push(&mut self, shop: &str, weight: u32, caller: T) {
        match self.lines.get_mut(shop) {
            Some(line) => {
                line.weight = weight.max(1);
                line.callers.push_back(caller);
            }
            None => {
                self.lines.insert(
                    shop.to_string(),
                    Line {
                        weight: weight.max(1),
                        callers: VecDeque::from([caller]),
                    },
                );
                self.ring.push_back(shop.to_string());
            }
        }
    }

    /// The caller whose turn it is, if any waits.
    pub(crate) fn pop(&mut self) -> Option<T> {
        let shop = self.ring.front()?.clone();
        let line = self.lines.get_mut(&shop)?;
        let caller = line.callers.pop_front();
        self.taken += 1;
        if line.callers.is_empty() {
            self.lines.remove(&shop);
            self.ring.pop_front();
            self.taken = 0;
        } else if self.taken >= line.weight {
            self.ring.rotate_left(1);
            self.taken = 0;
        }
        caller
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn take(turns: &mut ShopTurns<(String, u32)>, n: usize) -> Vec<String> {
        (0..n)
            .filter_map(|_| turns.pop())
            .map(|(shop, _)| shop)
            .collect()
    }

    #[test]
    fn shops_take_turns_whatever_each_has_waiting() {
        let mut turns = ShopTurns::default();
        for i in 0..12 {
            turns.push("big", 1, ("big".to_string(), i));
        }
        turns.push("small", 1, ("small".to_string(), 0));
        turns.push("small", 1, ("small".to_string(), 1));
        assert_eq!(
            take(&mut turns, 6),
            ["big", "small", "big", "small", "big", "big"]
        );
        assert!(!turns.is_empty());
        assert_eq!(take(&mut turns, 20).len(), 8);
        assert!(turns.is_empty());
        assert!(turns.pop().is_none());
    }

    #[test]
    fn a_weight_is_slots_per_round_and_a_shops_callers_keep_their_order() {
        let mut turns = ShopTurns::default();
        for i in 0..6 {
            turns.push("a", 3, ("a".to_string(), i));
            turns.push("b", 1, ("b".to_string(), i));
        }
        let order: Vec<(String, u32)> = (0..8).filter_map(|_| turns.pop()).collect();
        let shops: Vec<&str> = order.iter().map(|(s, _)| s.as_str()).collect();
        assert_eq!(shops, ["a", "a", "a", "b", "a", "a", "a", "b"]);
        let a: Vec<u32> = order
            .iter()
            .filter(|(s, _)| s == "a")
            .map(|x| x.1)
            .collect();
        assert_eq!(a, [0, 1, 2, 3, 4, 5]);
    }

    #[test]
    fn a_shop_that_comes_back_joins_the_end_of_the_round() {
        let mut turns = ShopTurns::default();
        turns.push("a", 1, ("a".to_string(), 0));
        turns.push("b", 1, ("b".to_string(), 0));
        turns.push("b", 1, ("b".to_string(), 1));
        assert_eq!(take(&mut turns, 1), ["a"]);
        // `a` left the ring with its line empty; back now, it waits for `b`'s turn to end.
        turns.push("a", 1, ("a".to_string(), 1));
        turns.push("c", 1, ("c".to_string(), 0));
        assert_eq!(take(&mut turns, 4), ["b", "a", "c", "b"]);
    }
}
