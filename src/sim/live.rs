//! Orders that live: per shop, new orders arrive at a configured rate and move through their
//! states (created, paid, shipped, signed; or closed unpaid, or refunded), each change
//! stamping `modified` (docs/design.md, "Continuous sync").
//!
//! A pure function of (seed, shop, order number, now): nothing is stored, so any instant's
//! state of every order is computed on demand, the same in every handler and in tests. The
//! k-th order of a shop is created `k x 60 / new_per_min` seconds after the simulator started;
//! each phase lasts its configured mean, jittered per order over [0.5, 1.5) of it.

use super::data::{mix, OrderData, OrderState};

/// Live order ids start here; each (app, shop) has its own block of [`BLOCK`] ids.
pub const LIVE_ID_BASE: u64 = 2_000_000_000;
/// Ids per (app, shop).
const BLOCK: u64 = 10_000_000;
/// Shops per app with their own block.
const SHOPS_PER_APP: u64 = 100;

/// How the live orders of every shop behave. `new_per_min = 0` (the default) keeps the
/// shops static.
#[derive(Debug, Clone, PartialEq)]
pub struct LiveOrders {
    /// Orders created per minute, per shop.
    pub new_per_min: f64,
    /// Mean seconds from creation to payment (or to closing, unpaid).
    pub pay_after_s: u64,
    /// Mean seconds from payment to shipping (a refund comes half-way instead).
    pub ship_after_s: u64,
    /// Mean seconds from shipping to the buyer's sign-off.
    pub sign_after_s: u64,
    /// Share of orders never paid: closed when payment was due.
    pub close_share: f64,
    /// Share of paid orders refunded instead of shipped.
    pub refund_share: f64,
}

impl Default for LiveOrders {
    fn default() -> Self {
        LiveOrders {
            new_per_min: 0.0,
            pay_after_s: 60,
            ship_after_s: 300,
            sign_after_s: 900,
            close_share: 0.1,
            refund_share: 0.05,
        }
    }
}

/// One change of a live order: at `at` (unix seconds) it entered `state`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Change {
    pub(crate) at: i64,
    pub(crate) state: OrderState,
}

/// The life of one live order: its id, amount and every change it will go through.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Life {
    pub(crate) id: u64,
    pub(crate) amount_cents: u64,
    /// In time order; the first is the creation.
    pub(crate) changes: Vec<Change>,
}

impl Life {
    /// The order as the platform shows it at `now`, if it exists by then.
    pub(crate) fn at(&self, now: i64) -> Option<OrderData> {
        let last = self.changes.iter().take_while(|c| c.at <= now).last()?;
        Some(OrderData {
            id: self.id,
            modified: last.at,
            state: last.state,
            amount_cents: self.amount_cents,
        })
    }
}

fn unit(h: u64) -> f64 {
    (h >> 11) as f64 / (1u64 << 53) as f64
}

/// The live orders of one shop of one app.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LiveShop<'a> {
    pub(crate) cfg: &'a LiveOrders,
    pub(crate) seed: u64,
    /// Unix seconds the simulator started: order 0 is created then.
    pub(crate) started: i64,
    /// The app's index and the shop's number within the app (0: the app's own session).
    pub(crate) app: usize,
    pub(crate) shop: usize,
}

impl LiveShop<'_> {
    fn base(&self) -> u64 {
        LIVE_ID_BASE + (self.app as u64 * SHOPS_PER_APP + self.shop as u64) * BLOCK
    }

    /// Whether the id is one of this shop's live orders.
    pub(crate) fn owns(&self, id: u64) -> bool {
        self.cfg.new_per_min > 0.0 && id >= self.base() && id < self.base() + BLOCK
    }

    /// Orders created by `now` (0 when the shop is static).
    pub(crate) fn created_by(&self, now: i64) -> u64 {
        if self.cfg.new_per_min <= 0.0 || now < self.started {
            return 0;
        }
        let n = ((now - self.started) as f64 * self.cfg.new_per_min / 60.0).floor() as u64 + 1;
        n.min(BLOCK)
    }

    /// The life of order number `k`.
    pub(crate) fn life(&self, k: u64) -> Life {
        let id = self.base() + k;
        let c = self.cfg;
        let h = |tag: u64| mix(self.seed, 7_000 + tag, id);
        let jitter = |mean: u64, tag: u64| ((mean as f64) * (0.5 + unit(h(tag)))).round() as i64;
        let created = self.started + (k as f64 * 60.0 / c.new_per_min).floor() as i64;
        let mut changes = vec![Change {
            at: created,
            state: OrderState::Created,
        }];
        // Every phase lasts at least a second, so each change stamps a later `modified`.
        let paid = created + jitter(c.pay_after_s, 1).max(1);
        if unit(h(2)) < c.close_share {
            changes.push(Change {
                at: paid,
                state: OrderState::Closed,
            });
        } else {
            changes.push(Change {
                at: paid,
                state: OrderState::Unshipped,
            });
            if unit(h(3)) < c.refund_share {
                changes.push(Change {
                    at: paid + (jitter(c.ship_after_s, 4) / 2).max(1),
                    state: OrderState::Refunded,
                });
            } else {
                let shipped = paid + jitter(c.ship_after_s, 4).max(1);
                changes.push(Change {
                    at: shipped,
                    state: OrderState::Shipped,
                });
                changes.push(Change {
                    at: shipped + jitter(c.sign_after_s, 5).max(1),
                    state: OrderState::Signed,
                });
            }
        }
        Life {
            id,
            amount_cents: 100 + (h(6) >> 24) % 50_000,
            changes,
        }
    }

    /// Every order as it is at `now`.
    pub(crate) fn orders_at(&self, now: i64) -> impl Iterator<Item = OrderData> + '_ {
        (0..self.created_by(now)).filter_map(move |k| self.life(k).at(now))
    }

    /// Orders with `start <= modified < end` at `now`, sorted by (modified, id).
    pub(crate) fn window(&self, start: i64, end: i64, now: i64) -> Vec<OrderData> {
        let mut out: Vec<OrderData> = self
            .orders_at(now)
            .filter(|o| o.modified >= start && o.modified < end)
            .collect();
        out.sort_by_key(|o| (o.modified, o.id));
        out
    }

    /// The order with this id at `now`.
    pub(crate) fn get(&self, id: u64, now: i64) -> Option<OrderData> {
        if !self.owns(id) {
            return None;
        }
        let k = id - self.base();
        (k < self.created_by(now))
            .then(|| self.life(k).at(now))
            .flatten()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> LiveOrders {
        LiveOrders {
            new_per_min: 60.0,
            ..LiveOrders::default()
        }
    }

    fn shop(cfg: &LiveOrders) -> LiveShop<'_> {
        LiveShop {
            cfg,
            seed: 7,
            started: 1_000_000,
            app: 0,
            shop: 1,
        }
    }

    #[test]
    fn orders_arrive_at_the_rate_and_change_in_time_order() {
        let c = cfg();
        let s = shop(&c);
        assert_eq!(s.created_by(999_999), 0);
        assert_eq!(s.created_by(1_000_000), 1);
        assert_eq!(s.created_by(1_000_059), 60);
        for k in 0..200 {
            let life = s.life(k);
            assert!(s.owns(life.id));
            assert!(life.changes.windows(2).all(|w| w[0].at < w[1].at));
            let last = life.changes.last().unwrap().state;
            assert!(matches!(
                last,
                OrderState::Signed | OrderState::Closed | OrderState::Refunded
            ));
        }
        // Some of each end, at these shares.
        let ends: Vec<OrderState> = (0..2_000)
            .map(|k| s.life(k).changes.last().unwrap().state)
            .collect();
        let closed = ends.iter().filter(|e| **e == OrderState::Closed).count();
        let refunded = ends.iter().filter(|e| **e == OrderState::Refunded).count();
        assert!((150..=250).contains(&closed), "{closed}");
        assert!((50..=140).contains(&refunded), "{refunded}");
    }

    #[test]
    fn a_window_holds_the_orders_whose_last_change_is_in_it() {
        let c = cfg();
        let s = shop(&c);
        let now = 1_000_000 + 3_600;
        let all: Vec<OrderData> = s.orders_at(now).collect();
        assert_eq!(all.len() as u64, s.created_by(now));
        // Windows that tile the past hold every order exactly once.
        let mut seen = 0;
        let mut t = 1_000_000;
        while t <= now {
            seen += s.window(t, t + 300, now).len();
            t += 300;
        }
        assert_eq!(seen, all.len());
        // An order changes later: it leaves an earlier window for a later one.
        let o = s.get(s.life(10).id, 1_000_010 + 1).unwrap();
        assert_eq!(o.state, OrderState::Created);
        let later = s.get(o.id, now).unwrap();
        assert!(later.modified > o.modified);
        assert!(!s
            .window(o.modified, o.modified + 1, now)
            .iter()
            .any(|x| x.id == o.id));
    }

    #[test]
    fn static_shops_have_no_live_orders() {
        let c = LiveOrders::default();
        let s = shop(&c);
        assert_eq!(s.created_by(2_000_000), 0);
        assert!(s.window(0, i64::MAX, 2_000_000).is_empty());
        assert!(!s.owns(LIVE_ID_BASE + BLOCK));
    }
}
