//! A gate's concurrency slots in one process, handed to the waiting callers shop by shop
//! ([`ShopTurns`]) instead of first come, first served (docs/design.md, "Fair shares at the
//! gate"), and the share a call asks for ([`GateShare`]).

use super::shop_turns::ShopTurns;
use std::sync::{Arc, Mutex};
use tokio::sync::oneshot;

/// Whose share of a gate a call is booked in: the shop the call's task works for, and the
/// shop's weight (its share among the shops calling through the gate at the same time).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct GateShare {
    /// The shop's name, as its jobs name it.
    pub shop: String,
    /// 1 to 1000 (`[shops.NAME] weight`, or the ledger's directory).
    pub weight: u32,
}

impl GateShare {
    /// `shop`'s share at `weight` (at least 1).
    pub fn new(shop: impl Into<String>, weight: u32) -> GateShare {
        GateShare {
            shop: shop.into(),
            weight: weight.max(1),
        }
    }
}

#[derive(Debug)]
struct State {
    free: usize,
    waiting: ShopTurns<oneshot::Sender<()>>,
}

/// A fixed number of slots; see the module doc.
#[derive(Debug, Clone)]
pub(crate) struct FairSlots {
    state: Arc<Mutex<State>>,
}

/// One slot, given back when dropped.
#[derive(Debug)]
pub(crate) struct FairSlot {
    state: Arc<Mutex<State>>,
}

impl Drop for FairSlot {
    fn drop(&mut self) {
        release(&self.state);
    }
}

/// Give one slot to the next waiting caller in the shops' turn, or back to the free ones.
fn release(state: &Mutex<State>) {
    let mut s = state.lock().unwrap_or_else(|e| e.into_inner());
    while let Some(caller) = s.waiting.pop() {
        // A caller that gave up has dropped its receiver: the slot goes on to the next.
        if caller.send(()).is_ok() {
            return;
        }
    }
    s.free += 1;
}

/// A caller waiting for its turn. Dropped before the turn came (a timeout), it leaves; if
/// the slot was handed to it meanwhile, it passes the slot on.
struct Waiting {
    turn: oneshot::Receiver<()>,
    state: Arc<Mutex<State>>,
    done: bool,
}

impl Drop for Waiting {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        self.turn.close();
        if self.turn.try_recv().is_ok() {
            release(&self.state);
        }
    }
}

impl FairSlots {
    /// `n` slots (at least one).
    pub(crate) fn new(n: usize) -> FairSlots {
        FairSlots {
            state: Arc::new(Mutex::new(State {
                free: n.max(1),
                waiting: ShopTurns::default(),
            })),
        }
    }

    /// A slot for a call of `shop` (weight `weight`), when its turn comes. Cancel-safe: drop
    /// the future (a timeout) and the caller leaves the line.
    pub(crate) async fn acquire(&self, shop: &str, weight: u32) -> FairSlot {
        let turn = {
            let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
            if s.free > 0 && s.waiting.is_empty() {
                s.free -= 1;
                return FairSlot {
                    state: self.state.clone(),
                };
            }
            let (tx, rx) = oneshot::channel();
            s.waiting.push(shop, weight, tx);
            rx
        };
        let mut waiting = Waiting {
            turn,
            state: self.state.clone(),
            done: false,
        };
        // The sender is only dropped unsent by `release` skipping a closed receiver, which
        // this one is not: a turn always comes or the future is dropped.
        let _ = (&mut waiting.turn).await;
        waiting.done = true;
        FairSlot {
            state: self.state.clone(),
        }
    }

    /// Slots free now.
    #[cfg(test)]
    pub(crate) fn free(&self) -> usize {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).free
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn a_freed_slot_goes_to_the_shop_whose_turn_it_is() {
        let slots = FairSlots::new(1);
        let held = slots.acquire("big", 1).await;
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut waiters = Vec::new();
        // Five callers of the big shop line up before the small shop's one.
        for (i, shop) in ["big", "big", "big", "big", "big", "small"]
            .into_iter()
            .enumerate()
        {
            let mine = slots.clone();
            let order = order.clone();
            waiters.push(tokio::spawn(async move {
                let slot = mine.acquire(shop, 1).await;
                order.lock().unwrap().push(shop);
                tokio::task::yield_now().await;
                drop(slot);
                i
            }));
            // Let each caller join the line in this order.
            while slots.state.lock().unwrap().waiting.is_empty() {
                tokio::task::yield_now().await;
            }
            for _ in 0..5 {
                tokio::task::yield_now().await;
            }
        }
        drop(held);
        for w in waiters {
            w.await.unwrap();
        }
        let order = order.lock().unwrap().clone();
        assert_eq!(order[..2], ["big", "small"], "{order:?}");
        assert_eq!(slots.free(), 1);
    }

    #[tokio::test]
    async fn a_caller_that_gives_up_loses_no_slot() {
        let slots = FairSlots::new(1);
        let held = slots.acquire("a", 1).await;
        let gave_up = tokio::time::timeout(Duration::from_millis(10), slots.acquire("b", 1)).await;
        assert!(gave_up.is_err());
        drop(held);
        assert_eq!(
            slots.free(),
            1,
            "the departed caller's turn passed the slot on"
        );
        let again = slots.acquire("c", 1).await;
        assert_eq!(slots.free(), 0);
        drop(again);
        assert_eq!(slots.free(), 1);
    }
}
