//! The walk-shift drill: an order window that changes under the walk reading it, as a busy
//! shop's does (docs/design.md, "Continuous sync"). Once per app while the drill is on: at the
//! first order-list call for a page after the first, the first order of page 1 (read already)
//! changes, which moves it out of the window; at the next such call a new order comes into the
//! window at its newest end (an order the platform indexed late). What the drill changed is
//! kept here and laid over the generated orders for every later answer.

use super::data::{OrderData, OrderState};
use std::collections::HashMap;
use std::sync::Mutex;

/// The first id of the drill's new orders (far above the generated ones).
const NEW_ORDER_BASE: u64 = 9_000_000_000;

#[derive(Default)]
struct AppShift {
    /// 0: nothing done; 1: an order moved; 2: an order inserted too.
    stage: u8,
    /// Orders whose `modified` the drill moved (id -> new modified, unix s).
    moved: HashMap<u64, i64>,
    /// Orders the drill brought into windows.
    inserted: Vec<OrderData>,
}

/// What the drill did, per app.
#[derive(Default)]
pub struct WalkShift {
    apps: Mutex<HashMap<usize, AppShift>>,
}

impl std::fmt::Debug for WalkShift {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WalkShift").finish_non_exhaustive()
    }
}

impl WalkShift {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<usize, AppShift>> {
        self.apps.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether the drill changed any order of `app`.
    pub fn touched(&self, app: usize) -> bool {
        self.lock().get(&app).is_some_and(|a| a.stage > 0)
    }

    /// Lay the drill's changes over `all`, the orders of `[start, end)` of `app`.
    pub fn lay_over(&self, app: usize, start: i64, end: i64, all: &mut Vec<OrderData>) {
        let apps = self.lock();
        let Some(a) = apps.get(&app) else {
            return;
        };
        for o in all.iter_mut() {
            if let Some(m) = a.moved.get(&o.id) {
                o.modified = *m;
            }
        }
        all.retain(|o| o.modified >= start && o.modified < end);
        all.extend(
            a.inserted
                .iter()
                .filter(|o| o.modified >= start && o.modified < end)
                .cloned(),
        );
    }

    /// One of the drill's orders, or a generated one as the drill changed it.
    pub fn get(&self, app: usize, id: u64, generated: Option<&OrderData>) -> Option<OrderData> {
        let apps = self.lock();
        let a = apps.get(&app);
        if let Some(o) = a.and_then(|a| a.inserted.iter().find(|o| o.id == id)) {
            return Some(o.clone());
        }
        let mut o = generated?.clone();
        if let Some(m) = a.and_then(|a| a.moved.get(&id)) {
            o.modified = *m;
        }
        Some(o)
    }

    /// A call for `page` of a window whose current page 1 starts with `first`: the drill's
    /// next step, if it has one left. True when the window changed.
    pub fn step(
        &self,
        app: usize,
        page: u64,
        end: i64,
        now: i64,
        first: Option<&OrderData>,
    ) -> bool {
        if page < 2 {
            return false;
        }
        let mut apps = self.lock();
        let a = apps.entry(app).or_default();
        match a.stage {
            0 => {
                let Some(first) = first else {
                    return false;
                };
                a.moved.insert(first.id, now.max(end));
                a.stage = 1;
                true
            }
            1 => {
                let id = NEW_ORDER_BASE + app as u64 * 1000 + a.inserted.len() as u64;
                a.inserted.push(OrderData {
                    id,
                    modified: end - 1,
                    state: OrderState::Shipped,
                    amount_cents: 4_321,
                });
                a.stage = 2;
                true
            }
            _ => false,
        }
    }

    /// Arm the drill again for every app (it was turned on anew), keeping what it changed.
    pub fn rearm(&self) {
        for a in self.lock().values_mut() {
            a.stage = 0;
        }
    }

    /// Forget what the drill changed, for every app.
    pub fn reset(&self) {
        self.lock().clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn order(id: u64, modified: i64) -> OrderData {
        OrderData {
            id,
            modified,
            state: OrderState::Shipped,
            amount_cents: 100,
        }
    }

    #[test]
    fn an_order_leaves_then_one_comes_in() {
        let w = WalkShift::default();
        let all = vec![order(1, 50), order(2, 40), order(3, 30)];
        assert!(!w.step(0, 1, 100, 1_000, all.first()));
        assert!(w.step(0, 3, 100, 1_000, all.first()));
        let mut now = all.clone();
        w.lay_over(0, 0, 100, &mut now);
        assert_eq!(now.iter().map(|o| o.id).collect::<Vec<_>>(), vec![2, 3]);
        assert!(w.step(0, 2, 100, 1_000, now.first()));
        let mut now = all.clone();
        w.lay_over(0, 0, 100, &mut now);
        assert_eq!(now.len(), 3);
        assert!(now
            .iter()
            .any(|o| o.id >= NEW_ORDER_BASE && o.modified == 99));
        // Once per app.
        assert!(!w.step(0, 2, 100, 1_000, now.first()));
        assert_eq!(w.get(0, 1, Some(&all[0])).map(|o| o.modified), Some(1_000));
    }
}
