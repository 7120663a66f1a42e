//! The order in which the queue hands out tasks: start-time fair queueing over shops
//! (docs/design.md, "Shops").
//!
//! Every task gets a start tag when it becomes ready: `S = max(V, F[shop])`, and the shop's
//! finish tag moves on to `F[shop] = S + 1 / weight`; the queue hands out the smallest tag
//! first and its virtual time `V` follows the tags handed out. A shop with work waiting
//! therefore gets tasks in proportion to its weight whatever was enqueued before it, and a
//! shop that had nothing waiting starts at `V`, not from a credit saved while idle. The
//! fleet queue runs the same arithmetic in its Lua scripts (`lua/push.lua`, `lua/fetch.lua`);
//! the embedded queue runs this type and stores the tags as apalis-sqlite priorities.

use std::collections::HashMap;

/// Tags of the shops and the queue's virtual time.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct FairClock {
    /// The tag of the latest task handed out (never goes back).
    pub(crate) virtual_time: f64,
    /// Each shop's finish tag: where its next ready task starts, unless `V` is past it.
    pub(crate) finish: HashMap<String, f64>,
}

impl FairClock {
    /// The start tag of a task of `shop` becoming ready now; moves the shop's finish tag.
    pub(crate) fn tag(&mut self, shop: &str, weight: u32) -> f64 {
        let f = self.finish.get(shop).copied().unwrap_or(0.0);
        let start = f.max(self.virtual_time);
        self.finish
            .insert(shop.to_string(), start + 1.0 / f64::from(weight.max(1)));
        start
    }

    /// A task with start tag `tag` was handed out.
    pub(crate) fn served(&mut self, tag: f64) {
        self.virtual_time = self.virtual_time.max(tag);
    }

    /// Nothing is waiting: every shop is idle, so none keeps a lead over the others.
    pub(crate) fn idle(&mut self) {
        let latest = self.finish.values().copied().fold(0.0, f64::max);
        self.virtual_time = self.virtual_time.max(latest);
    }
}

/// The largest priority the embedded queue uses: a tag `t` is stored as
/// `PRIORITY_TOP - round(t * 1000)`, so apalis-sqlite's `ORDER BY priority DESC` hands out
/// the smallest tag first. 2^52 keeps every value exact in an f64.
pub(crate) const PRIORITY_TOP: i64 = 1 << 52;

/// The apalis-sqlite priority of start tag `tag`.
pub(crate) fn priority_of(tag: f64) -> i64 {
    (PRIORITY_TOP - (tag * 1000.0).round() as i64).max(0)
}

/// The start tag a priority stands for.
pub(crate) fn tag_of(priority: i64) -> f64 {
    (PRIORITY_TOP - priority) as f64 / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Hand out the smallest tag of `ready` (tag, shop) `n` times; returns the shops in order.
    fn serve(clock: &mut FairClock, ready: &mut Vec<(f64, String)>, n: usize) -> Vec<String> {
        let mut out = Vec::new();
        for _ in 0..n {
            ready.sort_by(|a, b| a.0.total_cmp(&b.0));
            if ready.is_empty() {
                break;
            }
            let (t, s) = ready.remove(0);
            clock.served(t);
            out.push(s);
        }
        out
    }

    #[test]
    fn a_job_enqueued_after_a_big_one_gets_every_other_task() {
        let mut c = FairClock::default();
        let mut ready: Vec<(f64, String)> =
            (0..100).map(|_| (c.tag("big", 1), "big".into())).collect();
        let first = serve(&mut c, &mut ready, 10);
        assert!(first.iter().all(|s| s == "big"));
        ready.extend((0..5).map(|_| (c.tag("small", 1), "small".to_string())));
        let next = serve(&mut c, &mut ready, 10);
        let small = next.iter().filter(|s| *s == "small").count();
        assert_eq!(small, 5, "{next:?}");
        assert!(
            next[..2].contains(&"small".to_string()),
            "the small job starts at once: {next:?}"
        );
    }

    #[test]
    fn weights_set_the_shares() {
        let mut c = FairClock::default();
        let mut ready: Vec<(f64, String)> = Vec::new();
        for _ in 0..300 {
            ready.push((c.tag("a", 3), "a".into()));
            ready.push((c.tag("b", 1), "b".into()));
        }
        let out = serve(&mut c, &mut ready, 200);
        let a = out.iter().filter(|s| *s == "a").count();
        assert_eq!(a, 150, "weight 3 against 1 gets three tasks in four");
    }

    #[test]
    fn an_idle_shop_saves_no_credit() {
        let mut c = FairClock::default();
        let mut ready: Vec<(f64, String)> = Vec::new();
        c.tag("quiet", 1);
        for _ in 0..50 {
            ready.push((c.tag("busy", 1), "busy".into()));
        }
        serve(&mut c, &mut ready, 40);
        // "quiet" comes back after 40 tasks of "busy": it shares from now, it does not get
        // 40 tasks in a row.
        for _ in 0..20 {
            ready.push((c.tag("quiet", 1), "quiet".into()));
        }
        let next = serve(&mut c, &mut ready, 10);
        let quiet = next.iter().filter(|s| *s == "quiet").count();
        assert!((4..=6).contains(&quiet), "{next:?}");
    }

    #[test]
    fn once_all_is_served_no_shop_keeps_a_lead() {
        let mut c = FairClock::default();
        for _ in 0..10 {
            c.tag("a", 1);
        }
        c.idle();
        let a = c.tag("a", 1);
        let b = c.tag("b", 1);
        assert_eq!(a, b);
    }

    #[test]
    fn priorities_order_like_tags_and_round_trip() {
        assert!(priority_of(1.0) > priority_of(1.5));
        assert!((tag_of(priority_of(12.345)) - 12.345).abs() < 1e-9);
        assert!(priority_of(0.0) == PRIORITY_TOP);
    }
}
