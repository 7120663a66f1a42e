//! Orders that live: per shop, new orders arrive at a configured rate and move through their
//! states (created, paid, shipped, signed; or closed unpaid, or refunded), each change
//! stamping `modified` (docs/design.md, "Continuous sync").
//!
//! A pure function of (seed, shop, order number, now): nothing is stored, so any instant's
//! state of every order is computed on demand, the same in every handler and in tests. The
//! k-th order of a shop is created `k x 60 / new_per_min` seconds after the shop's origin (the
//! simulator's start less `history_s`, so a shop can start with a day of orders behind it);
//! each phase lasts its configured mean, jittered per order over [0.5, 1.5) of it. Change
//! messages are the changes since the simulator started (the subscription's start).

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
    /// Drill: share of change messages never delivered.
    pub message_loss: f64,
    /// Drill: share of change messages delivered once more after they were confirmed.
    pub message_duplicate: f64,
    /// Drill: share of change messages delivered `message_delay_s` late.
    pub message_delay: f64,
    /// How late a delayed message is.
    pub message_delay_s: u64,
    /// A message consumed and not confirmed is delivered again after this long.
    pub redeliver_after_s: u64,
    /// Where 1688 apps' changes are pushed (an HTTP POST per message); `None`: not pushed.
    pub push_url: Option<String>,
    /// The shops' orders began this long before the simulator started (a shop with a day of
    /// history behind it: what a one-day window holds).
    pub history_s: u64,
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
            message_loss: 0.0,
            message_duplicate: 0.0,
            message_delay: 0.0,
            message_delay_s: 30,
            redeliver_after_s: 10,
            push_url: None,
            history_s: 0,
        }
    }
}

/// One change of a live order: at `at` (unix seconds) it entered `state`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Change {
    /// Unix seconds.
    pub at: i64,
    /// The state the order entered.
    pub state: OrderState,
}

/// The life of one live order: its id, amount and every change it will go through.
#[derive(Debug, Clone, PartialEq)]
pub struct Life {
    /// The order's id.
    pub id: u64,
    /// The order's amount in cents.
    pub amount_cents: u64,
    /// In time order; the first is the creation.
    pub changes: Vec<Change>,
}

impl Life {
    /// The order as the platform shows it at `now`, if it exists by then.
    pub fn at(&self, now: i64) -> Option<OrderData> {
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
pub struct LiveShop<'a> {
    /// How live orders behave.
    pub cfg: &'a LiveOrders,
    /// The simulator's seed.
    pub seed: u64,
    /// Unix seconds the simulator started: order 0 is created then.
    pub started: i64,
    /// The app's index and the shop's number within the app (0: the app's own session).
    pub app: usize,
    /// The shop's number within the app (see `app`).
    pub shop: usize,
}

impl LiveShop<'_> {
    fn base(&self) -> u64 {
        LIVE_ID_BASE + (self.app as u64 * SHOPS_PER_APP + self.shop as u64) * BLOCK
    }

    /// Whether the id is one of this shop's live orders.
    pub fn owns(&self, id: u64) -> bool {
        self.cfg.new_per_min > 0.0 && id >= self.base() && id < self.base() + BLOCK
    }

    /// When order 0 was created.
    fn origin(&self) -> i64 {
        self.started - i64::try_from(self.cfg.history_s).unwrap_or(0)
    }

    /// Orders created by `now` (0 when the shop is static).
    pub fn created_by(&self, now: i64) -> u64 {
        if self.cfg.new_per_min <= 0.0 || now < self.origin() {
            return 0;
        }
        let n = ((now - self.origin()) as f64 * self.cfg.new_per_min / 60.0).floor() as u64 + 1;
        n.min(BLOCK)
    }

    /// The first order that may change at or after `t`: every change of an order comes
    /// within 1.5 x (pay + ship + sign) of its creation, plus a second a phase.
    pub fn first_changing_after(&self, t: i64) -> u64 {
        if self.cfg.new_per_min <= 0.0 {
            return 0;
        }
        let c = self.cfg;
        let life = ((c.pay_after_s + c.ship_after_s + c.sign_after_s) as f64 * 1.5) as i64 + 4;
        let from = t - life - self.origin();
        if from <= 0 {
            return 0;
        }
        (from as f64 * c.new_per_min / 60.0).floor() as u64
    }

    /// The life of order number `k`.
    pub fn life(&self, k: u64) -> Life {
        let id = self.base() + k;
        let c = self.cfg;
        let h = |tag: u64| mix(self.seed, 7_000 + tag, id);
        let jitter = |mean: u64, tag: u64| ((mean as f64) * (0.5 + unit(h(tag)))).round() as i64;
        let created = self.origin() + (k as f64 * 60.0 / c.new_per_min).floor() as i64;
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
    pub fn orders_at(&self, now: i64) -> impl Iterator<Item = OrderData> + '_ {
        (0..self.created_by(now)).filter_map(move |k| self.life(k).at(now))
    }

    /// Orders with `start <= modified < end` at `now`, sorted by (modified, id).
    pub fn window(&self, start: i64, end: i64, now: i64) -> Vec<OrderData> {
        let mut out: Vec<OrderData> = self
            .orders_at(now)
            .filter(|o| o.modified >= start && o.modified < end)
            .collect();
        out.sort_by_key(|o| (o.modified, o.id));
        out
    }

    /// The order with this id at `now`.
    pub fn get(&self, id: u64, now: i64) -> Option<OrderData> {
        if !self.owns(id) {
            return None;
        }
        let k = id - self.base();
        (k < self.created_by(now))
            .then(|| self.life(k).at(now))
            .flatten()
    }
}

/// The topic of the message a change emits (TOP's names).
pub fn topic(state: OrderState) -> &'static str {
    match state {
        OrderState::Created => "taobao_trade_TradeCreate",
        OrderState::Unshipped => "taobao_trade_TradeBuyerPay",
        OrderState::Shipped => "taobao_trade_TradeSellerShip",
        OrderState::Signed => "taobao_trade_TradeSuccess",
        OrderState::Closed => "taobao_trade_TradeClose",
        OrderState::Refunded => "taobao_refund_RefundSuccess",
    }
}

/// One delivery of a change message.
#[derive(Debug, Clone, PartialEq)]
pub struct Delivery {
    /// The message id: the order id x 8 + the change's index.
    pub id: u64,
    /// The shop's name (`""`: the app's own session).
    pub shop: String,
    /// The order as the change left it.
    pub order: OrderData,
}

/// The app's message queue, TOP-style: a consumer pulls what changed, confirms what it
/// recorded, and gets again what it did not confirm in time. The messages themselves are the
/// live orders' changes; this holds only who got and confirmed what.
#[derive(Debug, Default)]
pub struct MessageQueue {
    /// Delivered, not confirmed: id -> when (unix ms) it went out.
    in_flight: std::collections::HashMap<u64, i64>,
    confirmed: std::collections::HashSet<u64>,
    /// Drilled duplicates already sent again.
    duplicated: std::collections::HashSet<u64>,
    /// Messages delivered, duplicates and redeliveries included.
    pub delivered: u64,
}

impl MessageQueue {
    /// Up to `quantity` messages of `shops` at `now_ms`, oldest first; each goes out again if
    /// not confirmed within `redeliver_after_s`.
    pub fn consume(
        &mut self,
        shops: &[(String, LiveShop<'_>)],
        now_ms: i64,
        quantity: usize,
    ) -> Vec<Delivery> {
        let mut due: Vec<(i64, Delivery)> = Vec::new();
        for (name, shop) in shops {
            let c = shop.cfg;
            let now = now_ms.div_euclid(1000);
            for k in shop.first_changing_after(shop.started)..shop.created_by(now) {
                let life = shop.life(k);
                for (j, change) in life.changes.iter().enumerate() {
                    if change.at > now {
                        break;
                    }
                    // Messages are the changes since the subscription (the simulator) began.
                    if change.at < shop.started {
                        continue;
                    }
                    let id = life.id * 8 + j as u64;
                    let draw = |tag: u64| unit(mix(shop.seed, tag, id));
                    if draw(9_001) < c.message_loss {
                        continue;
                    }
                    let delay = if draw(9_002) < c.message_delay {
                        c.message_delay_s as i64 * 1000
                    } else {
                        0
                    };
                    let visible = change.at * 1000 + delay;
                    if visible > now_ms {
                        continue;
                    }
                    if self.confirmed.contains(&id) {
                        if draw(9_003) >= c.message_duplicate || self.duplicated.contains(&id) {
                            continue;
                        }
                    } else if self
                        .in_flight
                        .get(&id)
                        .is_some_and(|t| now_ms - t < c.redeliver_after_s as i64 * 1000)
                    {
                        continue;
                    }
                    due.push((
                        visible,
                        Delivery {
                            id,
                            shop: name.clone(),
                            order: OrderData {
                                id: life.id,
                                modified: change.at,
                                state: change.state,
                                amount_cents: life.amount_cents,
                            },
                        },
                    ));
                }
            }
        }
        due.sort_by_key(|(visible, d)| (*visible, d.id));
        due.truncate(quantity);
        for (_, d) in &due {
            if self.confirmed.contains(&d.id) {
                self.duplicated.insert(d.id);
            } else {
                self.in_flight.insert(d.id, now_ms);
            }
        }
        self.delivered += due.len() as u64;
        due.into_iter().map(|(_, d)| d).collect()
    }

    /// The consumer recorded these messages.
    pub fn confirm(&mut self, ids: &[u64]) {
        for id in ids {
            self.in_flight.remove(id);
            self.confirmed.insert(*id);
        }
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
    fn messages_are_delivered_until_confirmed_with_the_drills() {
        let mut c = cfg();
        c.redeliver_after_s = 10;
        let s = shop(&c);
        let shops = vec![(String::new(), s)];
        let mut q = MessageQueue::default();
        let now = (1_000_000 + 30) * 1000;
        let all = q.consume(&shops, now, 10_000);
        let changes: usize = (0..s.created_by(now / 1000))
            .map(|k| {
                s.life(k)
                    .changes
                    .iter()
                    .filter(|ch| ch.at * 1000 <= now)
                    .count()
            })
            .sum();
        assert_eq!(all.len(), changes);
        // In flight: not again before the redelivery time (only newer changes come), then
        // again (not confirmed).
        let ids = |v: &[Delivery]| {
            v.iter()
                .map(|d| d.id)
                .collect::<std::collections::HashSet<u64>>()
        };
        let first = ids(&all);
        let soon = q.consume(&shops, now + 1_000, 10_000);
        assert!(ids(&soon).is_disjoint(&first));
        let again = q.consume(&shops, now + 10_000, 10_000);
        assert!(ids(&again).is_superset(&first));
        q.confirm(&again.iter().map(|d| d.id).collect::<Vec<_>>());
        q.confirm(&soon.iter().map(|d| d.id).collect::<Vec<_>>());
        assert!(q.consume(&shops, now + 10_000, 10_000).is_empty());

        // Loss, duplicates and delay, each at 20%.
        let mut d = cfg();
        d.message_loss = 0.2;
        d.message_duplicate = 0.2;
        d.message_delay = 0.2;
        d.message_delay_s = 5;
        let s = shop(&d);
        let shops = vec![(String::new(), s)];
        let mut q = MessageQueue::default();
        let first = q.consume(&shops, now, 10_000);
        assert!(
            first.len() < changes * 9 / 10,
            "{} of {changes}",
            first.len()
        );
        q.confirm(&first.iter().map(|m| m.id).collect::<Vec<_>>());
        let later = q.consume(&shops, now + 6_000, 10_000);
        // Duplicates of confirmed ones, and the delayed ones now visible.
        assert!(later.iter().any(|m| first.iter().any(|f| f.id == m.id)));
        assert!(later.iter().any(|m| !first.iter().any(|f| f.id == m.id)));
        q.confirm(&later.iter().map(|m| m.id).collect::<Vec<_>>());
        let seen: std::collections::HashSet<u64> =
            first.iter().chain(&later).map(|m| m.id).collect();
        assert!(seen.len() < changes, "some are lost for good");
    }

    #[test]
    fn a_shop_with_history_has_a_day_of_orders_and_messages_only_of_changes_since_the_start() {
        let c = LiveOrders {
            history_s: 86_400,
            ..cfg()
        };
        let s = shop(&c);
        assert_eq!(s.created_by(1_000_000), 86_401);
        let day = s.window(1_000_000 - 86_400, 1_000_000, 1_000_000);
        assert!(day.len() > 86_000, "{}", day.len());
        let mut q = MessageQueue::default();
        let got = q.consume(&[(String::new(), s)], (1_000_000 + 5) * 1000, 100_000);
        assert!(!got.is_empty());
        assert!(got.iter().all(|d| d.order.modified >= 1_000_000));
        // Every change since the start, from orders created before it too.
        let expected: usize = (0..s.created_by(1_000_005))
            .map(|k| {
                s.life(k)
                    .changes
                    .iter()
                    .filter(|ch| (1_000_000..=1_000_005).contains(&ch.at))
                    .count()
            })
            .sum();
        assert_eq!(got.len(), expected);
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
